package service_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
	"github.com/fencegate/fencegate/httpapi"
	"github.com/fencegate/fencegate/service"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

const testConfig = `id: gw1
mqtt:
  broker: %s
store: %s
board: sim
http: 127.0.0.1:0
actuators:
  - {name: pump, pin: GPIO17}
  - {name: valve, pin: PIN13, active_low: true}
  - {name: fan, pin: GPIO22, scope: climate}
  - {name: heater, pin: GPIO23, scope: climate, boot: "off"}
`

type gateway struct {
	cfg  *config.Config
	info service.Info
	stop func() error
	// ended is closed when Run has returned, whatever ended it.
	ended chan struct{}
}

// start runs a gateway in this process against broker, with its store in
// dir, and waits until it is subscribed.
func start(t testing.TB, broker, dir string) *gateway {
	t.Helper()
	cfg, err := config.Parse([]byte(fmt.Sprintf(testConfig, broker, filepath.Join(dir, "fence.db"))))
	if err != nil {
		t.Fatal(err)
	}
	return startConfig(t, cfg)
}

// startConfig runs a gateway with cfg in this process, creating its store,
// and waits until it is subscribed; it stops when t ends.
func startConfig(t testing.TB, cfg *config.Config) *gateway {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan service.Info, 1)
	done := make(chan error, 1)
	g := &gateway{cfg: cfg, ended: make(chan struct{})}
	go func() {
		err := service.Run(ctx, cfg, service.Options{Init: true, Ready: func(i service.Info) { ready <- i }})
		close(g.ended)
		done <- err
	}()
	var stopped bool
	g.stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			var stacks strings.Builder
			pprof.Lookup("goroutine").WriteTo(&stacks, 2)
			t.Fatalf("gateway did not stop within 10s; goroutines:\n%s", stacks.String())
			return nil
		}
	}
	t.Cleanup(func() { g.stop() })
	select {
	case g.info = <-ready:
	case err := <-done:
		done <- err // for the cleanup's stop
		t.Fatalf("gateway stopped at start: %v", err)
	case <-time.After(15 * time.Second):
		t.Fatal("gateway not ready within 15s")
	}
	return g
}

func (g *gateway) topics() wire.Topics {
	return wire.Topics{Prefix: g.cfg.MQTT.TopicPrefix, GatewayID: g.cfg.ID}
}

