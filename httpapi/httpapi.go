// Package httpapi serves the gateway's read-only HTTP interface: the
// dashboard and its JSON API.
//
//	GET /                 the dashboard (package dashboard)
//	GET /api/status       the gateway: id, version, store, its broker
//	                      connection (connected, since, last error, taking
//	                      commands, another process using its id), and its
//	                      process's goroutines and heap
//	GET /api/actuators    every actuator: recorded state, fence, holder and
//	                      the level read back from its pin
//	GET /api/audit?n=N    the newest N audit entries (default 50), oldest first;
//	                      &actuator=, &outcome=, &holder=, &since=, &until=
//	                      (RFC 3339 times) select among them
//	GET /api/events       Server-Sent Events: one "decision" event per answer
//	GET /healthz          200 while the process serves
//	GET /readyz           200 while the gateway can take and carry out
//	                      commands (store writable, outputs reconciled,
//	                      broker connected and subscribed), else 503; the
//	                      body says which check fails and why
//
// Nothing here changes anything: commands go over MQTT, where they are
// fenced.
package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/dashboard"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
)

// Source is what the API reads: an *actuator.Bank and the gateway's status.
type Source interface {
	Statuses() ([]actuator.Status, error)
	Subscribe(buf int) (<-chan actuator.Event, func())
	Status() Status
}

// AuditSource is where the API reads the audit trail: the gateway's
// *fencelog.Store.
type AuditSource interface {
	FindAudit(q fencelog.AuditQuery) ([]fencelog.Entry, error)
}

// InputSource is what a Source that has digital inputs also offers: GET
// /api/inputs.
type InputSource interface {
	Inputs() []Input
}

// Input is one digital input in GET /api/inputs.
type Input struct {
	Name string `json:"name"`
	Pin  string `json:"pin"`
	Pull string `json:"pull"`
	// Level is "high" or "low"; Seq counts its changes (never back, across
	// restarts); ChangedAt is when the store recorded the last.
	Level     string    `json:"level"`
	Seq       uint64    `json:"seq"`
	ChangedAt time.Time `json:"changed_at"`
}

// Status is GET /api/status.
type Status struct {
	GatewayID string    `json:"gateway_id"`
	Version   string    `json:"version"`
	Started   time.Time `json:"started"`
	Board     string    `json:"board"`
	Store     string    `json:"store"`
	StoreID   string    `json:"store_id"`
	// StoreFloor is the floor the store was created with: every token at
	// or below it is stale; StoreFloorWhy says how it was decided.
	StoreFloor    uint64 `json:"store_floor"`
	StoreFloorWhy string `json:"store_floor_why,omitempty"`
	// StoreCommits counts the store's commits since the start, and the
	// writes (an actuator's applied commands, taken together, mostly) they
	// held: each commit costs the disk two syncs, shared by its writes.
	StoreCommits fencelog.Stats `json:"store_commits"`
	// StoreError is why the store takes no more writes (a failed commit:
	// the gateway stops for its supervisor to reopen it); "" while it does.
	StoreError string `json:"store_error,omitempty"`
	// Reconciled is true once every output was driven to its recorded (or
	// boot) state at start.
	Reconciled bool `json:"reconciled"`
	// Down are the outputs on devices that do not answer now (a Modbus
	// module without power, a broken bus): the gateway retries them.
	Down []DownOutput `json:"down,omitempty"`
	// Topics is the command topic filter the gateway subscribes to.
	Topics string `json:"topics"`
	Broker Broker `json:"broker"`
	// Runtime is the gateway process's own counts, so that a leak can be
	// seen from outside (gateway bench --profile soak).
	Runtime Runtime `json:"runtime"`
}

