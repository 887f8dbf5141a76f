package scenario

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/httpapi"
)

func pausedController(ctx context.Context, r *run) Verdict { return story(ctx, r, false) }

func unfenced(ctx context.Context, r *run) Verdict {
	r.say("info", "Simulation only: every command also goes to an unfenced twin of the pump, which obeys the last command it hears.")
	return story(ctx, r, true)
}

func duplicateDelivery(ctx context.Context, r *run) Verdict {
	const act = "valve"
	l, err := r.newLease(ctx, act)
	if err != nil {
		return r.fail("cannot read the valve: %v", err)
	}
	before, err := r.actuator(ctx, act)
	if err != nil || before.Drives == nil {
		return r.fail("cannot read the valve's drive count: %v", err)
	}
	want := fence.StateOn
	if before.State == "on" {
		want = fence.StateOff
	}
	t := l.grant()
	c := cmd("controller-b", act, t, 0, want)
	c.ID = fmt.Sprintf("dup-%d", t)
	r.say("controller", "Controller B holds token %d and publishes \"valve %s\" (id %s) with QoS 1.", t, want, c.ID)
	res, err := r.send(ctx, c)
	if err != nil || res.Outcome != fence.Applied {
		return r.fail("B's command: %v %s %s", err, res.Outcome, res.Error)
	}
	r.say("gateway", "Gateway: applied. Fence %s recorded, valve driven %s.", res.Fence, want)
	mid, err := r.waitLevel(ctx, act, want == fence.StateOn)
	if err != nil {
		return r.fail("the valve did not move: %v", err)
	}
	r.pause(ctx)
	r.say("info", "The acknowledgement is lost; the broker delivers the same message again (same id, token and seq).")
	r.pause(ctx)
	res, err = r.send(ctx, c)
	if err != nil {
		return r.fail("redelivery: %v", err)
	}
	if res.Outcome != fence.Duplicate {
		return r.fail("the redelivery was answered %s, want duplicate", res.Outcome)
	}
	r.say("gateway", "Gateway: duplicate, with the original decision's fence %s and the valve's state now, %s; nothing is driven.", res.Fence, res.State)
	after, err := r.actuator(ctx, act)
	if err != nil || after.Drives == nil {
		return r.fail("cannot read the valve: %v", err)
	}
	if *after.Drives != *mid.Drives || *mid.Drives != *before.Drives+1 {
		return r.fail("the valve was driven %d times, want once", *after.Drives-*before.Drives)
	}
	r.say("check", "The valve's pin was driven once (drive count %d → %d).", *before.Drives, *after.Drives)
	return Verdict{true, fmt.Sprintf("the redelivered command %s was answered duplicate and the valve was driven once.", c.ID)}
}

