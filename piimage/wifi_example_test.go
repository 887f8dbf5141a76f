package piimage

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/wifi"
)

// TestWiFiExample: the card's wifi.txt.example, renamed and filled in as
// its comments say, is a valid wifi.txt: a home network as it stands, and
// each commented alternative in place of passphrase:.
func TestWiFiExample(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("card", "wifi.txt.example"))
	if err != nil {
		t.Fatal(err)
	}
	example := string(b)
	filled := strings.NewReplacer("ssid: MyNetwork", "ssid: Greenhouse Wi-Fi", "passphrase: change-me", "passphrase: a long Wi-Fi password").Replace(example)
	if filled == example || strings.Contains(filled, "MyNetwork") {
		t.Fatal("the example has no ssid: MyNetwork and passphrase: change-me to fill in")
	}
	n, err := wifi.Parse("wifi.txt", []byte(filled))
	if err != nil {
		t.Fatalf("the example, filled in: %v", err)
	}
	if n.Country == "" || n.SSID != "Greenhouse Wi-Fi" || n.Security != wifi.Personal || n.Hidden {
		t.Errorf("the example, filled in: %+v", n)
	}
	// Each alternative: its commented lines taken in, passphrase: out.
	uncomment := func(keys ...string) string {
		s := strings.Replace(filled, "\npassphrase: a long Wi-Fi password\n", "\n", 1)
		for _, k := range keys {
			re := regexp.MustCompile(`(?m)^# (` + k + `: )`)
			if !re.MatchString(s) {
				t.Fatalf("the example has no commented %s: line", k)
			}
			s = re.ReplaceAllString(s, "$1")
		}
		return s
	}
	for _, alt := range []struct {
		keys []string
		want wifi.Security
	}{
		{[]string{"open", "hidden"}, wifi.Open},
		{[]string{"eap", "identity", "password", "ca", "anonymous_identity"}, wifi.Enterprise},
	} {
		n, err := wifi.Parse("wifi.txt", []byte(uncomment(alt.keys...)))
		if err != nil {
			t.Errorf("the example with %v: %v", alt.keys, err)
			continue
		}
		if n.Security != alt.want {
			t.Errorf("the example with %v: %v, want %v", alt.keys, n.Security, alt.want)
		}
	}
	// How to turn Wi-Fi off, said as wifi.txt takes it.
	if m := regexp.MustCompile(`(?m)^# To turn Wi-Fi off: a wifi.txt whose one line is: (\S+)\r?$`).FindStringSubmatch(example); m == nil {
		t.Error("the example does not say how to turn Wi-Fi off")
	} else if n, err := wifi.Parse("wifi.txt", []byte(m[1]+"\n")); err != nil || !n.Off {
		t.Errorf("the example's way to turn Wi-Fi off, %q: %+v, %v", m[1], n, err)
	}
	// Commented, as it ships, so that a renamed but unedited file is not
	// taken for an open network: it has a passphrase.
	if n, err := wifi.Parse("wifi.txt", b); err != nil || n.Security != wifi.Personal {
		t.Errorf("the example as it ships: %v, %v", n, err)
	}
}
