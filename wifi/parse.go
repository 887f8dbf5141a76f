package wifi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxSize is the largest wifi.txt Parse reads: a few lines are a few
// hundred bytes, and a larger file is the wrong file.
const MaxSize = 64 << 10

// MaxProblems is how many problems Parse returns at most; past them, one
// more says how many there were besides. The problems go to the card's
// status.txt, which a file of nonsense must not fill.
const MaxProblems = 10

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
// network is not kept: PSK is the key derived from it. A file whose one
// line is "off" turns Wi-Fi off: Off, and nothing else set.
type Network struct {
	Off bool // no network: the configuration is to be removed (Remove)

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

// err returns the problems, file-wide ones last, or nil: the first
// MaxProblems, and then how many more there were.
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
	errs := make([]error, 0, MaxProblems+1)
	for _, e := range p.probs[:min(len(p.probs), MaxProblems)] {
		errs = append(errs, e)
	}
	if more := len(p.probs) - MaxProblems; more > 0 {
		errs = append(errs, &LineError{File: p.file, Msg: fmt.Sprintf("and %d more problems, not shown (mend these first)", more)})
	}
	return errors.Join(errs...)
}

// Parse reads a wifi.txt's bytes; file names it in errors. It returns the
// network, or the problems it found, each a *LineError (errors.Join; at
// most MaxProblems of them, and a last one that counts the rest).
func Parse(file string, data []byte) (*Network, error) {
	p := &parser{file: file}
	if len(data) > MaxSize {
		p.add(0, "more than %d KiB: a wifi.txt is a few lines of text; is this the right file?", MaxSize>>10)
		return nil, p.err()
	}
	if isUTF16(data) {
		// Once: as lines of UTF-8, each of its lines would have a NUL.
		p.add(0, `saved as UTF-16 ("Unicode"): save it as UTF-8 (Notepad: Save as, Encoding UTF-8)`)
		return nil, p.err()
	}
	data = bytes.TrimPrefix(data, []byte("\xEF\xBB\xBF"))
	keys := map[string]entry{}
	off := 0   // the line of "off"
	other := 0 // the first line of anything else but comments
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
		if strings.EqualFold(line, "off") {
			if off > 0 {
				p.add(n, "off is given twice (lines %d and %d): keep one", off, n)
			} else {
				off = n
			}
			continue
		}
		if other == 0 {
			other = n
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
			p.add(n, "%s", unknownKey(key))
			continue
		}
		if prev, dup := keys[key]; dup {
			p.add(n, "%s is given twice (lines %d and %d): keep one", key, prev.line, n)
			continue
		}
		keys[key] = entry{n, unquote(strings.Trim(v, " \t"))}
	}
	if off > 0 {
		if other > 0 {
			p.add(off, "off turns Wi-Fi off and stands alone: remove the other lines (line %d is one), or this one", other)
		}
		if err := p.err(); err != nil {
			return nil, err
		}
		return &Network{Off: true}, nil
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

// isUTF16 reports whether data is UTF-16 text, as Notepad's "Unicode"
// saves it: a byte-order mark (FF FE, FE FF), or a NUL in every other byte
// of its first characters, and none in the others (ASCII as UTF-16).
func isUTF16(data []byte) bool {
	if bytes.HasPrefix(data, []byte{0xFF, 0xFE}) || bytes.HasPrefix(data, []byte{0xFE, 0xFF}) {
		return true
	}
	n := min(len(data), 64) &^ 1
	if n < 4 {
		return false
	}
	le, be := true, true
	for i := 0; i < n; i += 2 {
		le = le && data[i] != 0 && data[i+1] == 0
		be = be && data[i] == 0 && data[i+1] != 0
	}
	return le || be
}

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

// unknownKey says that k is not a key of wifi.txt. The key itself is
// named only if it is one of the other names for a key that meant knows,
// with the key meant: otherwise it is the user's text, and a line with a
// colon may be a passphrase ("Sup3r:Secret!").
func unknownKey(k string) string {
	if m, ok := meant[k]; ok {
		return "unknown key " + strconv.Quote(k) + ": did you mean " + m + "? (keys: " + strings.Join(knownKeys, ", ") + ")"
	}
	return "unknown key (not shown: the line may be a passphrase); the keys are " + strings.Join(knownKeys, ", ") +
		`, each followed by ':' ("ssid: MyNetwork")`
}

// meant maps other names for wifi.txt's keys, and misspellings of them,
// to the key meant.
var meant = map[string]string{
	"psk": "passphrase", "pass": "passphrase", "key": "passphrase", "wpa": "passphrase", "wpa_passphrase": "passphrase",
	"wpa-psk": "passphrase", "wpa_psk": "passphrase", "pwd": "passphrase", "pw": "passphrase", "wifi_password": "passphrase",
	"passwd": "passphrase", "pasphrase": "passphrase", "passphase": "passphrase", "passprase": "passphrase", "pass_phrase": "passphrase",
	"wpa_key": "passphrase", "wifi_key": "passphrase", "network_key": "passphrase",
	"name": "ssid", "network": "ssid", "essid": "ssid", "network_name": "ssid",
	"sid": "ssid", "ssdi": "ssid", "sssid": "ssid", "sidd": "ssid", "ssd": "ssid", "ssid_name": "ssid", "wifi_name": "ssid", "wifi_ssid": "ssid",
	"country_code": "country", "countrycode": "country", "regdomain": "country", "cc": "country",
	"user": "identity", "username": "identity", "user_name": "identity", "login": "identity",
	"ca_cert": "ca", "cacert": "ca", "ca_file": "ca", "certificate": "ca",
	"anonymous": "anonymous_identity", "outer_identity": "anonymous_identity",
	"security": "passphrase, eap or open", "key_mgmt": "passphrase, eap or open", "scan_ssid": "hidden",
}
