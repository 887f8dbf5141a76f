// Package httpapi serves the gateway's read-only HTTP interface: the
// dashboard and its JSON API.
//
//	GET /                 the dashboard (package dashboard)
//	GET /api/actuators    every actuator: recorded state, fence, holder and
//	                      the level read back from its pin
//	GET /api/audit?n=N    the newest N audit entries (default 50), oldest first
//	GET /api/events       Server-Sent Events: one "decision" event per answer
//
// Nothing here changes anything: commands go over MQTT, where they are
// fenced.
package httpapi

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/dashboard"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
)

// Source is what the API reads; *actuator.Bank implements it.
type Source interface {
	Statuses() ([]actuator.Status, error)
	Audit(n int) ([]fencelog.Entry, error)
	Subscribe(buf int) (<-chan actuator.Event, func())
}

// Actuator is one element of GET /api/actuators.
type Actuator struct {
	Name  string      `json:"name"`
	Scope string      `json:"scope"`
	Pin   string      `json:"pin"`
	State string      `json:"state"` // "on", "off", or "" if never set
	Fence fence.Fence `json:"fence"`
	// Level is the pin's read-back level, "high" or "low"; "" if it could
	// not be read (see LevelError).
	Level      string     `json:"level"`
	LevelError string     `json:"level_error,omitempty"`
	ActiveLow  bool       `json:"active_low"`
	Holder     string     `json:"holder"`
	ChangedAt  *time.Time `json:"changed_at"`
	// Drives counts the pin's drives since the gateway started, on boards
	// that count them (sim).
	Drives *uint64 `json:"drives,omitempty"`
}

// Decision is the data of a "decision" event.
type Decision struct {
	At       time.Time     `json:"at"`
	Scope    string        `json:"scope"`
	Actuator string        `json:"actuator"`
	ID       string        `json:"id"`
	Holder   string        `json:"holder,omitempty"`
	Outcome  fence.Outcome `json:"outcome"`
	Command  fence.Fence   `json:"command"`
	Want     string        `json:"want,omitempty"` // the state the command asked for
	Fence    fence.Fence   `json:"fence"`
	State    string        `json:"state,omitempty"`
	Error    string        `json:"error,omitempty"`
}

// New returns the handler for the dashboard and the API.
func New(src Source, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /", dashboard.Handler())
	mux.HandleFunc("GET /api/actuators", func(w http.ResponseWriter, r *http.Request) {
		sts, err := src.Statuses()
		if err != nil {
			log.Error("read statuses", "err", err)
			http.Error(w, "cannot read the fence store: "+err.Error(), http.StatusInternalServerError)
			return
		}
		out := make([]Actuator, 0, len(sts))
		for _, s := range sts {
			out = append(out, actuatorJSON(s))
		}
		writeJSON(w, out)
	})
	mux.HandleFunc("GET /api/audit", func(w http.ResponseWriter, r *http.Request) {
		n := 50
		if v := r.URL.Query().Get("n"); v != "" {
			var err error
			if n, err = strconv.Atoi(v); err != nil || n < 1 || n > 10000 {
				http.Error(w, "n: want a number from 1 to 10000", http.StatusBadRequest)
				return
			}
		}
		es, err := src.Audit(n)
		if err != nil {
			http.Error(w, "cannot read the audit trail: "+err.Error(), http.StatusInternalServerError)
			return
		}
		if es == nil {
			es = []fencelog.Entry{}
		}
		writeJSON(w, es)
	})
	mux.HandleFunc("GET /api/events", func(w http.ResponseWriter, r *http.Request) {
		events, cancel := src.Subscribe(256)
		defer cancel()
		ServeEvents(w, r, func(send func(event string, data any) error) error {
			for {
				select {
				case <-r.Context().Done():
					return nil
				case e := <-events:
					if err := send("decision", decisionJSON(e)); err != nil {
						return err
					}
				}
			}
		})
	})
	return mux
}

// ServeEvents answers r with a Server-Sent Events stream. loop sends events
// until the client goes away; comments keep idle connections open.
func ServeEvents(w http.ResponseWriter, r *http.Request, loop func(send func(event string, data any) error) error) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": fencegate events\nretry: 1000\n\n")
	rc.Flush()
	done := make(chan struct{})
	defer close(done)
	var mu chanMutex = make(chan struct{}, 1)
	go func() {
		t := time.NewTicker(15 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-r.Context().Done():
				return
			case <-t.C:
				mu.lock()
				fmt.Fprint(w, ": keep-alive\n\n")
				rc.Flush()
				mu.unlock()
			}
		}
	}()
	loop(func(event string, data any) error {
		b, err := json.Marshal(data)
		if err != nil {
			return err
		}
		mu.lock()
		defer mu.unlock()
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return err
		}
		return rc.Flush()
	})
}

type chanMutex chan struct{}

func (m chanMutex) lock()   { m <- struct{}{} }
func (m chanMutex) unlock() { <-m }

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func actuatorJSON(s actuator.Status) Actuator {
	a := Actuator{Name: s.Actuator, Scope: s.Scope, Pin: s.PinName, State: s.State.String(),
		Fence: s.Fence, ActiveLow: s.ActiveLow, Holder: s.Holder, Drives: s.Drives}
	if !s.ChangedAt.IsZero() {
		t := s.ChangedAt
		a.ChangedAt = &t
	}
	switch {
	case s.LevelErr != nil:
		a.LevelError = s.LevelErr.Error()
	case s.High:
		a.Level = "high"
	default:
		a.Level = "low"
	}
	return a
}

func decisionJSON(e actuator.Event) Decision {
	r := e.Result
	return Decision{At: e.At.UTC(), Scope: e.Scope, Actuator: r.Actuator, ID: r.ID, Holder: e.Holder,
		Outcome: r.Outcome, Command: r.Command, Want: e.State.String(), Fence: r.Fence, State: r.State.String(), Error: r.Error}
}