// Runtime is the gateway process's goroutines and heap, in GET
// /api/status. Reading them stops nothing: they come from runtime/metrics,
// not from runtime.ReadMemStats, which stops the world.
type Runtime struct {
	Goroutines int `json:"goroutines"`
	// HeapBytes is the memory of heap objects now, live or not yet
	// collected: it rises between collections and falls at each one.
	// HeapLiveBytes is the heap the last collection found live: the
	// steadier figure to watch for growth; 0 before the first collection.
	HeapBytes     uint64 `json:"heap_bytes"`
	HeapLiveBytes uint64 `json:"heap_live_bytes"`
}

// Broker is the gateway's broker connection, in GET /api/status.
type Broker struct {
	URL      string `json:"url"`
	ClientID string `json:"client_id"`
	// Connected is true while the MQTT connection is up; Since is when it
	// last changed.
	Connected bool      `json:"connected"`
	Since     time.Time `json:"since"`
	// Subscribed is true while commands are taken.
	Subscribed bool `json:"subscribed"`
	// LastError is the newest reason a connection attempt, the connection
	// or a subscription failed (kept after recovery), and LastErrorAt when.
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	// Failures counts failed attempts since the last good connection.
	Failures int `json:"failures"`
	// Conflict names another process serving this gateway id; the
	// gateway then takes no commands.
	Conflict string `json:"conflict,omitempty"`
	// Poison counts the commands acknowledged without their answer: the
	// broker closed the connection each time it was written. LastPoison
	// names the newest (its id, actuator, outcome and answer topic).
	Poison       int       `json:"poison_messages"`
	LastPoison   string    `json:"last_poison,omitempty"`
	LastPoisonAt time.Time `json:"last_poison_at,omitzero"`
}

// DownOutput is an output whose device does not answer.
type DownOutput struct {
	Actuator string    `json:"actuator"`
	Reason   string    `json:"reason"`
	Since    time.Time `json:"since"`
}

// Actuator is one element of GET /api/actuators.
type Actuator struct {
	Name  string `json:"name"`
	Scope string `json:"scope"`
	// Interlock names the actuator's interlock, if it is in one.
	Interlock string      `json:"interlock,omitempty"`
	Pin       string      `json:"pin"`
	State     string      `json:"state"` // "on", "off", or "" if never set
	Fence     fence.Fence `json:"fence"`
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
	// Kind is "switch", "pulse" or "setpoint".
	Kind string `json:"kind"`
	// Duty is a set-point output's recorded set-point, percent; omitted
	// for other outputs.
	Duty *fence.Duty `json:"duty,omitempty"`
	// Pulse is a pulse output's last pulse, as recorded.
	Pulse *Pulse `json:"pulse,omitempty"`
	// Why says why the gateway itself set the state (boot rule, safe
	// state, max_on); omitted after a command.
	Why string `json:"why,omitempty"`
	// Deadman is the scope's dead-man, if it has one with a time.
	Deadman *Deadman `json:"deadman,omitempty"`
	// Trip says why the scope is held at its safe state by an input's
	// trip, until a reset command; omitted if it is not.
	Trip string `json:"trip,omitempty"`
	// Watched is an output on a device the gateway reads back every poll
	// (a Modbus module); omitted for others.
	Watched *Watched `json:"watched,omitempty"`
}

// Watched is a watched output's health.
type Watched struct {
	// Down is why its device does not answer, since DownSince; "" while
	// it does.
	Down      string     `json:"down,omitempty"`
	DownSince *time.Time `json:"down_since,omitempty"`
	// OutOfBand counts the times it was found changed behind the
	// gateway's back (and driven as the boot rule says).
	OutOfBand uint64 `json:"out_of_band"`
}

// Deadman is where a scope's dead-man stands.
type Deadman struct {
	AfterMs int64  `json:"after_ms"`
	State   string `json:"state"` // the safe state
	// LeftMs is the time until it fires unless a command raises the
	// scope's fence; 0 once it fired.
	LeftMs  int64 `json:"left_ms"`
	Tripped bool  `json:"tripped"`
}

