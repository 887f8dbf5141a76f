# fencegate image: card_site, sourced by bootconfig (docs/site.md).
#
# Where the gateway's MQTT goes, decided at every boot from what the Pi
# holds (the card's files, once applied, are kept in /etc/fencegate):
#
# - gateway.yaml's mqtt.broker names this Pi's Mosquitto: it is the
#   gateway's broker, and with a bridge.txt it also carries the gateway's
#   topics to and from the site's broker (a Mosquitto bridge, written by
#   gateway bridge);
# - it names another broker: the gateway connects there directly, and
#   this Pi's Mosquitto stays off (mosquitto.service's drop-in skips it
#   while $MQ_OFF exists).
#
# The credentials the Pi presents to the site's broker come in the card's
# site/ folder (ca.crt, client.crt, client.key, password), are kept in
# /etc/fencegate/site (the gateway reads them there when it connects
# directly) and copied for Mosquitto to /etc/mosquitto/bridge.
SITE=$ETC/site
BRIDGE=$ETC/bridge.txt
MQ_OFF=${FENCEGATE_MQ_OFF:-/run/fencegate-image/mosquitto-off}
# (The FENCEGATE_ variables are for piimage's TestCardSite.)
SITE_GATEWAY=${FENCEGATE_GATEWAY:-/usr/bin/gateway}
SITE_FILES="ca.crt client.crt client.key password"

card_site() {
	site_credentials
	rm -f "$MQ_OFF"
	[ -e "$USE" ] || return 0 # no configuration yet: bootconfig says so
	if ! topo=$("$SITE_GATEWAY" bridge --config "$USE" --topology 2>&1); then
		refuse "broker: $topo"
		return
	fi
	case "$topo" in
	direct*)
		install -d -m 0755 "${MQ_OFF%/*}"
		echo "the gateway connects to ${topo#direct } directly" >"$MQ_OFF"
		rm -f "$MQ/conf.d/bridge.conf"
		say "broker: the gateway connects to the site's broker ${topo#direct } directly; this Pi's Mosquitto is off"
		if has bridge.txt; then
			refuse "bridge.txt: not used: gateway.yaml's mqtt.broker is the site's broker, so there is nothing to bridge (a bridge is for a gateway on this Pi's Mosquitto, tcp://127.0.0.1:1883); it was removed from the card"
			off_card bridge.txt
		elif [ -e "$BRIDGE" ]; then
			# Only once the configuration that connects directly is the
			# applied one (card_site_applied, for a new one): a new one
			# may yet be refused by its full check, and the Pi would go
			# back to the old one, and its bridge.
			site_drop=yes
			[ -z "$NEW" ] && card_site_applied
		fi
		return
	esac
	if has bridge.txt; then
		clean "$CARD/bridge.txt" >"$BRIDGE.new"
		chmod 0600 "$BRIDGE.new"
		if out=$(site_bridge "$BRIDGE.new" 2>&1); then
			mv "$BRIDGE.new" "$BRIDGE"
			off_card bridge.txt
		else
			rm -f "$BRIDGE.new"
			refuse "bridge.txt is not valid, so the bridge stays as it was: $(echo "$out" | sed "s|$BRIDGE.new|fencegate/bridge.txt (on the card)|g" | tr '\n' ' ')"
			# It stays to be mended, unless it may hold a password.
			if grep -qi 'pass' "$CARD/bridge.txt"; then
				off_card bridge.txt
				say "bridge.txt was removed from the card all the same: it seems to hold a password, which goes in site/password alone"
			fi
			return
		fi
	fi
	if [ ! -e "$BRIDGE" ]; then
		rm -f "$MQ/conf.d/bridge.conf"
		return
	fi
	if ! out=$(site_bridge "$BRIDGE" 2>&1); then
		rm -f "$MQ/conf.d/bridge.conf"
		refuse "bridge: not started: $(echo "$out" | sed "s|$BRIDGE|/etc/fencegate/bridge.txt (from the card's bridge.txt)|g" | tr '\n' ' ')"
		return
	fi
	if [ "$out" = off ]; then
		rm -f "$MQ/conf.d/bridge.conf" "$BRIDGE"
		say "broker: no bridge to the site's broker (bridge.txt said off)"
		return
	fi
	say "broker: $out"
}

