package main

import (
	"encoding/json"
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

	ready := func() (int, httpapi.Readiness) {
		t.Helper()
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var rd httpapi.Readiness
		if err := json.NewDecoder(resp.Body).Decode(&rd); err != nil {
			t.Fatalf("GET /readyz: %v", err)
		}
		return resp.StatusCode, rd
	}
	waitReady := func(what string, want bool) httpapi.Readiness {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			code, rd := ready()
			if rd.Ready == want && (code == http.StatusOK) == want {
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
	rd := waitReady("broker stopped", false)
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
