# fencegate image: card_wifi, sourced by bootconfig.
#
# card_wifi applies the card's wifi.txt (docs/site.md, "Wi-Fi").
card_wifi() {
	:
}