func crashAndReconcile(ctx context.Context, r *run) Verdict {
	const act = "pump"
	l, err := r.newLease(ctx, act)
	if err != nil {
		return r.fail("cannot read the pump: %v", err)
	}
	t := l.grant()
	r.say("controller", "Controller B holds token %d and switches the pump on.", t)
	if res, err := r.send(ctx, cmd("controller-b", act, t, 0, fence.StateOn)); err != nil || res.Outcome != fence.Applied {
		return r.fail("B's first command: %v %s %s", err, res.Outcome, res.Error)
	}
	if _, err := r.waitLevel(ctx, act, true); err != nil {
		return r.fail("the pump did not switch on: %v", err)
	}
	r.pause(ctx)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.env.SimURL+"/api/sim/crash", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		return r.fail("cannot arm the crash: %v", err)
	}
	resp.Body.Close()
	r.say("info", "The simulator arms a crash: the gateway process will be killed (SIGKILL) right after its next fsync, before it drives.")
	r.pause(ctx)
	armed := time.Now().Add(-time.Second) // the simulator's clock is this machine's
	off := cmd("controller-b", act, t, 1, fence.StateOff)
	off.ID = fmt.Sprintf("crash-%d", t)
	r.say("controller", "B publishes \"pump off\" with token %d seq 1.", t)
	answered := make(chan fence.Result, 1)
	go func() {
		actx, cancel := context.WithTimeout(ctx, 45*time.Second)
		defer cancel()
		res, err := answer(r.ctl.Send(actx, off))
		if err != nil {
			res = fence.Result{Outcome: "none", Error: err.Error()}
		}
		answered <- res
	}()
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var exit *Exit
	for exit == nil {
		info, err := FetchSim(wctx, r.env.SimURL)
		if err == nil && info.LastExit != nil && info.LastExit.At.After(armed) {
			exit = info.LastExit
			break
		}
		select {
		case <-wctx.Done():
			return r.fail("the gateway did not crash: %v", wctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	r.say("gateway", "The gateway process died: %s. The fence %d/1 and the intended state off were on disk; the pump had not been driven.", exit.Reason, t)
	if !exit.Latch["GPIO17"] {
		return r.fail("the pump was already off at the crash: the drive came before the crash point")
	}
	r.say("check", "Right after the crash the pump's latch reads high: the record (off) is ahead of the pin.")
	r.pause(ctx)
	r.say("info", "The supervisor restarts the gateway (as systemd would); at start it reconciles every output to its record.")
	a, err := r.waitLevel(ctx, act, false)
	if err != nil {
		return r.fail("after the restart the pump is not off: %v", err)
	}
	r.say("check", "After the restart the pump reads back %s at fence %s: reconciled to the record.", a.Level, a.Fence)
	var res fence.Result
	select {
	case res = <-answered:
	case <-ctx.Done():
		return r.fail("interrupted")
	}
	if res.Outcome != fence.Duplicate {
		return r.fail("B's command was answered %s after the restart, want duplicate (it was recorded before the crash): %s", res.Outcome, res.Error)
	}
	r.say("gateway", "The broker redelivered B's unacknowledged command; the gateway answered duplicate (fence %s, %s), not a second drive.", res.Fence, res.State)
	return Verdict{true, "killed between fsync and drive, the gateway came back with the pump reconciled off and answered B's redelivery duplicate."}
}

// controllerVanishes plays a holder that dies while its scope has a
// dead-man.
func controllerVanishes(ctx context.Context, r *run) Verdict {
	const act = "sprinkler"
	a0, err := r.actuator(ctx, act)
	if err != nil {
		return r.fail("cannot read the sprinkler: %v", err)
	}
	if a0.Deadman == nil {
		return r.fail("the sprinkler's scope has no dead-man")
	}
	after := time.Duration(a0.Deadman.AfterMs) * time.Millisecond
	l := &lease{next: a0.Fence.Token + 1}
	tA := l.grant()
	var seq client.Seq
	r.say("controller", "Controller A is granted token %d for the sprinkler, raises the fence and switches it on.", tA)
	if res, err := r.send(ctx, cmd("controller-a", act, tA, 0, fence.StateNone)); err != nil || res.Outcome != fence.Applied {
		return r.fail("A's fence-only command: %v %s %s", err, res.Outcome, res.Error)
	}
	if res, err := r.send(ctx, cmd("controller-a", act, tA, seq.Next(), fence.StateOn)); err != nil || res.Outcome != fence.Applied {
		return r.fail("A's on: %v %s %s", err, res.Outcome, res.Error)
	}
	r.say("info", "The sprinkler's scope has a dead-man: if no command raises its fence for %v, it goes off.", after)
	hctx, stop := context.WithCancel(ctx)
	beats := make(chan error, 1)
	go func() {
		beats <- r.ctl.Heartbeat(hctx, client.Heartbeat{Actuator: act, Holder: "controller-a", Token: tA, Seq: &seq, Every: after / 5})
	}()
	r.say("controller", "A sends a heartbeat (a fence-only command) every %v while it holds the lease.", after/5)
	select {
	case <-time.After(2 * after):
	case err := <-beats:
		stop()
		return r.fail("A's heartbeats stopped: %v", err)
	case <-ctx.Done():
		stop()
		return r.fail("interrupted")
	}
	if a, err := r.actuator(ctx, act); err != nil || a.State != "on" {
		stop()
		return r.fail("with heartbeats coming, the sprinkler is %s (%v), want on", a.State, err)
	}
	r.say("check", "%v later the sprinkler is still on: each heartbeat restarted the dead-man's count.", 2*after)
	stop()
	<-beats
	// The last heartbeat may have been published and not yet decided
	// when A stopped waiting for its answer: the fence may still rise to
	// it, and no further.
	sent := fence.Fence{Token: tA, Seq: seq.Last()}
	last, _ := r.actuator(ctx, act)
	r.say("controller", "A's process dies (or pauses): no more heartbeats. The fence stays at %s.", pair(last.Fence))
	wctx, cancel := context.WithTimeout(ctx, after+10*time.Second)
	defer cancel()
	var gone httpapi.Actuator
	for {
		a, err := r.actuator(wctx, act)
		if err == nil && a.State == "off" && a.Deadman != nil && a.Deadman.Tripped {
			gone = a
			break
		}
		select {
		case <-wctx.Done():
			return r.fail("the sprinkler did not go to its safe state: %+v %v", a, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	r.say("gateway", "The dead-man fired: the sprinkler is off (%s), recorded \"%s\".", gone.Level, gone.Why)
	if gone.Fence != last.Fence && gone.Fence != sent {
		return r.fail("the dead-man moved the fence from %s to %s (A's last heartbeat was %s)", pair(last.Fence), pair(gone.Fence), pair(sent))
	}
	r.say("check", "The fence did not move: %s.", pair(gone.Fence))
	r.pause(ctx)
	tB := l.grant()
	r.say("controller", "The lease service grants controller B token %d; B switches the sprinkler on at once.", tB)
	if res, err := r.send(ctx, cmd("controller-b", act, tB, 0, fence.StateOn)); err != nil || res.Outcome != fence.Applied {
		return r.fail("B's command: %v %s %s", err, res.Outcome, res.Error)
	}
	r.pause(ctx)
	r.say("controller", "A wakes and sends its next command with token %d.", tA)
	res, err := r.send(ctx, cmd("controller-a", act, tA, seq.Next(), fence.StateOff))
	if err != nil || res.Outcome != fence.Stale {
		return r.fail("A's late command: %v %s, want stale", err, res.Outcome)
	}
	r.say("gateway", "Stale: fence %s. A rereads the state instead of acting.", pair(res.Fence))
	return Verdict{true, "the vanished holder's sprinkler went off after the dead-man's time without moving the fence; B took over at once, and A's late command was stale."}
}

// pulseCrash kills the gateway while a door strike's pulse runs.
func pulseCrash(ctx context.Context, r *run) Verdict {
	const act = "door"
	l, err := r.newLease(ctx, act)
	if err != nil {
		return r.fail("cannot read the door: %v", err)
	}
	t := l.grant()
	open := cmd("controller-a", act, t, 1, fence.StateOn)
	open.Pulse = 5 * time.Second
	open.ID = fmt.Sprintf("open-%d", t)
	r.say("controller", "Controller A (token %d) opens the door: a pulse of %v on the door strike.", t, open.Pulse)
	res, err := r.send(ctx, open)
	if err != nil || res.Outcome != fence.Applied || res.Pulse == nil {
		return r.fail("A's pulse: %v %s %s", err, res.Outcome, res.Error)
	}
	r.say("gateway", "Applied: the pulse was recorded running with fence %s before the strike moved.", pair(res.Fence))
	if _, err := r.waitLevel(ctx, act, true); err != nil {
		return r.fail("the strike is not on: %v", err)
	}
	r.pause(ctx)
	armed := time.Now().Add(-time.Second)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.env.SimURL+"/api/sim/kill", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return r.fail("cannot kill the gateway: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return r.fail("cannot kill the gateway: %s", resp.Status)
	}
	r.say("info", "The gateway process is killed (SIGKILL) while the pulse runs, as a power cut would stop it.")
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		info, err := FetchSim(wctx, r.env.SimURL)
		if err == nil && info.LastExit != nil && info.LastExit.At.After(armed) {
			break
		}
		select {
		case <-wctx.Done():
			return r.fail("the gateway did not die: %v", wctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	r.say("info", "The supervisor restarts the gateway. It finds the pulse running in its record.")
	a, err := r.waitLevel(ctx, act, false)
	if err != nil {
		return r.fail("after the restart the strike is not at rest: %v", err)
	}
	if a.Pulse == nil || a.Pulse.Status != fence.PulseInterrupted {
		return r.fail("after the restart the door's pulse is %+v, want interrupted", a.Pulse)
	}
	r.say("check", "After the restart the strike is at rest (%s) and the pulse is recorded interrupted: it is never resumed.", a.Level)
	r.pause(ctx)
	r.say("controller", "A, not sure its pulse happened, sends the very same command again (same id, token and seq).")
	res, err = r.send(ctx, open)
	if err != nil || res.Outcome != fence.Duplicate || res.Pulse == nil || res.Pulse.Status != fence.PulseInterrupted {
		return r.fail("the resent pulse: %v %s %+v, want duplicate, interrupted", err, res.Outcome, res.Pulse)
	}
	if a, err := r.actuator(ctx, act); err != nil || a.Level != "low" {
		return r.fail("the resent pulse moved the strike: %+v %v", a, err)
	}
	r.say("gateway", "Duplicate: the pulse was interrupted, and it is not repeated. The door was not opened twice.")
	return Verdict{true, "killed mid-pulse, the gateway came back with the door strike at rest and the pulse interrupted, and answered its resend duplicate without a second pulse."}
}

// pausedDimmer plays the paused-controller story on a set-point output:
// the dimmer, a holding register of the simulator's Modbus module.
func pausedDimmer(ctx context.Context, r *run) Verdict {
	const act = "dimmer"
	l, err := r.newLease(ctx, act)
	if err != nil {
		return r.fail("cannot read the dimmer: %v", err)
	}
	set := func(holder string, token uint64, d fence.Duty) (fence.Result, error) {
		return r.send(ctx, fence.Command{Holder: holder, Actuator: act, Fence: fence.Fence{Token: token}, Setpoint: true, Duty: d, State: d.State()})
	}
	tA, tB := r.handOver(ctx, l, `"dimmer to 80 %"`)
	r.say("controller", "B sets the dimmer to 20 %% with token %d.", tB)
	res, err := set("controller-b", tB, 2000)
	if err != nil || res.Outcome != fence.Applied {
		return r.fail("B's set-point: %v %s %s", err, res.Outcome, res.Error)
	}
	want, err := r.waitRegister(ctx, act, 2000)
	if err != nil {
		return r.fail("the dimmer's register did not take B's 20 %%: %v", err)
	}
	r.say("gateway", "Gateway: applied. Fence %s and 20 %% recorded and fsynced, then the register written: %d.", pair(res.Fence), want)
	r.pause(ctx)
	r.say("controller", "A wakes up, still believing it holds the lease, and sets the dimmer to 80 %% with token %d.", tA)
	res, err = set("controller-a", tA, 8000)
	if err != nil {
		return r.fail("A's set-point: %v", err)
	}
	if res.Outcome != fence.Stale {
		return r.fail("A's set-point was answered %s, want stale: the gateway let an old token through", res.Outcome)
	}
	r.say("gateway", "Gateway: stale. %s", res.Error)
	r.pause(ctx)
	now := "off"
	if res.Duty != nil {
		now = res.Duty.String() + " %"
	}
	r.say("controller", "A rereads the set-point from the answer: %s at fence %s. A stands down.", now, pair(res.Fence))
	r.pause(ctx)
	info, err := FetchSim(ctx, r.env.SimURL)
	if err != nil {
		return r.fail("cannot read the Modbus module: %v", err)
	}
	if got := info.Modbus.Registers[act]; got != want {
		return r.fail("the dimmer's register holds %d, not B's %d: A's stale set-point was written", got, want)
	}
	r.say("check", "The dimmer's register still holds %d of %d: 20 %%, as B set it.", want, info.Modbus.Full[act])
	return Verdict{true, fmt.Sprintf("A's stale set-point (token %d, 80 %%) was refused; the dimmer stayed at 20 %% as B (token %d) set it.", tA, tB)}
}

// waitRegister waits until the Modbus register of actuator holds d's
// share of its full scale, and returns that value.
func (r *run) waitRegister(ctx context.Context, actuator string, d fence.Duty) (uint16, error) {
	var want uint16
	err := poll(ctx, func(ctx context.Context) (bool, error) {
		info, err := FetchSim(ctx, r.env.SimURL)
		if err != nil {
			return false, err
		}
		full := info.Modbus.Full[actuator]
		if full == 0 {
			return true, fmt.Errorf("%s is not a register of the Modbus module", actuator)
		}
		want = uint16((int(d)*full + int(fence.FullDuty)/2) / int(fence.FullDuty))
		if got := info.Modbus.Registers[actuator]; got != want {
			return false, fmt.Errorf("it holds %d, want %d", got, want)
		}
		return true, nil
	})
	return want, err
}

func pair(f fence.Fence) string { return fmt.Sprintf("%d/%d", f.Token, f.Seq) }
