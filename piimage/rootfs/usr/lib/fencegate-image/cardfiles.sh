# fencegate image: card_unknown, sourced by bootconfig (and by piimage's
# TestCardUnknown, which runs it on a folder and on a real FAT).
#
# card_unknown lists, in status.txt, the files and folders of the card's
# folder that bootconfig did not take, each with the name it probably
# meant: otherwise gateway.yaml.txt (Notepad's) changes nothing and
# nothing says why. Such a file is never touched: it stays for the user
# to rename or delete. The one exception is a private key, which must not
# stay on a card that any laptop reads: it is overwritten and removed
# (off_card), and status.txt says so loudly. The litter of laptops'
# systems (macOS's ._NAME and .DS_Store, Windows' Thumbs.db) is passed over
# in silence.
#
# Names come from whatever laptop wrote the card: status.txt shows them
# escaped and shortened (card_shown), so that no name can break its lines.
# Every variable here starts with cu_: bootconfig's own share the shell.

# CARD_TAKES: every name the Pi takes from the card's folder (a trailing /
# marks a folder), by bootconfig and the parts it sources. The one list of
# them (TestCardTakesAllTheyTake checks that each part's names are here).
CARD_TAKES="gateway.yaml store.txt passwd acl broker.crt broker.key ca.crt keys/ authorized_keys hostname.txt wifi.txt bridge.txt site/"
# CARD_LEAVES: names the Pi leaves alone: these, and NAME.example for each
# NAME it takes (the card ships some of those).
CARD_LEAVES="README.txt status.txt"
# At most this many names are listed one by one: a card that a broken
# laptop filled must not make status.txt endless.
CARD_UNKNOWN_MAX=20

card_unknown() {
	cu_said=0 cu_more=0 cu_keys=0
	cu_leaves=$(card_lower "$CARD_LEAVES")
	for cu_f in "$CARD"/* "$CARD"/.[!.]* "$CARD"/..?*; do
		[ -e "$cu_f" ] || [ -L "$cu_f" ] || continue
		cu_n=${cu_f##*/}
		[ -d "$cu_f" ] && [ ! -L "$cu_f" ] && cu_n=$cu_n/
		cu_l=$(card_lower "$cu_n")
		card_known "$cu_n" "$cu_l" && continue
		card_litter "$cu_l" && continue
		card_one "$cu_n"
	done
	if [ "$cu_more" -gt 0 ]; then
		cu_m="and $cu_more more names the Pi does not take"
		[ "$cu_keys" -gt 0 ] && cu_m="$cu_m (private keys among them, overwritten and removed: $cu_keys)"
		say "$cu_m"
	fi
	if [ "$cu_said" -gt 0 ]; then
		say "the Pi takes only these names from the fencegate folder: $(echo $CARD_TAKES | sed 's/ /, /g') (README.txt there says what each is for)"
	fi
}

# card_known NAME LOWER: whether the Pi takes NAME (LOWER: in lower case),
# or leaves it alone on purpose.
card_known() {
	for cu_k in $CARD_TAKES; do
		[ "$1" = "$cu_k" ] && return 0
	done
	for cu_k in $cu_leaves; do
		[ "$2" = "$cu_k" ] && return 0
	done
	for cu_k in $CARD_TAKES; do
		case $cu_k in */) ;; *) [ "$2" = "$cu_k.example" ] && return 0 ;; esac
		# In other capitals: on FAT, whose names ignore case, the Pi's
		# own name finds it too, so bootconfig took it as that (or
		# refused it and said why). On a file system that minds case,
		# the Pi's name finds nothing (or another file), and NAME is
		# listed as not taken.
		if [ "$2" = "$cu_k" ] && [ -e "$CARD/${cu_k%/}" ] && ! card_listed "${cu_k%/}"; then
			return 0
		fi
	done
	return 1
}

# card_listed NAME: whether the folder has an entry named exactly NAME.
card_listed() {
	for cu_g in "$CARD"/*; do
		[ "${cu_g##*/}" = "$1" ] && return 0
	done
	return 1
}

# card_litter LOWER: what laptops' systems leave on a card they mount.
card_litter() {
	case ${1%/} in
	._* | .ds_store | .spotlight-v100 | .fseventsd | .trashes | .temporaryitems | .apdisk | .trash-* | 'system volume information' | thumbs.db | desktop.ini)
		return 0
		;;
	esac
	return 1
}

card_lower() { printf '%s' "$1" | LC_ALL=C tr 'A-Z' 'a-z'; }

