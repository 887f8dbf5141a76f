package testenv

import (
	"bufio"
	"debug/buildinfo"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

// roundTrip publishes a retained message on broker and reads it back with
// a second client subscribing after it; it returns an error if the broker
// does not do so within a few seconds.
func roundTrip(broker string) error {
	topic := fmt.Sprintf("testenv/%d/%d", os.Getpid(), time.Now().UnixNano())
	connect := func(id string) (mqtt.Client, error) {
		c := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(broker).SetClientID(id).SetConnectTimeout(5 * time.Second))
		if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			return nil, fmt.Errorf("connect %s: %v", broker, tok.Error())
		}
		return c, nil
	}
	pub, err := connect("pub")
	if err != nil {
		return err
	}
	defer pub.Disconnect(0)
	if tok := pub.Publish(topic, 1, true, "hello"); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return fmt.Errorf("publish on %s: %v", broker, tok.Error())
	}
	sub, err := connect("sub")
	if err != nil {
		return err
	}
	defer sub.Disconnect(0)
	got := make(chan string, 1)
	sub.Subscribe(topic, 1, func(_ mqtt.Client, m mqtt.Message) {
		select {
		case got <- string(m.Payload()):
		default:
		}
	})
	select {
	case p := <-got:
		if p != "hello" {
			return fmt.Errorf("retained message on %s = %q, want hello", broker, p)
		}
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("no retained message from %s within 10s", broker)
	}
}

// childListening returns the child of this process that listens on url's
// address, or 0.
func childListening(t *testing.T, url string) int {
	t.Helper()
	addr := strings.TrimPrefix(url, "tcp://")
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, s := range stats {
		b, err := os.ReadFile(s)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, not a ')'.
		_, rest, _ := strings.Cut(string(b), ") ")
		f := strings.Fields(rest)
		if len(f) < 2 || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(s)))
		if ok, err := listens(pid, portOf(t, addr)); err == nil && ok {
			return pid
		}
	}
	return 0
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	i := strings.LastIndex(addr, ":")
	p, err := strconv.Atoi(addr[i+1:])
	if err != nil {
		t.Fatalf("no port in %q", addr)
	}
	return p
}

// gone reports whether process pid has ended: no such process, or a
// zombie that its new parent has not reaped.
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return strings.HasPrefix(rest, "Z") || strings.HasPrefix(rest, "X")
}

// waitGone fails t unless process pid ends within d.
func waitGone(t *testing.T, pid int, d time.Duration, what string) {
	t.Helper()
	for deadline := time.Now().Add(d); !gone(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("brokerd (pid %d) still runs %v after %s", pid, d, what)
		}
	}
}

func needProc(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil || runtime.GOOS != "linux" {
		t.Skip("needs Linux's /proc")
	}
}

// The embedded broker is a real MQTT broker (it keeps a retained message)
// in a child process, not in this one, whose executable is brokerd built
// without the race detector: the races inside the broker's library cannot
// fail a test run with -race.
func TestEmbeddedBrokerIsAChildWithoutRace(t *testing.T) {
	needProc(t)
	url := EmbeddedBroker(t)
	if err := roundTrip(url); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(url, "tcp://")
	if Listens(os.Getpid(), addr) {
		t.Fatalf("the test process itself listens on %s: the embedded broker runs in the test process", addr)
	}
	pid := childListening(t, url)
	if pid == 0 {
		t.Fatalf("no child of this process listens on %s", addr)
	}
	info, err := buildinfo.ReadFile(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		t.Fatalf("build info of the broker's executable (pid %d): %v", pid, err)
	}
	if info.Path != brokerdPkg {
		t.Errorf("the broker's executable (pid %d) is %s, want %s", pid, info.Path, brokerdPkg)
	}
	for _, s := range info.Settings {
		if s.Key == "-race" && s.Value == "true" {
			t.Errorf("the broker's executable (pid %d) was built with -race", pid)
		}
	}
}

