package testenv

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/logtail"
)

// brokerdPkg is the program EmbeddedBroker runs: mqttbroker in a process
// of its own.
const brokerdPkg = "github.com/fencegate/fencegate/tests/testenv/brokerd"

// BrokerdDir is where EmbeddedBroker builds brokerd: a directory per test
// process (NAME/), locked (NAME.lock) while that process lives. Builds of
// processes that have ended are removed by the next build.
var BrokerdDir = filepath.Join(os.TempDir(), "fencegate-test-brokerd")

// brokerdStart bounds how long brokerd may take to say its address.
const brokerdStart = 20 * time.Second

// brokerdLogMax bounds the tail of brokerd's stderr that is kept.
const brokerdLogMax = 1 << 20

var (
	brokerdOnce sync.Once
	brokerdBin  string
	brokerdErr  error
	// brokerdLock holds this process's lock on its build directory: if it
	// were collected, its file's finalizer would release the lock.
	brokerdLock func()
)

// EmbeddedBroker starts the simulator's embedded broker (package
// mqttbroker) on a free loopback port and returns its URL. It is killed
// when t ends; t fails if it exited before.
//
// The broker runs in a child process (brokerd, built once per test process
// without the race detector), so that the data races inside the broker's
// library (see mqttbroker's package comment) fail none of our tests run
// with -race, while they still talk to the real broker over loopback. The
// child listens on a port of its own choosing, so no other program can take
// it in between; it dies with the test process (its stdin closes, and on
// Linux the kernel kills it). Its log ends up in t's log if t fails.
func EmbeddedBroker(t testing.TB) string {
	t.Helper()
	url, _ := EmbeddedBrokerProcess(t)
	return url
}

// EmbeddedBrokerProcess is EmbeddedBroker that also returns the broker's
// process, for a test that pauses it (Pause) to make it slow.
func EmbeddedBrokerProcess(t testing.TB) (string, *os.Process) {
	t.Helper()
	b, err := startBrokerd()
	if err != nil {
		t.Fatalf("testenv: embedded broker: %v", err)
	}
	t.Cleanup(func() { Resume(b.cmd.Process); b.stop(t) })
	return b.url, b.cmd.Process
}

// brokerd is a running brokerd process.
type brokerd struct {
	url    string
	cmd    *exec.Cmd
	stderr *tailBuffer
	exited chan struct{} // closed once cmd.Wait returns
	err    error         // cmd.Wait's answer, set before exited closes
}

