package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/fencegate/fencegate/dashboard"
)

// restartRefresh is how often the page shown while the gateway process
// restarts reloads itself.
const restartRefresh = 2 * time.Second

// unavailable says why the gateway process does not answer: it stopped for
// good (a configuration error), it is restarting, or it does not answer
// although it runs. err is the proxy's error.
func (s *Sim) unavailable(err error) dashboard.Notice {
	s.mu.Lock()
	status, stopped, last := s.gateway, s.stopped, s.lastExit
	s.mu.Unlock()
	exited := func(verb string) string {
		if last == nil {
			return "It does not answer."
		}
		return fmt.Sprintf("It %s at %s: %s.", verb, last.At.Local().Format(time.TimeOnly), strings.TrimSuffix(last.Reason, "."))
	}
	switch {
	case stopped:
		return dashboard.Notice{
			Title: "The gateway process has stopped",
			What: exited("exited") + " The simulator does not restart it: it exited with a configuration error (exit status 78), " +
				"which a restart cannot fix.",
			Fix: fmt.Sprintf("Do what the reason says (for instance, if another gateway process serves the gateway id %q: stop it, "+
				"or give this simulator an id of its own with its flag --id NAME), then stop the simulator (Ctrl-C) and start it again.", s.opts.GatewayID),
		}
	case status != "online":
		return dashboard.Notice{
			Title:   "The gateway process is restarting",
			What:    exited("ended") + " The simulator restarts it, as systemd would on a Raspberry Pi (gateway status: " + status + ").",
			Refresh: restartRefresh,
		}
	}
	return dashboard.Notice{
		Title:   "The gateway process is not answering",
		What:    fmt.Sprintf("The gateway process says it is online but its web interface on %s does not answer: %v.", s.apiAddr, err),
		Refresh: restartRefresh,
	}
}

// gatewayUnavailable answers a request that the gateway process did not:
// with a page that says why (a browser's request), or, for /api/, with a
// JSON error. Both are 502 Bad Gateway.
func (s *Sim) gatewayUnavailable(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return // the client went away
	}
	n := s.unavailable(err)
	if strings.HasPrefix(r.URL.Path, "/api/") {
		msg := strings.ToLower(n.Title[:1]) + n.Title[1:] + ". " + n.What
		if n.Fix != "" {
			msg += " To fix it: " + n.Fix
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusBadGateway)
		json.NewEncoder(w).Encode(struct {
			Error string `json:"error"`
		}{msg})
		return
	}
	dashboard.ServeNotice(w, http.StatusBadGateway, n)
}
