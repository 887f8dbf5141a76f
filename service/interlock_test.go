package service_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/service"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/wire"
)

const interlockConfig = `id: motor
mqtt: {broker: %q}
store: %s
board: sim
http: ""
actuators:
  - {name: vent-open, pin: GPIO5, scope: vent}
  - {name: vent-close, pin: GPIO6, scope: vent}
interlocks:
  - name: vent
    actuators: [vent-open, vent-close]
    break_before_make: %v
    dead_time: 50ms
`

// TestInterlockOverMQTT: the motor's two direction
// relays, end to end over a real broker on the sim board. Rejected: the
// answer says interlock and which member is on, the pins do not move, and
// the fence rises. Break-before-make: both states are published and the
// latch ends with exactly one on.
func TestInterlockOverMQTT(t *testing.T) {
	forEachBroker(t, func(t *testing.T, broker string) {
		for _, bbm := range []bool{false, true} {
			t.Run(fmt.Sprint("break_before_make=", bbm), func(t *testing.T) {
				store := filepath.Join(t.TempDir(), "fence.db")
				cfg, err := config.Parse(fmt.Appendf(nil, interlockConfig, broker, store, bbm))
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				ready := make(chan service.Info, 1)
				go func() {
					done <- service.Run(ctx, cfg, service.Options{Init: true, Ready: func(i service.Info) { ready <- i }})
				}()
				defer func() { cancel(); <-done }()
				var info service.Info
				select {
				case info = <-ready:
				case err := <-done:
					done <- err // for the deferred wait
					t.Fatal(err)
				case <-time.After(15 * time.Second):
					t.Fatal("not ready")
				}
				ctl := testctl.Connect(t, broker, wire.Topics{GatewayID: "motor"})
				latch := func() map[string]bool {
					m, err := boards.ReadLatch(info.Latch)
					if err != nil {
						t.Fatal(err)
					}
					return m
				}
				if res := ctl.Send(t, fence.Command{ID: "a-1", Actuator: "vent-close", Fence: fence.Fence{Token: 41}, State: fence.StateOn}); res.Outcome != fence.Applied {
					t.Fatalf("vent-close on: %s %s", res.Outcome, res.Error)
				}
				res := ctl.Send(t, fence.Command{ID: "b-1", Actuator: "vent-open", Fence: fence.Fence{Token: 42}, State: fence.StateOn})
				if !bbm {
					if res.Outcome != fence.Rejected || res.Reason != fence.ReasonInterlock || res.Blocking == nil ||
						res.Blocking.Actuator != "vent-close" || res.Blocking.State != fence.StateOn || res.Fence.Token != 42 {
						t.Fatalf("vent-open on while vent-close is on = %+v (blocking %+v), want rejected: interlock, vent-close on, fence 42", res, res.Blocking)
					}
					if m := latch(); m["GPIO5"] || !m["GPIO6"] {
						t.Errorf("latch %v after a refused command: want vent-open low, vent-close high", m)
					}
					// The displaced holder is stale from now on.
					if res := ctl.Send(t, fence.Command{ID: "a-2", Actuator: "vent-close", Fence: fence.Fence{Token: 41, Seq: 1}, State: fence.StateOff}); res.Outcome != fence.Stale {
						t.Errorf("the displaced holder's command = %s, want stale", res.Outcome)
					}
					return
				}
				if res.Outcome != fence.Applied || res.State != fence.StateOn {
					t.Fatalf("break-before-make = %+v", res)
				}
				ctl.State(t, "vent-close", func(o fence.Output) bool { return o.State == fence.StateOff && o.Fence.Token == 42 })
				ctl.State(t, "vent-open", func(o fence.Output) bool { return o.State == fence.StateOn && o.Fence.Token == 42 })
				if m := latch(); !m["GPIO5"] || m["GPIO6"] {
					t.Errorf("latch %v: want vent-open high, vent-close low", m)
				}
			})
		}
	})
}
