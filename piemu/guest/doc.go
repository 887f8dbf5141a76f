// Package guest holds fencegate's tests that run inside the emulated
// Raspberry Pi 3B (QEMU raspi3b, Debian's arm64 kernel): the test binary,
// cross-compiled with
//
//	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go test -c ./piemu/guest
//
// is the initramfs's /init. Its TestMain then mounts the kernel's file
// systems, runs the tests against the real kernel GPIO driver
// (pinctrl-bcm2835 over the emulated GPIO block), prints
// "PIEMU GUEST RESULT: PASS" or "... FAIL" and powers the machine off.
//
// Anywhere else (an ordinary `go test ./...`) every test skips. See
// piemu/README.md; `make pi-emu` runs it all.
package guest
