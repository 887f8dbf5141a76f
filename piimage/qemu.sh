#!/usr/bin/env bash
# Boot fencegate's Raspberry Pi image in QEMU's emulated Raspberry Pi 3B,
# without a Pi: docs/raspberry-pi.md, "Try the image in QEMU, without a Pi".
#
# The emulated Pi's SD card is a working copy of the image, made once and
# kept between boots, as a Pi keeps its card; mtools puts the user's files
# in its fencegate folder (no root, no loop device). At each boot the
# kernel, initramfs, device tree and command line are read from the card's
# boot partition, as the Pi's firmware reads them. The QEMU command is the
# image test's (piimage/pi_test.go, qemuArgs in qemuargs_test.go) but for
# the console, here this terminal; TestQEMUScript checks that they agree.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: piimage/qemu.sh [OPTION]... [IMAGE]

Boot fencegate's Raspberry Pi image in QEMU's emulated Raspberry Pi 3B
(no Pi, no root, no KVM): the Pi's serial console on this terminal, its
SSH and MQTT on ports of localhost.

IMAGE is the image make image built (default dist/image/latest.img.xz),
.img.xz or .img. The emulated Pi's SD card is a working copy of it, made
once and kept between boots, as a Pi keeps its card.

  --card FILE    the SD card (default ~/.cache/fencegate/qemu/card.img)
  --new          make the card from IMAGE again (what the Pi applied is lost)
  --put PATH     copy PATH into the card's fencegate folder first: a file, or
                 the files of a folder (your card's folder); may be repeated
  --ssh-port N   localhost's port to the Pi's SSH (default 2222)
  --mqtt-port N  localhost's port to the Pi's Mosquitto, 1883 (default 1884)
  --no-boot      make the card and put the files, then stop
  --status       print the card's fencegate/status.txt, then stop
  --print        print the QEMU command, an argument a line, then stop
  -h, --help     print this help and do nothing else

In the console, Ctrl-A X quits QEMU: a power cut for the Pi. poweroff or
reboot on the Pi ends QEMU cleanly; run this again to boot the same card.
Needs qemu-system-aarch64 (Debian's qemu-system-arm), xz and mtools.
EOF
}

# Messages go to stderr: stdout is --print's, --status's and --help's.
say() { echo "qemu.sh: $*" >&2; }
die() {
  say "$*"
  exit 1
}
usage_error() {
  echo "qemu.sh: $*" >&2
  echo "Try: piimage/qemu.sh --help" >&2
  exit 2
}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
image="" card="" new="" mode=boot ssh=2222 mqtt=1884
puts=()
while (($#)); do
  opt=$1
  case $opt in
  --card=* | --put=* | --ssh-port=* | --mqtt-port=*) set -- "${opt%%=*}" "${opt#*=}" "${@:2}" ;;
  esac
  case $1 in
  -h | --help)
    usage
    exit 0
    ;;
  --card | --put | --ssh-port | --mqtt-port)
    (($# >= 2)) || usage_error "$1 needs a value"
    case $1 in
    --card) card=$2 ;;
    --put) puts+=("$2") ;;
    --ssh-port) ssh=$2 ;;
    --mqtt-port) mqtt=$2 ;;
    esac
    shift 2
    continue
    ;;
  --new) new=yes ;;
  --no-boot) mode=no-boot ;;
  --status) mode=status ;;
  --print) mode=print ;;
  -*) usage_error "unknown option $1" ;;
  *)
    [ -z "$image" ] || usage_error "one image only ($image, $1)"
    image=$1
    ;;
  esac
  shift
done
for p in "$ssh" "$mqtt"; do
  [[ $p =~ ^[1-9][0-9]{0,4}$ ]] && ((p <= 65535)) || usage_error "$p is not a port (1 to 65535)"
done
[ "$ssh" != "$mqtt" ] || usage_error "--ssh-port and --mqtt-port are the same port, $ssh"
for p in "${puts[@]}"; do
  [ -e "$p" ] || usage_error "--put $p: no such file or folder"
