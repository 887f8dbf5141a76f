// Package piemu is fencegate's emulated Raspberry Pi test harness: QEMU's
// raspi3b machine booting Debian's arm64 kernel, with the test binary of
// package piemu/guest as /init driving GPIO through the kernel's character
// device. TestPiEmu (make pi-emu) runs it from the host; the scripts next
// to this file do the work. See README.md.
package piemu
