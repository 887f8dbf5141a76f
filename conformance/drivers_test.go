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
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/tests/testenv"
)

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

// startDriver runs language l's driver: it commands actuator of gateway
// g to state as holder, with command id, under a lease of TTL ttl, and
// flags (e.g. --stop-after-grant) after the others (--timeout 60 unless
// flags give one).
func startDriver(t *testing.T, l language, g *gateway, actuator, holder, id, state string, flags ...string) *driverRun {
	t.Helper()
	argv, dir, env := l.driver(t)
	args := append(argv[1:], "--broker", g.Broker, "--gateway", g.ID, "--etcd", g.Etcd, "--actuator", actuator,
		"--holder", holder, "--id", id, "--ttl", ttl)
	if !slices.Contains(flags, "--timeout") {
		args = append(args, "--timeout", "60")
	}
	args = append(args, flags...)
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
