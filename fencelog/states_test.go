package fencelog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/fencegate/fencegate/fence"
)

// boot is a state change as the boot rule makes one.
func boot(scope, actuator string, s fence.State, why string) StateChange {
	return StateChange{Scope: scope, Actuator: actuator, State: s, Holder: "boot", Outcome: fence.OutcomeBoot, Why: why}
}

// Write records states of several scopes at once, each with the caller's
// outcome and why, and touches no fence.
func TestWriteKeepsFence(t *testing.T) {
	l, _ := openLog(t, nil)
	admit(t, l, "s", cmd("b", "pump", 42, 3, fence.StateOn), fence.Applied)
	ok, err := l.Write(Changes{States: []StateChange{boot("s", "pump", fence.StateOff, "boot: off"),
		{Scope: "t", Actuator: "fan", State: fence.StateOn, Holder: "safe", Outcome: fence.OutcomeSafe, Why: "dead-man"}}})
	if err != nil || !ok {
		t.Fatalf("Write = %v, %v", ok, err)
	}
	out, _ := l.Output("s", "pump")
	if out.State != fence.StateOff || out.Fence != (fence.Fence{Token: 42, Seq: 3}) || out.Holder != "boot" || out.Why != "boot: off" {
		t.Errorf("after Write, pump = %+v, want off, fence 42/3 unchanged, holder boot, why boot: off", out)
	}
	if fan, _ := l.Output("t", "fan"); fan.State != fence.StateOn || fan.Fence != (fence.Fence{}) || fan.Why != "dead-man" {
		t.Errorf("after Write, fan = %+v, want on at fence 0/0", fan)
	}
	admit(t, l, "s", cmd("a", "pump", 42, 3, fence.StateOff), fence.Stale)
	es, _ := l.Audit(10)
	var got []string
	for _, e := range es[1:] {
		got = append(got, string(e.Outcome)+" "+e.Actuator+" "+e.Fence.String()+" "+e.Why)
	}
	if want := "boot pump 42/3 boot: off|safe fan 0/0 dead-man|stale pump 42/3 "; strings.Join(got, "|") != want {
		t.Errorf("audit after Write = %q, want %q", strings.Join(got, "|"), want)
	}
}

