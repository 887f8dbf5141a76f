package actuator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
)

// A watched output (Spec.Poll) is on a device that can stop answering, or
// lose or change its level, without the gateway driving it: a relay
// module on a bus loses its coils with its power, another master or a
// button on the board switches them. The gateway never assumes such an
// output is as it left it:
//
//   - a drive that fails (at start, or a command's) marks it down; a
//     command is answered failed and its fence stays recorded, as for
//     any output;
//   - every Poll it is read back, under its scope's lock; a down output
//     is tried again sooner, with backoff (watchRetryMin to watchRetryMax);
//   - when it answers again, or reads a level its record does not say,
//     the boot rule decides its state, as at a start: boot: last drives
//     it back to the record; boot: off and boot: on record that state and
//     drive it (the fence is untouched). A trip holds it at its scope's
//     safe state; an interlock's other member that is on keeps it off.
//
// What was found is logged and reported (Health, Observer.Watched).

const (
	watchRetryMin = 250 * time.Millisecond
	watchRetryMax = 10 * time.Second
)

// Health is a watched output's state as the gateway last found it.
type Health struct {
	// Down is why the output could not be driven or read, since Since;
	// "" while it answers.
	Down  string
	Since time.Time
	// OutOfBand counts the times it was found at a level the gateway had
	// not driven it to.
	OutOfBand uint64
	// LateWrites counts the times a write of the gateway's own that had
	// failed (timed out) was found carried out late by its device (a pin
	// with OnLateWrite says so): not counted in OutOfBand.
	LateWrites uint64
}

// lateWriter is a pin whose device may carry out a write after it failed
// as timed out (a Modbus output), and says so when it finds one.
type lateWriter interface {
	OnLateWrite(func(why string))
}

// health is a watched output's Health and its next retry; guarded by the
// scope's lock, copied out under Bank.healthMu for readers without it.
type health struct {
	Health
	retry time.Duration // the wait before the next try while down
	// high is the level last read, if read: what Statuses reports, so
	// that a status never waits for a device under the scope's lock.
	high, read bool
	// late is the pin's word on its own late write found since reconcile
	// last read it, if any.
	late string
}

// lateWrite notes that o's pin found a write of the gateway's own carried
// out late (why): logged and counted as such, not as out of band. The pin
// calls it while it is driven or read, under the lock of the scope of
// whichever output asked, not necessarily o's: it takes healthMu only.
func (b *Bank) lateWrite(o *output, why string) {
	b.healthMu.Lock()
	o.health.LateWrites++
	o.health.late = why
	b.healthMu.Unlock()
	b.opts.Logger.Warn("the gateway's own late write landed", "actuator", o.Name, "pin", o.PinName, "why", why)
	b.watched(o)
}

// sawLevel notes the level o was last read at. The scope's lock must be
// held.
func (b *Bank) sawLevel(o *output, high bool) {
	b.healthMu.Lock()
	o.health.high, o.health.read = high, true
	b.healthMu.Unlock()
}

// readWatched reads a watched output back after its drive at start, so
// that its status has a level before its first poll. The scope's lock
// must be held.
func (b *Bank) readWatched(o *output) {
	if o.Poll == 0 {
		return
	}
	switch high, err := o.pin.Level(); {
	case err == nil:
		b.sawLevel(o, high)
	case !neitherLevel(err):
		b.markDown(o, fmt.Errorf("read back: %w", err))
	}
}

// lastLevel is the level o was last read at, for Statuses; an error if
// it is down or was never read.
func (b *Bank) lastLevel(o *output) (bool, error) {
	b.healthMu.Lock()
	defer b.healthMu.Unlock()
	switch h := o.health; {
	case h.Down != "":
		return false, errors.New(h.Down)
	case !h.read:
		return false, errors.New("not read yet")
	default:
		return h.high, nil
	}
}

// Health returns the named actuator's health, and whether it is a watched
// output (only watched outputs have one).
func (b *Bank) Health(name string) (Health, bool) {
	o, ok := b.outs[name]
	if !ok || o.Poll == 0 {
		return Health{}, false
	}
	b.healthMu.Lock()
	defer b.healthMu.Unlock()
	return o.health.Health, true
}

