#!/usr/bin/env bash
# Build the flashable Raspberry Pi image (make image; docs/raspberry-pi.md):
# Debian arm64 from Debian's own packages (mmdebstrap, maintainer scripts
# under qemu-user), the fencegate .deb of this tree, a FAT boot partition
# labelled RASPIFIRM (/boot/firmware) and an ext4 root labelled RASPIROOT,
# as Debian's image-specs lay them out. No loop devices are needed.
#
# Usage: piimage/build.sh [--install]   (root; --install apt-gets what is missing)
#   IMAGE_DEB      the fencegate arm64 .deb (required; make image builds it)
#   IMAGE_OUT      output directory (default dist/image)
#   IMAGE_SUITE    Debian release (default trixie)
#   IMAGE_MIRROR   Debian mirror (default http://deb.debian.org/debian)
#   IMAGE_CACHE    downloaded packages, reused by the next build
#                  (default ${XDG_CACHE_HOME:-$HOME/.cache}/fencegate/image)
#   IMAGE_VERBOSE  1: mmdebstrap and apt say what they do
#   IMAGE_XZ       xz level (default 0: a 1 GB card compresses in half a minute to
#                  about 250 MB; 3 saves 15 MB and takes four times as long)
# Writes IMAGE_OUT/NAME.img.xz, NAME.img.xz.sha256, NAME.img.bmap and
# NAME.manifest, NAME = fencegate-VERSION-raspi-arm64.
set -euo pipefail
# All of it in main, read whole before it runs: a script edited while it runs
# would otherwise go on from the old offset in the new text.
main() {
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
DEB=${IMAGE_DEB:?set IMAGE_DEB to the fencegate arm64 .deb (make image does)}
OUT=${IMAGE_OUT:-$REPO/dist/image}
SUITE=${IMAGE_SUITE:-trixie}
MIRROR=${IMAGE_MIRROR:-http://deb.debian.org/debian}
CACHE=${IMAGE_CACHE:-${XDG_CACHE_HOME:-${HOME:?set HOME or IMAGE_CACHE}/.cache}/fencegate/image}
XZ=${IMAGE_XZ:-0}
BOOT_MB=256
die() { echo "image: $*" >&2; exit 1; }
step() { echo "image: $(date -u +%T) $*"; }

[ -f "$DEB" ] || die "no .deb at $DEB"

# What the build needs, by command and Debian package.
need=(mmdebstrap:mmdebstrap qemu-aarch64-static:qemu-user-static update-binfmts:binfmt-support
  mkfs.vfat:dosfstools mcopy:mtools mkfs.ext4:e2fsprogs sfdisk:fdisk xz:xz-utils bmaptool:bmap-tools
  arch-test:arch-test)
missing=()
for n in "${need[@]}"; do command -v "${n%%:*}" >/dev/null 2>&1 || missing+=("${n#*:}"); done
if [ "$(id -u)" != 0 ]; then
  ((${#missing[@]} == 0)) || echo "image: also missing: install with: sudo apt-get install --no-install-recommends ${missing[*]}" >&2
  die "needs root (mmdebstrap's root mode, file ownership in the image): run sudo make image"
fi
if ((${#missing[@]})); then
  [ "${1:-}" = --install ] || die "missing programs; install them with: apt-get install --no-install-recommends ${missing[*]}"
  step "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# arm64 maintainer scripts run under qemu-user through binfmt_misc.
if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
  mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc || die "cannot mount binfmt_misc (a container without it cannot run arm64 programs)"
fi
[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || update-binfmts --enable qemu-aarch64 ||
  die "cannot register qemu-aarch64 with binfmt_misc"

VERSION=$(dpkg-deb -f "$DEB" Version)
NAME=fencegate-$VERSION-raspi-arm64
mkdir -p "$OUT" "$CACHE"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fencegate-image.XXXXXX")
# mmdebstrap mounts /proc, /sys and /dev in the root while it runs; a build
# stopped half way (Ctrl-C, or .ci/run ending its jobs) may leave them
# mounted: unmount whatever is under $WORK, deepest first, then remove it.
cleanup() {
  awk -v w="$WORK/" 'index($2, w) == 1 {print $2}' /proc/mounts | sort -r | while read -r m; do umount -l "$m" || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
ROOT=$WORK/root
SECONDS=0

# trixie: Debian's stable release, with Linux 6.12 (gpio-pwm, newer Pi
# device trees) and security support to 2028 (LTS to 2030).
step "root file system: Debian $SUITE arm64 (packages cached in $CACHE)"
packages=linux-image-arm64,raspi-firmware,initramfs-tools,zstd,systemd-sysv,udev,kmod,dbus,
packages+=systemd-timesyncd,iproute2,openssh-server,avahi-daemon,mosquitto,mosquitto-clients,
packages+=adduser,fdisk,e2fsprogs,dosfstools,gpiod,less,nano,
# Wi-Fi from the card's wifi.txt (docs/site.md): wpa_supplicant, the Pi
# radios' firmware (Broadcom's, from non-free-firmware) and the regulatory
# database the kernel reads for the country wifi.txt names.
packages+=wpasupplicant,firmware-brcm80211,wireless-regdb
# Documentation, manual pages and translations stay out (copyright files
# stay): a smaller card and less to unpack under emulation.
talk=--quiet
[ -z "${IMAGE_VERBOSE:-}" ] || talk=--verbose
IMAGE_DEB=$DEB IMAGE_MANIFEST=$WORK/manifest mmdebstrap "$talk" --arch=arm64 --variant=minbase \
  --include="$packages" \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-include=/usr/share/doc/fencegate/*' \
  --skip=download/empty --skip=essential/unlink \
  --setup-hook='mkdir -p "$1"/var/cache/apt/archives/ "$1"/boot/firmware' \
  --setup-hook="sync-in $CACHE /var/cache/apt/archives/" \
  --essential-hook="$HERE/customize.sh --no-initramfs \"\$1\"" \
  --customize-hook="sync-out /var/cache/apt/archives $CACHE" \
  --customize-hook="$HERE/customize.sh \"\$1\"" \
  "$SUITE" "$ROOT" \
  "deb $MIRROR $SUITE main non-free-firmware" \
  "deb $MIRROR $SUITE-updates main non-free-firmware" \
  "deb ${MIRROR%/debian}/debian-security $SUITE-security main non-free-firmware"
rm -f "$CACHE"/lock

step "partitions"
# The boot partition's files leave the root, whose /boot/firmware is then
# only the mount point.
mv "$ROOT/boot/firmware" "$WORK/firmware"
mkdir -m 0755 "$ROOT/boot/firmware"
used=$(du -s -m "$ROOT" | cut -f1)
root_mb=$((used + used / 4 + 256))   # room for the journal and the store until growroot
# 2 KiB clusters (mkfs.vfat would take 512 bytes for 256 MB): a FAT a
# quarter the size, which each boot's fsck and mount read whole under
# emulation, and still enough clusters to be a valid FAT32 (4 KiB would
# leave too few for 256 MB).
mkfs.vfat -n RASPIFIRM -F 32 -S 512 -s 4 -C "$WORK/boot.img" $((BOOT_MB * 1024)) >/dev/null
mcopy -s -i "$WORK/boot.img" "$WORK"/firmware/* ::
mkfs.ext4 -q -L RASPIROOT -d "$ROOT" "$WORK/root.img" "${root_mb}M"
IMG=$WORK/$NAME.img
total=$((4 + BOOT_MB + root_mb))
truncate -s "${total}M" "$IMG"
sfdisk -q "$IMG" <<EOF
label: dos
start=4MiB, size=${BOOT_MB}MiB, type=c, bootable
start=$((4 + BOOT_MB))MiB, type=83
EOF
dd if="$WORK/boot.img" of="$IMG" bs=1M seek=4 conv=notrunc,sparse status=none
dd if="$WORK/root.img" of="$IMG" bs=1M seek=$((4 + BOOT_MB)) conv=notrunc,sparse status=none
rm -f "$WORK/boot.img" "$WORK/root.img"

step "compressing (xz -$XZ)"
bmaptool -q create -o "$OUT/$NAME.img.bmap" "$IMG"
xz -T0 -"$XZ" -c "$IMG" >"$OUT/$NAME.img.xz.part"
mv "$OUT/$NAME.img.xz.part" "$OUT/$NAME.img.xz"
(cd "$OUT" && sha256sum "$NAME.img.xz" >"$NAME.img.xz.sha256")
cp "$WORK/manifest" "$OUT/$NAME.manifest"
ln -sfn "$NAME.img.xz" "$OUT/latest.img.xz"
step "done in ${SECONDS}s: $OUT/$NAME.img.xz ($(du -m "$OUT/$NAME.img.xz" | cut -f1) MB; ${total} MB written to the card)"
}
main "$@"
