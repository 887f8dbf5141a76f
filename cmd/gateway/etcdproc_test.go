package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
	"github.com/fencegate/fencegate/tests/testenv"
)

// The helpers of the tests that run controllers against etcd: a gateway
// send stopped after its grant, the example controller's binary, the
// gateway's audit trail.

// outBuffer collects a process's output, as its Stdout or Stderr (so that
// exec waits for the last byte), and waits for patterns in it.
type outBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{}
}

func newOutBuffer() *outBuffer { return &outBuffer{changed: make(chan struct{})} }

func (o *outBuffer) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	close(o.changed)
	o.changed = make(chan struct{})
	return o.b.Write(p)
}

// String returns everything written so far.
func (o *outBuffer) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// waitFor waits up to d until done(output) is true, and fails t if not.
func (o *outBuffer) waitFor(t *testing.T, done func(string) bool, d time.Duration) {
	t.Helper()
	timeout := time.After(d)
	for {
		o.mu.Lock()
		ok, changed := done(o.b.String()), o.changed
		o.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("not seen within %v in the output:\n%s", d, o.String())
		}
	}
}

// wait returns the submatches of re's first match in the output, waiting
// until it appears; it returns nil if done is closed (the process ended)
// first, and fails t if d passes first.
func (o *outBuffer) wait(t *testing.T, re *regexp.Regexp, done <-chan struct{}, d time.Duration) []string {
	t.Helper()
	timeout := time.After(d)
	for {
		o.mu.Lock()
		m, changed := re.FindStringSubmatch(o.b.String()), o.changed
		o.mu.Unlock()
		if m != nil {
			return m
		}
		select {
		case <-changed:
		case <-done:
			return re.FindStringSubmatch(o.String())
		case <-timeout:
			t.Fatalf("no %q within %v:\n%s", re, d, o.String())
		}
	}
}

// stoppedSend is a gateway send --etcd --stop-after-grant process: after
// etcd granted it token, and before its publish, it stops itself
// (SIGSTOP) until it is continued.
type stoppedSend struct {
	cmd   *exec.Cmd
	token uint64
	out   *outBuffer // stdout and stderr
	done  chan struct{}
	err   error // the process's, once done is closed
}

// startSend starts gateway send with args (which must include --etcd) and
// --stop-after-grant, unless they hold --stop-under-lease. See waitStopped.
func startSend(t *testing.T, args ...string) *stoppedSend {
	t.Helper()
	s := &stoppedSend{out: newOutBuffer(), done: make(chan struct{})}
	if !slices.Contains(args, "--stop-under-lease") {
		args = append(args[:len(args):len(args)], "--stop-after-grant")
	}
	s.cmd = exec.Command(binary, args...)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.err = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() { testenv.Resume(s.cmd.Process); s.cmd.Process.Kill(); <-s.done })
	return s
}

// startStoppedSend is startSend and waitStopped.
func startStoppedSend(t *testing.T, args ...string) *stoppedSend {
	t.Helper()
	s := startSend(t, args...)
	s.waitStopped(t)
	return s
}

// stoppingRE is the line gateway send writes right before it stops itself.
var stoppingRE = regexp.MustCompile(`(?m)^stopping \(pid \d+\)`)

// waitStopped waits until etcd granted the process a token and the process
// stopped itself: first for its own lines (the grant, then the stop it
// announces), then for the kernel to report it stopped. Its deadlines are
// long: nothing here may fail only because the machine is busy.
func (s *stoppedSend) waitStopped(t *testing.T) {
	t.Helper()
	m := s.out.wait(t, grantedRE, s.done, 120*time.Second)
	if m == nil {
		t.Fatalf("gateway send ended (%v) before a grant:\n%s", s.err, s.out)
	}
	s.token, _ = strconv.ParseUint(m[1], 10, 64)
	if s.out.wait(t, stoppingRE, s.done, 60*time.Second) == nil {
		t.Fatalf("gateway send ended (%v) after its grant instead of stopping:\n%s", s.err, s.out)
	}
	for processState(s.cmd.Process.Pid) != "T" {
		select {
		case <-s.done:
			t.Fatalf("gateway send ended (%v) instead of stopping:\n%s", s.err, s.out)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// resume continues the process (SIGCONT) and waits for it to end; it
// returns its output and exit code.
func (s *stoppedSend) resume(t *testing.T) (string, int) {
	t.Helper()
	testenv.Resume(s.cmd.Process)
	select {
	case <-s.done:
	case <-time.After(120 * time.Second):
		t.Fatalf("gateway send still runs 120 s after SIGCONT:\n%s", s.out)
	}
	return s.out.String(), procExitCode(s.err)
}

var (
	controllerOnce sync.Once
	controllerBin  string
	controllerErr  error
)

// exampleController builds examples/controller once per test process and
// returns its path.
func exampleController(t *testing.T) string {
	t.Helper()
	controllerOnce.Do(func() {
		controllerBin = filepath.Join(filepath.Dir(binary), "controller")
		if out, err := exec.Command("go", "build", "-o", controllerBin, "../../examples/controller").CombinedOutput(); err != nil {
			controllerErr = fmt.Errorf("build the example controller: %v\n%s", err, out)
		}
	})
	if controllerErr != nil {
		t.Fatal(controllerErr)
	}
	return controllerBin
}

// startExampleCtl starts the example controller (lease TTL 2 s, a command
// every 200 ms) with a name unique to the run, on actuator; it is killed
// when t ends.
func startExampleCtl(t *testing.T, etcd, broker, actuator, name string) (*exec.Cmd, *lineWatcher) {
	t.Helper()
	cmd := exec.Command(exampleController(t), "--etcd", etcd, "--broker", broker, "--gateway", gatewayID(t), "--actuator", actuator,
		"--ttl", "2", "--period", "200ms", "--name", testenv.ID(t, name))
	w := watch(t, cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.Resume(cmd.Process); cmd.Process.Kill(); cmd.Wait() })
	return cmd, w
}

// exampleCtl is an example controller whose whole output is kept.
type exampleCtl struct {
	cmd *exec.Cmd
	out *outBuffer
}

// startExampleCtlOut is startExampleCtl, keeping the whole output.
func startExampleCtlOut(t *testing.T, etcd, broker, actuator, name string) *exampleCtl {
	t.Helper()
	c := &exampleCtl{out: newOutBuffer()}
	c.cmd = exec.Command(exampleController(t), "--etcd", etcd, "--broker", broker, "--gateway", gatewayID(t), "--actuator", actuator,
		"--ttl", "2", "--period", "200ms", "--name", testenv.ID(t, name))
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.Resume(c.cmd.Process); c.cmd.Process.Kill(); c.cmd.Wait() })
	return c
}

