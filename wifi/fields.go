package wifi

import (
	"crypto/pbkdf2"
	"crypto/sha1"
	"encoding/hex"
	"regexp"
	"strings"
	"unicode/utf8"
)

// network checks the keys' values, each at its line, and how they go
// together; it returns the network if nothing was wrong.
func (p *parser) network(keys map[string]entry) *Network {
	before := len(p.probs)
	nw := &Network{}
	if e, ok := keys["country"]; ok {
		nw.Country = p.country(e)
	} else {
		p.add(0, "no country: add a line such as \"country: DE\", the two-letter code of the country the Pi is in; "+
			"it sets the radio's regulatory domain (the channels and power it may use): without it the radio stays at "+
			`the world domain ("country 99") and may not see the network`)
	}
	if e, ok := keys["ssid"]; ok {
		nw.SSID = p.ssid(e)
	} else {
		p.add(0, "no ssid: add a line \"ssid: NAME\" with the network's name, as phones show it")
	}
	if e, ok := keys["hidden"]; ok {
		nw.Hidden = p.yesNo("hidden", e)
	}
	open := false
	if e, ok := keys["open"]; ok {
		open = p.yesNo("open", e)
	}
	// Exactly one kind of security, said, never taken from what is missing.
	var kinds []string
	var lines []int
	if e, ok := keys["passphrase"]; ok {
		kinds, lines = append(kinds, "passphrase"), append(lines, e.line)
	}
	if e, ok := keys["eap"]; ok {
		kinds, lines = append(kinds, "eap"), append(lines, e.line)
	}
	if open {
		kinds, lines = append(kinds, "open: yes"), append(lines, keys["open"].line)
	}
	switch len(kinds) {
	case 0:
		p.add(0, "no security given: add passphrase: (WPA2-Personal, a home network's Wi-Fi password), "+
			"eap: peap or ttls with identity:, password: and ca: (WPA2-Enterprise), or open: yes (a network without a key)")
	case 1:
	default:
		p.add(lines[1], "%s and %s (line %d) are two kinds of security: a network has one; keep the one it uses", kinds[1], kinds[0], lines[0])
	}
	if e, ok := keys["passphrase"]; ok && len(kinds) == 1 {
		nw.Security = Personal
		nw.PSK = p.passphrase(e, nw.SSID)
	}
	if open && len(kinds) == 1 {
		nw.Security = Open
	}
	if e, ok := keys["eap"]; ok {
		if len(kinds) == 1 {
			nw.Security = Enterprise
		}
		p.enterprise(nw, e, keys)
	} else {
		for _, k := range eapKeys {
			if e, ok := keys[k]; ok {
				why := "is for WPA2-Enterprise networks (with eap: peap or ttls)"
				if k == "password" {
					why += "; a home network's Wi-Fi password is passphrase:"
				}
				p.add(e.line, "%s %s", k, why)
			}
		}
	}
	if len(p.probs) > before {
		return nil
	}
	return nw
}

// country checks an ISO 3166 alpha-2 code.
func (p *parser) country(e entry) string {
	c := strings.ToUpper(e.value)
	switch {
	case c == "":
		p.add(e.line, "country is empty: write the two-letter code of the country the Pi is in, such as DE, GB or US")
	case c == "UK":
		p.add(e.line, "country: UK is not an ISO 3166 code: the United Kingdom is GB")
	case c == "EU":
		p.add(e.line, "country: EU is not a country: write the code of the country the Pi is in, such as DE or FR")
	case !isCountry(c):
		p.add(e.line, "country: %s is not an ISO 3166 country code: write two letters, such as DE, GB, US or FR", showKey(e.value))
	default:
		return c
	}
	return ""
}

// ssid checks a network name: 1 to 32 bytes (text has been checked).
func (p *parser) ssid(e entry) string {
	switch n := len(e.value); {
	case n == 0:
		p.add(e.line, "ssid is empty: write the network's name, as phones show it")
	case n > 32:
		p.add(e.line, "ssid is %d bytes long; a network's name is at most 32 bytes (letters outside ASCII take 2 to 4 bytes each)", n)
	default:
		return e.value
	}
	return ""
}

