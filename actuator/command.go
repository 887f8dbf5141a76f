package actuator

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
)

// Handle takes c through admission, durable record and drive, and returns
// the answer. An unknown actuator is rejected. It never panics on bad
// input. If ctx ends while c waits for its scope, c is not decided and the
// error is ctx's: the caller must leave the command unanswered (and, over
// MQTT, unacknowledged, so that the broker delivers it again).
func (b *Bank) Handle(ctx context.Context, c fence.Command) (fence.Result, error) {
	res, err := b.HandleBatch(ctx, []fence.Command{c})
	if err != nil {
		return fence.Result{}, err
	}
	return res[0], nil
}

// HandleBatch handles cmds, commands to one actuator in the order they
// came, as Handle would one after another, and returns their answers in
// that order; but the commands its scope admits share one commit, and so
// one sync of the store. Each is still driven only after that commit, and
// in order, each read back before the next is driven. If ctx ends while
// the batch waits for its scope, the commands from the first that waited
// on are not decided: HandleBatch returns the answers before it (those
// Authorize rejected) and ctx's error.
//
// An interlocked output's commands are decided one at a time under the
// lock (see MaxBatch): a caller that must look at something between them
// gives them one by one.
func (b *Bank) HandleBatch(ctx context.Context, cmds []fence.Command) ([]fence.Result, error) {
	results := make([]fence.Result, len(cmds))
	if len(cmds) == 0 {
		return results, nil
	}
	name := cmds[0].Actuator
	if i := slices.IndexFunc(cmds, func(c fence.Command) bool { return c.Actuator != name }); i >= 0 {
		return nil, fmt.Errorf("actuator: a batch of commands to %q and %q: a batch is one actuator's", name, cmds[i].Actuator)
	}
	o, ok := b.outs[name]
	if !ok {
		for i, c := range cmds {
			results[i] = b.Reject(c, fence.ReasonUnknownActuator, fmt.Errorf("unknown actuator %q", c.Actuator))
		}
		return results, nil
	}
	if !b.Started() {
		return nil, errors.New("actuator: Handle before Start")
	}
	var todo []int // the commands to decide: those authorized
	cloned := false
	for i, c := range cmds {
		if b.opts.Authorize != nil {
			// The command as it was signed: before shape fills in a default.
			if reason, err := b.opts.Authorize(c, o.Scope); err != nil {
				results[i] = b.Reject(c, reason, err)
				continue
			}
		}
		shaped, reason, err := o.shape(c)
		if err != nil {
			results[i] = b.Reject(c, reason, err)
			continue
		}
		if !shaped.Equal(c) {
			if !cloned {
				cmds, cloned = slices.Clone(cmds), true // the caller's stay as they came
			}
			cmds[i] = shaped
		}
		todo = append(todo, i)
	}
	if len(todo) == 0 {
		return results, nil
	}
	if err := o.guard.lock(ctx); err != nil {
		return results[:todo[0]], err // the rejections before the first that waited are answered
	}
	var decided []fence.Result
	if !o.oneByOne() {
		decided = b.handle(o, pick(cmds, todo))
	} else {
		// An interlocked output's command plans from the other members'
		// pins, and a ramped set-point's from the time of its last drive,
		// which the commands before it may have moved: one at a time, each
		// planned after the one before it was driven.
		for _, i := range todo {
			o.guard.progress()
			decided = append(decided, b.handle(o, cmds[i:i+1])...)
		}
	}
	o.guard.unlock()
	for k, i := range todo {
		results[i] = decided[k]
		b.emit(cmds[i], o.Scope, decided[k])
	}
	return results, nil
}

// MaxBatch is the most commands of an actuator that HandleBatch should be
// given at once: one for an interlocked output and a ramped set-point,
// whose commands are planned one by one anyway (see oneByOne), and a
// pulse output; the link's own bound otherwise.
func (b *Bank) MaxBatch(actuator string) int {
	if o, ok := b.outs[actuator]; ok && (o.oneByOne() || o.Kind == KindPulse) {
		return 1
	}
	return math.MaxInt
}

// oneByOne reports whether o's commands are planned one at a time, each
// after the one before it was driven: an interlocked output's (its plan
// reads the other members' pins) and a set-point's with a max_rate (its
// plan reads when the set-point was last driven).
func (o *output) oneByOne() bool {
	return o.lock != nil || (o.Kind == KindSetpoint && o.MaxRate > 0)
}

