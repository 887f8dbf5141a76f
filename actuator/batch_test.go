package actuator_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/fence"
)

// HandleBatch answers and drives as Handle would one command after
// another: the same answers, the same drives in the same order, the same
// audit trail, for random batches of fresh, stale, redelivered and
// fence-only commands to a plain output and to the members of an
// interlock with break-before-make (whose commands are planned one at a
// time, each after the drives of the one before it).
func TestHandleBatchIsHandleInSequence(t *testing.T) {
	acts := append([]act{{name: "pump", pin: "GPIO17"}}, ventActs...)
	for seed := range uint64(30) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 5))
			names := []string{"pump", "vent-open", "vent-close"}
			// batches of commands to one actuator each
			var batches [][]fence.Command
			var all []fence.Command
			for i := 0; i < 60; {
				name := names[rng.IntN(len(names))]
				var b []fence.Command
				for n := 1 + rng.IntN(6); n > 0; n, i = n-1, i+1 {
					c := command(fmt.Sprintf("c%d", i), name, 40+rng.Uint64N(4), rng.Uint64N(4),
						[]fence.State{fence.StateOn, fence.StateOff, fence.StateNone}[rng.IntN(3)])
					if i > 0 && rng.IntN(5) == 0 {
						if old := all[rng.IntN(len(all))]; old.Actuator == name {
							c = old // a redelivery
						}
					}
					b = append(b, c)
					all = append(all, c)
				}
				batches = append(batches, b)
			}
			var oneDrives, batchDrives drivesSeen
			one := newRigWrapped(t, "", acts, ventLock(true, 0), oneDrives.add)
			batched := newRigWrapped(t, "", acts, ventLock(true, 0), batchDrives.add)
			var want, got []string
			for _, b := range batches {
				for _, c := range b {
					want = append(want, resultView(must(one.bank.Handle(context.Background(), c))))
				}
				res, err := batched.bank.HandleBatch(context.Background(), b)
				if err != nil || len(res) != len(b) {
					t.Fatalf("HandleBatch(%d commands) = %d answers, %v", len(b), len(res), err)
				}
				for _, r := range res {
					got = append(got, resultView(r))
				}
			}
			for i := range want {
				if want[i] != got[i] {
					t.Fatalf("command %d (%+v):\n one by one %s\n in a batch %s", i, all[i], want[i], got[i])
				}
			}
			firstDifference(t, "drive", oneDrives.list(), batchDrives.list())
			firstDifference(t, "audit entry", auditView(t, one), auditView(t, batched))
		})
	}
}

// firstDifference reports the first of want and got that differ.
func firstDifference(t *testing.T, what string, want, got []string) {
	t.Helper()
	for i := range max(len(want), len(got)) {
		w, g := "(none)", "(none)"
		if i < len(want) {
			w = want[i]
		}
		if i < len(got) {
			g = got[i]
		}
		if w != g {
			t.Errorf("%s %d differs:\n one by one %s\n in batches %s", what, i, w, g)
			return
		}
	}
}

type drivesSeen struct {
	mu sync.Mutex
	l  []string
}

func (d *drivesSeen) add(name string, high bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.l = append(d.l, fmt.Sprintf("%s=%v", name, high))
}

func (d *drivesSeen) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.l...)
}

func resultView(r fence.Result) string {
	return fmt.Sprintf("%s %s %v %s fence %s state %s actual %q reason %s error %q blocking %s",
		r.ID, r.Actuator, r.Command, r.Outcome, r.Fence, r.State, r.Actual, r.Reason, r.Error, blockingView(r.Blocking))
}

func blockingView(o *fence.Output) string {
	if o == nil {
		return "-"
	}
	return fmt.Sprintf("%s %s %s %s", o.Actuator, o.State, o.Fence, o.Holder)
}

