package actuator_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/fence"
)

// TestRefusalsAndTheFence: a refusal decided after the command's pair
// passed the fence (here trip, for an on and for a reset while the input
// is still at its trip level) records the pair as the scope's new fence
// and moves no output: the displaced holder is stale from then on, and a
// redelivery is refused the same. A refusal decided before the fence is
// read (invalid, token-jump, unknown-actuator) moves nothing, the fence
// included. The other reasons that raise the fence are pinned where their
// rules are: interlock (TestInterlockRejects), busy (TestPulseBusy), rate
// (TestSetpointFenced, with range, which does not); docs/protocol.md, The
// reasons, says which is which.
func TestRefusalsAndTheFence(t *testing.T) {
	hot := &settableInput{}
	opts := &actuator.Options{Trips: overheat, Rules: map[string]fence.Rules{"climate": {MaxJump: 100}}}
	r, _ := newInputRig(t, "", heaterSpecs(""), opts, map[string]*settableInput{"overheat": hot})
	r.send(t, command("a-1", "heater", 5, 0, fence.StateOn), fence.Applied)
	hot.high.Store(true)
	r.bank.InputChanged("overheat", true)

	fenceNow := func() fence.Fence {
		t.Helper()
		out, err := r.bank.Output("heater")
		if err != nil {
			t.Fatal(err)
		}
		if out.State != fence.StateOff {
			t.Fatalf("the heater is recorded %v, want off (its safe state)", out.State)
		}
		return out.Fence
	}
	if f := fenceNow(); f != (fence.Fence{Token: 5}) {
		t.Fatalf("fence %v after the trip, want 5/0: a trip does not move it", f)
	}
	since := map[string]int{"GPIO23": len(r.drivesOf("GPIO23")), "GPIO22": len(r.drivesOf("GPIO22"))}
	reset := fence.Command{ID: "b-2", Actuator: "fan", Holder: "b", Fence: fence.Fence{Token: 6, Seq: 1}, Reset: true}

	// Refused after the fence: the pair is the new fence.
	for _, x := range []struct {
		name string
		c    fence.Command
		says string
	}{
		{"an on while tripped", command("b-1", "heater", 6, 0, fence.StateOn), "held at its safe state"},
		{"a reset while the input is at its trip level", reset, "cannot be reset"},
		{"a redelivery of the refused reset", reset, "cannot be reset"},
	} {
		res := r.send(t, x.c, fence.Rejected)
		if res.Reason != fence.ReasonTrip || !strings.Contains(res.Error, x.says) {
			t.Errorf("%s: %+v, want rejected trip, %q", x.name, res, x.says)
		}
		if f := fenceNow(); f != x.c.Fence || res.Fence != x.c.Fence {
			t.Errorf("%s: fence %v (answer %v), want %v: the refused command's pair raised it", x.name, f, res.Fence, x.c.Fence)
		}
	}
	// The displaced holder's command in flight is stale, on either actuator.
	r.send(t, command("a-2", "fan", 5, 1, fence.StateOff), fence.Stale)

	// Refused before the fence is read: nothing moves, the fence included.
	for _, x := range []struct {
		name   string
		c      fence.Command
		reason string
	}{
		{"a token too far above the fence", command("x-1", "heater", 1000, 0, fence.StateOff), fence.ReasonTokenJump},
		{"a pulse to a switch", fence.Command{ID: "x-2", Actuator: "heater", Fence: fence.Fence{Token: 7}, State: fence.StateOn, Pulse: time.Second}, fence.ReasonInvalid},
		{"an unknown actuator", command("x-3", "nosuch", 8, 0, fence.StateOn), fence.ReasonUnknownActuator},
	} {
		if res := r.send(t, x.c, fence.Rejected); res.Reason != x.reason {
			t.Errorf("%s: %+v, want rejected %s", x.name, res, x.reason)
		}
		if f := fenceNow(); f != reset.Fence {
			t.Errorf("%s: fence %v, want %v: a command refused before the fence is read does not move it", x.name, f, reset.Fence)
		}
	}
	// Just above the fence the last refusal raised, not above theirs.
	r.send(t, command("b-3", "fan", 6, 2, fence.StateOff), fence.Applied)

	// Of all these, only the fan's applied off drove anything.
	for pin, n := range since {
		after := r.drivesOf(pin)[n:]
		for _, d := range after {
			if d.high {
				t.Errorf("%s was driven high since the trip: %+v", pin, after)
			}
		}
		if pin == "GPIO23" && len(after) != 0 {
			t.Errorf("the heater was driven since the trip: %+v", after)
		}
	}
}
