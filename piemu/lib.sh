# Shared settings for the piemu scripts; sourced, not run.
# PIEMU_CACHE   kernel cache (default ${XDG_CACHE_HOME:-$HOME/.cache}/fencegate/piemu)
# PIEMU_WORK    per-run build directory (test binary, initramfs, DTB, console log)
PIEMU_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PIEMU_REPO=$(cd "$PIEMU_DIR/.." && pwd)
PIEMU_CACHE=${PIEMU_CACHE:-${XDG_CACHE_HOME:-${HOME:?set HOME or PIEMU_CACHE}/.cache}/fencegate/piemu}
# QEMU's emulated Raspberry Pi 3B, as boot.sh and piimage/qemu.sh (the
# image's) start it. -accel tcg,thread=single: raspi3b always has 4 vCPUs;
# with multi-threaded TCG on few host cores, boot spends ~22 s patching
# ftrace call sites (each patch is a cross-vCPU TLB flush). Single-threaded
# TCG boots in ~3 s.
PIEMU_MACHINE=(-M raspi3b -accel tcg,thread=single)
# The guest's result line (printed by piemu/guest's TestMain).
PIEMU_PASS='PIEMU GUEST RESULT: PASS'

piemu_die() { echo "piemu: $*" >&2; exit 1; }

# piemu_kernel_dir prints the cached kernel directory (vmlinuz, DTB, module)
# that fetch-kernel.sh selected last, or fails.
piemu_kernel_dir() {
  local d="$PIEMU_CACHE/kernel/current"
  [ -f "$d/vmlinuz" ] && [ -f "$d/bcm2837-rpi-3-b.dtb" ] && [ -f "$d/bcm2835_wdt.ko" ] && [ -f "$d/pwm-bcm2835.ko" ] ||
    piemu_die "no cached kernel in $d; run piemu/fetch-kernel.sh first"
  (cd "$d" && pwd -P)
}