// shape checks c against o's kind and returns it as o takes it: a pulse
// output takes pulses (state on without pulse_ms is a pulse of its
// default width) and fence-only commands; a switch takes no pulse. An
// error rejects c before its scope is locked: nothing recorded or driven.
func (o *output) shape(c fence.Command) (fence.Command, string, error) {
	c, err := o.shapeKind(c)
	if err != nil {
		return c, fence.ReasonInvalid, err
	}
	if o.Kind == KindSetpoint {
		return o.shapeSetpoint(c)
	}
	return c, "", nil
}

// shapeKind is shape for switches and pulse outputs.
func (o *output) shapeKind(c fence.Command) (fence.Command, error) {
	if c.State == fence.StateNone || c.Setpoint {
		c.State = c.Asks() // as the wire decodes a pulse (on, then back at rest) and a set-point
	}
	if c.Setpoint && o.Kind != KindSetpoint {
		return c, fmt.Errorf("%s is not a set-point output: send state on or off, without duty", o.Name)
	}
	if o.Kind != KindPulse {
		if c.Pulse > 0 && o.Kind != KindSetpoint {
			return c, fmt.Errorf("%s is not a pulse output: send state on or off, without pulse_ms", o.Name)
		}
		return c, nil
	}
	switch {
	case c.State == fence.StateOff:
		return c, fmt.Errorf("%s is a pulse output, which rests off by itself: send pulse_ms (at most %d), or state on for its default pulse", o.Name, o.MaxPulse.Milliseconds())
	case c.State == fence.StateOn && c.Pulse == 0 && o.Pulse == 0:
		return c, fmt.Errorf("%s is a pulse output without a default width (pulse:): send pulse_ms, at most %d", o.Name, o.MaxPulse.Milliseconds())
	case c.State == fence.StateOn && c.Pulse == 0:
		c.Pulse = o.Pulse
	case c.Pulse > o.MaxPulse:
		return c, fmt.Errorf("pulse_ms %d is longer than %s's max_pulse (%d ms)", c.Pulse.Milliseconds(), o.Name, o.MaxPulse.Milliseconds())
	}
	return c, nil
}

func pick(cmds []fence.Command, at []int) []fence.Command {
	if len(at) == len(cmds) {
		return cmds
	}
	out := make([]fence.Command, len(at))
	for k, i := range at {
		out[k] = cmds[i]
	}
	return out
}

// handle admits cmds, commands to o, in one batch and carries out each
// decision in order. The scope's lock must be held.
func (b *Bank) handle(o *output, cmds []fence.Command) []fence.Result {
	reqs := make([]fencelog.Request, len(cmds))
	for i, c := range cmds {
		reqs[i] = fencelog.Request{Command: c, Plan: b.planner(o, c)}
	}
	start := time.Now()
	adms, err := b.store.AdmitBatch(o.Scope, o.guard.rules, reqs)
	if ob := b.opts.Observer; ob != nil && ob.Admitted != nil {
		ob.Admitted(time.Since(start), len(cmds))
	}
	results := make([]fence.Result, len(cmds))
	for i, c := range cmds {
		if err != nil {
			results[i] = b.notRecorded(o, c, err)
			continue
		}
		if adms[i].Outcome == fence.Applied {
			b.alive(o.guard) // a sign of life from the holder: the fence rose
		}
		results[i] = b.carryOut(o, c, adms[i])
	}
	return results
}

// notRecorded answers c, whose admission failed: nothing was recorded or
// driven.
func (b *Bank) notRecorded(o *output, c fence.Command, err error) fence.Result {
	res := fence.Result{ID: c.ID, Actuator: c.Actuator, Command: c.Fence, Outcome: fence.Failed,
		Error: "fence not recorded, nothing driven: " + err.Error()}
	if cur, err := b.store.Output(o.Scope, o.Name); err == nil {
		res.Fence, res.State = cur.Fence, cur.State
	}
	b.readBack(o, &res)
	return res
}

