# fencegate image: card_wifi, sourced by bootconfig.
#
# card_wifi applies the card's wifi.txt (docs/site.md, "Wi-Fi from the
# card"): gateway wifi, as root, checks it and writes wpa_supplicant's
# configuration for wlan0 (the key derived from the passphrase, never the
# passphrase; a WPA2-Enterprise network's CA file beside it). Then
# wpa_supplicant@wlan0 starts when wlan0 appears (80-fencegate-wifi.rules),
# or is restarted here if wlan0 is there already. Whether the Pi joined is
# said later, in status.txt too, by fencegate-netstatus, which gives the
# network its time and delays nothing.
#
# A wifi.txt whose one line is "off" turns Wi-Fi off: gateway wifi removes
# the configuration (and its CA file), and wpa_supplicant@wlan0 is
# stopped; without a configuration it never starts again
# (ConditionPathExists).
#
# wifi.txt holds a passphrase or a password: it is taken off the card
# (off_card) whether it was applied or refused. The CA file it names is
# no secret: it is taken off with a wifi.txt that was applied, and left
# for the mended one when wifi.txt was refused (unless it holds a private
# key, which gateway wifi refuses and no card keeps). A name of the
# card's own files (CARD_TAKES, CARD_LEAVES, NAME.example) is never
# touched. A refused wifi.txt leaves Wi-Fi as it was, and status.txt
# names its lines as the card's file (at most WIFI_SAID_MAX of gateway
# wifi's lines). Without a wifi.txt, nothing changes: Wi-Fi stays as the
# last one set it (off, if none ever did). Every variable here starts
# with wf_: bootconfig's own share the shell. (The FENCEGATE_ variables
# are for piimage's TestCardWiFi.)
WIFI_CONF=${FENCEGATE_WPA_CONF:-/etc/wpa_supplicant/wpa_supplicant-wlan0.conf}
WIFI_NET=${FENCEGATE_NET:-/sys/class/net}
WIFI_GATEWAY=${FENCEGATE_GATEWAY:-/usr/bin/gateway}
# gateway wifi says at most 10 problems and how many more; this bounds
# what status.txt takes from it whatever it prints.
WIFI_SAID_MAX=12

card_wifi() {
	has wifi.txt || return 0
	wf_ca=$(wifi_ca_name)
	wf_out=$("$WIFI_GATEWAY" wifi --from "$CARD/wifi.txt" --out "$WIFI_CONF" 2>&1)
	wf_rc=$?
	wf_ok=""
	case $wf_rc in
	0)
		case $wf_out in
		"$CARD/wifi.txt: off:"*)
			say "Wi-Fi: off (wifi.txt said off)"
			wf_ok=off
			;;
		*)
			wf_out=${wf_out#*: ok: }
			say "Wi-Fi: ${wf_out%; wrote *} (the Wi-Fi: line below says whether the Pi joined)"
			wf_ok=yes
			;;
		esac
		;;
	78) # the file (or its CA file) is not valid
		refuse "wifi.txt is not valid, so Wi-Fi stays as it was; the file was removed from the card all the same, since it holds a passphrase: mend it and put it there again:"
		;;
	*) # the Pi's side: /etc/wpa_supplicant, the root file system
		refuse "Wi-Fi: gateway wifi failed (exit $wf_rc), so Wi-Fi stays as it was; wifi.txt was removed from the card all the same, since it holds a passphrase:"
		;;
	esac
	if [ -z "$wf_ok" ]; then
		wifi_said "$wf_out"
		if [ -n "$wf_ca" ] && [ -f "$CARD/$wf_ca" ]; then
			if grep -q 'PRIVATE KEY' "$CARD/$wf_ca"; then
				# gateway wifi refused it for that: a secret, which
				# never stays on the card.
				off_card "$wf_ca"
				say "  $wf_ca held a private key, so it was removed from the card all the same"
			else
				say "  $wf_ca, the CA file that wifi.txt names, stays on the card for the mended wifi.txt"
			fi
		fi
	fi
	off_card wifi.txt
	[ "$wf_ok" = yes ] && [ -n "$wf_ca" ] && off_card "$wf_ca"
	case $wf_ok in
	yes)
		# Before wlan0 appears, udev starts wpa_supplicant@wlan0 with this
		# configuration; after (the first boot, or a new network), a
		# restart reads it. --no-block: the rest of the card does not
		# wait for it.
		if [ -e "$WIFI_NET/wlan0" ]; then
			systemctl --no-block restart wpa_supplicant@wlan0.service ||
				say "Wi-Fi: WARNING: wpa_supplicant@wlan0 could not be restarted: the new network is used from the next boot"
		fi
		;;
	off)
		# Stopped if it runs, or is starting (udev may have started it as
		# wlan0 appeared, before its configuration was removed); a unit
		# that is not running stays so. Not waited for.
		systemctl --no-block stop wpa_supplicant@wlan0.service ||
			say "Wi-Fi: WARNING: wpa_supplicant@wlan0 could not be stopped: Wi-Fi is off from the next boot"
		;;
	esac
}

# wifi_said OUT puts gateway wifi's output in status.txt, indented, one
# problem a line, naming the card's file as the card's folder does: at
# most WIFI_SAID_MAX lines of at most 1000 bytes, then how many more.
wifi_said() {
	printf '%s\n' "$1" | sed -e 's/^gateway: //' -e "s|$CARD/|fencegate/|g" |
		LC_ALL=C awk -v max="$WIFI_SAID_MAX" '
			NR <= max {
				s = $0
				if (length(s) > 1000) {
					s = substr(s, 1, 1000)
					# Not half of a UTF-8 character.
					while (s ~ /[\200-\377]$/) s = substr(s, 1, length(s) - 1)
					s = s "..."
				}
				print s
			}
			END { if (NR > max) print "and " NR - max " more lines: gateway wifi --from wifi.txt, on a laptop, says them all" }' |
		while IFS= read -r wf_l; do
			say "  $wf_l"
		done
}

# wifi_ca_name prints the name of the file that wifi.txt's ca: line names,
# if it is a file name (gateway wifi refuses any other), and not one of
# the names of the card's own files: those bootconfig takes for itself
# (ca.crt, the broker's CA, say: that part takes it off the card), those
# it leaves (README.txt, status.txt), and the examples the card ships
# (NAME.example).
wifi_ca_name() {
	wf_n=$(clean "$CARD/wifi.txt" |
		sed -n 's/^[[:space:]]*[Cc][Aa][[:space:]]*:[[:space:]]*"\{0,1\}\([A-Za-z0-9][A-Za-z0-9._-]*\)"\{0,1\}[[:space:]]*$/\1/p' | head -n 1)
	wf_lower=$(printf '%s' "$wf_n" | LC_ALL=C tr 'A-Z' 'a-z')
	case $wf_lower in *.example) return 0 ;; esac
	for wf_k in wifi.txt $CARD_TAKES $CARD_LEAVES; do
		[ "$wf_lower" = "${wf_k%/}" ] && return 0
	done
	printf '%s' "$wf_n"
}
