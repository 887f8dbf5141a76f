# fencegate image: card_unknown, sourced by bootconfig.
#
# card_unknown lists, in status.txt, the files of the card's folder that
# bootconfig does not take, with the name each one probably meant.
card_unknown() {
	:
}
