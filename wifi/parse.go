package wifi

import (
	"bytes"
	"crypto/pbkdf2"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxSize is the largest wifi.txt Parse reads: a few lines are a few
// hundred bytes, and a larger file is the wrong file.
const MaxSize = 64 << 10

// Security is how a network is secured.
type Security int

// The kinds of security wifi.txt can name.
const (
	Open       Security = iota + 1 // no key (open: yes)
	Personal                       // WPA2-Personal: a passphrase or its key (passphrase:)
	Enterprise                     // WPA2-Enterprise: PEAP or TTLS with a user's password (eap:)
)

func (s Security) String() string {
	switch s {
	case Open:
		return "open (no key)"
	case Personal:
		return "WPA2-Personal"
	case Enterprise:
		return "WPA2-Enterprise"
	}
	return "Security(" + strconv.Itoa(int(s)) + ")"
}

// Network is what a valid wifi.txt says. The passphrase of a WPA2-Personal
// network is not kept: PSK is the key derived from it.
type Network struct {
	Country  string // ISO 3166 alpha-2, upper case
	SSID     string // 1 to 32 bytes of UTF-8
	Hidden   bool
	Security Security
	PSK      []byte // Personal: the 32-byte key

	// Enterprise only.
	EAP               string // "peap" or "ttls"
	Phase2            string // "mschapv2" or "pap" (ttls only)
	Identity          string
	AnonymousIdentity string // may be empty
	Password          string
	CA                string // a file name, next to wifi.txt
}

// A LineError is one thing wrong with a wifi.txt, at a line (0: the file
// as a whole).
type LineError struct {
	File string
	Line int
	Msg  string
}

func (e *LineError) Error() string {
	if e.Line == 0 {
		return e.File + ": " + e.Msg
	}
	return fmt.Sprintf("%s, line %d: %s", e.File, e.Line, e.Msg)
}

// Limits of the EAP strings: a user name or password, not a document, and
// short enough that their hex keeps every line of the configuration well
// under the 256 bytes some wpa_supplicant builds read a line into.
const maxEAPValue = 100

// ReadFile reads and parses the wifi.txt at path; see Parse.
func ReadFile(path string) (*Network, error) {
	f, err := os.Open(path) // its error names the path
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && !st.Mode().IsRegular() {
		return nil, &LineError{File: path, Msg: "not a regular file"}
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// entry is one key's value and its line.
type entry struct {
	line  int
	value string
}

// parser collects the problems of one file, each at its line.
type parser struct {
	file  string
	probs []*LineError
}

func (p *parser) add(line int, format string, a ...any) {
	p.probs = append(p.probs, &LineError{File: p.file, Line: line, Msg: fmt.Sprintf(format, a...)})
}

// err returns the problems, file-wide ones last, or nil.
func (p *parser) err() error {
	if len(p.probs) == 0 {
		return nil
	}
	slices.SortStableFunc(p.probs, func(a, b *LineError) int {
		switch {
		case a.Line == b.Line:
			return 0
		case a.Line == 0:
			return 1
		case b.Line == 0:
			return -1
		}
		return a.Line - b.Line
	})
	errs := make([]error, len(p.probs))
	for i, e := range p.probs {
		errs[i] = e
	}
	return errors.Join(errs...)
}

// Parse reads a wifi.txt's bytes; file names it in errors. It returns the
// network, or every problem it found, each a *LineError (errors.Join).
func Parse(file string, data []byte) (*Network, error) {
	p := &parser{file: file}
	if len(data) > MaxSize {
		p.add(0, "more than %d KiB: a wifi.txt is a few lines of text; is this the right file?", MaxSize>>10)
		return nil, p.err()
	}
	data = bytes.TrimPrefix(data, []byte("\xEF\xBB\xBF"))
	keys := map[string]entry{}
	for i, raw := range bytes.Split(data, []byte("\n")) {
		n := i + 1
		raw = bytes.TrimSuffix(raw, []byte("\r"))
		if !p.text(n, raw) {
			continue
		}
		line := strings.Trim(string(raw), " \t")
		if line == "" || line[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			hint := `write "key: value", for example "ssid: MyNetwork"`
			if strings.Contains(line, "=") {
				hint = `wifi.txt takes "key: value" lines, not key=value`
			}
			// The line is not shown: it may be a passphrase on a line of its own.
			p.add(n, "no ':' on this line: %s (a comment line starts with #)", hint)
			continue
		}
		key := strings.ToLower(strings.Trim(k, " \t"))
		if key == "" {
			p.add(n, `no key before ':': write "key: value"`)
			continue
		}
		if !slices.Contains(knownKeys, key) {
			p.add(n, "unknown key %s: %s", showKey(key), suggest(key))
			continue
		}
		if prev, dup := keys[key]; dup {
			p.add(n, "%s is given twice (lines %d and %d): keep one", key, prev.line, n)
			continue
		}
		keys[key] = entry{n, unquote(strings.Trim(v, " \t"))}
	}
	nw := p.network(keys)
	if err := p.err(); err != nil {
		return nil, err
	}
	return nw, nil
}

// knownKeys are the keys of wifi.txt.
var knownKeys = []string{"country", "ssid", "hidden", "passphrase", "open", "eap", "identity", "anonymous_identity", "password", "ca", "phase2"}

// eapKeys are the keys that only WPA2-Enterprise takes.
var eapKeys = []string{"identity", "anonymous_identity", "password", "ca", "phase2"}

// text reports whether a line is text the file may hold: UTF-8 without
// control characters (a tab is white space); it adds the problem if not.
func (p *parser) text(n int, raw []byte) bool {
	if !utf8.Valid(raw) {
		p.add(n, "not UTF-8 text: save the file as UTF-8 (Notepad: Save as, Encoding UTF-8)")
		return false
	}
	for _, r := range string(raw) {
		switch {
		case r == 0:
			p.add(n, "a NUL byte: this is not a text file; write wifi.txt in a text editor")
			return false
		case r == '\r':
			p.add(n, "a carriage return inside the line: save the file again with ordinary line ends")
			return false
		case r != '\t' && unicode.IsControl(r):
			p.add(n, "a control character (%U): remove it (values are text; a line ends the value)", r)
			return false
		}
	}
	return true
}

// unquote removes one pair of double quotes around a value.
func unquote(v string) string {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return v[1 : len(v)-1]
	}
	return v
}

// showKey quotes a key from the file for a message, cut short.
func showKey(k string) string {
	if len(k) > 40 {
		k = k[:40]
		for !utf8.ValidString(k) {
			k = k[:len(k)-1]
		}
		return strconv.Quote(k) + "…"
	}
	return strconv.Quote(k)
}

// suggest names the key that was probably meant.
func suggest(k string) string {
	meant := map[string]string{
		"psk": "passphrase", "pass": "passphrase", "key": "passphrase", "wpa": "passphrase", "wpa_passphrase": "passphrase",
		"wpa-psk": "passphrase", "wpa_psk": "passphrase", "pwd": "passphrase", "pw": "passphrase", "wifi_password": "passphrase",
		"name": "ssid", "network": "ssid", "essid": "ssid", "network_name": "ssid",
		"country_code": "country", "countrycode": "country", "regdomain": "country", "cc": "country",
		"user": "identity", "username": "identity", "user_name": "identity", "login": "identity",
		"ca_cert": "ca", "cacert": "ca", "ca_file": "ca", "certificate": "ca",
		"anonymous": "anonymous_identity", "outer_identity": "anonymous_identity",
		"security": "passphrase, eap or open", "key_mgmt": "passphrase, eap or open", "scan_ssid": "hidden",
	}
	if m, ok := meant[k]; ok {
		return "did you mean " + m + "? (keys: " + strings.Join(knownKeys, ", ") + ")"
	}
	return "the keys are " + strings.Join(knownKeys, ", ")
}

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