done

# PIEMU_MACHINE: raspi3b as piemu boots it.
. "$REPO/piemu/lib.sh"

need() {
  local missing=() n
  for n in "$@"; do command -v "${n%%:*}" >/dev/null 2>&1 || missing+=("${n#*:}"); done
  ((${#missing[@]} == 0)) || die "missing programs: install them with: sudo apt-get install --no-install-recommends ${missing[*]}"
}
need mdir:mtools mcopy:mtools mtype:mtools
# Before the card is made (a minute's work): what a boot needs.
if [ "$mode" = boot ]; then
  need qemu-system-aarch64:qemu-system-arm
  for p in "$ssh" "$mqtt"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      die "localhost's port $p is taken: choose another with --ssh-port or --mqtt-port"
    fi
  done
fi

default_card=${XDG_CACHE_HOME:-${HOME:?set HOME, or name the card with --card}/.cache}/fencegate/qemu/card.img
card=$(realpath -m -- "${card:-$default_card}")
boot=$card.boot # the boot partition's kernel files, copied at each boot

# boot_offset CARD prints where the card's boot partition (the first, FAT)
# starts, in bytes, read from its MBR partition table.
boot_offset() {
  local b
  # shellcheck disable=SC2207 # od prints numbers, split on white space
  b=($(od -An -v -tu1 -j446 -N66 -- "$1"))
  ((${#b[@]} == 66 && b[64] == 0x55 && b[65] == 0xaa)) || die "$1 has no MBR partition table: not a card made from the image"
  case ${b[4]} in 11 | 12 | 14) ;; *) die "$1: its first partition is not FAT (type ${b[4]}): not a card made from the image" ;; esac
  echo $(((b[8] + b[9] * 256 + b[10] * 65536 + b[11] * 16777216) * 512))
}

# make_card writes the image to a new card, padded to the power-of-two
# size QEMU's SD card model requires (the Pi grows its root file system
# into the rest at its first boot).
make_card() {
  local img=${image:-$REPO/dist/image/latest.img.xz} real size want
  [ -e "$img" ] || die "no image at $img: build one with sudo make image (docs/raspberry-pi.md, step 1), or name one"
  real=$(realpath -- "$img")
  if [ -f "$real.sha256" ]; then
    say "checking $real against its .sha256"
    [ "$(sha256sum <"$real" | cut -d' ' -f1)" = "$(cut -d' ' -f1 "$real.sha256")" ] ||
      die "$real does not match $real.sha256: a copy cut short? (docs/raspberry-pi.md, step 2)"
  else
    say "no $real.sha256 beside the image: not checked"
  fi
  mkdir -p "$(dirname "$card")"
  part=$card.part
  trap 'rm -f -- "$part"' EXIT # a copy cut short is no card
  say "writing the card $card from $real"
  case $real in
  *.xz)
    need xz:xz-utils
    xz -dc -- "$real" | dd of="$part" bs=1M conv=sparse iflag=fullblock status=none
    ;;
  *) cp --sparse=always -- "$real" "$part" ;;
  esac
  size=$(stat -c %s -- "$part")
  want=1
  while ((want < size)); do want=$((want * 2)); done
  truncate -s "$want" -- "$part"
  mv -- "$part" "$card"
}

if [ "$mode" = status ]; then
  [ -f "$card" ] || die "no card at $card yet"
  fat="$card@@$(boot_offset "$card")"
  mtype -i "$fat" ::fencegate/status.txt 2>/dev/null | tr -d '\r' ||
    die "no fencegate/status.txt on the card yet: the Pi writes it at every boot"
  exit 0
fi

if [ -n "$new" ] || [ ! -f "$card" ]; then
  make_card
elif [ -n "$image" ]; then
  say "the card $card exists and is booted as it is; --new makes it from $image again"
elif [ "$REPO/dist/image/latest.img.xz" -nt "$card" ]; then
  say "make image built a newer image than this card: --new makes the card from it (what the Pi applied is lost)"
fi
fat="$card@@$(boot_offset "$card")"

# The user's files, as a laptop writes them onto the card.
for p in "${puts[@]}"; do
  if [ -d "$p" ]; then
    files=()
    while IFS= read -r -d '' f; do files+=("$f"); done < <(find "$p" -mindepth 1 -maxdepth 1 -print0)
    ((${#files[@]} == 0)) || mcopy -s -o -i "$fat" "${files[@]}" ::fencegate/ ||
      die "mcopy: could not put $p in the card's fencegate folder"
  else
    mcopy -o -i "$fat" "$p" ::fencegate/ || die "mcopy: could not put $p in the card's fencegate folder"
  fi
  say "put $p in the card's fencegate folder"
done
if [ "$mode" = no-boot ]; then
  say "the card is $card; its fencegate folder holds:"
  mdir -b -i "$fat" ::fencegate | sed 's|^::/fencegate/|  |'
  say "put more with: mcopy -o -i '$fat' FILE ::fencegate/"
  exit 0
fi

# What the Pi's firmware would boot: the card's kernel, initramfs, device
# tree and command line (the last of each name, as the image test takes).
rm -rf -- "$boot"
mkdir -p -- "$boot"
declare -A file
for pat in 'vmlinuz-*' 'initrd.img-*' bcm2837-rpi-3-b.dtb cmdline.txt; do
  name=$(mdir -b -i "$fat" "::$pat" 2>/dev/null | tail -n 1) || true
  [ -n "$name" ] || die "the card's boot partition has no $pat: not a card made from the image"
  file[$pat]=$boot/${name##*/}
  mcopy -n -o -i "$fat" "$name" "${file[$pat]}" || die "mcopy: could not read $name from the card"
done
cmdline=$(<"${file[cmdline.txt]}")
cmdline=${cmdline#"${cmdline%%[![:space:]]*}"}
cmdline=${cmdline%"${cmdline##*[![:space:]]}"}

# The console on QEMU's PL011 (a Pi's firmware would choose ttyS1); QEMU's
# model of the SoC's watchdog resets the machine the moment systemd arms
# it, so systemd must not (as in the image test). The Pi's Ethernet is a
# USB network adapter, forwarded from localhost. -serial mon:stdio: Ctrl-C
# goes to the Pi, Ctrl-A X quits. -no-reboot: a reboot ends QEMU.
args=("${PIEMU_MACHINE[@]}"
  -kernel "${file[vmlinuz-*]}" -initrd "${file[initrd.img-*]}" -dtb "${file[bcm2837-rpi-3-b.dtb]}"
  -append "$cmdline console=ttyAMA0,115200 systemd.watchdog_sec=off"
  -drive "if=sd,format=raw,file=${card//,/,,}"
  -netdev "user,id=net0,hostfwd=tcp:127.0.0.1:$ssh-:22,hostfwd=tcp:127.0.0.1:$mqtt-:1883" -device usb-net,netdev=net0
  -nographic -serial mon:stdio -monitor none -no-reboot)
if [ "$mode" = print ]; then
  printf '%s\n' qemu-system-aarch64 "${args[@]}"
  exit 0
fi

cat >&2 <<EOF
qemu.sh: booting the emulated Raspberry Pi 3B with the card $card
qemu.sh:   SSH:  ssh -p $ssh root@127.0.0.1 (with the key whose public half is in authorized_keys)
qemu.sh:   MQTT: 127.0.0.1:$mqtt (the Pi's Mosquitto, 1883)
qemu.sh:   a boot takes about 2 minutes; Ctrl-A X quits (a power cut), poweroff on the Pi ends it cleanly
EOF
set +e
qemu-system-aarch64 "${args[@]}"
rc=$?
set -e
again=""
[ "$card" = "$(realpath -m -- "$default_card")" ] || again=" --card '$card'"
say "QEMU ended (status $rc). What the Pi made of the card's folder: piimage/qemu.sh --status$again"
exit $rc
