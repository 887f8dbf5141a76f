// Package wifi reads the wifi.txt a user puts in the fencegate folder of the
// image's card and writes the wpa_supplicant configuration that joins the Pi
// to that network (gateway wifi; docs/site.md, "Wi-Fi from the card").
//
// # The file
//
// wifi.txt holds "key: value" lines; a line whose first character other than
// a space is # is a comment; blank lines are skipped. Windows line ends and
// a UTF-8 byte-order mark are accepted, as Notepad writes them. A value is
// taken as it stands, # and quotes included, once the spaces around it are
// cut; a value wrapped in double quotes loses that one pair (so that spaces
// at its ends can be kept). Keys:
//
//	country             required: the two-letter ISO 3166 code of the country the Pi is in (DE, GB, US)
//	ssid                required: the network's name, 1 to 32 bytes
//	hidden              yes if the network does not announce its name (default no)
//	passphrase          WPA2-Personal: 8 to 63 printable ASCII characters, or the key itself as 64 hex digits
//	eap                 WPA2-Enterprise: peap or ttls, with identity, password, ca and
//	                    optionally anonymous_identity and phase2 (ttls: mschapv2 or pap)
//	open                yes for a network without a key
//
// Exactly one of passphrase, eap and open: yes says how the network is
// secured; a network is never taken as open because its key was left out.
//
// A file whose one line, comments aside, is "off" turns Wi-Fi off: Parse
// returns a Network that is Off, and Remove takes the configuration away.
//
// The country matters on every network: it is the radio's regulatory domain,
// the channels and power it may use. Without one, Broadcom's brcmfmac radio
// of the Pi stays at the world domain ("country 99") and may never see a
// network on channels 12 and 13.
//
// # What is written
//
// Config renders one network block for wpa_supplicant. The SSID, and the
// EAP identities and password, are written as hex, which wpa_supplicant
// reads as the raw bytes: no value can close a quote, end a line or open a
// block, whatever it holds. For WPA2-Personal the passphrase is not written
// at all: Parse derives the network's key from it (PBKDF2-HMAC-SHA1 over
// the SSID, as wpa_passphrase does) and keeps only the key. A CA file named
// by ca is read from next to wifi.txt and checked to be certificates only
// (LoadCA).
//
// Errors name the file and the line, say what is wrong and how to mend it,
// and never quote a value that may be a secret, nor a key the file does not
// take (a line "Sup3r:Secret!" is a passphrase as likely as a key): only
// another name for a key, from a fixed list, is named, with the key meant.
// A file saved as UTF-16 is one problem, not one per line; and at most
// MaxProblems are said, then how many more there were.
package wifi