// The gateway's reasons for the states it sets are not errors: an audit
// entry of a boot change says why, and has no error, as written to disk.
func TestWriteAuditsWhyNotError(t *testing.T) {
	l, path := openLog(t, nil)
	if _, err := l.Write(Changes{States: []StateChange{boot("s", "pump", fence.StateOn, "boot: on")}}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var raw []byte
	db.View(func(tx *bolt.Tx) error {
		_, v := tx.Bucket(bucketAudit).Cursor().Last()
		raw = bytes.Clone(v)
		return nil
	})
	if !bytes.Contains(raw, []byte(`"outcome":"boot"`)) || !bytes.Contains(raw, []byte(`"why":"boot: on"`)) || bytes.Contains(raw, []byte(`"error"`)) {
		t.Errorf("the boot change's audit entry on disk = %s, want outcome boot, why \"boot: on\" and no error", raw)
	}
}

// A trip is set with the states it sends its scope to, and released by a
// write that clears it.
func TestWriteTrip(t *testing.T) {
	l, _ := openLog(t, nil)
	admit(t, l, "s", cmd("b", "heater", 7, 0, fence.StateOn), fence.Applied)
	trip := StateChange{Scope: "s", Actuator: "heater", State: fence.StateOff, Holder: "trip", Outcome: fence.OutcomeTrip, Why: "trip: overheat is high"}
	if _, err := l.Write(Changes{States: []StateChange{trip}, Trip: &Trip{Scope: "s", Why: trip.Why}}); err != nil {
		t.Fatal(err)
	}
	sc, _ := l.ScopeRecord("s")
	if sc.Trip() != trip.Why || sc.Output("heater").State != fence.StateOff || sc.Fence != (fence.Fence{Token: 7}) {
		t.Errorf("after the trip: trip %q, heater %s, fence %s; want tripped, off, 7/0", sc.Trip(), sc.Output("heater").State, sc.Fence)
	}
	if _, err := l.Write(Changes{Trip: &Trip{Scope: "s"}}); err != nil {
		t.Fatal(err)
	}
	if sc, _ := l.ScopeRecord("s"); sc.Trip() != "" || sc.Output("heater").State != fence.StateOff {
		t.Errorf("after the release: trip %q, heater %s; want none, off", sc.Trip(), sc.Output("heater").State)
	}
}

// pulse admits a pulse command for door in scope s and returns its
// recorded pulse.
func pulse(t *testing.T, l *Store, id string, token uint64) (fence.Command, fence.Pulse) {
	t.Helper()
	c := cmd(id, "door", token, 0, fence.StateOn)
	c.Pulse = 300 * time.Millisecond
	adm, err := l.Admit("s", c, fence.Rules{}, func(ScopeRecord) fence.Effect { return fence.PulseEffect(c, false) })
	if err != nil || adm.Outcome != fence.Applied || adm.Output.Pulse == nil || adm.Output.Pulse.Status != fence.PulseRunning {
		t.Fatalf("pulse %s = %+v, %v; want applied, running", id, adm, err)
	}
	return c, *adm.Output.Pulse
}

// pulseEnd is the end of pulse p of door, as the pulse rule records it.
func pulseEnd(p fence.Pulse, holder, status, why string) Changes {
	return Changes{
		States: []StateChange{{Scope: "s", Actuator: "door", State: fence.StateOff, Holder: holder, Outcome: fence.OutcomePulse, Why: why, ID: p.ID, Command: p.Fence}},
		Pulse:  &PulseEnd{Scope: "s", Actuator: "door", Pulse: p, Status: status},
	}
}

// The end of a pulse is recorded only if that pulse still runs: on its
// output, in its command's window entry (a redelivery is told how it
// ended) and in the audit trail, with the pulse's id and pair; an end
// that comes too late, or names another pulse, writes nothing.
func TestWritePulseEnd(t *testing.T) {
	l, _ := openLog(t, nil)
	c, p := pulse(t, l, "p-1", 5)
	other := p
	other.ID = "p-0"
	for _, w := range []fence.Pulse{other, {ID: p.ID, Fence: fence.Fence{Token: 4}}} {
		if ok, err := l.Write(pulseEnd(w, c.Holder, fence.PulseDone, "done")); err != nil || ok {
			t.Errorf("the end of another pulse %+v = %v, %v; want false and nothing written", w, ok, err)
		}
	}
	if out, _ := l.Output("s", "door"); out.State != fence.StateOn || out.Pulse.Status != fence.PulseRunning {
		t.Fatalf("after the ends of other pulses, door = %+v, want on, running", out)
	}
	if ok, err := l.Write(pulseEnd(p, c.Holder, fence.PulseDone, "done: on for 300ms")); err != nil || !ok {
		t.Fatalf("the end of the running pulse = %v, %v", ok, err)
	}
	out, _ := l.Output("s", "door")
	if out.State != fence.StateOff || out.Pulse == nil || out.Pulse.Status != fence.PulseDone || out.Holder != c.Holder || out.Why != "" || out.Fence != c.Fence {
		t.Errorf("after the end, door = %+v, want off, done, holder %s, no why (a command's pulse), fence %s", out, c.Holder, c.Fence)
	}
	if d := admit(t, l, "s", c, fence.Duplicate); d.Original == nil || d.Original.PulseStatus != fence.PulseDone {
		t.Errorf("redelivery after the end = %+v, want a duplicate of a done pulse", d.Decision)
	}
	if ok, err := l.Write(pulseEnd(p, c.Holder, fence.PulseInterrupted, "again")); err != nil || ok {
		t.Errorf("a second end of the pulse = %v, %v; want false", ok, err)
	}
	es, _ := l.FindAudit(AuditQuery{Outcome: fence.OutcomePulse, Limit: 10})
	if len(es) != 1 || es[0].ID != "p-1" || es[0].Command != c.Fence || es[0].Holder != c.Holder || es[0].Why != "done: on for 300ms" || es[0].Error != "" {
		t.Errorf("pulse entries = %+v, want one, of p-1's pair and holder, saying why", es)
	}
}

// A write that does not say which rule set a state, or how a pulse ended,
// is refused, and writes nothing.
func TestWriteRefusesWhatItCannotRecord(t *testing.T) {
	l, _ := openLog(t, nil)
	_, p := pulse(t, l, "p-1", 5)
	for _, tt := range []struct {
		w    Changes
		want string
	}{
		{Changes{States: []StateChange{{Scope: "s", Actuator: "pump", State: fence.StateOn, Holder: "boot", Why: "boot: on"}}}, "state change of pump in scope s has no outcome"},
		{Changes{Pulse: &PulseEnd{Scope: "s", Actuator: "door", Pulse: p}}, `pulse 5/0 has status ""`},
		{Changes{Pulse: &PulseEnd{Scope: "s", Actuator: "door", Pulse: p, Status: fence.PulseRunning}}, `has status "running"`},
	} {
		if ok, err := l.Write(tt.w); ok || err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Write(%+v) = %v, %v; want an error saying %q", tt.w, ok, err, tt.want)
		}
	}
	sc, _ := l.ScopeRecord("s")
	if sc.Output("pump").State != fence.StateNone || sc.Output("door").Pulse.Status != fence.PulseRunning || l.Err() != nil {
		t.Errorf("after refused writes: pump %s, door %+v, store %v; want nothing written, store usable", sc.Output("pump").State, sc.Output("door"), l.Err())
	}
}

