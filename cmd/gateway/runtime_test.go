package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/httpapi"
	"github.com/fencegate/fencegate/tests/testenv"
)

// TestStatusRuntime: GET /api/status counts the gateway process's own
// goroutines and heap. Event streams held open (each a handler and its
// goroutines, and a buffer of 256 events) raise both by at least what
// they hold, the live heap too once a collection ran; closed, the
// goroutines come back down.
func TestStatusRuntime(t *testing.T) {
	const streams = 100
	g := startGateway(t, testenv.EmbeddedBroker(t), "actuators:\n  - {name: pump, pin: GPIO17}\n", true)
	id, httpAddr, ctl := g.id, g.http, g.ctl

	status := func() httpapi.Runtime {
		t.Helper()
		resp, err := http.Get("http://" + httpAddr + "/api/status")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st map[string]json.RawMessage
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		raw, ok := st["runtime"]
		if !ok {
			t.Fatalf("GET /api/status has no runtime: %v", st)
		}
		var r httpapi.Runtime
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatalf("runtime %s: %v", raw, err)
		}
		return r
	}
	waitRuntime := func(what string, cond func(httpapi.Runtime) bool, each func()) httpapi.Runtime {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			r := status()
			if cond(r) {
				return r
			}
			if time.Now().After(deadline) {
				t.Fatalf("runtime %+v: not within 20s: %s", r, what)
			}
			if each != nil {
				each()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// Commands make garbage, and so collections: the first sets
	// heap_live_bytes, which is 0 before it.
	seq := uint64(0)
	commands := func() {
		for range 20 {
			seq++
			c := fence.Command{ID: fmt.Sprintf("%s-%d", id, seq), Actuator: "pump", Holder: "test", Fence: fence.Fence{Token: 5, Seq: seq}, State: fence.StateOn}
			if seq%2 == 0 {
				c.State = fence.StateOff
			}
			if res := ctl.Send(t, c); res.Outcome != fence.Applied {
				t.Fatalf("command %d: %s, want applied", seq, res.Outcome)
			}
		}
	}
	base := waitRuntime("a first collection: heap_live_bytes above 0",
		func(r httpapi.Runtime) bool { return r.HeapLiveBytes > 0 }, commands)
	if base.Goroutines < 5 || base.HeapBytes < 64<<10 || base.HeapLiveBytes < 64<<10 {
		t.Fatalf("runtime %+v: want some goroutines (a gateway runs several) and some heap", base)
	}

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var bodies []func() error
	defer func() {
		for _, c := range bodies {
			c()
		}
	}()
	for range streams {
		resp, err := client.Get("http://" + httpAddr + "/api/events")
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, resp.Body.Close)
		// The handler wrote its first line: it runs, and has subscribed.
		if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || !strings.HasPrefix(line, ": fencegate events") {
			t.Fatalf("GET /api/events: first line %q, %v", line, err)
		}
	}
	held := uint64(streams * 256 * unsafe.Sizeof(actuator.Event{})) // the streams' event buffers
	open := waitRuntime(fmt.Sprintf("%d goroutines more with %d event streams open", 2*streams, streams),
		func(r httpapi.Runtime) bool { return r.Goroutines >= base.Goroutines+2*streams }, nil)
	t.Logf("runtime %+v; with %d event streams open %+v", base, streams, open)
	if open.HeapBytes < base.HeapLiveBytes+held/2 {
		t.Errorf("heap_bytes %d with %d event streams open, want at least %d: the live heap before (%d) and half their buffers (%d bytes)",
			open.HeapBytes, streams, base.HeapLiveBytes+held/2, base.HeapLiveBytes, held)
	}
	// Collections now find the buffers live.
	waitRuntime(fmt.Sprintf("heap_live_bytes at least %d (half the streams' buffers above %d)", base.HeapLiveBytes+held/2, base.HeapLiveBytes),
		func(r httpapi.Runtime) bool { return r.HeapLiveBytes >= base.HeapLiveBytes+held/2 }, commands)

	for _, c := range bodies {
		c()
	}
	bodies = nil
	waitRuntime(fmt.Sprintf("back to at most %d goroutines (%d before the streams) once they closed", base.Goroutines+3, base.Goroutines),
		func(r httpapi.Runtime) bool { return r.Goroutines <= base.Goroutines+3 }, nil)
}
