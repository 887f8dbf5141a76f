package wifi

import (
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseValid(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		want     Network
	}{
		{"personal", "country: DE\nssid: MyNetwork\npassphrase: correct horse battery\n",
			Network{Country: "DE", SSID: "MyNetwork", Security: Personal}},
		{"windows", "\xEF\xBB\xBF# from Notepad\r\ncountry: de\r\nSSID: Cafe Wi-Fi\r\npassphrase: 12345678\r\n",
			Network{Country: "DE", SSID: "Cafe Wi-Fi", Security: Personal}},
		{"quoted keeps spaces and quotes", "country: GB\nssid: \" spaced \"\npassphrase: \"a\"b c#d}\"\n",
			Network{Country: "GB", SSID: " spaced ", Security: Personal}},
		{"hidden, tabs, comments", "  # indented comment\n\tcountry:\tUS\t\nssid: x\nhidden: YES\n\npassphrase: abcdefgh\n",
			Network{Country: "US", SSID: "x", Hidden: true, Security: Personal}},
		{"raw key", "country: FR\nssid: n\npassphrase: " + strings.Repeat("aB", 32) + "\n",
			Network{Country: "FR", SSID: "n", Security: Personal}},
		{"utf-8 ssid of 32 bytes", "country: JP\nssid: " + strings.Repeat("日", 10) + "ab\nopen: yes\n",
			Network{Country: "JP", SSID: strings.Repeat("日", 10) + "ab", Security: Open}},
		{"open", "country: NL\nssid: guest\nopen: yes\nhidden: no\n", Network{Country: "NL", SSID: "guest", Security: Open}},
		{"open: no with a passphrase", "country: NL\nssid: home\nopen: no\npassphrase: abcdefgh\n", Network{Country: "NL", SSID: "home", Security: Personal}},
		{"peap", "country: CH\nssid: corp\neap: PEAP\nidentity: alice@example.org\npassword: s3cret\nca: corp-ca.pem\n",
			Network{Country: "CH", SSID: "corp", Security: Enterprise, EAP: "peap", Phase2: "mschapv2", Identity: "alice@example.org", Password: "s3cret", CA: "corp-ca.pem"}},
		{"ttls pap", "country: AT\nssid: eduroam\neap: ttls\nphase2: pap\nidentity: bob@uni.example\nanonymous_identity: anonymous@uni.example\npassword: p: w\nca: ca.crt\n",
			Network{Country: "AT", SSID: "eduroam", Security: Enterprise, EAP: "ttls", Phase2: "pap", Identity: "bob@uni.example",
				AnonymousIdentity: "anonymous@uni.example", Password: "p: w", CA: "ca.crt"}},
		{"no final line end", "country: DE\nssid: a\nopen: yes", Network{Country: "DE", SSID: "a", Security: Open}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, err := Parse("wifi.txt", []byte(tt.in))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got := *n
			got.PSK = nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse = %+v\nwant   %+v", got, tt.want)
			}
			if (n.Security == Personal) != (len(n.PSK) == 32) {
				t.Errorf("PSK %x for %v", n.PSK, n.Security)
			}
		})
	}
}