# card_one NAME: one name the Pi did not take, said; a private key is
# taken off the card.
card_one() {
	cu_what=file
	case $1 in */) cu_what=folder ;; esac
	cu_file=""
	[ -f "$CARD/$1" ] && [ ! -L "$CARD/$1" ] && cu_file=yes
	cu_c=""
	[ -n "$cu_file" ] && cu_c=$(card_content "$CARD/$1")
	cu_g=$(card_guess "$1" "$cu_c")
	cu_why=${cu_g%% *} cu_meant=${cu_g#* }
	if [ -n "$cu_file" ] && { [ "$cu_c" = private ] || [ "$cu_why" = private ]; }; then
		cu_s=$(card_shown "$1")
		if [ "$cu_s" = "$1" ]; then
			off_card "$1"
		else
			# off_card would put the raw name in status.txt.
			shred_card_file "$CARD/$1" 2>/dev/null ||
				card_say "WARNING: \"$cu_s\" could not be overwritten on the card before its removal: what it held may stay on the card (make a new key)"
		fi
		cu_m="WARNING: \"$cu_s\" is a private key, which must never be on the card: the Pi overwrote and removed it (it needs only public keys; make a new key if the card was out of your hands)"
		case $cu_why/$cu_meant in
		meant/*.key) cu_m="$cu_m; did you mean $cu_meant? Put it back under that name" ;;
		private/* | meant/authorized_keys) cu_m="$cu_m; for SSH, put its public half (the .pub file) in as authorized_keys" ;;
		esac
		card_say "$cu_m" key
		return
	fi
	# Past the limit, only counted (card_shown is a few processes).
	card_say "" || return 0
	cu_m="\"$(card_shown "$1")\": not a $cu_what the Pi takes, so it stays on the card"
	case $cu_why in
	meant) cu_m="$cu_m: did you mean $cu_meant? (rename it and reboot)" ;;
	backup) cu_m="$cu_m: an editor's backup of $cu_meant? Delete it (it may hold what $cu_meant held)" ;;
	keys) cu_m="$cu_m: a controller's public key? Put it in the keys folder and reboot" ;;
	esac
	say "$cu_m"
}

# card_say LINE [key]: LINE said, if fewer than CARD_UNKNOWN_MAX were;
# else counted (a private key apart), and it fails. An empty LINE only
# asks, and counts the one to be said.
card_say() {
	if [ "$cu_said" -ge "$CARD_UNKNOWN_MAX" ]; then
		cu_more=$((cu_more + 1))
		[ "${2:-}" = key ] && cu_keys=$((cu_keys + 1))
		return 1
	fi
	cu_said=$((cu_said + 1))
	[ -z "$1" ] || say "$1"
}

# card_content FILE: what FILE holds, by its first 64 KiB: private (a
# private key: "PRIVATE KEY" as PEM has it, or PuTTY's key file), ssh (an
# SSH public key, as authorized_keys takes), sign (a controller's public
# key, ed25519:..., as keys/ takes) or nothing.
card_content() {
	head -c 65536 -- "$1" 2>/dev/null | LC_ALL=C tr -d '\000' | LC_ALL=C awk '
		NR == 1 { sub(/^\357\273\277/, "") }
		{ sub(/\r$/, "") }
		/PRIVATE KEY|^PuTTY-User-Key-File-/ { k = "private"; exit }
		k == "" && /^(ssh-|ecdsa-|sk-)/ { k = "ssh" }
		k == "" && /^ed25519:/ { k = "sign" }
		END { print k }'
}

# card_guess NAME CONTENT prints why NAME was probably put there and the
# name of CARD_TAKES it meant: "meant NAME" (Notepad's .txt, a copy's
# " (1)" or " - Copy", an example not renamed, .yml, another case, no
# extension), "backup NAME" (an editor's backup or lock file), "private"
# (an SSH private key's name), "keys" (a controller's public key), or "-"
# (no idea). The guess is always a name of CARD_TAKES, never the card's
# own text.
card_guess() {
	CU_NAME=$1 CU_CONTENT=$2 CU_TAKES=$CARD_TAKES LC_ALL=C awk 'BEGIN {
		nt = split(ENVIRON["CU_TAKES"], t, " ")
		for (i = 1; i <= nt; i++) {
			T[t[i]] = 1
			# Without its extension (gateway, hostname); one that two
			# names share (broker) means neither.
			b = t[i]
			if (!sub(/\.[^.\/]*$/, "", b)) continue
			if (b in B) B[b] = ""
			else B[b] = t[i]
		}
		n = tolower(ENVIRON["CU_NAME"]); c = ENVIRON["CU_CONTENT"]; dir = ""
		if (n ~ /\/$/) { dir = "/"; n = substr(n, 1, length(n) - 1) }
		why = "meant"
		if (n ~ /(~|\.bak|\.old|\.orig)$/) { sub(/(~|\.bak|\.old|\.orig)$/, "", n); why = "backup" }
		else if (n ~ /^\..+\.sw[a-p]$/) { n = substr(n, 2); sub(/\.sw[a-p]$/, "", n); why = "backup" }
		else if (n ~ /^\.~lock\..+#$/) { n = substr(n, 8, length(n) - 8); why = "backup" }
		else if (n ~ /^#.+#$/) { n = substr(n, 2, length(n) - 2); why = "backup" }
		for (;;) {
			if ((n dir) in T) { print why, n dir; exit }
			if (dir == "" && (n in B) && B[n] != "") { print why, B[n]; exit }
			if (sub(/^[ \t\r\n]+/, "", n) + sub(/[ \t\r\n.]+$/, "", n)) continue
			if (sub(/\.txt$/, "", n)) continue
			if (sub(/\.example$/, "", n)) continue
			if (sub(/ \([0-9]+\)/, "", n)) continue
			if (sub(/ - copy( \([0-9]+\))?/, "", n)) continue
			if (sub(/ copy( [0-9]+)?/, "", n)) continue
			if (sub(/^copy (\([0-9]+\) )?of /, "", n)) continue
			if (sub(/\.yml$/, ".yaml", n)) continue
			break
		}
		if (dir == "" && (n ~ /^id_(rsa|dsa|ecdsa|ed25519|ecdsa_sk|ed25519_sk)$/ || n ~ /\.ppk$/)) print "private"
		else if (dir == "" && (c == "ssh" || n ~ /^id_.*\.pub$/ || n == "authorized_keys.pub")) print "meant authorized_keys"
		else if (dir == "" && (c == "sign" || n ~ /\.pub$/)) print "keys"
		else print "-"
	}'
}

# card_shown NAME prints NAME as status.txt shows it: printable ASCII and
# valid UTF-8 as they are; control characters, bytes that are not UTF-8
# and invisible or direction-changing characters escaped (\n, \x01,
# \u202E), as are " and \; cut after 64 characters, with "..." then.
card_shown() {
	printf '%s' "$1" | LC_ALL=C od -An -v -tu1 | LC_ALL=C awk -v max=64 '
		{ for (i = 1; i <= NF; i++) b[n++] = $i + 0 }
		END {
			out = ""; w = 0
			for (i = 0; i < n; i += len) {
				c = b[i]; len = 1; s = ""
				if (c == 92) s = "\\\\"
				else if (c == 34) s = "\\\""
				else if (c == 10) s = "\\n"
				else if (c == 13) s = "\\r"
				else if (c == 9) s = "\\t"
				else if (c < 32 || c == 127) s = sprintf("\\x%02x", c)
				else if (c < 128) s = sprintf("%c", c)
				else {
					# UTF-8 (RFC 3629): the length of the sequence, and
					# the range of its second byte.
					lo = 128; hi = 191; len = 0
					if (c >= 194 && c <= 223) len = 2
					else if (c >= 224 && c <= 239) { len = 3; if (c == 224) lo = 160; if (c == 237) hi = 159 }
					else if (c >= 240 && c <= 244) { len = 4; if (c == 240) lo = 144; if (c == 244) hi = 143 }
					ok = len > 0 && i + len <= n && b[i + 1] >= lo && b[i + 1] <= hi
					for (j = 2; ok && j < len; j++) ok = b[i + j] >= 128 && b[i + j] <= 191
					if (!ok) { s = sprintf("\\x%02x", c); len = 1 }
					else {
						cp = c % (len == 2 ? 32 : (len == 3 ? 16 : 8))
						for (j = 1; j < len; j++) cp = cp * 64 + b[i + j] % 64
						if (cp <= 160 || cp == 173 || (cp >= 8203 && cp <= 8207) || (cp >= 8232 && cp <= 8238) || (cp >= 8288 && cp <= 8303) || cp == 65279 || (cp >= 65529 && cp <= 65531))
							s = sprintf("\\u%04X", cp)
						else for (j = 0; j < len; j++) s = s sprintf("%c", b[i + j])
					}
				}
				u = (len > 1 && s !~ /^\\/) ? 1 : length(s)
				if (w + u > max) { out = out "..."; break }
				out = out s; w += u
			}
			printf "%s", out
		}'
}
