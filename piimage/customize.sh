#!/usr/bin/env bash
# mmdebstrap's customize hook for the fencegate image (build.sh runs it):
# $1 is the new root file system, complete but for fencegate itself.
# IMAGE_DEB (the fencegate arm64 .deb) and IMAGE_MANIFEST (where the list
# of packages goes) come from build.sh.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
in_root() { chroot "$ROOT" "$@"; }

# As mmdebstrap's essential hook (before the kernel and the rest are
# installed): no initramfs until the end. The kernel's postinst and each
# trigger would make one, three minutes each under qemu-user.
if [ "$1" = --no-initramfs ]; then
  ROOT=${2:?the new root}
  in_root dpkg-divert --quiet --local --rename --divert /usr/sbin/update-initramfs.real --add /usr/sbin/update-initramfs
  printf '#!/bin/sh\n# fencegate image build: made once, at the end (piimage/customize.sh)\nexit 0\n' >"$ROOT/usr/sbin/update-initramfs"
  chmod 0755 "$ROOT/usr/sbin/update-initramfs"
  # Placeholders, so that openssh-server's postinst makes no host keys (a
  # minute under qemu-user): every card makes its own at its first boot.
  mkdir -p "$ROOT/etc/ssh"
  for k in rsa ecdsa ed25519; do touch "$ROOT/etc/ssh/ssh_host_${k}_key" "$ROOT/etc/ssh/ssh_host_${k}_key.pub"; done
  exit 0
fi
ROOT=${1:?the new root}

# The image's own files: owned by root, modes as git cannot keep them.
cp -r --no-preserve=ownership "$HERE/rootfs/." "$ROOT/"
chmod 0644 "$ROOT"/usr/lib/fencegate-image/*.sh
chmod 0755 "$ROOT/usr/lib/fencegate-image/bootconfig" "$ROOT/usr/lib/fencegate-image/growroot" "$ROOT/usr/lib/fencegate-image/fatcheck" \
  "$ROOT/usr/lib/fencegate-image/netstatus"

# fencegate, from this tree.
cp "${IMAGE_DEB:?}" "$ROOT/tmp/fencegate.deb"
in_root dpkg -i /tmp/fencegate.deb >/dev/null
rm "$ROOT/tmp/fencegate.deb"

# Nothing at boot that the appliance has no use for: each process costs
# the Pi seconds of a slow card, and the emulated Pi of the image test
# (one host thread for all of it) ten. e2scrub checks ext4 on LVM (the
# card has none); pstore collects crash records from EFI or ramoops (a Pi
# has neither configured); logind's early load of drm is done by the
# display's own driver when it loads; networkd's persistent storage keeps
# state the card's network (DHCP on one port) does not need.
in_root systemctl disable --quiet e2scrub_reap.service e2scrub_all.timer
# wpasupplicant's D-Bus service (for NetworkManager) would be one more
# wpa_supplicant at every boot; the image runs wpa_supplicant@wlan0 alone,
# when wlan0 appears and a wifi.txt was applied (80-fencegate-wifi.rules).
in_root systemctl disable --quiet wpa_supplicant.service
in_root systemctl mask --quiet systemd-pstore.service modprobe@efi_pstore.service modprobe@drm.service \
  systemd-networkd-persistent-storage.service
in_root systemctl enable --quiet systemd-networkd.service systemd-timesyncd.service fencegate-fatcheck.service \
  fencegate-growroot.service fencegate-bootconfig.service fencegate-netstatus.service mosquitto.service ssh.service fencegate.service

# The initramfs, once; raspi-firmware's hook then copies the kernel, the
# initramfs and the device trees to /boot/firmware and writes cmdline.txt
# and config.txt from /etc/default/raspi-firmware.
rm "$ROOT/usr/sbin/update-initramfs"
in_root dpkg-divert --quiet --local --rename --remove /usr/sbin/update-initramfs
in_root update-initramfs -c -k all >/dev/null
grep -q 'root=LABEL=RASPIROOT' "$ROOT/boot/firmware/cmdline.txt" ||
  { echo "customize: cmdline.txt does not name root=LABEL=RASPIROOT: $(cat "$ROOT/boot/firmware/cmdline.txt")" >&2; exit 1; }

# Every card its own host keys and machine id (made at its first boot).
rm -f "$ROOT"/etc/ssh/ssh_host_*
: >"$ROOT/etc/machine-id"
rm -f "$ROOT/var/lib/dbus/machine-id"
echo fencegate >"$ROOT/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tfencegate\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$ROOT/etc/hosts"

# The folder a user edits on a laptop.
mkdir -p "$ROOT/boot/firmware/fencegate"
cp "$HERE"/card/* "$ROOT/boot/firmware/fencegate/"

# /usr is as new as /etc and /var: systemd's update services
# (ldconfig, the journal's catalog) have nothing to do at the first boot,
# which they would otherwise spend a minute on.
touch "$ROOT/etc/.updated" "$ROOT/var/.updated"

# What the image holds.
{
  echo "# fencegate image $(in_root /usr/bin/gateway version | sed 's/^fencegate gateway //')"
  echo "# Debian $(cat "$ROOT/etc/debian_version"), arm64; package, version, architecture:"
  in_root dpkg-query -W -f '${Package}\t${Version}\t${Architecture}\n'
} >"${IMAGE_MANIFEST:?}"