// grants returns the tokens an example controller's output says it was
// granted, in order.
func grants(out string) []uint64 {
	var toks []uint64
	for _, m := range ctlGranted.FindAllStringSubmatch(out, -1) {
		tok, _ := strconv.ParseUint(m[1], 10, 64)
		toks = append(toks, tok)
	}
	return toks
}

// granted reports whether the controller was granted token.
func (c *exampleCtl) granted(token uint64) bool {
	return slices.Contains(grants(c.out.String()), token)
}

// waitGrantAbove waits until the controller is granted a token above
// token and applies a command under it, and returns that token.
func (c *exampleCtl) waitGrantAbove(t *testing.T, token uint64) uint64 {
	t.Helper()
	var got uint64
	c.out.waitFor(t, func(out string) bool {
		got = 0
		for _, g := range grants(out) {
			if g > token {
				got = g
				break
			}
		}
		if got == 0 {
			return false
		}
		for _, m := range ctlApplied.FindAllStringSubmatch(out, -1) {
			if m[2] == strconv.FormatUint(got, 10) {
				return true
			}
		}
		return false
	}, 90*time.Second)
	return got
}

// lockHolder waits until at least n keys exist under a scope's lock and
// returns the holder's token: the oldest key's CreateRevision.
func lockHolder(t *testing.T, cli *clientv3.Client, lock string, n int) uint64 {
	t.Helper()
	waitLockKeys(t, cli, lock, int64(n))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, lock+"/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("the holder of %s: %v, %v", lock, resp, err)
	}
	return uint64(resp.Kvs[0].CreateRevision)
}

// The example controller's log lines.
var (
	ctlGranted = regexp.MustCompile(`msg=granted .*token=(\d+)`)
	ctlApplied = regexp.MustCompile(`msg=applied .*command=(on|off) token=(\d+)`)
	ctlWaiting = regexp.MustCompile(`msg="waiting for the lock"`)
)

// auditOf returns the audit trail of the gateway whose API is at addr.
func auditOf(t *testing.T, addr string) []fencelog.Entry {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/api/audit?n=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /api/audit: %s: %s", resp.Status, b)
	}
	var audit []fencelog.Entry
	if err := json.NewDecoder(resp.Body).Decode(&audit); err != nil {
		t.Fatal(err)
	}
	if len(audit) == 10000 {
		t.Fatal("the audit trail has 10000 entries or more: the API gives the newest 10000 only, too few to check")
	}
	return audit
}

// checkAppliedInFenceOrder fails t if the gateway applied a command under
// a (token, seq) at or below one it had already applied in the same scope,
// and returns how many commands it applied per scope.
func checkAppliedInFenceOrder(t *testing.T, audit []fencelog.Entry) map[string]int {
	t.Helper()
	last := map[string]fence.Fence{}
	n := map[string]int{}
	for _, e := range audit {
		if e.Outcome != fence.Applied {
			continue
		}
		scope, f := e.Scope, e.Command
		if prev, ok := last[scope]; ok && !prev.Less(f) {
			t.Errorf("scope %s: applied %s (holder %s) after %s", scope, f, e.Holder, prev)
		}
		last[scope] = f
		n[scope]++
	}
	return n
}

// waitLockKeys waits until at least n lock keys exist under the lock of a
// scope (lease.Key): the holder's and those of n-1 waiters. It is how a
// test knows that a controller waits for the lock, without a sleep.
func waitLockKeys(t *testing.T, cli *clientv3.Client, lock string, n int64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := cli.Get(ctx, lock+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		cancel()
		if err == nil && resp.Count >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d keys under %s/ within 60 s (last error %v)", n, lock, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// procExitCode returns the exit code of a finished command's error.
func procExitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
