#!/usr/bin/env bash
# Boot the emulated Raspberry Pi 3B with the guest test binary as /init and
# pass only if the guest printed "PIEMU GUEST RESULT: PASS" and the kernel
# powered the machine off cleanly within the timeout.
# Usage: PIEMU_WORK=dir piemu/boot.sh [go test flags for the guest, e.g. -test.run=Model]
#   PIEMU_TIMEOUT  seconds (default 180)
#   PIEMU_QUIET=1  do not echo the console (it is always in $PIEMU_WORK/console.log)
#   PIEMU_KERNEL_ARGS  extra kernel words, e.g. loglevel=7 for the whole boot log
set -euo pipefail
. "$(dirname "$0")/lib.sh"
WORK=${PIEMU_WORK:?set PIEMU_WORK (the directory build-initramfs.sh wrote)}
TIMEOUT=${PIEMU_TIMEOUT:-180}
SECONDS=0
KDIR=$(piemu_kernel_dir)
[ -f "$WORK/initrd.cpio.gz" ] && [ -f "$WORK/rpi3b.dtb" ] || piemu_die "run build-initramfs.sh first"
LOG="$WORK/console.log"
# Kernel words without a dot reach init as environment variables; words
# after "--" as its arguments (the go test flags).
# quiet keeps the console to warnings, the tests' output and "reboot: Power down".
APPEND="console=ttyAMA0,115200 panic=-1 quiet ${PIEMU_KERNEL_ARGS:-} FENCEGATE_PIEMU=1 -- -test.v -test.timeout=$((TIMEOUT - 20))s $*"
start=$(date +%s.%N)
# PIEMU_MACHINE (lib.sh): raspi3b, single-threaded TCG.
qemu-system-aarch64 "${PIEMU_MACHINE[@]}" \
  -kernel "$KDIR/vmlinuz" -dtb "$WORK/rpi3b.dtb" -initrd "$WORK/initrd.cpio.gz" \
  -append "$APPEND" -nographic -serial stdio -monitor none -no-reboot </dev/null >"$LOG" 2>&1 &
qpid=$!
trap 'kill -9 $qpid 2>/dev/null || true' EXIT
[ "${PIEMU_QUIET:-0}" = 1 ] || tail -s 0.2 -n +1 -f --pid=$qpid "$LOG" &
# Watch the console: without a power-off driver the guest can only halt
# (a restart needs the same watchdog), so a guest that printed its result
# or panicked but is still running after a grace period is stopped, as is
# one that runs past the timeout.
why=""
seen=""
while kill -0 $qpid 2>/dev/null; do
  if ((SECONDS >= TIMEOUT)); then why="no power-off within ${TIMEOUT}s"; break; fi
  if [ -z "$seen" ] && grep -qE 'PIEMU GUEST RESULT:|Kernel panic' "$LOG"; then seen=$SECONDS; fi
  if [ -n "$seen" ] && ((SECONDS - seen >= 15)); then why="still running 15 s after its result or panic: no clean power-off"; break; fi
  sleep 0.2
done
if [ -n "$why" ]; then kill $qpid 2>/dev/null || true; fi
set +e
wait $qpid
rc=$?
set -e
wait   # the console echo
took=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN{printf "%.1f", e-s}')
[ -z "$why" ] || piemu_die "FAIL: $why (console: $LOG)"
grep -q "$PIEMU_PASS" "$LOG" || piemu_die "FAIL: the guest did not print '$PIEMU_PASS' (qemu status $rc, ${took}s; console: $LOG)"
# panic=-1 with -no-reboot also ends QEMU with status 0, so require the
# kernel's own power-off line.
grep -q 'reboot: Power down' "$LOG" || piemu_die "FAIL: the guest passed but did not power off cleanly (console: $LOG)"
[ "$rc" = 0 ] || piemu_die "FAIL: qemu exit status $rc (console: $LOG)"
echo "piemu: PASS (boot, tests and power-off in ${took}s)"