// TestPSK: the key is PBKDF2-HMAC-SHA1(passphrase, SSID, 4096, 32), as
// wpa_passphrase derives it: IEEE 802.11i's vectors, which hostap's
// tests/test-sha1.c checks wpa_supplicant against; 64 hex digits are the key.
func TestPSK(t *testing.T) {
	for _, tt := range []struct{ ssid, pass, want string }{
		{"IEEE", "password", "f42c6fc52df0ebef9ebb4b90b38a5f902e83fe1b135a70e23aed762e9710a12e"},
		{"ThisIsASSID", "ThisIsAPassword", "0dc0d6eb90555ed6419756b9a15ec3e3209b63df707dd508d14581f8982721af"},
		{"n", "0DC0D6EB90555ED6419756B9A15EC3E3209B63DF707DD508D14581F8982721AF", "0dc0d6eb90555ed6419756b9a15ec3e3209b63df707dd508d14581f8982721af"},
	} {
		n, err := Parse("wifi.txt", []byte("country: DE\nssid: "+tt.ssid+"\npassphrase: "+tt.pass+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(n.PSK); got != tt.want {
			t.Errorf("PSK(%q, %q) = %s, want %s", tt.pass, tt.ssid, got, tt.want)
		}
	}
}

// TestParseHostile: what is wrong is said at its line, with what to do,
// and never panics; a secret is never quoted.
func TestParseHostile(t *testing.T) {
	const base = "country: DE\nssid: home\n"
	const secret = "Sup3r-Secr3t-Passphrase"
	for _, tt := range []struct {
		name, in string
		want     []string // each in the error
	}{
		{"empty", "", []string{"wifi.txt: no country", "wifi.txt: no ssid", "no security given"}},
		{"comments only", "# nothing\n\n", []string{"no country"}},
		{"no country", "ssid: a\npassphrase: abcdefgh\n", []string{"no country", "regulatory domain", "country 99"}},
		{"country UK", "country: UK\nssid: a\nopen: yes\n", []string{"line 1: country: UK is not an ISO 3166 code: the United Kingdom is GB"}},
		{"country junk", "country: NaN\nssid: a\nopen: yes\n", []string{"line 1: country: \"NaN\" is not an ISO 3166"}},
		{"country XX", "country: XX\nssid: a\nopen: yes\n", []string{"line 1: country: \"XX\""}},
		{"country empty", "country:\nssid: a\nopen: yes\n", []string{"line 1: country is empty"}},
		{"country EU", "country: eu\nssid: a\nopen: yes\n", []string{"line 1: country: EU is not a country"}},
		{"ssid too long", "country: DE\nssid: " + strings.Repeat("x", 33) + "\nopen: yes\n", []string{"line 2: ssid is 33 bytes long"}},
		{"ssid utf-8 too long", "country: DE\nssid: " + strings.Repeat("é", 17) + "\nopen: yes\n", []string{"line 2: ssid is 34 bytes", "2 to 4 bytes"}},
		{"ssid empty", "country: DE\nssid: \"\"\nopen: yes\n", []string{"line 2: ssid is empty"}},
		{"hidden maybe", base + "hidden: maybe\nopen: yes\n", []string{"line 3: hidden: want yes or no"}},
		{"hidden number", base + "hidden: 1\nopen: yes\n", []string{"line 3: hidden: want yes or no"}},
		{"open maybe", base + "open: true\n", []string{"line 3: open: want yes or no", "no security given"}},
		{"no security", base, []string{"no security given", "open: yes"}},
		{"open no alone", base + "open: no\n", []string{"no security given"}},
		{"two kinds", base + "passphrase: " + secret + "\nopen: yes\n", []string{"line 4: open: yes and passphrase (line 3) are two kinds of security"}},
		{"three kinds", base + "passphrase: " + secret + "\neap: peap\nopen: yes\n", []string{"line 4: eap and passphrase (line 3)"}},
		{"short passphrase", base + "passphrase: 1234567\n", []string{"line 3: passphrase: 7 characters; a WPA2 passphrase has 8 to 63"}},
		{"long passphrase", base + "passphrase: " + strings.Repeat("p", 65) + "\n", []string{"line 3: passphrase: 65 characters"}},
		{"64 not hex", base + "passphrase: " + strings.Repeat("g", 64) + "\n", []string{"line 3: passphrase: 64 characters that are not all hex digits"}},
		{"non-ascii passphrase", base + "passphrase: pässwort-" + secret + "\n", []string{"line 3: passphrase: character 2 is not printable ASCII"}},
		{"control character", base + "passphrase: abc\x07defgh\n", []string{"line 3: a control character (U+0007)"}},
		{"NUL", base + "passphrase: abc\x00defgh\n", []string{"line 3: a NUL byte"}},
		{"DEL", base + "passphrase: abcdefgh\x7f\n", []string{"line 3: a control character (U+007F)"}},
		{"C1 control", base + "passphrase: abcdefgh\u0085\n", []string{"line 3: a control character (U+0085)"}},
		{"lone CR", "country: DE\rssid: injected\nopen: yes\n", []string{"line 1: a carriage return inside the line"}},
		{"invalid UTF-8", base + "passphrase: \xff\xfeabcdefgh\n", []string{"line 3: not UTF-8 text"}},
		{"latin-1 ssid", "country: DE\nssid: Caf\xe9\nopen: yes\n", []string{"line 2: not UTF-8 text"}},
		{"utf-16", "\xff\xfec\x00o\x00u\x00", []string{`wifi.txt: saved as UTF-16 ("Unicode"): save it as UTF-8`}},
		{"huge", strings.Repeat("# padding\n", MaxSize/10+1), []string{"wifi.txt: more than 64 KiB"}},
		{"unknown key", base + "psk: " + secret + "\n", []string{`line 3: unknown key "psk": did you mean passphrase?`}},
		{"unknown key long", base + strings.Repeat("k", 100) + ": v\nopen: yes\n", []string{"line 3: unknown key (not shown", "the keys are country, ssid,"}},
		{"unknown key a passphrase", base + "Sup3r:" + secret + "\nopen: yes\n", []string{"line 3: unknown key (not shown", "the keys are country, ssid,"}},
		{"duplicate", base + "ssid: other\nopen: yes\n", []string{"line 3: ssid is given twice (lines 2 and 3): keep one"}},
		{"duplicate case", base + "SSID: other\nopen: yes\n", []string{"line 3: ssid is given twice"}},
		{"no colon", base + secret + "\n", []string{"line 3: no ':' on this line"}},
		{"equals", base + "passphrase=" + secret + "\n", []string{`line 3: no ':' on this line: wifi.txt takes "key: value" lines, not key=value`}},
		{"no key", base + ": " + secret + "\n", []string{"line 3: no key before ':'"}},
		{"password without eap", base + "password: " + secret + "\n", []string{"line 3: password is for WPA2-Enterprise", "passphrase:"}},
		{"identity without eap", base + "passphrase: abcdefgh\nidentity: me\n", []string{"line 4: identity is for WPA2-Enterprise"}},
		{"eap tls", base + "eap: tls\nidentity: a\npassword: " + secret + "\nca: ca.pem\n", []string{"line 3: eap: want peap or ttls"}},
		{"eap missing all", base + "eap: peap\n", []string{"line 3: eap: identity: missing", "line 3: eap: password: missing", "line 3: eap: ca: missing"}},
		{"eap ca path", base + "eap: peap\nidentity: a\npassword: " + secret + "\nca: ../etc/shadow\n", []string{"line 6: ca: want the name of a file next to wifi.txt"}},
		{"eap ca dot file", base + "eap: peap\nidentity: a\npassword: " + secret + "\nca: .hidden\n", []string{"line 6: ca: want the name"}},
		{"eap long identity", base + "eap: peap\nidentity: " + strings.Repeat("i", 101) + "\npassword: " + secret + "\nca: c.pem\n", []string{"line 4: identity is 101 bytes long; at most 100"}},
		{"eap empty password", base + "eap: peap\nidentity: a\npassword:\nca: c.pem\n", []string{"line 5: password is empty"}},
		{"peap pap", base + "eap: peap\nphase2: pap\nidentity: a\npassword: " + secret + "\nca: c.pem\n", []string{"line 4: phase2: pap works with eap: ttls only"}},
		{"phase2 junk", base + "eap: ttls\nphase2: gtc\nidentity: a\npassword: " + secret + "\nca: c.pem\n", []string{"line 4: phase2: want mschapv2 or pap"}},
		{"injection by line", "country: DE\nssid: a\nopen: yes\n}\nnetwork={\n", []string{"line 4: no ':'", "line 5: no ':'"}},
		{"many problems in line order", "x: 1\ncountry: ZZ\nssid:\nhidden: 2\n", []string{"line 1: unknown key", "line 2: country", "line 3: ssid is empty", "line 4: hidden"}},
		{"off and more", "off\ncountry: DE\nssid: a\nopen: yes\n", []string{"line 1: off turns Wi-Fi off and stands alone"}},
		{"more and off", base + "open: yes\n  OFF\n", []string{"line 4: off turns Wi-Fi off and stands alone"}},
		{"off twice", "off\noff\n", []string{"line 2: off is given twice (lines 1 and 2)"}},
		{"off with a bad line", "off\nSup3r:" + secret + "\n", []string{"line 1: off turns Wi-Fi off and stands alone", "line 2: unknown key (not shown"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, err := Parse("wifi.txt", []byte(tt.in))
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", n)
			}
			if n != nil {
				t.Errorf("Parse returned a network with its error: %+v", n)
			}
			msg := err.Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error lacks %q:\n%s", w, msg)
				}
			}
			if strings.Contains(msg, secret) {
				t.Errorf("the error quotes the secret:\n%s", msg)
			}
			var le *LineError
			if !errors.As(err, &le) {
				t.Errorf("error %T is no *LineError", err)
			}
			// In line order, file-wide problems last.
			last := 0
			for _, l := range strings.Split(msg, "\n") {
				var n int
				if _, rest, ok := strings.Cut(l, "wifi.txt, line "); ok {
					for _, c := range rest {
						if c < '0' || c > '9' {
							break
						}
						n = n*10 + int(c-'0')
					}
				} else {
					n = 1 << 30
				}
				if n < last {
					t.Errorf("problems not in line order:\n%s", msg)
				}
				last = n
			}
		})
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "wifi.txt")
	if err := os.WriteFile(path, []byte("country: DE\nssid: a\nopen: yes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := ReadFile(path); err != nil || n.SSID != "a" {
		t.Fatalf("ReadFile = %+v, %v", n, err)
	}
	if _, err := ReadFile(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("ReadFile(a directory) = %v, want not a regular file", err)
	}
	if _, err := ReadFile(filepath.Join(dir, "none")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadFile(missing) = %v, want ErrNotExist", err)
	}
	big := filepath.Join(dir, "big.txt")
	if err := os.WriteFile(big, make([]byte, 10*MaxSize), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(big); err == nil || !strings.Contains(err.Error(), big+": more than 64 KiB") {
		t.Errorf("ReadFile(huge) = %v", err)
	}
}

func TestCountries(t *testing.T) {
	if n := len(strings.Fields(countries)); n != 249 {
		t.Errorf("%d codes, want ISO 3166-1's 249", n)
	}
	for _, c := range []string{"DE", "GB", "US", "AD", "ZW", "AX", "SS"} {
		if !isCountry(c) {
			t.Errorf("isCountry(%q) = false", c)
		}
	}
	for _, c := range []string{"UK", "EU", "XK", "D", "DEU", "de", "E ", " D", "E", "", "00", "ZZ"} {
		if isCountry(c) {
			t.Errorf("isCountry(%q) = true", c)
		}
	}
}

// TestUnknownKeyNotShown: a key the file does not take is never quoted,
// since a line with a colon may be a passphrase (Sup3r:Secret!); only a
// key of a fixed list of other names for wifi.txt's keys is named, with
// the key meant.
func TestUnknownKeyNotShown(t *testing.T) {
	for _, key := range []string{"Sup3r", "my wifi password is", "hunter2", "s3cret-Pass", "x"} {
		_, err := Parse("wifi.txt", []byte("country: DE\nssid: a\nopen: yes\n"+key+": rest\n"))
		if err == nil {
			t.Fatalf("Parse accepted the key %q", key)
		}
		msg := err.Error()
		if !strings.Contains(msg, "wifi.txt, line 4: unknown key (not shown") || strings.Contains(strings.ToLower(msg), strings.ToLower(key)+`"`) ||
			strings.Contains(strings.ToLower(msg), `"`+strings.ToLower(key)) || strings.Contains(msg, "did you mean") {
			t.Errorf("unknown key %q:\n%s", key, msg)
		}
	}
	for key, meant := range map[string]string{"psk": "passphrase", "PSK": "passphrase", "Key": "passphrase", "wpa_passphrase": "passphrase",
		"pasphrase": "passphrase", "essid": "ssid", "sid": "ssid", "ssdi": "ssid", "name": "ssid", "username": "identity", "cacert": "ca"} {
		_, err := Parse("wifi.txt", []byte("country: DE\nssid: a\nopen: yes\n"+key+": rest\n"))
		if want := `wifi.txt, line 4: unknown key "` + strings.ToLower(key) + `": did you mean ` + meant + "?"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("key %q: %v; want %q", key, err, want)
		}
	}
}