// The level of an input is decided in the write transaction: a level
// recorded between the read-only look and the write (the hook) counts,
// so no change is lost from the count.
func TestRecordInputDecidedInTransaction(t *testing.T) {
	l, _ := openLog(t, nil)
	var ran bool
	testHookInputBetween = func() {
		if ran {
			return
		}
		ran = true
		if rec, err := l.RecordInput("door", false); err != nil || rec.Seq != 1 {
			t.Errorf("RecordInput(door, low) in between = %+v, %v; want seq 1", rec, err)
		}
	}
	defer func() { testHookInputBetween = nil }()
	rec, err := l.RecordInput("door", true)
	if err != nil {
		t.Fatal(err)
	}
	if !ran {
		t.Fatal("the hook between the look and the write did not run")
	}
	if !rec.High || rec.Seq != 2 {
		t.Errorf("RecordInput(door, high) after low was recorded in between = %+v, want high, seq 2", rec)
	}
	if again, err := l.RecordInput("door", true); err != nil || again != rec {
		t.Errorf("the same level again = %+v, %v; want %+v unchanged", again, err, rec)
	}
}

// storeWrites are the store's writes of the gateway's own states, each
// with a check that it was recorded, run on a store where door's pulse
// p-1 (token 5) runs.
var storeWrites = []struct {
	name     string
	write    func(l *Store, p fence.Pulse) error
	recorded func(l *Store) bool
}{
	{"states",
		func(l *Store, _ fence.Pulse) error {
			_, err := l.Write(Changes{States: []StateChange{boot("s", "pump", fence.StateOn, "boot: on")}})
			return err
		},
		func(l *Store) bool { out, _ := l.Output("s", "pump"); return out.State == fence.StateOn }},
	{"trip",
		func(l *Store, _ fence.Pulse) error {
			_, err := l.Write(Changes{Trip: &Trip{Scope: "s", Why: "trip"}})
			return err
		},
		func(l *Store) bool { sc, _ := l.ScopeRecord("s"); return sc.Trip() == "trip" }},
	{"pulse end",
		func(l *Store, p fence.Pulse) error {
			_, err := l.Write(pulseEnd(p, "h", fence.PulseDone, "done"))
			return err
		},
		func(l *Store) bool { out, _ := l.Output("s", "door"); return out.Pulse.Status == fence.PulseDone }},
	{"input",
		func(l *Store, _ fence.Pulse) error {
			_, err := l.RecordInput("door", true)
			return err
		},
		func(l *Store) bool {
			var v []byte
			l.db.View(func(tx *bolt.Tx) error { v = tx.Bucket(bucketInputs).Get([]byte("door")); return nil })
			return v != nil
		}},
}

// Each write of the gateway's own states is one transaction, committed
// (fsynced) before the write returns, and on disk after a reopen.
func TestOwnWritesCommitBeforeReturn(t *testing.T) {
	for _, tt := range storeWrites {
		t.Run(tt.name, func(t *testing.T) {
			l, path := openLog(t, nil)
			_, p := pulse(t, l, "p-1", 5)
			held, release := holdCommits(t, 1)
			before := l.Stats().Commits
			done := make(chan error, 1)
			go func() { done <- tt.write(l, p) }()
			if n := <-held; n != 1 {
				t.Fatalf("a batch of %d writes, want 1", n)
			}
			select {
			case <-done:
				t.Fatal("the write returned before its commit was done")
			case <-time.After(50 * time.Millisecond):
			}
			release()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := l.Stats().Commits - before; got != 1 {
				t.Errorf("%d commits, want 1", got)
			}
			l.Close()
			l, err := Open(path, &Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if !tt.recorded(l) {
				t.Error("not on disk after a reopen")
			}
		})
	}
}

// A write of the gateway's own states whose commit fails returns ErrBroken,
// and the store refuses every write after it.
func TestOwnWritesBreakOnFailedCommit(t *testing.T) {
	for _, tt := range storeWrites {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "fence.db")
			l, err := Open(path, &Options{Create: Fresh(), AuditFlush: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			_, p := pulse(t, l, "p-1", 5)
			os.Remove(path)
			if err := tt.write(l, p); !errors.Is(err, ErrBroken) || !errors.Is(err, ErrGone) {
				t.Errorf("write to a deleted store = %v, want ErrBroken and ErrGone", err)
			}
			select {
			case <-l.Broken():
			default:
				t.Error("Broken() not closed")
			}
			if err := tt.write(l, p); !errors.Is(err, ErrBroken) {
				t.Errorf("the write again = %v, want ErrBroken", err)
			}
		})
	}
}