# card_site_applied removes the bridge that a configuration connecting to
# the site's broker directly has no use for, once that configuration is
# the applied one; bootconfig calls it when it applies a new one.
site_drop=""
card_site_applied() {
	[ -n "$site_drop" ] && [ -e "$BRIDGE" ] || return 0
	rm -f "$BRIDGE"
	say "broker: the bridge to the site's broker is removed: the gateway connects there itself now"
}

# site_bridge FILE writes Mosquitto's bridge.conf from the bridge file FILE
# and says what it bridges, or fails saying why (nothing written then).
site_bridge() {
	install -d -m 0750 -g mosquitto "$MQ/bridge"
	for f in ca.crt client.crt client.key; do
		if [ -s "$SITE/$f" ]; then
			install -m 0640 -o root -g mosquitto "$SITE/$f" "$MQ/bridge/$f"
		else
			rm -f "$MQ/bridge/$f"
		fi
	done
	conf=$(mktemp)
	# As root: Mosquitto's copies of the credentials are not the
	# gateway user's to read, and their presence decides the bridge.
	if ! "$SITE_GATEWAY" bridge --config "$USE" --site "$1" --credentials "$MQ/bridge" --password-file "$SITE/password" \
		--host-id "$(head -c 8 /etc/machine-id 2>/dev/null)" >"$conf"; then
		rm -f "$conf"
		return 1
	fi
	chown root:mosquitto "$conf"
	chmod 0640 "$conf"
	mv "$conf" "$MQ/conf.d/bridge.conf"
	sed -n 's/^# bridge: //p' "$MQ/conf.d/bridge.conf" | head -n 1
}

# site_credentials takes the card's site/ folder off the card into $SITE.
# Every file there is taken off, known or not: they are keys and passwords.
site_credentials() {
	[ -d "$CARD/site" ] || return 0
	install -d -m 0750 -g fencegate "$SITE"
	# Every file, in folders within too: they are keys and passwords.
	find "$CARD/site" -mindepth 1 -type f | while IFS= read -r f; do
		n=${f#"$CARD"/site/}
		case " $SITE_FILES " in
		*" $n "*)
			clean "$f" >"$SITE/$n"
			if [ "$n" = password ]; then
				# One line: the password, without its line end.
				printf '%s' "$(head -n 1 "$SITE/$n")" >"$SITE/$n.tmp" && mv "$SITE/$n.tmp" "$SITE/$n"
			fi
			chown root:fencegate "$SITE/$n"
			chmod 0640 "$SITE/$n"
			off_card "site/$n"
			say "site: $n installed (/etc/fencegate/site/$n)"
			;;
		*)
			private=""
			[ "$(card_content "$f")" = private ] && private=yes
			off_card "site/$n"
			refuse "site/$(card_shown "$n"): not a file the Pi takes ($SITE_FILES); it was removed from the card all the same, since this folder holds keys and passwords"
			[ -n "$private" ] && say "WARNING: site/$(card_shown "$n") was a private key other than this Pi's client.key (a CA's?): it must never travel on a card; make a new one if the card was out of your hands"
			;;
		esac
	done
	# Names the loop cannot read (a line break in them): off the card
	# all the same.
	if [ -n "$(find "$CARD/site" -mindepth 1 -type f)" ]; then
		find "$CARD/site" -mindepth 1 -type f -exec sh -c '. "$1"; shred_card_file "$2"' _ "$LIB/shred.sh" {} \; 2>/dev/null
		refuse "site/: files with names the Pi cannot read were removed from the card, unread"
	fi
	find "$CARD/site" -depth -mindepth 1 -type d -exec rmdir {} + 2>/dev/null
	rmdir "$CARD/site" 2>/dev/null || true
}