// carryOut drives what adm, c's admission, recorded, and answers c.
func (b *Bank) carryOut(o *output, c fence.Command, adm fencelog.Admission) fence.Result {
	res := fence.Result{ID: c.ID, Actuator: c.Actuator, Command: c.Fence}
	res.Outcome = adm.Outcome
	res.Fence, res.State = adm.Output.Fence, adm.Output.State
	switch adm.Outcome {
	case fence.Duplicate:
		// The original decision's fence, and the state now: the output
		// may have changed since the original was applied (a later
		// command, or the boot rule at a restart), and the answer must
		// not tell the controller it is as it asked when it is not.
		orig := adm.Original
		res.Fence = orig.Fence
		if orig.Refused != nil {
			// The original was refused; so is its redelivery, the same way.
			b.refuse(&res, orig.Refused, adm.Record)
		} else if orig.Pulse > 0 {
			// Never again: the redelivery is told how the pulse went.
			status := orig.PulseStatus
			if status == "" {
				status = fence.PulseRunning
			}
			res.Pulse = &fence.Pulse{ID: orig.ID, Fence: orig.Fence, Width: orig.Pulse, Status: status}
		}
	case fence.Stale:
		res.Error = adm.Error
	case fence.Rejected:
		// A token jump: nothing recorded, nothing driven.
		res.Reason, res.Error = adm.Reason, adm.Error
	case fence.Applied:
		if b.opts.AfterCommit != nil {
			b.opts.AfterCommit(c)
		}
		if r := adm.Effect.Refusal; r != nil {
			b.refuse(&res, r, adm.Record)
			b.changedFrom(o.guard, adm.Record)
			break
		}
		for i, set := range adm.Effect.Sets {
			target := b.outs[set.Actuator]
			if err := b.drive(target, set.State); err != nil {
				res.Outcome = fence.Failed
				res.Error = fmt.Sprintf("fence %s recorded but %s could not be driven %s: %v", c.Fence, target.Name, set.State, err)
				if rest := adm.Effect.Sets[i+1:]; len(rest) > 0 {
					res.Error += fmt.Sprintf("; %s was not driven %s (the interlock's other member may still be on)", rest[len(rest)-1].Actuator, rest[len(rest)-1].State)
				}
				b.opts.Logger.Error("drive failed", "actuator", target.Name, "pin", target.PinName, "state", set.State.String(), "err", err)
				b.store.Record(fencelog.Entry{Scope: o.Scope, Actuator: o.Name, ID: c.ID, Holder: c.Holder, Signer: c.Signer,
					Command: c.Fence, State: c.State, Outcome: fence.Failed, Fence: res.Fence, Error: res.Error})
				break
			}
		}
		if p := adm.Output.Pulse; adm.Effect.Pulse > 0 && p != nil {
			res.Pulse = p
			// A pulse that did not start, or that the stopping gateway
			// cuts short, ends at once, at rest.
			cut := ""
			if res.Outcome == fence.Failed {
				cut = "interrupted: the output could not be driven on"
			} else if !b.pulseEnds(o, *p) {
				cut = pulseStopped
			}
			if cut != "" {
				if rec, ok := b.endPulse(o, *p, fence.PulseInterrupted, cut); ok {
					adm.Record = rec
					res.Pulse = rec.Output(o.Name).Pulse
					res.State = fence.StateOff
				}
			}
		}
		b.changedFrom(o.guard, adm.Record)
	}
	b.readBack(o, &res)
	return res
}

// readBack sets res.Actual if o's output does not read back as its
// recorded state res.State. The scope's lock must be held.
func (b *Bank) readBack(o *output, res *fence.Result) {
	if o.Kind == KindSetpoint {
		b.readDuty(o, res)
		return
	}
	if res.State == fence.StateNone {
		return
	}
	high, err := o.pin.Level()
	if err == nil && o.Poll > 0 {
		b.sawLevel(o, high)
	}
	switch {
	case err != nil:
		res.Actual = "unknown"
	case high != o.level(res.State):
		res.Actual = fence.StateOff.String()
		if high == o.level(fence.StateOn) {
			res.Actual = fence.StateOn.String()
		}
	}
}

// refuse makes res the answer to a command that raised the fence but was
// refused r.
func (b *Bank) refuse(res *fence.Result, r *fence.Refusal, rec fencelog.ScopeRecord) {
	res.Outcome = fence.Rejected
	res.Reason = r.Reason
	res.Error = r.Error
	if r.Blocker != "" {
		blocking := rec.Output(r.Blocker)
		res.Blocking = &blocking
	}
}

// Reject answers c as rejected for reason (a fence.Reason* code) because
// of err, audits it, and changes nothing. The answer carries the
// actuator's current fence and state when the actuator exists.
func (b *Bank) Reject(c fence.Command, reason string, err error) fence.Result {
	res := fence.Result{ID: c.ID, Actuator: c.Actuator, Command: c.Fence, Outcome: fence.Rejected, Reason: reason, Error: err.Error()}
	e := fencelog.Entry{Actuator: c.Actuator, ID: c.ID, Holder: c.Holder, Signer: c.Signer, Command: c.Fence, State: c.State,
		Outcome: fence.Rejected, Reason: reason, Error: res.Error}
	if o, ok := b.outs[c.Actuator]; ok {
		e.Scope = o.Scope
		if cur, err := b.store.Output(o.Scope, o.Name); err == nil {
			res.Fence, res.State = cur.Fence, cur.State
			e.Fence = cur.Fence
			if o.Kind == KindSetpoint {
				res.Duty = &cur.Duty
			}
		}
	}
	b.store.Record(e)
	b.emit(c, e.Scope, res)
	return res
}
