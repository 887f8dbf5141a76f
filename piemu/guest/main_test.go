//go:build linux

package guest

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/fencegate/fencegate/tests/testenv"
)

// GuestEnv is set on the guest kernel's command line (a word without a dot
// becomes init's environment). Together with PID 1 it marks the guest.
const GuestEnv = "FENCEGATE_PIEMU"

// Result lines, read by the host (piemu/boot.sh).
const (
	resultPass = "PIEMU GUEST RESULT: PASS"
	resultFail = "PIEMU GUEST RESULT: FAIL"
)

var inGuest bool

// canPowerOff is set once bcm2835_wdt, raspi3b's pm_power_off, is loaded.
var canPowerOff bool

// guestOnly skips t outside the emulated Raspberry Pi.
func guestOnly(t *testing.T) {
	t.Helper()
	if !inGuest {
		t.Skip("runs only as /init in the emulated Raspberry Pi (make pi-emu, see piemu/README.md)")
	}
}

// TestMain is init in the guest: it prepares the system, runs the tests,
// prints the result line and powers off. Elsewhere it just runs the tests,
// which skip.
func TestMain(m *testing.M) {
	inGuest = os.Getpid() == 1 && os.Getenv(GuestEnv) == "1"
	if !inGuest {
		os.Exit(m.Run())
	}
	start := time.Now()
	code := 1
	if err := initGuest(); err != nil {
		fmt.Printf("piemu guest: init: %v\n", err)
	} else {
		code = m.Run()
	}
	if code == 0 {
		fmt.Printf("%s (tests took %.1fs)\n", resultPass, time.Since(start).Seconds())
	} else {
		fmt.Printf("%s (exit status %d)\n", resultFail, code)
	}
	powerOff()
}

// initGuest mounts what the tests need and brings up loopback.
func initGuest() error {
	for _, mnt := range []struct{ src, dst, fs string }{
		{"proc", "/proc", "proc"},
		{"sysfs", "/sys", "sysfs"},
		{"devtmpfs", "/dev", "devtmpfs"}, // CONFIG_DEVTMPFS_MOUNT is not set
		{"debugfs", "/sys/kernel/debug", "debugfs"},
		{"tracefs", "/sys/kernel/tracing", "tracefs"}, // the gpio tracepoints (trace_test.go)
		{"tmpfs", "/tmp", "tmpfs"},
	} {
		if err := os.MkdirAll(mnt.dst, 0o755); err != nil {
			return err
		}
		if err := syscall.Mount(mnt.src, mnt.dst, mnt.fs, 0, ""); err != nil && err != syscall.EBUSY {
			return fmt.Errorf("mount %s on %s: %w", mnt.fs, mnt.dst, err)
		}
	}
	// bcm2835_wdt registers pm_power_off on raspi3b; without it the
	// power-off below would hang the machine.
	if err := loadModule("/lib/modules/bcm2835_wdt.ko"); err != nil {
		fmt.Printf("piemu guest: %v (power-off will not work)\n", err)
	} else {
		canPowerOff = true
	}
	// The embedded broker and the gateway's API listen on 127.0.0.1.
	return testenv.LoopbackUp()
}

func loadModule(path string) error {
	nr := sysFinitModule
	if nr < 0 {
		return fmt.Errorf("finit_module: unknown on this architecture")
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	params := []byte{0}
	_, _, e := syscall.Syscall(uintptr(nr), f.Fd(), uintptr(unsafe.Pointer(&params[0])), 0)
	if e != 0 && e != syscall.EEXIST {
		return fmt.Errorf("finit_module %s: %w", path, e)
	}
	return nil
}

// powerOff ends the machine: QEMU exits with status 0 after the kernel's
// "reboot: Power down". Without a power-off driver the kernel would only
// halt, and QEMU would run until the host's timeout; a restart makes QEMU
// (-no-reboot) exit at once instead, without that line, so the host fails
// fast.
func powerOff() {
	syscall.Sync()
	if canPowerOff {
		err := syscall.Reboot(syscall.LINUX_REBOOT_CMD_POWER_OFF)
		fmt.Printf("piemu guest: power off: %v\n", err)
	} else {
		fmt.Println("piemu guest: no power-off driver (bcm2835_wdt not loaded); restarting so that QEMU exits")
	}
	syscall.Reboot(syscall.LINUX_REBOOT_CMD_RESTART)
	select {}
}