func (g *gateway) latch(t *testing.T) map[string]bool {
	t.Helper()
	m, err := boards.ReadLatch(g.info.Latch)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (g *gateway) api(t *testing.T) map[string]httpapi.Actuator {
	t.Helper()
	var list []httpapi.Actuator
	getJSON(t, g.info.HTTP, "/api/actuators", &list)
	m := map[string]httpapi.Actuator{}
	for _, a := range list {
		m[a.Name] = a
	}
	return m
}

func cmd(id, act string, token, seq uint64, s fence.State) fence.Command {
	return fence.Command{ID: id, Actuator: act, Holder: "ctl-" + id[:1], Fence: fence.Fence{Token: token, Seq: seq}, State: s}
}

func expect(t *testing.T, res fence.Result, want fence.Outcome, fenceWant fence.Fence, stateWant fence.State) {
	t.Helper()
	if res.Outcome != want || res.Fence != fenceWant || res.State != stateWant {
		t.Errorf("answer to %q = %v fence %v state %q (%s); want %v fence %v state %q",
			res.ID, res.Outcome, res.Fence, res.State, res.Error, want, fenceWant, stateWant)
	}
}

func forEachBroker(t *testing.T, f func(t *testing.T, broker string)) {
	for name, startBroker := range testenv.Brokers() {
		t.Run(name, func(t *testing.T) { f(t, startBroker(t)) })
	}
}

func TestEndToEnd(t *testing.T) {
	forEachBroker(t, func(t *testing.T, broker string) {
		dir := t.TempDir()
		g := start(t, broker, dir)
		ctl := testctl.Connect(t, broker, g.topics())
		ctl.WaitStatus(t, "online")
		ctl.State(t, "heater", func(o fence.Output) bool { return o.State == fence.StateOff && o.Holder == "boot" })

		f42 := fence.Fence{Token: 42}
		expect(t, ctl.Send(t, cmd("b-7", "pump", 42, 0, fence.StateOn)), fence.Applied, f42, fence.StateOn)
		st := ctl.State(t, "pump", func(o fence.Output) bool { return o.Fence == f42 })
		if st.State != fence.StateOn || st.Holder != "ctl-b" || st.ChangedAt.IsZero() {
			t.Errorf("retained state = %+v, want on, held by ctl-b, with changed_at", st)
		}
		// The paused controller wakes with 41: stale, with the current fence and state.
		res := ctl.Send(t, cmd("a-1", "pump", 41, 0, fence.StateOff))
		expect(t, res, fence.Stale, f42, fence.StateOn)
		if res.Error == "" {
			t.Error("stale answer has no explanation")
		}
		// A QoS 1 redelivery of B's command: duplicate, not driven again.
		expect(t, ctl.Send(t, cmd("b-7", "pump", 42, 0, fence.StateOn)), fence.Duplicate, f42, fence.StateOn)
		// Interlocked scope: B's fan command fences A's heater command.
		expect(t, ctl.Send(t, cmd("b-8", "fan", 43, 0, fence.StateOn)), fence.Applied, fence.Fence{Token: 43}, fence.StateOn)
		expect(t, ctl.Send(t, cmd("a-2", "heater", 42, 9, fence.StateOn)), fence.Stale, fence.Fence{Token: 43}, fence.StateOff)
		// The heater's state message carries the scope's new fence too.
		ctl.State(t, "heater", func(o fence.Output) bool { return o.Fence == fence.Fence{Token: 43} && o.State == fence.StateOff })
		// Active low: on drives the pin low.
		expect(t, ctl.Send(t, cmd("c-1", "valve", 5, 0, fence.StateOn)), fence.Applied, fence.Fence{Token: 5}, fence.StateOn)

		latch := g.latch(t)
		want := map[string]bool{"GPIO17": true, "GPIO27": false, "GPIO22": true, "GPIO23": false}
		for pin, w := range want {
			if latch[pin] != w {
				t.Errorf("latch %s = %v, want %v", pin, latch[pin], w)
			}
		}
		api := g.api(t)
		if a := api["pump"]; a.State != "on" || a.Level != "high" || a.Fence != f42 || a.Holder != "ctl-b" || a.ChangedAt == nil {
			t.Errorf("API pump = %+v", a)
		}
		if a := api["valve"]; a.State != "on" || a.Level != "low" || !a.ActiveLow || a.Pin != "GPIO27" {
			t.Errorf("API valve = %+v, want on, level low (active low), pin GPIO27", a)
		}
		if err := g.stop(); err != nil {
			t.Errorf("gateway stop: %v", err)
		}
		ctl.WaitStatus(t, "offline")

		// Restart on the same store: fences held, old tokens still stale.
		g = start(t, broker, dir)
		ctl.WaitStatus(t, "online")
		expect(t, ctl.Send(t, cmd("a-3", "pump", 41, 5, fence.StateOff)), fence.Stale, f42, fence.StateOn)
		expect(t, ctl.Send(t, cmd("b-7", "pump", 42, 0, fence.StateOn)), fence.Duplicate, f42, fence.StateOn)
		if !g.latch(t)["GPIO17"] {
			t.Error("pump latch low after restart")
		}
	})
}

// Bad input gets a clear error and changes nothing: no fence movement, no
// pin movement.
func TestBadInputOverMQTT(t *testing.T) {
	forEachBroker(t, func(t *testing.T, broker string) {
		dir := t.TempDir()
		g := start(t, broker, dir)
		ctl := testctl.Connect(t, broker, g.topics())
		expect(t, ctl.Send(t, cmd("b-1", "pump", 42, 3, fence.StateOn)), fence.Applied, fence.Fence{Token: 42, Seq: 3}, fence.StateOn)
		before := g.latch(t)

		tests := []struct {
			actuator, payload, want string
		}{
			{"pump", `{"id":"r1","token":"43","state":"off"}`, "token must be an integer"},
			{"pump", `{"id":"r2","token":-43,"state":"off"}`, "negative"},
			{"pump", `{"id":"r3","token":43.5,"state":"off"}`, "integer"},
			{"pump", `{"id":"r4","token":9223372036854775808,"state":"off"}`, "too large"},
			{"pump", `{"id":"r5","token":0,"state":"off"}`, "from 1"},
			{"pump", `{"id":"r6","state":"off"}`, "token is required"},
			{"pump", `{"id":"r7","token":43,"state":"toggle"}`, "state"},
			{"pump", `{"id":"r8","token":43,"seq":-1,"state":"off"}`, "seq"},
			{"pump", `{"id":"r9","token":43,"state":"off","force":true}`, "unknown field"},
			{"pump", `{"id":"r10","token":43,"token":44,"state":"off"}`, "twice"},
			{"pump", `{"id":"r11","token":43,"state":"off"`, "not JSON"},
			{"pump", `{"id":"r12","token":43,"state":"off","holder":"` + strings.Repeat("x", 200) + `"}`, "holder"},
			{"pump", `{"id":"r13","token":43,"state":"off","holder":"` + strings.Repeat("x", 1100) + `"}`, "limit is 1024"},
			{"nope", `{"id":"r14","token":43,"state":"off"}`, "unknown actuator"},
		}
		for _, tt := range tests {
			var id string
			fmt.Sscanf(tt.payload, `{"id":"%3s`, &id)
			id = strings.TrimSuffix(strings.SplitN(tt.payload, `"`, 5)[3], `"`)
			ctl.Publish(t, tt.actuator, []byte(tt.payload), false)
			res := ctl.Result(t, id)
			if res.Outcome != fence.Rejected || !strings.Contains(res.Error, tt.want) {
				t.Errorf("%s: answer %v %q, want rejected mentioning %q", tt.payload[:min(len(tt.payload), 60)], res.Outcome, res.Error, tt.want)
			}
			if tt.actuator == "pump" && res.Fence != (fence.Fence{Token: 42, Seq: 3}) {
				t.Errorf("%s: rejected answer carries fence %v, want the current 42/3", id, res.Fence)
			}
		}
		// Not JSON at all, and empty: answered without an id.
		for _, p := range []string{"on", ""} {
			ctl.Publish(t, "pump", []byte(p), false)
			if res := ctl.Result(t, ""); res.Outcome != fence.Rejected {
				t.Errorf("payload %q: answer %v, want rejected", p, res.Outcome)
			}
		}
		// Nothing moved: the next higher command is still the first above 42/3.
		if got := g.latch(t); fmt.Sprint(got) != fmt.Sprint(before) {
			t.Errorf("latch changed by bad input: %v -> %v", before, got)
		}
		expect(t, ctl.Send(t, cmd("b-2", "pump", 42, 4, fence.StateOff)), fence.Applied, fence.Fence{Token: 42, Seq: 4}, fence.StateOff)
	})
}

// A retained command is refused when the broker replays it to a gateway
// that subscribes later. Published live, it reaches a subscribed gateway
// either with the flag cleared (MQTT 3.1.1 brokers usually do; then it is
// decided normally) or with it kept (then it is refused at once): both
// are safe, and the test accepts both.
func TestRetainedReplayRejected(t *testing.T) {
	forEachBroker(t, retainedReplayRejected)
}

// TestRetainedReplayRejectedRuns runs TestRetainedReplayRejected on the
// embedded broker $FENCEGATE_RETAINED_RUNS times in a row (it
// failed 2-6% of runs under load, when the broker delivered a retained
// publish twice; see mqttbroker's TestRetainedPublishDuringSubscribe). It
// stops at the first failure and says how many passed before it.
func TestRetainedReplayRejectedRuns(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv("FENCEGATE_RETAINED_RUNS"))
	if err != nil || n <= 0 {
		t.Skip("set FENCEGATE_RETAINED_RUNS=1000 to run TestRetainedReplayRejected/embedded that many times in a row")
	}
	for i := range n {
		if !t.Run(fmt.Sprint(i+1), func(t *testing.T) { retainedReplayRejected(t, testenv.EmbeddedBroker(t)) }) {
			t.Fatalf("run %d of %d failed; %d in a row passed before it", i+1, n, i)
		}
	}
	t.Logf("%d runs in a row passed", n)
}

