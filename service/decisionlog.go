package service

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/fence"
)

// decisionLog writes the gateway's decisions to its log: every applied
// command at info, every failed one at error, duplicates at debug. Stale
// and rejected commands come in floods (a flapping controller, a broken
// one): the first of each holder, outcome and reason is logged in full,
// and those that follow are counted and logged as one line each interval,
// so that a flood cannot drown the log.
type decisionLog struct {
	log   *slog.Logger
	every time.Duration

	mu    sync.Mutex
	flood map[floodKey]*tally
}

type floodKey struct {
	outcome        fence.Outcome
	holder, reason string
}

// tally counts a flood's decisions since its last line.
type tally struct {
	n     int
	last  actuator.Event
	quiet int // intervals in a row without one
}

// floodInterval is how often counted stale and rejected commands are
// logged.
const floodInterval = time.Minute

func newDecisionLog(log *slog.Logger, every time.Duration) *decisionLog {
	return &decisionLog{log: log, every: every, flood: map[floodKey]*tally{}}
}

func decisionAttrs(e actuator.Event) []any {
	r := e.Result
	a := []any{"actuator", r.Actuator, "scope", e.Scope, "id", r.ID, "holder", e.Holder,
		"token", r.Command.Token, "seq", r.Command.Seq}
	if e.State != fence.StateNone {
		a = append(a, "state", e.State.String())
	}
	a = append(a, "fence", r.Fence.String())
	if r.Reason != "" {
		a = append(a, "reason", r.Reason)
	}
	if r.Error != "" {
		a = append(a, "error", r.Error)
	}
	return a
}

// decided logs e (actuator.Observer.Decided).
func (d *decisionLog) decided(e actuator.Event) {
	switch o := e.Result.Outcome; o {
	case fence.Applied:
		d.write(slog.LevelInfo, "applied", e)
	case fence.Failed:
		d.write(slog.LevelError, "failed", e)
	case fence.Duplicate:
		d.write(slog.LevelDebug, "duplicate", e)
	case fence.Stale, fence.Rejected:
		k := floodKey{o, e.Holder, e.Result.Reason}
		d.mu.Lock()
		t, counting := d.flood[k]
		if counting {
			t.n++
			t.last = e
		} else {
			d.flood[k] = &tally{}
		}
		d.mu.Unlock()
		if !counting {
			level := slog.LevelInfo
			if o == fence.Rejected {
				level = slog.LevelWarn
			}
			d.write(level, string(o), e,
				"note", "more "+string(o)+" commands of this holder (and reason) are counted, and logged once every "+d.every.String())
		}
	}
}

// write logs e at level, with more attributes after its own, if the log
// takes that level: at a level it drops, the attributes are not built (a
// command applied is one line at info; a gateway run at warn pays nothing
// for it).
func (d *decisionLog) write(level slog.Level, msg string, e actuator.Event, more ...any) {
	ctx := context.Background()
	if d.log.Enabled(ctx, level) {
		d.log.Log(ctx, level, msg, append(decisionAttrs(e), more...)...)
	}
}

// tell logs one line for each flood counted since the last call, and
// forgets floods that stayed quiet for a whole interval: the next of those
// is logged in full again.
func (d *decisionLog) tell() {
	d.mu.Lock()
	type line struct {
		k floodKey
		t tally
	}
	var lines []line
	for k, t := range d.flood {
		if t.n > 0 {
			lines = append(lines, line{k, *t})
			t.n, t.quiet = 0, 0
			continue
		}
		if t.quiet++; t.quiet > 1 {
			delete(d.flood, k)
		}
	}
	d.mu.Unlock()
	sort.Slice(lines, func(i, j int) bool {
		a, b := lines[i].k, lines[j].k
		return a.outcome < b.outcome || a.outcome == b.outcome && (a.holder < b.holder || a.holder == b.holder && a.reason < b.reason)
	})
	for _, l := range lines {
		level := slog.LevelInfo
		if l.k.outcome == fence.Rejected {
			level = slog.LevelWarn
		}
		r := l.t.last.Result
		d.log.Log(context.Background(), level, string(l.k.outcome)+" commands", "holder", l.k.holder, "count", l.t.n, "in", d.every.String(),
			"reason", l.k.reason, "last_actuator", r.Actuator, "last_token", r.Command.Token, "last_seq", r.Command.Seq, "fence", r.Fence.String())
	}
}

// run calls tell every interval until ctx ends, and once more then.
func (d *decisionLog) run(ctx context.Context) {
	t := time.NewTicker(d.every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			d.tell()
		case <-ctx.Done():
			d.tell()
			return
		}
	}
}