// Healths returns every watched output's health, by actuator.
func (b *Bank) Healths() map[string]Health {
	hs := map[string]Health{}
	b.healthMu.Lock()
	defer b.healthMu.Unlock()
	for name, o := range b.outs {
		if o.Poll > 0 {
			hs[name] = o.health.Health
		}
	}
	return hs
}

// markDown notes that o could not be driven or read (err). The scope's
// lock must be held.
func (b *Bank) markDown(o *output, err error) {
	if o.Poll == 0 {
		return
	}
	b.healthMu.Lock()
	h := &o.health
	was := h.Down
	h.Down = err.Error()
	if was == "" {
		h.Since = time.Now().UTC()
		h.retry = watchRetryMin
	}
	b.healthMu.Unlock()
	if was == "" {
		b.opts.Logger.Warn("output down: retrying its recorded state", "actuator", o.Name, "pin", o.PinName, "err", err)
		b.watched(o)
	}
}

// markUp notes that o answered. The scope's lock must be held.
func (b *Bank) markUp(o *output) {
	if o.Poll == 0 {
		return
	}
	b.healthMu.Lock()
	was := o.health.Down
	o.health.Down, o.health.Since = "", time.Time{}
	b.healthMu.Unlock()
	if was != "" {
		b.opts.Logger.Info("output answers again", "actuator", o.Name, "pin", o.PinName)
		b.watched(o)
	}
}

// watched tells Observer.Watched that o's health changed.
func (b *Bank) watched(o *output) {
	if ob := b.opts.Observer; ob != nil && ob.Watched != nil {
		h, _ := b.Health(o.Name)
		ob.Watched(o.Name, h)
	}
}

// startWatching schedules every watched output's first check; Start
// calls it last.
func (b *Bank) startWatching() {
	b.watchMu.Lock()
	b.watching = map[*output]Timer{}
	b.watchMu.Unlock()
	for _, name := range b.order {
		if o := b.outs[name]; o.Poll > 0 {
			if lw, ok := o.pin.(lateWriter); ok {
				lw.OnLateWrite(func(why string) { b.lateWrite(o, why) })
			}
			b.schedule(o)
		}
	}
}

// schedule arms o's next check: after Poll, or its retry while down.
func (b *Bank) schedule(o *output) {
	b.healthMu.Lock()
	wait := o.Poll
	if h := &o.health; h.Down != "" {
		wait, h.retry = h.retry, min(2*h.retry, watchRetryMax)
	}
	b.healthMu.Unlock()
	b.watchMu.Lock()
	defer b.watchMu.Unlock()
	if b.watching == nil {
		return // stopped
	}
	b.watchWG.Add(1)
	b.watching[o] = b.clock.AfterFunc(wait, func() { b.check(o) })
}

// stopWatching stops the checks and waits for the one running, if any.
func (b *Bank) stopWatching() {
	b.watchMu.Lock()
	for _, t := range b.watching {
		if t.Stop() {
			b.watchWG.Done()
		}
	}
	b.watching = nil
	b.watchMu.Unlock()
	b.watchWG.Wait()
}

// check reads o back and reconciles it, then schedules the next check.
func (b *Bank) check(o *output) {
	defer b.watchWG.Done()
	o.guard.lock(context.Background())
	b.reconcile(o)
	o.guard.unlock()
	b.schedule(o)
}