// TestUTF16: a file saved as UTF-16 (Notepad's "Unicode"), with either
// byte-order mark or none, is one problem, said once, not one per line.
func TestUTF16(t *testing.T) {
	text := "country: DE\r\nssid: a\r\nopen: yes\r\n"
	le, be := []byte{}, []byte{}
	for _, c := range []byte(text) {
		le, be = append(le, c, 0), append(be, 0, c)
	}
	for name, in := range map[string][]byte{
		"LE with BOM": append([]byte{0xFF, 0xFE}, le...), "BE with BOM": append([]byte{0xFE, 0xFF}, be...),
		"LE": le, "BE": be, "BOM alone": {0xFF, 0xFE},
	} {
		_, err := Parse("wifi.txt", in)
		if want := `wifi.txt: saved as UTF-16 ("Unicode"): save it as UTF-8 (Notepad: Save as, Encoding UTF-8)`; err == nil || err.Error() != want {
			t.Errorf("%s: %v\nwant %s", name, err, want)
		}
	}
	// One NUL is not UTF-16: it is said at its line.
	if _, err := Parse("wifi.txt", []byte("country: DE\nssid: a\x00b\nopen: yes\n")); err == nil || !strings.Contains(err.Error(), "line 2: a NUL byte") {
		t.Errorf("one NUL: %v", err)
	}
}

