#!/usr/bin/env bash
# Fetch Debian's arm64 kernel into the cache, without installing it, and
# point $PIEMU_CACHE/kernel/current at it. Only four files are kept:
# vmlinuz (an uncompressed arm64 Image QEMU boots directly), the Pi 3B DTB,
# bcm2835_wdt.ko (power-off on raspi3b) and pwm-bcm2835.ko (the PWM
# controller, for the set-point tests). A cache without one of them is
# fetched again.
#
# A cached kernel is reused as it is (no network). Set PIEMU_REFRESH=1 to
# resolve linux-image-arm64 again, or KPKG=linux-image-6.1.0-NN-arm64 to pin.
# The download uses a private apt state for arm64 (own lists and cache,
# empty dpkg status), so the host's apt state is not touched.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
mkdir -p "$PIEMU_CACHE/kernel"
exec 9>"$PIEMU_CACHE/.lock"
flock 9   # one fetch at a time per cache

if [ -z "${KPKG:-}" ] && [ "${PIEMU_REFRESH:-0}" != 1 ] && [ -f "$PIEMU_CACHE/kernel/current/vmlinuz" ] && [ -f "$PIEMU_CACHE/kernel/current/pwm-bcm2835.ko" ]; then
  echo "cached kernel: $(readlink "$PIEMU_CACHE/kernel/current")"
  exit 0
fi
if [ -n "${KPKG:-}" ] && [ -f "$PIEMU_CACHE/kernel/$KPKG/vmlinuz" ] && [ -f "$PIEMU_CACHE/kernel/$KPKG/pwm-bcm2835.ko" ]; then
  ln -sfn "$KPKG" "$PIEMU_CACHE/kernel/current"
  echo "cached kernel: $KPKG"
  exit 0
fi

APTDIR="$PIEMU_CACHE/apt-arm64"
mkdir -p "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial" "$PIEMU_CACHE/debs"
APT=(-o APT::Architecture=arm64 -o APT::Architectures=arm64
  -o "Dir::State::Lists=$APTDIR/lists" -o "Dir::Cache=$APTDIR/cache"
  -o Dir::State::status=/dev/null)
[ "$(id -u)" = 0 ] && APT+=(-o APT::Sandbox::User=root)   # no _apt warning in a root-owned cache
if [ ! -e "$APTDIR/lists/.updated" ] || [ "${PIEMU_REFRESH:-0}" = 1 ]; then
  apt-get "${APT[@]}" update -qq
  touch "$APTDIR/lists/.updated"
fi
# ABI names (6.1.0-57) change with security updates and old ones leave the
# mirror, so resolve the current one through the metapackage.
if [ -z "${KPKG:-}" ]; then
  KPKG=$(apt-cache "${APT[@]}" depends linux-image-arm64 | awk '/Depends: linux-image-/{print $2; exit}')
  [ -n "$KPKG" ] || piemu_die "cannot resolve linux-image-arm64 (are Debian sources configured?)"
fi
echo "kernel package: $KPKG $(apt-cache "${APT[@]}" show "$KPKG" 2>/dev/null | awk '/^Version:/{print $2; exit}')"
if [ ! -f "$PIEMU_CACHE/kernel/$KPKG/vmlinuz" ] || [ ! -f "$PIEMU_CACHE/kernel/$KPKG/pwm-bcm2835.ko" ]; then
  cd "$PIEMU_CACHE/debs"
  ls "${KPKG}"_*_arm64.deb >/dev/null 2>&1 || apt-get "${APT[@]}" download "$KPKG"
  DEB=$(ls "${KPKG}"_*_arm64.deb | head -1)
  TMP=$(mktemp -d "$PIEMU_CACHE/kernel/.x.XXXXXX")
  trap 'rm -rf "$TMP"' EXIT
  mkdir -p "$TMP/x" "$TMP/out"
  dpkg-deb --fsys-tarfile "$DEB" | tar -x -C "$TMP/x" --wildcards \
    './boot/vmlinuz-*' '*/broadcom/bcm2837-rpi-3-b.dtb' '*/bcm2835_wdt.ko*' '*/pwm-bcm2835.ko*'
  mv "$TMP"/x/boot/vmlinuz-* "$TMP/out/vmlinuz"
  find "$TMP/x" \( -name bcm2837-rpi-3-b.dtb -o -name 'bcm2835_wdt.ko*' -o -name 'pwm-bcm2835.ko*' \) -exec mv {} "$TMP/out/" \;
  # finit_module takes a plain module; newer kernels ship them xz'd.
  for f in "$TMP"/out/*.ko.xz; do [ -e "$f" ] && xz -d "$f"; done
  echo "$DEB" >"$TMP/out/SOURCE"
  rm -rf "$PIEMU_CACHE/kernel/$KPKG"
  mv "$TMP/out" "$PIEMU_CACHE/kernel/$KPKG"
  # The .deb (60 MB) is not needed any more.
  rm -f "$DEB"
fi
ln -sfn "$KPKG" "$PIEMU_CACHE/kernel/current"
ls -l "$PIEMU_CACHE/kernel/$KPKG"
