package wifi

import (
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Header is the first line of every configuration Config writes; the
// second is "# ssid: " and the SSID quoted as Go quotes it (one line,
// whatever it holds), which the image's fencegate-netstatus reads.
const Header = "# Written by gateway wifi from a wifi.txt (docs/site.md); a new wifi.txt on the card replaces it."

// SSIDComment starts the comment line that names the network.
const SSIDComment = "# ssid: "

// safePath is a path wpa_supplicant may read between double quotes.
var safePath = regexp.MustCompile(`^/[A-Za-z0-9/._-]+$`)

// Config renders wpa_supplicant's configuration for the network: its
// control socket in /run/wpa_supplicant (wpa_cli's default), no writing
// back (update_config=0: the card's file is the one source), the country,
// and one network block. caPath is where the CA file (LoadCA) is on the
// Pi; only a WPA2-Enterprise network needs it.
func (n *Network) Config(caPath string) ([]byte, error) {
	if n.Off {
		return nil, fmt.Errorf("wifi: Wi-Fi off has no configuration: remove it (Remove)")
	}
	if n.Security == Enterprise && !safePath.MatchString(caPath) {
		return nil, fmt.Errorf("wifi: the CA file's path %q: want an absolute path of letters, digits, '/', '.', '_' and '-'", caPath)
	}
	if !isCountry(n.Country) || len(n.SSID) == 0 || len(n.SSID) > 32 {
		return nil, fmt.Errorf("wifi: not a network Parse returned (country %q, SSID of %d bytes)", n.Country, len(n.SSID))
	}
	var b strings.Builder
	line := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	line("%s", Header)
	line("%s%s", SSIDComment, strconv.Quote(n.SSID))
	line("ctrl_interface=/run/wpa_supplicant")
	line("update_config=0")
	line("country=%s", n.Country)
	line("")
	line("network={")
	// Hex, not a quoted string: an SSID may hold quotes, #, braces.
	line("\tssid=%s", hex.EncodeToString([]byte(n.SSID)))
	if n.Hidden {
		// Probe for it by name: a hidden network answers only those.
		line("\tscan_ssid=1")
	}
	switch n.Security {
	case Open:
		line("\tkey_mgmt=NONE")
	case Personal:
		if len(n.PSK) != 32 {
			return nil, fmt.Errorf("wifi: a WPA2-Personal network without its 32-byte key")
		}
		// WPA2 (RSN) only: no fall-back to WPA's TKIP.
		line("\tproto=RSN")
		line("\tkey_mgmt=WPA-PSK")
		line("\tpsk=%s", hex.EncodeToString(n.PSK))
	case Enterprise:
		line("\tproto=RSN")
		line("\tkey_mgmt=WPA-EAP")
		line("\teap=%s", strings.ToUpper(n.EAP))
		// wpa_supplicant reads an unquoted string value as hex.
		line("\tidentity=%s", hex.EncodeToString([]byte(n.Identity)))
		if n.AnonymousIdentity != "" {
			line("\tanonymous_identity=%s", hex.EncodeToString([]byte(n.AnonymousIdentity)))
		}
		line("\tpassword=%s", hex.EncodeToString([]byte(n.Password)))
		line("\tca_cert=%q", caPath)
		line("\tphase2=%q", "auth="+strings.ToUpper(n.Phase2))
	default:
		return nil, fmt.Errorf("wifi: no security")
	}
	line("}")
	return []byte(b.String()), nil
}

// Summary says what the network is, in one line, without its key or
// password: "MyNetwork", country DE, WPA2-Personal; or Wi-Fi off.
func (n *Network) Summary() string {
	if n.Off {
		return "Wi-Fi off"
	}
	s := fmt.Sprintf("%s, country %s, %s", strconv.Quote(n.SSID), n.Country, n.Security)
	if n.Security == Enterprise {
		s += fmt.Sprintf(" (%s, %s)", strings.ToUpper(n.EAP), strings.ToUpper(n.Phase2))
	}
	if n.Hidden {
		s += ", hidden"
	}
	return s
}