// yesNo reads yes or no.
func (p *parser) yesNo(key string, e entry) bool {
	switch strings.ToLower(e.value) {
	case "yes":
		return true
	case "no":
		return false
	}
	p.add(e.line, "%s: want yes or no", key)
	return false
}

var hexKey = regexp.MustCompile(`^[0-9A-Fa-f]{64}$`)

// passphrase checks a WPA2 passphrase and returns the network's key: the
// 64 hex digits themselves, or PBKDF2-HMAC-SHA1(passphrase, SSID, 4096, 32)
// as IEEE 802.11i (and wpa_passphrase) derive it. No message quotes it.
func (p *parser) passphrase(e entry, ssid string) []byte {
	v := e.value
	if hexKey.MatchString(v) {
		k, _ := hex.DecodeString(v)
		return k
	}
	for i, r := range v {
		if r < 0x20 || r > 0x7e {
			p.add(e.line, "passphrase: character %d is not printable ASCII: a WPA2 passphrase is letters, digits, punctuation and spaces only", utf8.RuneCountInString(v[:i])+1)
			return nil
		}
	}
	switch n := len(v); {
	case n == 64:
		p.add(e.line, "passphrase: 64 characters that are not all hex digits: a passphrase has 8 to 63 characters, and 64 hex digits are the key itself")
	case n < 8 || n > 63:
		p.add(e.line, "passphrase: %d characters; a WPA2 passphrase has 8 to 63 (or is the key itself, 64 hex digits)", n)
	case ssid == "":
		// Its key depends on the SSID, reported already.
	default:
		k, err := pbkdf2.Key(sha1.New, v, []byte(ssid), 4096, 32)
		if err != nil {
			p.add(e.line, "passphrase: %v", err)
			return nil
		}
		return k
	}
	return nil
}

// caName is a CA file's name as the card's folder holds it: no directory,
// nothing a shell or wpa_supplicant would read otherwise.
var caName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// enterprise checks eap and the keys that go with it.
func (p *parser) enterprise(nw *Network, eap entry, keys map[string]entry) {
	switch strings.ToLower(eap.value) {
	case "peap", "ttls":
		nw.EAP = strings.ToLower(eap.value)
	default:
		p.add(eap.line, "eap: want peap or ttls (PEAP with MSCHAPv2, or TTLS; EAP-TLS with a client certificate is not supported)")
	}
	str := func(k string, required bool) string {
		e, ok := keys[k]
		switch {
		case !ok && required:
			p.add(eap.line, "eap: %s: missing: WPA2-Enterprise needs identity:, password: and ca:", k)
		case !ok:
		case e.value == "":
			p.add(e.line, "%s is empty", k)
		case len(e.value) > maxEAPValue:
			p.add(e.line, "%s is %d bytes long; at most %d", k, len(e.value), maxEAPValue)
		default:
			return e.value
		}
		return ""
	}
	nw.Identity = str("identity", true)
	nw.Password = str("password", true)
	nw.AnonymousIdentity = str("anonymous_identity", false)
	if e, ok := keys["ca"]; !ok {
		p.add(eap.line, "eap: ca: missing: name the file of the CA certificate that signed the network's server "+
			"(its PEM file, next to wifi.txt); without it the Pi would send its password to any access point that takes the network's name")
	} else if !caName.MatchString(e.value) {
		p.add(e.line, "ca: want the name of a file next to wifi.txt: letters, digits, '.', '_' and '-', such as wifi-ca.pem")
	} else {
		nw.CA = e.value
	}
	nw.Phase2 = "mschapv2"
	if e, ok := keys["phase2"]; ok {
		switch v := strings.ToLower(e.value); {
		case v == "mschapv2":
		case v == "pap" && nw.EAP == "ttls":
			nw.Phase2 = v
		case v == "pap":
			p.add(e.line, "phase2: pap works with eap: ttls only; PEAP uses MSCHAPv2 (leave phase2 out)")
		default:
			p.add(e.line, "phase2: want mschapv2 or pap (pap with eap: ttls only)")
		}
	}
}