// Pulse is a pulse output's last pulse.
type Pulse struct {
	ID      string      `json:"id,omitempty"`
	Fence   fence.Fence `json:"fence"`
	WidthMs int64       `json:"width_ms"`
	Status  string      `json:"status"` // running, done or interrupted
}

// Decision is the data of a "decision" event.
type Decision struct {
	At       time.Time     `json:"at"`
	Scope    string        `json:"scope"`
	Actuator string        `json:"actuator"`
	ID       string        `json:"id"`
	Holder   string        `json:"holder,omitempty"`
	Outcome  fence.Outcome `json:"outcome"`
	Reason   string        `json:"reason,omitempty"` // why it was rejected
	Command  fence.Fence   `json:"command"`
	Want     string        `json:"want,omitempty"` // the state the command asked for
	Fence    fence.Fence   `json:"fence"`
	State    string        `json:"state,omitempty"`
	Error    string        `json:"error,omitempty"`
}

// New returns the handler for the dashboard and the API.
func New(src Source, audit AuditSource, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /", dashboard.Handler())
	mux.HandleFunc("GET /api/status", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, src.Status()) })
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		rd := ReadinessOf(src.Status())
		w.Header().Set("Content-Type", "application/json")
		if !rd.Ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		json.NewEncoder(w).Encode(rd)
	})
	mux.HandleFunc("GET /api/inputs", func(w http.ResponseWriter, r *http.Request) {
		list := []Input{}
		if is, ok := src.(InputSource); ok {
			list = is.Inputs()
		}
		writeJSON(w, list)
	})
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
		q, err := ParseAuditQuery(r.URL.Query())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		es, err := audit.FindAudit(q)
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
		out := make(chan Event)
		go func() {
			for {
				select {
				case <-r.Context().Done():
					return
				case e := <-events:
					select {
					case out <- Event{"decision", decisionJSON(e)}:
					case <-r.Context().Done():
						return
					}
				}
			}
		}()
		ServeEvents(w, r, out)
	})
	return mux
}

// Event is one Server-Sent Event: its name and its data, sent as JSON.
type Event struct {
	Name string
	Data any
}

// keepAlive is how often an idle event stream gets a comment.
var keepAlive = 15 * time.Second

// ServeEvents answers r with a Server-Sent Events stream of the events on
// events until the client goes away; comments keep idle connections open.
// Everything is written from the handler's own goroutine, so nothing is
// written after it returns.
func ServeEvents(w http.ResponseWriter, r *http.Request, events <-chan Event) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": fencegate events\nretry: 1000\n\n")
	rc.Flush()
	t := time.NewTicker(keepAlive)
	defer t.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
			fmt.Fprint(w, ": keep-alive\n\n")
		case e := <-events:
			b, err := json.Marshal(e.Data)
			if err != nil {
				return
			}
			if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.Name, b); err != nil {
				return
			}
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func actuatorJSON(s actuator.Status) Actuator {
	a := Actuator{Name: s.Actuator, Scope: s.Scope, Interlock: s.Interlock, Pin: s.PinName, State: s.State.String(),
		Fence: s.Fence, ActiveLow: s.ActiveLow, Holder: s.Holder, Drives: s.Drives, Kind: string(s.Kind), Why: s.Why, Trip: s.Trip}
	if s.Kind == actuator.KindSetpoint {
		d := s.Output.Duty
		a.Duty = &d
	}
	if d := s.Deadman; d != nil {
		a.Deadman = &Deadman{AfterMs: d.After.Milliseconds(), State: d.State.String(), LeftMs: d.Left.Milliseconds(), Tripped: d.Tripped}
	}
	if p := s.Pulse; p != nil {
		a.Pulse = &Pulse{ID: p.ID, Fence: p.Fence, WidthMs: p.Width.Milliseconds(), Status: p.Status}
	}
	if !s.ChangedAt.IsZero() {
		t := s.ChangedAt
		a.ChangedAt = &t
	}
	if h := s.Health; h != nil {
		a.Watched = &Watched{Down: h.Down, OutOfBand: h.OutOfBand}
		if h.Down != "" {
			t := h.Since
			a.Watched.DownSince = &t
		}
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
		Outcome: r.Outcome, Reason: r.Reason, Command: r.Command, Want: e.State.String(), Fence: r.Fence, State: r.State.String(), Error: r.Error}
}

