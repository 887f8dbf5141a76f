#!/usr/bin/env bash
# The whole emulated-Raspberry-Pi run: check the host, fetch (or reuse) the
# kernel, build the guest and boot it. Arguments go to the guest's go test
# (e.g. -test.run=Gateway). Run as root. `make pi-emu` runs the same steps
# through the Go test piemu/piemu_test.go.
#   PIEMU_WORK   build directory (default: a new temporary one, removed on success)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
own=0
if [ -z "${PIEMU_WORK:-}" ]; then
  PIEMU_WORK=$(mktemp -d -t fencegate-piemu.XXXXXX)
  own=1
fi
export PIEMU_WORK
t() {
  local s e
  s=$(date +%s.%N)
  "$@"
  e=$(date +%s.%N)
  echo "### $(basename "$1") took $(awk -v s="$s" -v e="$e" 'BEGIN{printf "%.1f", e-s}') s"
}
t "$PIEMU_DIR/setup-host.sh"
t "$PIEMU_DIR/fetch-kernel.sh"
t "$PIEMU_DIR/build-initramfs.sh"
t "$PIEMU_DIR/boot.sh" "$@"
[ "$own" = 1 ] && rm -rf "$PIEMU_WORK"
exit 0
