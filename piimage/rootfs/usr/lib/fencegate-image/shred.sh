# fencegate image: shred_card_file, sourced by bootconfig (and by
# piimage's TestShredCardFile, which runs it on a real FAT file system).
#
# shred_card_file FILE overwrites FILE, on the card's FAT boot partition,
# with zeros where it lies, then removes it. A plain rm only marks the
# file's clusters free: its bytes stay on the card, readable by anyone
# with the card and `strings` (issue 33). So:
#
# - the zeros go into the file's own clusters: dd with conv=notrunc, never
#   a truncation (on FAT, truncating frees the clusters first, and the
#   zeros would go wherever the next free cluster is). They reach the end
#   of its last cluster (statfs's block size is FAT's cluster size): the
#   slack past the end of the file may hold the tail of a longer version
#   that an editor cut short in place;
# - they are on the card before the file goes: conv=fsync, which on FAT
#   writes the file's data and asks the card to flush its own cache
#   (fat_file_fsync ends with blkdev_issue_flush);
# - only then is the file removed.
#
# What it cannot reach: copies of the file left in other clusters (an
# editor on a laptop that saved a new file and deleted the old, the
# laptop's own trash or backup files), and the card's flash cells that its
# controller remapped (wear levelling) under the sectors written here.
# Zeros, not random bytes: what matters is that the secret's bytes are
# gone, and zeros let a test see it.
#
# It returns 1, and says why on stderr, if the file could not be
# overwritten; it is removed all the same (a file left on the card is
# readable from any laptop, which is worse), and the caller tells the user
# that the secret may stay in the card's free space.
shred_card_file() {
	[ -f "$1" ] || return 0
	_size=$(stat -c %s -- "$1") || _size=""
	_cl=$(stat -f -c %s -- "$1" 2>/dev/null) || _cl=""
	case "$_cl" in '' | *[!0-9]* | 0) _cl=1 ;; esac
	[ "$_cl" -le 1048576 ] || _cl=1
	_ok=0
	case "$_size" in
	'' | *[!0-9]*)
		echo "fencegate: $1: its size cannot be read, so it was not overwritten" >&2
		_ok=1
		;;
	0) ;;
	*)
		_end=$(((_size + _cl - 1) / _cl * _cl))
		if ! dd if=/dev/zero of="$1" bs=64K count="$_end" iflag=count_bytes conv=notrunc,fsync status=none; then
			echo "fencegate: $1: could not be overwritten" >&2
			_ok=1
		fi
		;;
	esac
	rm -f -- "$1"
	return $_ok
}
