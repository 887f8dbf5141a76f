package conformance_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
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

// event is a line a driver writes.
type event struct {
	Event   string            `json:"event"`
	Token   string            `json:"token"`
	Scope   string            `json:"scope"`
	Outcome string            `json:"outcome"`
	Reason  string            `json:"reason"`
	Fence   map[string]string `json:"fence"`
	State   string            `json:"state"`
}

// A driverRun is a driver process and the events it wrote.
type driverRun struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	mu     sync.Mutex
	events []event
	lines  []string
	got    chan event // every event, as it comes
	done   chan struct{}
}

func startDriver(t *testing.T, l language, g *gateway, actuator, holder, id, state string, stop bool) *driverRun {
	t.Helper()
	argv, dir, env := l.driver(t)
	args := append(argv[1:], "--broker", g.Broker, "--gateway", g.ID, "--etcd", g.Etcd, "--actuator", actuator,
		"--holder", holder, "--id", id, "--ttl", ttl, "--timeout", "60")
	if stop {
		args = append(args, "--stop-after-grant")
	}
	d := &driverRun{cmd: exec.Command(argv[0], append(args, state)...), got: make(chan event, 16), done: make(chan struct{})}
	d.cmd.Dir = dir
	d.cmd.Env = append(os.Environ(), env...)
	d.cmd.Stderr = &d.stderr
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := testenv.StartChild(d.cmd); err != nil {
		t.Fatalf("%s driver: %v", l.name, err)
	}
	t.Cleanup(func() { testenv.Resume(d.cmd.Process); d.cmd.Process.Kill(); <-d.done })
	go func() {
		defer close(d.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var e event
			err := json.Unmarshal(sc.Bytes(), &e)
			d.mu.Lock()
			d.lines = append(d.lines, sc.Text())
			if err == nil {
				d.events = append(d.events, e)
			}
			d.mu.Unlock()
			if err == nil {
				select {
				case d.got <- e:
				default:
				}
			}
		}
		io.Copy(io.Discard, out)
	}()
	return d
}

// wait waits for the driver's exit and returns its code and its events by
// name.
func (d *driverRun) wait(t *testing.T, within time.Duration) (int, map[string]event) {
	t.Helper()
	exited := make(chan error, 1)
	go func() { <-d.done; exited <- d.cmd.Wait() }()
	var err error
	select {
	case err = <-exited:
	case <-time.After(within):
		d.cmd.Process.Kill()
		<-exited
		t.Fatalf("driver %v did not exit within %v:\n%s", d.cmd.Args, within, d.output())
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("driver %v: %v", d.cmd.Args, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	byName := map[string]event{}
	for _, e := range d.events {
		byName[e.Event] = e
	}
	return code, byName
}

func (d *driverRun) output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return fmt.Sprintf("stdout:\n%s\nstderr:\n%s", strings.Join(d.lines, "\n"), d.stderr.String())
}

// granted waits for the driver's granted event.
func (d *driverRun) granted(t *testing.T, within time.Duration) event {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case e := <-d.got:
			if e.Event == "granted" {
				return e
			}
		case <-d.done:
			t.Fatalf("driver %v ended before its grant:\n%s", d.cmd.Args, d.output())
		case <-deadline:
			t.Fatalf("driver %v: no grant within %v:\n%s", d.cmd.Args, within, d.output())
		}
	}
}

// stopped waits until the kernel reports the driver's process stopped
// (state T in /proc/PID/stat): it stopped itself after its grant.
func (d *driverRun) stopped(t *testing.T, within time.Duration) {
	t.Helper()
	path := fmt.Sprintf("/proc/%d/stat", d.cmd.Process.Pid)
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		b, err := os.ReadFile(path)
		if err != nil {
			break
		}
		if i := bytes.LastIndexByte(b, ')'); i > 0 && len(b) > i+2 && b[i+2] == 'T' {
			return
		}
	}
	t.Fatalf("driver %v did not stop itself after its grant within %v:\n%s", d.cmd.Args, within, d.output())
}

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
	n := reps(t)
	t.Cleanup(func() { printTable(t, n) })
	for _, a := range languages {
		for _, b := range languages {
			t.Run(a.name+"-paused/"+b.name+"-takes-over", func(t *testing.T) {
				t.Parallel()
				pausePair(t, g, a, b, n)
			})
		}
	}
}

func pausePair(t *testing.T, g *gateway, a, b language, n int) {
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
		A := startDriver(t, a, g, actuator, "A-"+a.name, testenv.ID(t, fmt.Sprint("a", i)), stateA, true)
		tokA := A.granted(t, 60*time.Second)
		A.stopped(t, 10*time.Second)

		B := startDriver(t, b, g, actuator, "B-"+b.name, testenv.ID(t, fmt.Sprint("b", i)), stateB, false)
		code, ev := B.wait(t, 90*time.Second)
		if code != 0 || ev["answer"].Outcome != "applied" {
			t.Fatalf("rep %d: B (%s): exit %d, want 0 and applied\n%s", i, b.name, code, B.output())
		}
		tA, _ := strconv.ParseUint(tokA.Token, 10, 64)
		tB, _ := strconv.ParseUint(ev["granted"].Token, 10, 64)
		if tB <= tA {
			t.Fatalf("rep %d: B's token %d is not above A's %d", i, tB, tA)
		}

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
