package conformance_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/tests/testenv"
)

// reps is how many times each pair of languages plays the pause test:
// FENCEGATE_CONFORMANCE_REPS (make conformance sets 20), 3 by default.
func reps(t *testing.T) int {
	s := os.Getenv("FENCEGATE_CONFORMANCE_REPS")
	if s == "" {
		return 3
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("FENCEGATE_CONFORMANCE_REPS=%q: want a positive number", s)
	}
	return n
}

// ttl is the leases' time to live in the pause test, in seconds: etcd's
// shortest with its default settings, so that a paused A's lease runs
// out soon.
const ttl = "2"

// tally counts a pair's outcomes for the table.
type tally struct{ reps, stale, nonStale int }

var (
	tableMu sync.Mutex
	table   = map[[2]string]*tally{}
)

// The seed's pause test, across languages: controller A takes the
// scope's lease and stops (SIGSTOP) after the grant, before its command;
// its lease runs out; controller B, of another language or the same,
// acquires and commits; A continues and sends. A must be refused stale,
// every time, reread the state, and the output must show B's effect
// only. Every pair of languages, in both roles.
func TestPause(t *testing.T) {
	var names []string
	for _, a := range languages {
		for _, b := range languages {
			names = append(names, "p-"+a.name+"-"+b.name)
		}
	}
	g := startGateway(t, names...)
	w := watch(t, g)
	n := reps(t)
	t.Cleanup(func() { printTable(t, n) })
	for _, a := range languages {
		for _, b := range languages {
			t.Run(a.name+"-paused/"+b.name+"-takes-over", func(t *testing.T) {
				t.Parallel()
				pausePair(t, g, w, a, b, n)
			})
		}
	}
}

func pausePair(t *testing.T, g *gateway, w *watcher, a, b language, n int) {
	actuator := "p-" + a.name + "-" + b.name
	tl := &tally{}
	tableMu.Lock()
	table[[2]string{a.name, b.name}] = tl
	tableMu.Unlock()
	for i := range n {
		stateB, stateA := "off", "on"
		if i%2 == 1 {
			stateB, stateA = "on", "off"
		}
		A := startDriver(t, a, g, actuator, "A-"+a.name, testenv.ID(t, fmt.Sprint("a", i)), stateA, "--stop-after-grant")
		tokA := A.granted(t, 60*time.Second)
		A.stopped(t, 10*time.Second)

		B := startDriver(t, b, g, actuator, "B-"+b.name, testenv.ID(t, fmt.Sprint("b", i)), stateB)
		code, ev := B.wait(t, 90*time.Second)
		if code != 0 || ev["answer"].Outcome != "applied" {
			t.Fatalf("rep %d: B (%s): exit %d, want 0 and applied\n%s", i, b.name, code, B.output())
		}
		tA, _ := strconv.ParseUint(tokA.Token, 10, 64)
		tB, _ := strconv.ParseUint(ev["granted"].Token, 10, 64)
		if tB <= tA {
			t.Fatalf("rep %d: B's token %d is not above A's %d", i, tB, tA)
		}

		resumed := time.Now()
		testenv.Resume(A.cmd.Process)
		code, ev = A.wait(t, 60*time.Second)
		tl.reps++
		if ev["answer"].Outcome == "stale" {
			tl.stale++
		} else {
			tl.nonStale++
		}
		if code != 3 || ev["answer"].Outcome != "stale" {
			t.Fatalf("rep %d: A (%s, token %d, after B's %d): exit %d, answer %+v; want 3 and stale\n%s", i, a.name, tA, tB, code, ev["answer"], A.output())
		}
		// Stale is not retried: every command A published after it
		// continued is one command (its copies), under its old token.
		ids := map[string]bool{}
		for _, p := range w.by("A-"+a.name, actuator, resumed) {
			ids[p.ID] = true
			if p.Token.String() != tokA.Token {
				t.Errorf("rep %d: A published under token %s after it continued; want only its old token %s", i, p.Token, tokA.Token)
			}
		}
		if len(ids) != 1 {
			t.Errorf("rep %d: A published %d commands after it continued (ids %v); want one, not retried", i, len(ids), ids)
		}
		if ev["answer"].Fence["token"] != strconv.FormatUint(tB, 10) {
			t.Errorf("rep %d: A's stale answer carries the fence %v, not B's token %d", i, ev["answer"].Fence, tB)
		}
		if r := ev["reread"]; r.State != stateB {
			t.Errorf("rep %d: A reread %+v, want B's state %s\n%s", i, r, stateB, A.output())
		}
		pins, err := boards.ReadLatch(g.Latch)
		if err != nil {
			t.Fatal(err)
		}
		if pins[g.Pins[actuator]] != (stateB == "on") {
			t.Fatalf("rep %d: %s's output high=%v, want B's state %s", i, actuator, pins[g.Pins[actuator]], stateB)
		}
	}
}

// printTable prints how each pair's paused A was answered.
func printTable(t *testing.T, n int) {
	var b strings.Builder
	fmt.Fprintf(&b, "pause test, %d repetitions per pair: how the paused controller A was answered (stale/all; non-stale must be 0)\n", n)
	fmt.Fprintf(&b, "%-10s", "A \\ B")
	for _, l := range languages {
		fmt.Fprintf(&b, " %-18s", l.name)
	}
	b.WriteString("\n")
	tableMu.Lock()
	defer tableMu.Unlock()
	for _, a := range languages {
		fmt.Fprintf(&b, "%-10s", a.name)
		for _, l := range languages {
			cell := "skipped"
			if x := table[[2]string{a.name, l.name}]; x != nil && x.reps > 0 {
				cell = fmt.Sprintf("%d/%d stale, %d not", x.stale, x.reps, x.nonStale)
			}
			fmt.Fprintf(&b, " %-18s", cell)
		}
		b.WriteString("\n")
	}
	fmt.Print(b.String())
	t.Log("\n" + b.String())
}
