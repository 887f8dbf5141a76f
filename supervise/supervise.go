// Package supervise tells the service manager (systemd, through the
// socket NOTIFY_SOCKET names) what the gateway is doing: READY=1 once its
// outputs are reconciled and its subscription is in place, STATUS= with
// its broker connection as it changes, STOPPING=1 at the stop, and, if the
// unit sets WatchdogSec=, WATCHDOG=1 pings only while the decision path
// is alive. A store commit that never returns or a scope whose lock is
// held without progress stops the pings, and systemd restarts the gateway.
// Without NOTIFY_SOCKET (not under systemd) it does nothing.
package supervise

import (
	"context"
	"log/slog"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// Options configure Run.
type Options struct {
	// Status returns the STATUS= text: what the gateway is doing now.
	Status func() string
	// Stalled returns why the decision path has not moved for longer than
	// limit (a commit or a scope that is stuck), or "" if it has.
	Stalled func(limit time.Duration) string
	Logger  *slog.Logger
}

// Watchdog returns the watchdog interval the service manager asked for
// (WatchdogSec=), 0 if none.
func Watchdog() time.Duration {
	d, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		return 0
	}
	return d
}

// StallLimit is how long the decision path may stand still before the
// pings stop, for a watchdog interval: half of it, so that systemd, which
// waits the whole interval after the last ping, restarts the gateway
// within one and a half intervals of the stall.
func StallLimit(watchdog time.Duration) time.Duration { return watchdog / 2 }

// Ready tells the service manager that the gateway is ready, and what it
// does.
func Ready(status string) { notify("READY=1\nSTATUS=" + status) }

// Stopping tells the service manager that the gateway is stopping.
func Stopping() { notify("STOPPING=1") }

func notify(state string) { daemon.SdNotify(false, state) }

// Run sends STATUS= whenever the status changes and, with a watchdog, a
// ping every half interval while the decision path moves, until ctx ends.
func Run(ctx context.Context, o Options) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	wd := Watchdog()
	every := time.Second
	if wd > 0 {
		every = min(every, wd/2)
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	var status, stuck string
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if s := o.Status(); s != status {
			status = s
			notify("STATUS=" + s)
		}
		if wd == 0 {
			continue
		}
		why := o.Stalled(StallLimit(wd))
		switch {
		case why == "":
			if stuck != "" {
				log.Info("decision path moving again; watchdog pings resume")
			}
			notify("WATCHDOG=1")
		case stuck == "":
			log.Error("decision path stuck; watchdog pings stop, so that systemd restarts the gateway", "why", why,
				"watchdog", wd.String())
		}
		stuck = why
	}
}
