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
# wifi.txt holds a passphrase or a password, and the CA file it names
# comes with it: both are taken off the card (off_card) whether they were
# applied or refused. A refused wifi.txt leaves Wi-Fi as it was, and
# status.txt names its lines as the card's file. Without a wifi.txt,
# nothing changes: Wi-Fi stays as the last one set it (off, if none ever
# did). Every variable here starts with wf_: bootconfig's own share the
# shell. (The FENCEGATE_ variables are for piimage's TestCardWiFi.)
WIFI_CONF=${FENCEGATE_WPA_CONF:-/etc/wpa_supplicant/wpa_supplicant-wlan0.conf}
WIFI_NET=${FENCEGATE_NET:-/sys/class/net}
WIFI_GATEWAY=${FENCEGATE_GATEWAY:-/usr/bin/gateway}

card_wifi() {
	has wifi.txt || return 0
	wf_ca=$(wifi_ca_name)
	wf_out=$("$WIFI_GATEWAY" wifi --from "$CARD/wifi.txt" --out "$WIFI_CONF" 2>&1)
	wf_rc=$?
	wf_ok=""
	case $wf_rc in
	0)
		wf_out=${wf_out#*: ok: }
		say "Wi-Fi: ${wf_out%; wrote *} (the network: line below says whether the Pi joined)"
		wf_ok=yes
		;;
	78) # the file (or its CA file) is not valid
		refuse "wifi.txt is not valid, so Wi-Fi stays as it was; the file was removed from the card all the same, since it holds a passphrase: mend it and put it there again:"
		;;
	*) # the Pi's side: /etc/wpa_supplicant, the root file system
		refuse "Wi-Fi: gateway wifi failed (exit $wf_rc), so Wi-Fi stays as it was; wifi.txt was removed from the card all the same, since it holds a passphrase:"
		;;
	esac
	if [ -z "$wf_ok" ]; then
		# Named as the card's file, one problem a line.
		printf '%s\n' "$wf_out" | sed -e 's/^gateway: //' -e "s|$CARD/|fencegate/|g" | while IFS= read -r wf_l; do
			say "  $wf_l"
		done
	fi
	off_card wifi.txt
	[ -n "$wf_ca" ] && off_card "$wf_ca"
	# Before wlan0 appears, udev starts wpa_supplicant@wlan0 with this
	# configuration; after (the first boot, or a new network), a restart
	# reads it. --no-block: the rest of the card does not wait for it.
	if [ -n "$wf_ok" ] && [ -e "$WIFI_NET/wlan0" ]; then
		systemctl --no-block restart wpa_supplicant@wlan0.service ||
			say "Wi-Fi: WARNING: wpa_supplicant@wlan0 could not be restarted: the new network is used from the next boot"
	fi
}

# wifi_ca_name prints the name of the file that wifi.txt's ca: line names,
# if it is a file name (gateway wifi refuses any other), and not one of
# the names bootconfig takes for itself (ca.crt, the broker's CA, say:
# that part takes it off the card).
wifi_ca_name() {
	wf_n=$(clean "$CARD/wifi.txt" |
		sed -n 's/^[[:space:]]*[Cc][Aa][[:space:]]*:[[:space:]]*"\{0,1\}\([A-Za-z0-9][A-Za-z0-9._-]*\)"\{0,1\}[[:space:]]*$/\1/p' | head -n 1)
	wf_lower=$(printf '%s' "$wf_n" | LC_ALL=C tr 'A-Z' 'a-z')
	for wf_k in wifi.txt $CARD_TAKES $CARD_LEAVES; do
		[ "$wf_lower" = "${wf_k%/}" ] && return 0
	done
	printf '%s' "$wf_n"
}
