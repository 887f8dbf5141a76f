package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
	"github.com/fencegate/fencegate/httpapi"
)

func newServer(t *testing.T) (*httptest.Server, *actuator.Bank) {
	t.Helper()
	dir := t.TempDir()
	l, err := fencelog.Open(filepath.Join(dir, "fence.db"), &fencelog.Options{Create: fencelog.Fresh()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	sim, err := boards.OpenSim(filepath.Join(dir, "pins"))
	if err != nil {
		t.Fatal(err)
	}
	decided := make(chan actuator.Event, 256)
	bank, err := actuator.New(l, []actuator.Spec{{Name: "pump", Scope: "pump", PinName: "GPIO17"}}, &actuator.Options{Observer: &actuator.Observer{
		Decided: func(e actuator.Event) {
			select {
			case decided <- e:
			default: // as the gateway's stream: a decision never waits for it
			}
		}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := bank.Start(sim.Pin); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(source{bank, decided}, l, nil))
	t.Cleanup(srv.Close)
	return srv, bank
}

// source is the bank and its decisions, with a fixed gateway status.
type source struct {
	*actuator.Bank
	decided chan actuator.Event
}

// Subscribe implements httpapi.Source: the one subscriber (of one test)
// gets every decision.
func (s source) Subscribe(int) (<-chan actuator.Event, func()) { return s.decided, func() {} }

func (source) Status() httpapi.Status {
	return httpapi.Status{GatewayID: "gw", Broker: httpapi.Broker{URL: "tcp://127.0.0.1:1", LastError: "connection refused"}}
}

func TestEventsAuditAndDashboard(t *testing.T) {
	srv, bank := newServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q", ct)
	}
	rd := bufio.NewReader(resp.Body)
	rd.ReadString('\n') // the opening comment: the stream is subscribed once it arrives
	bank.Handle(ctx, fence.Command{ID: "b-1", Actuator: "pump", Holder: "b", Fence: fence.Fence{Token: 42}, State: fence.StateOn})
	bank.Handle(ctx, fence.Command{ID: "a-1", Actuator: "pump", Holder: "a", Fence: fence.Fence{Token: 41}, State: fence.StateOff})
	var got []httpapi.Decision
	for len(got) < 2 {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("read events: %v (got %+v)", err, got)
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			var e httpapi.Decision
			if err := json.Unmarshal([]byte(d), &e); err != nil {
				t.Fatal(err)
			}
			got = append(got, e)
		}
	}
	if got[0].Outcome != fence.Applied || got[1].Outcome != fence.Stale || got[1].Want != "off" || got[1].Fence.Token != 42 || got[1].Error == "" {
		t.Errorf("events = %+v", got)
	}

	var audit []fencelog.Entry
	r, err := http.Get(srv.URL + "/api/audit?n=2")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(r.Body).Decode(&audit)
	r.Body.Close()
	if len(audit) != 2 || audit[0].ID != "b-1" || audit[1].Outcome != fence.Stale {
		t.Errorf("audit = %+v", audit)
	}
	if r, _ := http.Get(srv.URL + "/api/audit?n=0"); r.StatusCode != http.StatusBadRequest {
		t.Errorf("audit?n=0 status = %d, want 400", r.StatusCode)
	}
	for path, want := range map[string]string{"/": "<title>fencegate</title>", "/app.js": "EventSource", "/style.css": ".lamp"} {
		r, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
			t.Errorf("GET %s = %d, body lacks %q", path, r.StatusCode, want)
		}
	}
	if r, _ := http.Post(srv.URL+"/api/actuators", "application/json", nil); r.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /api/actuators = %d, want 405: the API is read-only", r.StatusCode)
	}
}

// GET /healthz answers while the process serves; GET /readyz answers 503,
// naming the failing check, while the broker is not connected, and when
// the store refused a write (a real store, deleted under it).
func TestHealthAndReadiness(t *testing.T) {
	srv, _ := newServer(t)
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("GET /healthz = %d %q, want 200 ok", code, body)
	}
	code, body := get("/readyz")
	var rd httpapi.Readiness
	if err := json.Unmarshal([]byte(body), &rd); err != nil {
		t.Fatalf("GET /readyz: %v: %s", err, body)
	}
	if code != http.StatusServiceUnavailable || rd.Ready || !strings.Contains(body, "connection refused") {
		t.Errorf("GET /readyz with the broker not connected = %d %s, want 503 saying why", code, body)
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "fence.db")
	l, err := fencelog.Open(path, &fencelog.Options{Create: fencelog.Fresh()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	os.Remove(path)
	if _, err := l.Admit("pump", fence.Command{ID: "x", Actuator: "pump", Fence: fence.Fence{Token: 1}, State: fence.StateOn}, fence.Rules{}, nil); err == nil {
		t.Fatal("a commit into a deleted store succeeded")
	}
	st := httpapi.Status{Store: path, StoreError: l.Err().Error(), Reconciled: true, Broker: httpapi.Broker{Connected: true, Subscribed: true}}
	broken := httptest.NewServer(httpapi.New(fixed{source{}, st}, l, nil))
	defer broken.Close()
	resp, err := http.Get(broken.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd = httpapi.Readiness{}
	json.NewDecoder(resp.Body).Decode(&rd)
	if resp.StatusCode != http.StatusServiceUnavailable || rd.Ready || rd.Checks[0].Name != "store" || rd.Checks[0].OK ||
		!strings.Contains(rd.Checks[0].Detail, "was deleted") {
		t.Errorf("GET /readyz with a broken store = %d %+v, want 503 with the store's failure", resp.StatusCode, rd)
	}
}

// fixed is a source with a given status.
type fixed struct {
	source
	st httpapi.Status
}

func (f fixed) Status() httpapi.Status { return f.st }
