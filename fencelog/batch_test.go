package fencelog

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/fence"
)

// AdmitBatch decides a batch as Admit would decide its commands one after
// another: the same answers, the same record, the same audit trail, for
// random mixes of fresh, stale, redelivered and fence-only commands, and
// of commands that an interlock refuses or that switch its other member
// off.
func TestAdmitBatchIsAdmitInSequence(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 11))
			g := &fence.Interlock{Name: "vent", Members: []string{"open", "close"}, BreakBeforeMake: seed%2 == 0}
			plan := func(c fence.Command) Planner {
				if c.State != fence.StateOn {
					return nil
				}
				return func(rec ScopeRecord) fence.Effect {
					states := rec.States()
					return g.Effect(c, func(a string) bool { return states[a] == fence.StateOn })
				}
			}
			var cmds []fence.Command
			for i := range 60 {
				token, seq := 40+rng.Uint64N(4), rng.Uint64N(4)
				if seed%2 == 1 {
					// Mostly rising pairs: more commands pass than the window keeps.
					token, seq = 40, uint64(2*i)+rng.Uint64N(3)
				}
				c := cmd(fmt.Sprintf("c%d", i), []string{"open", "close"}[rng.IntN(2)], token, seq,
					[]fence.State{fence.StateOn, fence.StateOff, fence.StateNone}[rng.IntN(3)])
				if i > 0 && rng.IntN(5) == 0 {
					c = cmds[rng.IntN(i)] // a redelivery
				}
				cmds = append(cmds, c)
			}
			one, _ := openLog(t, nil)
			batched, _ := openLog(t, nil)
			var want, got []Admission
			for _, c := range cmds {
				adm, err := one.Admit("vent", c, fence.Rules{}, plan(c))
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, adm)
			}
			before := batched.Stats().Commits
			batches := 0
			for rest := cmds; len(rest) > 0; batches++ {
				n := min(len(rest), 1+rng.IntN(12))
				reqs := make([]Request, n)
				for i, c := range rest[:n] {
					reqs[i] = Request{c, plan(c)}
				}
				adms, err := batched.AdmitBatch("vent", fence.Rules{}, reqs)
				if err != nil {
					t.Fatal(err)
				}
				if len(adms) != n {
					t.Fatalf("%d admissions for a batch of %d", len(adms), n)
				}
				got = append(got, adms...)
				rest = rest[n:]
			}
			for i := range cmds {
				w, g := admissionView(want[i]), admissionView(got[i])
				if !reflect.DeepEqual(w, g) {
					t.Fatalf("command %d (%+v):\n in sequence %+v\n in a batch  %+v", i, cmds[i], w, g)
				}
			}
			if c := batched.Stats().Commits - before; c > uint64(batches) {
				t.Errorf("%d commits for %d batches, want at most one each", c, batches)
			}
			if w, g := auditView(t, one), auditView(t, batched); !reflect.DeepEqual(w, g) {
				t.Errorf("audit trails differ:\n in sequence %v\n in batches  %v", w, g)
			}
			// The record each keeps: the newest fence.Window commands that passed.
			passed := 0
			for _, a := range want {
				if a.Outcome == fence.Applied || a.Effect.Refusal != nil {
					passed++
				}
			}
			for name, l := range map[string]*Store{"in sequence": one, "in batches": batched} {
				sc, err := l.ScopeRecord("vent")
				if err != nil {
					t.Fatal(err)
				}
				if n := len(sc.rec.Recent); n != min(passed, fence.Window) {
					t.Errorf("%s: the record keeps %d commands of the %d that passed, want %d", name, n, passed, min(passed, fence.Window))
				}
			}
			if seed%2 == 1 && passed <= fence.Window {
				t.Errorf("only %d commands passed: the window (%d) never filled", passed, fence.Window)
			}
		})
	}
}

// admissionView is what an admission tells the caller, without the times.
func admissionView(a Admission) string {
	o := a.Output
	orig := "<nil>"
	if a.Original != nil {
		orig = appliedView(*a.Original)
	}
	return fmt.Sprintf("%v %s %s %s | %s %s %s fence %s | scope %s %v", a.Outcome, a.Reason, a.Error, orig,
		o.State, o.Holder, o.Actuator, o.Fence, a.Record.Fence, a.Record.States()) + fmt.Sprintf(" | effect %v %+v", a.Effect.Sets, a.Effect.Refusal) +
		" | window " + windowView(a.Record.rec.Recent)
}

// windowView is a scope's window of remembered commands, for comparing.
func windowView(recent []fence.AppliedCommand) string {
	var b strings.Builder
	for _, a := range recent {
		b.WriteString(appliedView(a) + " ")
	}
	return b.String()
}

// appliedView is every field of a remembered command, its refusal's
// rather than the pointer to it.
func appliedView(a fence.AppliedCommand) string {
	refused := "<nil>"
	if a.Refused != nil {
		refused = fmt.Sprintf("%+v", *a.Refused)
	}
	a.Refused = nil
	return fmt.Sprintf("%+v refused %s", a, refused)
}

func auditView(t *testing.T, l *Store) []string {
	t.Helper()
	es, err := l.Audit(1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, fmt.Sprintf("%s %s %s %s %v %s %s %s", e.ID, e.Actuator, e.Command, e.State, e.Outcome, e.Reason, e.Fence, e.Error))
	}
	return out
}

// A batch in which no command passes the fence writes nothing: stale
// commands cost no sync, however many come together.
func TestStaleBatchWritesNothing(t *testing.T) {
	l, _ := openLog(t, nil)
	admit(t, l, "pump", cmd("b-1", "pump", 42, 0, fence.StateOff), fence.Applied)
	before := l.Stats().Commits
	var reqs []Request
	for i := range 20 {
		reqs = append(reqs, Request{Command: cmd(fmt.Sprintf("a-%d", i), "pump", 41, uint64(i), fence.StateOn)})
	}
	reqs = append(reqs, Request{Command: cmd("b-1", "pump", 42, 0, fence.StateOff)})
	adms, err := l.AdmitBatch("pump", fence.Rules{}, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range adms[:20] {
		if a.Outcome != fence.Stale || a.Output.State != fence.StateOff {
			t.Errorf("command %d: %v, %s; want stale, off", i, a.Outcome, a.Output.State)
		}
	}
	if adms[20].Outcome != fence.Duplicate {
		t.Errorf("the redelivery: %v, want duplicate", adms[20].Outcome)
	}
	if c := l.Stats().Commits - before; c != 0 {
		t.Errorf("%d commits for a batch of stale commands and a duplicate, want 0", c)
	}
}