// TestProblemsCapped: a file with many mistakes gives the first
// MaxProblems of them and a count of the rest, not one line each: the
// message goes to the card's status.txt.
func TestProblemsCapped(t *testing.T) {
	_, err := Parse("wifi.txt", []byte(strings.Repeat("x\n", MaxSize/2)))
	if err == nil {
		t.Fatal("Parse accepted it")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != MaxProblems+1 || !strings.HasPrefix(lines[0], "wifi.txt, line 1: no ':'") ||
		!strings.HasPrefix(lines[MaxProblems-1], "wifi.txt, line 10: ") ||
		lines[MaxProblems] != "wifi.txt: and 32761 more problems, not shown (mend these first)" {
		t.Errorf("%d lines:\n%s", len(lines), strings.Join(lines[:min(len(lines), 20)], "\n"))
	}
	// Exactly MaxProblems: all shown.
	_, err = Parse("wifi.txt", []byte("country: DE\nssid: a\nopen: yes\n"+strings.Repeat("x\n", MaxProblems)))
	if err == nil || strings.Count(err.Error(), "\n") != MaxProblems-1 || strings.Contains(err.Error(), "more problems") {
		t.Errorf("%d problems: %v", MaxProblems, err)
	}
}

// TestOff: a file whose one line is off (comments aside) turns Wi-Fi off:
// a network that is Off and nothing else, which has no configuration.
func TestOff(t *testing.T) {
	for _, in := range []string{"off", "off\n", "\xEF\xBB\xBF# no Wi-Fi here\r\n  Off \r\n\r\n", "OFF\n# ssid: old\n"} {
		n, err := Parse("wifi.txt", []byte(in))
		if err != nil {
			t.Fatalf("Parse(%q): %v", in, err)
		}
		if !reflect.DeepEqual(*n, Network{Off: true}) || n.Summary() != "Wi-Fi off" {
			t.Errorf("Parse(%q) = %+v (%s)", in, n, n.Summary())
		}
		if cfg, err := n.Config(testCA); err == nil {
			t.Errorf("Config of Wi-Fi off:\n%s", cfg)
		}
	}
	for _, in := range []string{"off: yes\n", "wifi: off\n", "of\n", "off off\n"} {
		if n, err := Parse("wifi.txt", []byte(in)); err == nil {
			t.Errorf("Parse(%q) = %+v", in, n)
		}
	}
}
