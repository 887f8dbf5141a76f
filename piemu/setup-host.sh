#!/usr/bin/env bash
# Check (or, with --install, install) the host programs the emulated
# Raspberry Pi needs, from Debian's packages:
#   qemu-system-arm       qemu-system-aarch64, machine raspi3b
#   cpio                  packs the initramfs
#   device-tree-compiler  fdtput, to patch the DTB
# apt-get (for the private arm64 kernel download) and root (mknod of
# /dev/console in the initramfs) are needed too. .ci/run installs the
# packages in CI.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
missing=()
command -v qemu-system-aarch64 >/dev/null 2>&1 || missing+=(qemu-system-arm)
command -v cpio >/dev/null 2>&1 || missing+=(cpio)
command -v fdtput >/dev/null 2>&1 || missing+=(device-tree-compiler)
if ((${#missing[@]})); then
  if [ "${1:-}" = --install ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    piemu_die "missing Debian packages: ${missing[*]} (apt-get install --no-install-recommends ${missing[*]}, or run $0 --install as root)"
  fi
fi
command -v apt-get >/dev/null 2>&1 || piemu_die "apt-get is needed to download Debian's arm64 kernel"
[ "$(id -u)" = 0 ] || piemu_die "root is needed (mknod /dev/console in the initramfs, private apt state)"
qemu-system-aarch64 --version | head -1