// reconcile reads o and, if it came back or is not at its recorded level,
// applies the boot rule to it. The scope's lock must be held.
func (b *Bank) reconcile(o *output) {
	rec, err := b.store.ScopeRecord(o.Scope)
	if err != nil {
		b.opts.Logger.Error("read scope", "scope", o.Scope, "err", err)
		return
	}
	cur := rec.Output(o.Name)
	b.healthMu.Lock()
	o.health.late = ""
	b.healthMu.Unlock()
	high, err := o.pin.Level()
	neither := neitherLevel(err)
	if err != nil && !neither {
		b.markDown(o, fmt.Errorf("read back: %w", err))
		return
	}
	if !neither {
		b.sawLevel(o, high)
	}
	b.healthMu.Lock()
	wasDown, late := o.health.Down != "", o.health.late
	b.healthMu.Unlock()
	recorded := cur.State
	if recorded == fence.StateNone {
		recorded = fence.StateOff
	}
	if !wasDown && !neither && high == o.level(recorded) {
		return
	}
	found := "off"
	switch {
	case neither:
		found = "neither on nor off (" + err.Error() + ")"
	case high == o.level(fence.StateOn):
		found = "on"
	}
	why := "it answers again, at " + found
	switch {
	case late != "" && !neither:
		// The read found the gateway's own write that had timed out,
		// carried out late: logged and counted by lateWrite.
		why = fmt.Sprintf("found %s, recorded %s: %s", found, recorded, late)
	case !wasDown:
		why = fmt.Sprintf("found %s, recorded %s: changed behind the gateway's back", found, recorded)
		b.healthMu.Lock()
		o.health.OutOfBand++
		b.healthMu.Unlock()
		b.opts.Logger.Warn("output changed behind the gateway's back", "actuator", o.Name, "pin", o.PinName, "found", found, "recorded", recorded.String())
		b.watched(o)
	}
	set, rule := o.guard.bootState(o, rec)
	if set.State == fence.StateOn && o.lock != nil {
		for _, m := range o.lock.Members {
			if m != o.Name && rec.Output(m).State == fence.StateOn {
				set, rule = fence.Set{Actuator: o.Name, State: fence.StateOff}, rule+", but "+m+" of interlock "+o.lock.Name+" is on"
			}
		}
	}
	want := set.State
	changed := !isAt(cur, set)
	if changed {
		if _, err := b.store.Write(fencelog.Changes{States: []fencelog.StateChange{{Scope: o.Scope, Actuator: o.Name, State: want, Duty: set.Duty, Frequency: set.Frequency,
			Holder: "boot", Outcome: fence.OutcomeBoot, Why: why + "; " + rule}}}); err != nil {
			b.opts.Logger.Error("record the boot rule's state", "actuator", o.Name, "err", err)
			return
		}
		b.opts.Logger.Warn("boot rule applied", "actuator", o.Name, "state", want.String(), "why", why+"; "+rule)
		b.changed(o.guard)
	}
	if neither || high != o.level(want) || changed {
		if err := b.drive(o, want); err != nil {
			return // drive marked it down
		}
		b.opts.Logger.Info("output reconciled", "actuator", o.Name, "state", want.String(), "why", why)
	}
	if high, err = o.pin.Level(); err != nil {
		b.markDown(o, fmt.Errorf("read back: %w", err))
		return
	}
	b.sawLevel(o, high)
	if high != o.level(want) {
		b.markDown(o, fmt.Errorf("driven %s, reads back %s", want, map[bool]string{true: "high", false: "low"}[high]))
		return
	}
	b.markUp(o)
}

// bootState is the state the boot rule gives o, whose scope's record is
// rec, and the rule's reason: the record's state, unless boot: on or off,
// a pulse output's rest, a trip or an interlock decides otherwise.
func (sc *guard) bootState(o *output, rec fencelog.ScopeRecord) (fence.Set, string) {
	cur := rec.Output(o.Name)
	state := func(s fence.State) fence.Set { return fence.Set{Actuator: o.Name, State: s} }
	switch {
	case o.Kind == KindPulse && cur.Pulse != nil && cur.Pulse.Status == fence.PulseRunning:
		return state(fence.StateOn), "its pulse runs"
	case o.Kind == KindPulse:
		return state(fence.StateOff), "a pulse output rests off"
	case rec.Trip() != "":
		return sc.safeSet(o), "held by its scope's trip (" + rec.Trip() + ") until a reset"
	case o.Boot == BootOff:
		return state(fence.StateOff), "boot: off"
	case o.Boot == BootOn:
		return state(fence.StateOn), "boot: on"
	case o.Boot == BootDuty:
		return o.at(o.BootDuty), "boot: " + o.BootDuty.String()
	case cur.State == fence.StateNone:
		return state(fence.StateOff), "never commanded: off"
	}
	return fence.Set{Actuator: o.Name, State: cur.State, Duty: cur.Duty, Frequency: cur.Frequency}, "boot: last"
}
