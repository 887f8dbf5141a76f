#!/usr/bin/env bash
# Build the guest: cross-compile the piemu/guest test binary for arm64 and
# pack it as /init into a gzip'd newc cpio, with /dev/console,
# bcm2835_wdt.ko and pwm-bcm2835.ko; patch the cached Pi 3B DTB with the board revision.
# Usage: PIEMU_WORK=dir piemu/build-initramfs.sh   (after fetch-kernel.sh; root)
# Result: $PIEMU_WORK/{guest.test,initrd.cpio.gz,rpi3b.dtb}
set -euo pipefail
. "$(dirname "$0")/lib.sh"
WORK=${PIEMU_WORK:?set PIEMU_WORK to a build directory}
KDIR=$(piemu_kernel_dir)
[ "$(id -u)" = 0 ] || piemu_die "root is needed for mknod /dev/console in the initramfs"
mkdir -p "$WORK"

# The guest test binary: static, stripped, arm64.
(cd "$PIEMU_REPO" && CGO_ENABLED=0 GOOS=linux GOARCH=arm64 "${GO:-go}" test -c -trimpath \
  -ldflags='-s -w' -o "$WORK/guest.test" ./piemu/guest)

ROOT="$WORK/rootfs"
rm -rf "$ROOT"
mkdir -p "$ROOT"/{dev,proc,sys,tmp,lib/modules}
cp "$WORK/guest.test" "$ROOT/init"
chmod 755 "$ROOT/init"
# Without /dev/console in the initramfs, init has no stdout until it has
# mounted devtmpfs itself (CONFIG_DEVTMPFS_MOUNT is not set).
mknod -m 600 "$ROOT/dev/console" c 5 1
# bcm2835_wdt provides pm_power_off on raspi3b, so the guest can power off.
cp "$KDIR/bcm2835_wdt.ko" "$ROOT/lib/modules/"
# pwm-bcm2835 drives the PWM controller the Pi 3B's device tree enables.
cp "$KDIR/pwm-bcm2835.ko" "$ROOT/lib/modules/"
(cd "$ROOT" && find . | cpio -o -H newc -R 0:0 --quiet | gzip -1) >"$WORK/initrd.cpio.gz"
rm -rf "$ROOT"

# The firmware of a real Pi adds /system/linux,revision; QEMU boots the
# kernel directly, so add it (0xa02082 = Pi 3B rev 1.2). periph's rpi
# driver needs it; fencegate does not, but the guest checks it is there.
cp "$KDIR/bcm2837-rpi-3-b.dtb" "$WORK/rpi3b.dtb"
fdtput -c "$WORK/rpi3b.dtb" /system
fdtput -t x "$WORK/rpi3b.dtb" /system linux,revision a02082
ls -l "$WORK/guest.test" "$WORK/initrd.cpio.gz" | awk '{print $5, $NF}'
