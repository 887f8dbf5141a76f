//go:build linux

package piimage

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The emulated Pi's QEMU command, in one place for the Go side: the image
// test boots with it (pi.boot), and TestQEMUScript checks that
// piimage/qemu.sh, the users' way to boot the image, builds the same.

// qemuBoot is what a Pi's firmware boots from the card's boot partition:
// local copies of the kernel, initramfs and device tree, and the kernel
// command line (cmdline.txt).
type qemuBoot struct {
	kernel, initrd, dtb string
	cmdline             string
}

// bootFiles copies them from the card's boot partition (fat: mtools'
// IMAGE@@OFFSET) into dir: for each name, the last in the partition's
// listing.
func bootFiles(t *testing.T, fat, dir string) qemuBoot {
	t.Helper()
	files := map[string]string{}
	for _, pat := range []string{"vmlinuz-*", "initrd.img-*", "bcm2837-rpi-3-b.dtb", "cmdline.txt"} {
		out, err := exec.Command("mdir", "-b", "-i", fat, "::"+pat).Output()
		names := strings.Fields(string(out))
		if err != nil || len(names) == 0 {
			t.Fatalf("boot partition: no %s (%v)", pat, err)
		}
		name := names[len(names)-1]
		local := filepath.Join(dir, strings.TrimPrefix(filepath.Base(name), "::"))
		if out, err := exec.Command("mcopy", "-n", "-o", "-i", fat, name, local).CombinedOutput(); err != nil {
			t.Fatalf("mcopy %s: %v\n%s", name, err, out)
		}
		files[pat] = local
	}
	cmdline, err := os.ReadFile(files["cmdline.txt"])
	if err != nil {
		t.Fatal(err)
	}
	return qemuBoot{kernel: files["vmlinuz-*"], initrd: files["initrd.img-*"], dtb: files["bcm2837-rpi-3-b.dtb"], cmdline: string(cmdline)}
}

// qemuArgs returns the arguments of qemu-system-aarch64 that boot b with
// the card's image, SSH and MQTT forwarded from localhost's ports ssh and
// mqtt, and the serial console on serial (a QEMU character device).
func qemuArgs(b qemuBoot, card string, ssh, mqtt int, serial string) []string {
	// The console on QEMU's PL011 (the firmware would choose ttyS1).
	// QEMU's model of the SoC's watchdog resets the machine the moment it
	// is armed (it has no countdown), so systemd must not arm it here; on
	// a Pi it does (RuntimeWatchdogSec, checked in firstBoot).
	appendLine := strings.TrimSpace(b.cmdline) + " console=ttyAMA0,115200 systemd.watchdog_sec=off"
	// The gateway's API listens on the Pi's loopback: tunnel reaches it.
	fwd := fmt.Sprintf("user,id=net0,hostfwd=tcp:127.0.0.1:%d-:22,hostfwd=tcp:127.0.0.1:%d-:1883", ssh, mqtt)
	// -accel tcg,thread=single: raspi3b has 4 vCPUs, and multi-threaded
	// TCG on two host cores spends its time in cross-vCPU TLB flushes.
	// -no-reboot: a reboot ends QEMU; boot starts the next one.
	// A comma in -drive's file is written twice (QEMU's option syntax).
	return []string{"-M", "raspi3b", "-accel", "tcg,thread=single",
		"-kernel", b.kernel, "-initrd", b.initrd, "-dtb", b.dtb,
		"-append", appendLine,
		"-drive", "if=sd,format=raw,file=" + strings.ReplaceAll(card, ",", ",,"),
		"-netdev", fwd, "-device", "usb-net,netdev=net0",
		"-nographic", "-serial", serial, "-monitor", "none", "-no-reboot"}
}
