package mutants

// The card's secrets (issue 33): bootconfig takes passwd, broker.key and
// the rest off the Raspberry Pi image's FAT boot partition through
// shred_card_file, which overwrites a file where it lies before removing
// it. This mutant removes it only, as before issue 33: its bytes stay in
// the freed clusters, where dd | strings on a laptop finds them.
func init() {
	mutants = append(mutants, mutant{
		name: "card-secret-only-removed",
		why:  "shred_card_file removes a secret from the card without overwriting it: the password stays in the FAT's freed clusters (issue 33)",
		file: "piimage/rootfs/usr/lib/fencegate-image/shred.sh",
		old:  `if ! dd if=/dev/zero of="$1" bs=64K count="$_end" iflag=count_bytes conv=notrunc,fsync status=none; then`,
		new:  `if false; then`,
		pkgs: []string{"./piimage"}, run: "TestShredCardFile",
	})
}
