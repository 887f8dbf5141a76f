package actuator_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/fence"
)

// TestLockHeldFromRecordToDrive forces the interleaving that a broken
// scope lock would let happen, instead of hoping for it: while the fan's
// command is between its durable record and its drive (held in the
// AfterCommit hook), a second command arrives. For the fan itself or the
// heater, which shares the fan's scope, the second must wait for the
// scope's lock (a hook reports the wait) and be recorded and driven only
// after the first's drive; for the pump, in a scope of its own, it must
// not wait. Every outcome is decided by the hooks, none by timing, so a
// lock released before the drive, or one lock per actuator, fails it on
// every run.
func TestLockHeldFromRecordToDrive(t *testing.T) {
	tests := []struct {
		name   string
		second fence.Command
		waits  bool
	}{
		{"same actuator", command("second", "fan", 11, 0, fence.StateOff), true},
		{"another actuator of the scope", command("second", "heater", 11, 0, fence.StateOn), true},
		{"another scope", command("second", "pump", 1, 0, fence.StateOn), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var events []string
			record := func(e string) {
				mu.Lock()
				events = append(events, e)
				mu.Unlock()
			}
			first := command("first", "fan", 10, 0, fence.StateOn)
			waited := make(chan string, 8)
			secondDone := make(chan fence.Result, 1)
			var early *fence.Result // the second's answer, if it came while the first was between record and drive
			var r *rig
			r = newRigWrapped(t, "", defaultActs, &actuator.Options{AfterCommit: func(c fence.Command) {
				record("commit " + c.ID)
				if c.ID != first.ID {
					return
				}
				go func() { secondDone <- must(r.bank.Handle(context.Background(), tt.second)) }()
				select {
				case scope := <-waited:
					record("second waits for scope " + scope)
				case res := <-secondDone:
					early = &res
				}
			}}, func(name string, high bool) { record(fmt.Sprintf("drive %s %v", name, high)) })
			actuator.OnLockWait(r.bank, func(scope string) { waited <- scope })
			mu.Lock()
			events = nil // forget the boot drives
			mu.Unlock()

			if res := must(r.bank.Handle(context.Background(), first)); res.Outcome != fence.Applied {
				t.Fatalf("first = %v (%s), want applied", res.Outcome, res.Error)
			}
			second := early
			if second == nil {
				res := <-secondDone
				second = &res
			}
			if second.Outcome != fence.Applied {
				t.Fatalf("second = %v (%s), want applied", second.Outcome, second.Error)
			}
			mu.Lock()
			got := strings.Join(events, "; ")
			mu.Unlock()
			drive := func(c fence.Command) string { return fmt.Sprintf("drive %s %v", c.Actuator, c.State == fence.StateOn) }
			want := strings.Join([]string{"commit first", "drive fan true", "commit second", drive(tt.second)}, "; ")
			switch {
			case tt.waits && early != nil:
				t.Errorf("the %s command was decided while the fan's was between its record and its drive: events %s", tt.second.Actuator, got)
			case tt.waits && got != "commit first; second waits for scope climate; "+strings.TrimPrefix(want, "commit first; "):
				t.Errorf("events %s, want %s, with the second waiting for scope climate after the first commit", got, want)
			case !tt.waits && early == nil:
				t.Errorf("the pump's command waited for the climate scope's lock: events %s", got)
			}
			sts, err := r.bank.Statuses()
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range sts {
				if s.LevelErr != nil || s.High != ((s.State == fence.StateOn) != s.ActiveLow) {
					t.Errorf("%s: recorded %v, pin high %v (%v): the drives did not follow the records", s.Actuator, s.State, s.High, s.LevelErr)
				}
			}
		})
	}
}

// Stalled measures a held lock on the bank's clock: a drive that does not
// return holds its scope's lock, and after the limit has passed on the
// clock, Stalled names the scope.
func TestStalledOnTheClock(t *testing.T) {
	r, _ := newInputRig(t, "", []actuator.Spec{{Name: "pump", PinName: "GPIO17"}}, &actuator.Options{}, nil)
	gate := make(chan struct{})
	r.gate.Store(&gate)
	done := make(chan struct{})
	go func() {
		defer close(done)
		must(r.bank.Handle(context.Background(), command("p-1", "pump", 1, 0, fence.StateOn)))
	}()
	<-r.entered // the drive holds pump's lock
	if s, held := r.bank.Stalled(time.Second); s != "" {
		t.Errorf("Stalled names %s, held %v, before any time passed", s, held)
	}
	r.clock.Advance(2 * time.Second)
	if s, held := r.bank.Stalled(time.Second); s != "pump" || held != 2*time.Second {
		t.Errorf("Stalled = %q, %v after 2s on the clock; want pump, 2s", s, held)
	}
	r.gate.Store(nil)
	close(gate)
	<-done
	if s, _ := r.bank.Stalled(0); s != "" {
		t.Errorf("Stalled names %s after the drive returned", s)
	}
}