// The broker stops when the test that started it ends.
func TestEmbeddedBrokerStopsWithTheTest(t *testing.T) {
	needProc(t)
	var url string
	var pid int
	t.Run("broker", func(t *testing.T) {
		url = EmbeddedBroker(t)
		if pid = childListening(t, url); pid == 0 {
			t.Fatalf("no child of this process listens on %s", url)
		}
	})
	if !gone(pid) {
		t.Errorf("brokerd (pid %d, %s) still runs after its test ended", pid, url)
	}
	if err := roundTrip(url); err == nil {
		t.Errorf("%s still answers after its test ended", url)
	}
}

// startPiped starts cmd with its stdout a pipe and its stderr kept, safe
// to read while cmd runs.
func startPiped(t *testing.T, cmd *exec.Cmd) (stdout io.Reader, stderr *tailBuffer) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr = newTailBuffer(brokerdLogMax)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return stdout, stderr
}

// The broker program stops when its stdin closes, with its URL as the
// first line of its stdout.
func TestBrokerdStopsWhenStdinCloses(t *testing.T) {
	bin, err := brokerdBuilt()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr := startPiped(t, cmd)
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "tcp://127.0.0.1:") {
		t.Fatalf("brokerd's first line = %q, %v; want tcp://127.0.0.1:PORT\n%s", line, err, stderr.String())
	}
	if err := roundTrip(strings.TrimSpace(line)); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	io.Copy(io.Discard, stdout)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("brokerd after its stdin closed: %v, want exit 0\n%s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("brokerd still runs 10s after its stdin closed\n%s", stderr.String())
	}
}

// The broker dies with the test process even if it cannot read its stdin
// (stopped here): the kernel kills it (Pdeathsig).
func TestEmbeddedBrokerDiesWithTheTestProcess(t *testing.T) {
	needProc(t)
	cmd := helperCmd("broker", 0)
	out, stderr := startPiped(t, cmd)
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var pid int
	var url string
	if _, err := fmt.Fscan(bufio.NewReader(out), &pid, &url); err != nil {
		t.Fatalf("helper's brokerd: %v\n%s", err, stderr.String())
	}
	defer syscall.Kill(pid, syscall.SIGKILL) // if the test fails
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	waitGone(t, pid, 10*time.Second, "the test process that started it was killed")
}

// Pdeathsig fires when the thread that forked the child ends, not the
// process: a broker started from a goroutine that exits locked to its
// thread (which Go then ends) keeps running.
func TestEmbeddedBrokerOutlivesTheThreadThatStartedIt(t *testing.T) {
	needProc(t)
	type started struct {
		b   *brokerd
		err error
		tid int
	}
	ch := make(chan started)
	var s started
	for s.b == nil && s.err == nil {
		go func() {
			runtime.LockOSThread() // never unlocked: Go ends the thread when this goroutine returns
			if syscall.Gettid() == os.Getpid() {
				// The main thread, which Go never ends (it wedges it): this
				// test failed so, now and then. Let it go and try another.
				runtime.UnlockOSThread()
				ch <- started{}
				return
			}
			b, err := startBrokerd()
			ch <- started{b, err, syscall.Gettid()}
		}()
		s = <-ch
	}
	if s.err != nil {
		t.Fatal(s.err)
	}
	t.Cleanup(func() { s.b.stop(t) })
	task := fmt.Sprintf("/proc/self/task/%d", s.tid)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(task); err != nil {
			break
		}
		if time.Now().After(deadline) {
			stat, _ := os.ReadFile(task + "/stat")
			t.Fatalf("thread %d did not end within 10s after its locked goroutine returned (its /proc stat: %s)", s.tid, stat)
		}
	}
	// The thread is gone; a Pdeathsig it set off would have been sent
	// before, and a killed broker answers nothing.
	if err := roundTrip(s.b.url); err != nil {
		t.Fatalf("after the thread that asked for it ended: %v", err)
	}
}

// BenchmarkEmbeddedBroker measures what a test pays for its embedded
// broker: start brokerd, wait for its address, kill it. The build, once a
// process, is done before the timer starts.
func BenchmarkEmbeddedBroker(b *testing.B) {
	if _, err := brokerdBuilt(); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		br, err := startBrokerd()
		if err != nil {
			b.Fatal(err)
		}
		br.stop(b)
	}
}