func auditView(t *testing.T, r *rig) []string {
	t.Helper()
	es, err := r.log.Audit(1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, fmt.Sprintf("%s %s %s %s %v %s %s %s", e.ID, e.Actuator, e.Command, e.State, e.Outcome, e.Reason, e.Fence, e.Error))
	}
	return out
}

// The commands of a batch that pass share one commit, and every drive
// comes after it.
func TestHandleBatchCommitsOnce(t *testing.T) {
	var r *rig
	var mu sync.Mutex
	var commitsAtDrive []uint64
	r = newRigWrapped(t, "", defaultActs, nil, func(name string, high bool) {
		if r == nil {
			return // Start
		}
		mu.Lock()
		commitsAtDrive = append(commitsAtDrive, r.log.Stats().Commits)
		mu.Unlock()
	})
	before := r.log.Stats().Commits
	var b []fence.Command
	for i := range 10 {
		b = append(b, command(fmt.Sprintf("b-%d", i), "pump", 42, uint64(i), []fence.State{fence.StateOn, fence.StateOff}[i%2]))
	}
	res, err := r.bank.HandleBatch(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range res {
		if x.Outcome != fence.Applied || x.Actual != "" {
			t.Errorf("command %d: %v %q, actual %q; want applied, as asked", i, x.Outcome, x.Error, x.Actual)
		}
	}
	if c := r.log.Stats().Commits - before; c != 1 {
		t.Errorf("%d commits for a batch of 10 applied commands, want 1", c)
	}
	if len(commitsAtDrive) != 10 {
		t.Fatalf("%d drives, want 10", len(commitsAtDrive))
	}
	for i, c := range commitsAtDrive {
		if c != before+1 {
			t.Errorf("drive %d came after %d commits of the batch, want 1", i, c-before)
		}
	}
	if r.level(t, "GPIO17") {
		t.Errorf("GPIO17 high after the batch, want low: its last command, b-9, is off")
	}
	if _, err := r.bank.HandleBatch(context.Background(), []fence.Command{b[0], command("v-1", "valve", 1, 0, fence.StateOn)}); err == nil {
		t.Errorf("a batch of two actuators' commands was taken")
	}
}

// An interlocked output is to be given one command at a time; a plain one
// as many as queued.
func TestMaxBatch(t *testing.T) {
	r := newRigWrapped(t, "", append([]act{{name: "pump", pin: "GPIO17"}}, ventActs...), ventLock(true, 0), nil)
	if n := r.bank.MaxBatch("pump"); n < 64 {
		t.Errorf("MaxBatch(pump) = %d, want no bound below the link's", n)
	}
	for _, name := range []string{"vent-open", "vent-close"} {
		if n := r.bank.MaxBatch(name); n != 1 {
			t.Errorf("MaxBatch(%s) = %d, want 1 (interlocked)", name, n)
		}
	}
}

// A batch whose context ended before it got its scope answers the
// commands Authorize rejected before the first that waited, and decides
// nothing.
func TestHandleBatchContextEndedAnswersRejectionsBefore(t *testing.T) {
	r := newRig(t, "", defaultActs, &actuator.Options{Authorize: func(c fence.Command, scope string) (string, error) {
		if strings.HasPrefix(c.ID, "bad") {
			return fence.ReasonUnsigned, errors.New("unsigned")
		}
		return "", nil
	}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := r.bank.HandleBatch(ctx, []fence.Command{command("bad-1", "pump", 1, 0, fence.StateOn), command("ok-1", "pump", 1, 1, fence.StateOn),
		command("bad-2", "pump", 1, 2, fence.StateOn)})
	if !errors.Is(err, context.Canceled) || len(res) != 1 || res[0].ID != "bad-1" || res[0].Outcome != fence.Rejected {
		t.Fatalf("HandleBatch with an ended context = %+v, %v; want bad-1's rejection only, and context.Canceled", res, err)
	}
	if out, _ := r.log.Output("pump", "pump"); out.Fence.Token != 0 {
		t.Errorf("the pump's fence moved to %s", out.Fence)
	}
}