// startBrokerd starts brokerd, built first if this process has not yet, and
// waits until it says its URL.
func startBrokerd() (*brokerd, error) {
	bin, err := brokerdBuilt()
	if err != nil {
		return nil, err
	}
	b := &brokerd{cmd: exec.Command(bin), stderr: newTailBuffer(brokerdLogMax), exited: make(chan struct{})}
	stdout := &firstLine{line: make(chan string, 1)}
	b.cmd.Stdout, b.cmd.Stderr = stdout, b.stderr
	// Its stdin is a pipe that only this process holds: when this process
	// ends, however it ends, brokerd reads EOF and stops.
	if _, err := b.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := startChild(b.cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() { b.err = b.cmd.Wait(); close(b.exited) }()
	select {
	case line := <-stdout.line:
		if !strings.HasPrefix(line, "tcp://127.0.0.1:") {
			b.cmd.Process.Kill()
			<-b.exited
			return nil, fmt.Errorf("brokerd (pid %d) said %q, want tcp://127.0.0.1:PORT; its stderr:\n%s", b.cmd.Process.Pid, line, b.stderr)
		}
		b.url = line
		return b, nil
	case <-b.exited:
		return nil, fmt.Errorf("brokerd (pid %d) exited at start (%v); its stderr:\n%s", b.cmd.Process.Pid, b.err, b.stderr)
	case <-time.After(brokerdStart):
		b.cmd.Process.Kill()
		<-b.exited
		return nil, fmt.Errorf("brokerd (pid %d) did not say its address within %v; its stderr:\n%s", b.cmd.Process.Pid, brokerdStart, b.stderr)
	}
}

// stop kills b. It fails t if b had exited before, and logs b's stderr if
// t failed.
func (b *brokerd) stop(t testing.TB) {
	select {
	case <-b.exited:
		t.Errorf("testenv: the embedded broker %s (brokerd, pid %d) exited during the test (%v); its stderr:\n%s", b.url, b.cmd.Process.Pid, b.err, b.stderr)
		return
	default:
	}
	b.cmd.Process.Kill()
	<-b.exited
	if t.Failed() {
		t.Logf("testenv: stderr of the embedded broker %s (brokerd, pid %d):\n%s", b.url, b.cmd.Process.Pid, b.stderr)
	}
}

// brokerdBuilt returns the path of brokerd, built by the first call in this
// process.
func brokerdBuilt() (string, error) {
	brokerdOnce.Do(func() { brokerdBin, brokerdErr = buildBrokerd() })
	return brokerdBin, brokerdErr
}

// buildBrokerd builds brokerd without the race detector into a new
// directory of BrokerdDir and returns its path.
func buildBrokerd() (string, error) {
	dir, err := brokerdDir()
	if err != nil {
		return "", fmt.Errorf("brokerd build directory in %s: %w", BrokerdDir, err)
	}
	bin := filepath.Join(dir, "brokerd")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	// -race=false also overrides a -race in GOFLAGS.
	cmd := exec.Command("go", "build", "-race=false", "-o", bin, brokerdPkg)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the embedded broker with the go command on PATH: go build -race=false -o %s %s: %v\n%s", bin, brokerdPkg, err, out)
	}
	return bin, nil
}

// brokerdDir removes the build directories of test processes that have
// ended, then makes and locks one for this process.
func brokerdDir() (string, error) {
	if err := os.MkdirAll(BrokerdDir, 0o777); err != nil {
		return "", err
	}
	os.Chmod(BrokerdDir, 0o1777) // other users' suites build here too
	if locksAcrossProcesses {
		locks, _ := filepath.Glob(filepath.Join(BrokerdDir, "*.lock"))
		for _, l := range locks {
			if unlock, ok, err := lockPort(l); err == nil && ok {
				os.RemoveAll(strings.TrimSuffix(l, ".lock"))
				os.Remove(l)
				unlock()
			}
		}
	}
	for {
		name := filepath.Join(BrokerdDir, fmt.Sprintf("%s-%08x", runTag, rand.Uint32()))
		// The lock comes first: a directory without a held lock is an ended
		// process's, for every other process to remove.
		unlock, ok, err := lockPort(name + ".lock")
		if err != nil {
			return "", err
		}
		if !ok {
			continue // another process's sweep holds it for a moment
		}
		if err := os.Mkdir(name, 0o700); err != nil {
			unlock()
			return "", err
		}
		brokerdLock = unlock
		return name, nil
	}
}

// firstLine is a writer that sends the first line written to it, without
// its newline, on line, and discards the rest.
type firstLine struct {
	buf  []byte
	sent bool
	line chan string
}

func (w *firstLine) Write(p []byte) (int, error) {
	if !w.sent {
		w.buf = append(w.buf, p...)
		if l, _, ok := bytes.Cut(w.buf, []byte("\n")); ok {
			w.line <- string(l)
			w.sent, w.buf = true, nil
		}
	}
	return len(p), nil
}

// tailBuffer keeps the last max bytes of a broker's output.
type tailBuffer struct{ logtail.Buffer }

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{logtail.Buffer{Max: max}} }

// String returns what w keeps, saying so if earlier output was dropped.
func (w *tailBuffer) String() string {
	s, full := w.Tail()
	switch {
	case s == "":
		return "(nothing)"
	case full:
		return "(…only the last part)\n" + s
	}
	return s
}