// Readiness is GET /readyz: whether the gateway can take and carry out
// commands now, and each check that decides it.
type Readiness struct {
	Ready  bool    `json:"ready"`
	Checks []Check `json:"checks"`
}

// Check is one condition of readiness: ok, or why not.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// ReadinessOf judges st: the store takes writes, the outputs were
// reconciled, and the broker connection takes commands.
func ReadinessOf(st Status) Readiness {
	store := Check{Name: "store", OK: st.StoreError == "", Detail: "writable: " + st.Store}
	if !store.OK {
		store.Detail = st.StoreError
	}
	outputs := Check{Name: "outputs", OK: st.Reconciled && len(st.Down) == 0, Detail: "reconciled to the recorded states"}
	switch {
	case !st.Reconciled:
		outputs.Detail = "not yet reconciled"
	case len(st.Down) > 0:
		var down []string
		for _, d := range st.Down {
			down = append(down, fmt.Sprintf("%s (%s, since %s)", d.Actuator, d.Reason, d.Since.Format(time.RFC3339)))
		}
		outputs.Detail = "down, retrying their recorded states: " + strings.Join(down, "; ")
	}
	b := st.Broker
	broker := Check{Name: "broker", OK: b.Connected && b.Subscribed, Detail: "connected to " + b.URL + ", taking commands on " + st.Topics}
	switch {
	case b.Conflict != "":
		broker.Detail = "another process serves this gateway id: " + b.Conflict
	case !b.Connected && b.LastError != "":
		broker.Detail = "not connected to " + b.URL + ": " + b.LastError
	case !b.Connected:
		broker.Detail = "connecting to " + b.URL
	case !b.Subscribed:
		broker.Detail = "connected to " + b.URL + ", not yet taking commands (claiming the gateway id, subscribing)"
	}
	checks := []Check{store, outputs, broker}
	return Readiness{Ready: store.OK && outputs.OK && broker.OK, Checks: checks}
}

// String says it in one line, for people and for systemd's STATUS=: what
// the gateway does when ready, else the first check that fails.
func (r Readiness) String() string {
	for _, c := range r.Checks {
		if !c.OK {
			return "not ready: " + c.Name + ": " + c.Detail
		}
	}
	for _, c := range r.Checks {
		if c.Name == "broker" {
			return "ready: " + c.Detail
		}
	}
	return "ready"
}

// ParseAuditQuery reads the audit trail's filters from a query string (GET
// /api/audit): n (1 to 10000, default 50), actuator, outcome, holder, and
// since and until as RFC 3339 times.
func ParseAuditQuery(v url.Values) (fencelog.AuditQuery, error) {
	q := fencelog.AuditQuery{Limit: 50, Actuator: v.Get("actuator"), Outcome: fence.Outcome(v.Get("outcome")), Holder: v.Get("holder")}
	if q.Outcome != "" && !slices.Contains(fence.Outcomes, q.Outcome) {
		return q, fmt.Errorf("outcome=%q: want one of %v", q.Outcome, fence.Outcomes)
	}
	if s := v.Get("n"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 10000 {
			return q, errors.New("n: want a number from 1 to 10000")
		}
		q.Limit = n
	}
	for _, t := range []struct {
		name string
		to   *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		if s := v.Get(t.name); s != "" {
			at, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return q, fmt.Errorf("%s=%q: want an RFC 3339 time, e.g. 2026-12-03T07:00:00Z", t.name, s)
			}
			*t.to = at
		}
	}
	return q, nil
}
