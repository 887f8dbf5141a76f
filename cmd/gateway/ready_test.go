package main

import (
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencegate/fencegate/httpapi"
	"github.com/fencegate/fencegate/tests/testenv"
)

// TestReadyzFollowsTheBroker: GET /readyz says ready while the gateway
// takes commands, 503 with the broker's check failing (and why) once the
// broker stops, and ready again once it is back; GET /healthz answers
// throughout.
func TestReadyzFollowsTheBroker(t *testing.T) {
	b := testenv.MosquittoVolatile(t)
	httpAddr := startGateway(t, b.URL, "actuators:\n  - {name: pump, pin: GPIO17}\n", true).http

	ready := func() (int, httpapi.Readiness) { t.Helper(); return readyz(t, httpAddr) }
	waitReady := func(what string, want bool) httpapi.Readiness {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			code, rd := ready()
			// Ready is every check's OK, and the status code says it:
			// a contradiction fails now, not at the deadline.
			all := len(rd.Checks) > 0
			for _, c := range rd.Checks {
				all = all && c.OK
			}
			if rd.Ready != all || (code == http.StatusOK) != rd.Ready {
				t.Fatalf("%s: GET /readyz = %d %+v: ready must be every check's ok, and 200 only when ready", what, code, rd)
			}
			if rd.Ready == want {
				return rd
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: GET /readyz = %d %+v", what, code, rd)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	healthy := func() {
		t.Helper()
		resp, err := http.Get("http://" + httpAddr + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET /healthz = %s, want 200", resp.Status)
		}
	}
	waitReady("started", true)
	healthy()
	b.Stop(t, syscall.SIGTERM)
	// Once GET /api/status shows the connection lost, /readyz must say
	// not ready at once: waiting for it would only delay a failure.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var st httpapi.Status
		if err := httpapi.GetJSON(t.Context(), "http://"+httpAddr+"/api/status", &st); err != nil {
			t.Fatal(err)
		}
		if !st.Broker.Connected {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker stopped: GET /api/status still says connected after 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	code, rd := ready()
	if rd.Ready || code != http.StatusServiceUnavailable {
		t.Fatalf("broker stopped (GET /api/status: not connected): GET /readyz = %d %+v, want 503, not ready", code, rd)
	}
	for _, c := range rd.Checks {
		if c.OK != (c.Name != "broker") {
			t.Errorf("broker stopped: check %s ok = %v (%s)", c.Name, c.OK, c.Detail)
		}
		if c.Name == "broker" && !strings.Contains(c.Detail, b.URL) {
			t.Errorf("broker stopped: the broker check says %q, want the broker's address and why", c.Detail)
		}
	}
	healthy()
	b.Start(t)
	waitReady("broker back", true)
}
