package wifi

import (
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

var errLine = regexp.MustCompile(`^wifi\.txt, line (\d+): .`)

// FuzzParse checks that no input panics; that Parse returns a network or
// an error; that every problem names the file and a line the input has (or
// the file alone), and that there are at most MaxProblems and the count of
// the rest; that Wi-Fi off is off and nothing else, and has no
// configuration; and that any other accepted network renders a
// configuration whose network block is well-formed and says what the
// network is (checkRendered).
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"country: DE\nssid: home\npassphrase: abcdefgh\n",
		"\xEF\xBB\xBFcountry: de\r\nssid: \"a}#\\\"\"\r\nhidden: yes\r\nopen: yes\r\n",
		"country: GB\nssid: corp\neap: ttls\nphase2: pap\nidentity: a\"}\nanonymous_identity: #\npassword: }\nca: ca.pem\n",
		"country: FR\nssid: n\npassphrase: " + strings.Repeat("0", 64) + "\n",
		"country: UK\nssid:\nhidden: maybe\npsk: x\n", "ssid: a\nssid: b\n", "a\x00b\n", "\xff\n", "country: DE\rssid: x\n",
		"", "#", ":", "country: DE\nssid: " + strings.Repeat("x", 33) + "\nopen: yes\n",
		"off\n", "# none\r\nOFF\r\n", "off\nssid: a\n", "\xff\xfeo\x00f\x00f\x00", "o\x00f\x00f\x00\n\x00", strings.Repeat("x\n", 20),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		n, err := Parse("wifi.txt", []byte(in))
		if (n == nil) == (err == nil) {
			t.Fatalf("Parse(%q) = %v, %v; want a network or an error", in, n, err)
		}
		if err != nil {
			msg := err.Error()
			if msg == "" || !utf8.ValidString(msg) {
				t.Fatalf("Parse(%q): error %q, want an explanation in UTF-8", in, msg)
			}
			lines := strings.Count(in, "\n") + 1
			if n := strings.Count(msg, "\n") + 1; n > MaxProblems+1 {
				t.Fatalf("Parse(%q): %d problems, want at most %d and a count of the rest", in, n, MaxProblems)
			}
			for _, e := range strings.Split(msg, "\n") {
				if m := errLine.FindStringSubmatch(e); m != nil {
					if l, _ := strconv.Atoi(m[1]); l < 1 || l > lines {
						t.Fatalf("Parse(%q): %q names line %d of %d", in, e, l, lines)
					}
				} else if !strings.HasPrefix(e, "wifi.txt: ") {
					t.Fatalf("Parse(%q): %q does not name the file", in, e)
				}
			}
			return
		}
		if n.Off {
			if !reflect.DeepEqual(*n, Network{Off: true}) {
				t.Fatalf("Parse(%q) = %+v: Wi-Fi off with more", in, n)
			}
			if _, err := n.Config(testCA); err == nil {
				t.Fatalf("Parse(%q): Wi-Fi off has a configuration", in)
			}
			return
		}
		cfg, err := n.Config(testCA)
		if err != nil {
			t.Fatalf("Parse(%q) accepted a network Config refuses: %v", in, err)
		}
		checkRendered(t, n, cfg)
	})
}