func retainedReplayRejected(t *testing.T, broker string) {
	dir := t.TempDir()
	g := start(t, broker, dir)
	ctl := testctl.Connect(t, broker, g.topics())
	ctl.Publish(t, "pump", wire.EncodeCommand(cmd("k-1", "pump", 7, 0, fence.StateOn)), true)
	live := ctl.Result(t, "k-1")
	wantFence := fence.Fence{Token: 7}
	switch {
	case live.Outcome == fence.Applied:
	case live.Outcome == fence.Rejected && strings.Contains(live.Error, "retained"):
		wantFence = fence.Fence{}
	default:
		t.Fatalf("live retained command = %v %q, want applied or rejected for being retained", live.Outcome, live.Error)
	}
	g.stop()
	ctl.Drain()
	g = start(t, broker, dir)
	// The broker may first redeliver the live copy if its acknowledgement
	// was still in flight at the stop (at-least-once): that is a duplicate.
	for {
		res := ctl.Result(t, "k-1")
		if res.Outcome == fence.Duplicate {
			continue
		}
		if res.Outcome != fence.Rejected || !strings.Contains(res.Error, "retained") {
			t.Errorf("replayed retained command = %v %q, want rejected for being retained", res.Outcome, res.Error)
		}
		break
	}
	ctl.Publish(t, "pump", nil, true) // clear it
	ctl.Result(t, "")                 // the empty publish is answered (rejected)
	if fs := g.api(t)["pump"].Fence; fs != wantFence {
		t.Errorf("fence after replay = %v, want %v", fs, wantFence)
	}
}

func TestStoreNeverSilentlyCreated(t *testing.T) {
	cfg, err := config.Parse([]byte(fmt.Sprintf(testConfig, "tcp://127.0.0.1:1", filepath.Join(t.TempDir(), "fence.db"))))
	if err != nil {
		t.Fatal(err)
	}
	// A gateway that created the store would start and run on (its broker
	// cannot be reached): stop it as soon as it listens, and at the latest
	// after a bound, so that the test fails instead of hanging.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	started := false
	err = service.Run(ctx, cfg, service.Options{Listening: func(service.Info) { started = true; cancel() }})
	if started || ctx.Err() != nil {
		t.Fatalf("Run without a store started a gateway (created the store?): %v", err)
	}
	if !errors.Is(err, fencelog.ErrNotExist) || !strings.Contains(err.Error(), "gateway init") {
		t.Errorf("Run without a store = %v, want ErrNotExist saying how to create one", err)
	}
}
