package service_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/service"
	"github.com/fencegate/fencegate/tests/testenv"
)

// envLoopbackChild tells a run of this test binary that it is the child of
// TestDefaultHTTPIsLoopbackOnly, in a network namespace of its own.
const envLoopbackChild = "FENCEGATE_TEST_LOOPBACK_CHILD"

// TestDefaultHTTPIsLoopbackOnly: a gateway whose
// configuration has no http key serves its API on 127.0.0.1:8080 and on no
// other address. The gateway runs in a child of this test in a network
// namespace of its own (only loopback), so that port 8080 is its own
// whatever else runs on this machine. There, 127.0.0.2 is as local as
// 127.0.0.1: an API that listened on every address (0.0.0.0, [::]) would
// answer on it, and on ::1.
func TestDefaultHTTPIsLoopbackOnly(t *testing.T) {
	if os.Getenv(envLoopbackChild) == "1" {
		loopbackChild(t)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestDefaultHTTPIsLoopbackOnly$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envLoopbackChild+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		Pdeathsig:   syscall.SIGKILL,
	}
	out, err := runLocked(cmd)
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		testenv.Need(t, false, "cannot start a process in a user and network namespace of its own: %v", err)
	}
	if err != nil || !strings.Contains(string(out), "--- PASS: TestDefaultHTTPIsLoopbackOnly") {
		t.Fatalf("the gateway in its own network namespace: %v\n%s", err, out)
	}
}

// runLocked runs cmd from one locked OS thread: the parent-death signal
// follows the thread that started the child.
func runLocked(cmd *exec.Cmd) ([]byte, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return cmd.CombinedOutput()
}

// loopbackChild is the test's part in the network namespace.
func loopbackChild(t *testing.T) {
	if err := testenv.LoopbackUp(); err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf("id: loopback\nmqtt: {broker: \"tcp://127.0.0.1:1\"}\nstore: %s\nboard: sim\nactuators:\n  - {name: pump, pin: GPIO17}\n",
		filepath.Join(t.TempDir(), "fence.db"))
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTP != nil {
		t.Fatalf("the configuration sets http %q; this test is about its absence", *cfg.HTTP)
	}
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan service.Info, 1)
	done := make(chan error, 1)
	go func() {
		done <- service.Run(ctx, cfg, service.Options{Init: true, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
			Listening: func(i service.Info) { listening <- i }})
	}()
	defer func() { cancel(); <-done }()
	var info service.Info
	select {
	case info = <-listening:
	case err := <-done:
		done <- err
		t.Fatalf("gateway stopped: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("gateway API not listening within 30s")
	}
	if info.HTTP != "127.0.0.1:8080" {
		t.Errorf("API listens on %q, want 127.0.0.1:8080", info.HTTP)
	}
	resp, err := http.Get("http://127.0.0.1:8080/api/status")
	if err != nil {
		t.Fatalf("GET /api/status on 127.0.0.1:8080: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /api/status = %d, want 200", resp.StatusCode)
	}
	for _, addr := range []string{"127.0.0.2:8080", "[::1]:8080"} {
		if c, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
			c.Close()
			t.Errorf("the API answers on %s as well: it must listen on 127.0.0.1 only", addr)
		}
	}
}
