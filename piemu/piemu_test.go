//go:build linux

package piemu

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencegate/fencegate/tests/testenv"
)

// budget bounds the whole harness: a cold kernel download (~10 s), a cold
// arm64 cross-compile of the guest (~90 s on 2 cores) and the boot (~10 s,
// 180 s at most), with room for a slow mirror.
const budget = 8 * time.Minute

// TestPiEmu runs the emulated Raspberry Pi: fetch (or reuse) the kernel,
// build the guest test binary and initramfs, boot QEMU raspi3b, and require
// the guest's PASS line and a clean power-off. It skips without QEMU, cpio,
// fdtput or root, and fails for them under CI=true (.ci/run installs them).
func TestPiEmu(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the emulated Raspberry Pi takes 10 s to 2 min")
	}
	testenv.Program(t, "qemu-system-aarch64")
	testenv.Program(t, "cpio")
	testenv.Program(t, "fdtput")
	testenv.Program(t, "apt-get")
	testenv.Need(t, os.Geteuid() == 0, "the emulated Raspberry Pi needs root (mknod /dev/console in its initramfs)")

	deadline := time.Now().Add(budget)
	if d, ok := t.Deadline(); ok && d.Add(-30*time.Second).Before(deadline) {
		deadline = d.Add(-30 * time.Second)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	work := t.TempDir()

	// run runs one script with its output captured, and fails t with the
	// output's tail (or the console's, for boot.sh) if it fails.
	run := func(script string, args ...string) string {
		t.Helper()
		start := time.Now()
		cmd := exec.CommandContext(ctx, "bash", append([]string{script}, args...)...)
		cmd.Env = append(os.Environ(), "PIEMU_WORK="+work, "PIEMU_QUIET=1")
		// Kill the whole group (timeout, qemu) if the budget runs out.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = 5 * time.Second
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		took := time.Since(start).Seconds()
		if err != nil {
			msg := tail(out.String(), 30)
			if console, rerr := os.ReadFile(filepath.Join(work, "console.log")); rerr == nil {
				msg += "\n--- guest console (tail) ---\n" + tail(string(console), 80)
			}
			if ctx.Err() != nil {
				msg += "\n(the harness's budget ran out)"
			}
			t.Fatalf("%s failed after %.1fs: %v\n%s", script, took, err, msg)
		}
		t.Logf("%-20s %5.1fs  %s", script, took, tail(out.String(), 1))
		return out.String()
	}
	run("fetch-kernel.sh")
	run("build-initramfs.sh")
	// FENCEGATE_PIEMU_RUN picks the guest's tests (its -test.run), e.g.
	// for a mutant that only one guest test can catch.
	var guestFlags []string
	if re := os.Getenv("FENCEGATE_PIEMU_RUN"); re != "" {
		guestFlags = append(guestFlags, "-test.run="+re)
	}
	run("boot.sh", guestFlags...)

	// The guest's own test output, without the kernel's messages.
	console, err := os.ReadFile(filepath.Join(work, "console.log"))
	if err != nil {
		t.Fatal(err)
	}
	var guest []string
	for _, l := range strings.Split(string(console), "\n") {
		l = strings.TrimRight(l, "\r")
		if strings.HasPrefix(l, "--- ") || strings.HasPrefix(l, "    ") || strings.HasPrefix(l, "PIEMU ") {
			guest = append(guest, l)
		}
	}
	t.Logf("guest:\n%s", strings.Join(guest, "\n"))
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
