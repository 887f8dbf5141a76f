// Package piimage builds and tests fencegate's flashable Raspberry Pi image.
//
// build.sh (make image) builds the image from Debian's own packages and the
// .deb of this tree; rootfs/ holds the files it adds to Debian, card/ what
// it puts in the fencegate folder of the boot partition for the user to
// edit, and rootfs/usr/lib/fencegate-image/bootconfig applies that folder
// at every boot. The tests built with -tags imagetest (make image-test,
// make image-torture) boot the very image build.sh wrote in QEMU's emulated
// Raspberry Pi 3B: first boot, a clean reboot, power cuts and upgrades.
// qemu.sh boots the same image there for users, with the same QEMU
// command (qemuArgs; TestQEMUScript keeps the two the same).
// docs/raspberry-pi.md is the user's guide to the image.
package piimage
