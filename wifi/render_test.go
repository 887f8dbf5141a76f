package wifi

import (
	"encoding/hex"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const testCA = "/etc/wpa_supplicant/wpa_supplicant-wlan0-ca.pem"

func TestConfig(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"personal", "country: DE\nssid: IEEE\npassphrase: password\n", `# Written by gateway wifi from a wifi.txt (docs/site.md); a new wifi.txt on the card replaces it.
# ssid: "IEEE"
ctrl_interface=/run/wpa_supplicant
update_config=0
country=DE

network={
	ssid=49454545
	proto=RSN
	key_mgmt=WPA-PSK
	psk=f42c6fc52df0ebef9ebb4b90b38a5f902e83fe1b135a70e23aed762e9710a12e
}
`},
		{"open hidden", "country: us\nssid: guest\nhidden: yes\nopen: yes\n", `# Written by gateway wifi from a wifi.txt (docs/site.md); a new wifi.txt on the card replaces it.
# ssid: "guest"
ctrl_interface=/run/wpa_supplicant
update_config=0
country=US

network={
	ssid=6775657374
	scan_ssid=1
	key_mgmt=NONE
}
`},
		{"peap", "country: CH\nssid: corp\neap: peap\nidentity: al\nanonymous_identity: x\npassword: pw\nca: ca.pem\n", `# Written by gateway wifi from a wifi.txt (docs/site.md); a new wifi.txt on the card replaces it.
# ssid: "corp"
ctrl_interface=/run/wpa_supplicant
update_config=0
country=CH

network={
	ssid=636f7270
	proto=RSN
	key_mgmt=WPA-EAP
	eap=PEAP
	identity=616c
	anonymous_identity=78
	password=7077
	ca_cert="/etc/wpa_supplicant/wpa_supplicant-wlan0-ca.pem"
	phase2="auth=MSCHAPV2"
}
`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, err := Parse("wifi.txt", []byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			got, err := n.Config(testCA)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("Config:\n%s\nwant:\n%s", got, tt.want)
			}
			checkRendered(t, n, got)
		})
	}
}

// TestConfigNoInjection: a newline, a quote, a closing brace or a # in any
// value written to the configuration changes nothing of its structure, and
// the passphrase is nowhere in it.
func TestConfigNoInjection(t *testing.T) {
	hostile := []string{`a"b`, `}`, "x}\nnetwork={", `#x`, `"`, `a # b`, `"quoted"x`, `\"`, `ssid="evil"`, "}\"#\\"}
	field := func(v string) string { return strings.ReplaceAll(v, "\n", "") } // a line end ends the value: it cannot be in one
	for _, h := range hostile {
		v := field(h)
		files := []string{
			"country: DE\nssid: " + v + "\nopen: yes\n",
			"country: DE\nssid: n\npassphrase: " + v + "padding!\n",
			"country: DE\nssid: n\neap: ttls\nidentity: " + v + "\npassword: " + v + "\nanonymous_identity: " + v + "\nca: c.pem\n",
		}
		for _, f := range files {
			n, err := Parse("wifi.txt", []byte(f))
			if err != nil {
				t.Fatalf("Parse(%q): %v", f, err)
			}
			cfg, err := n.Config(testCA)
			if err != nil {
				t.Fatal(err)
			}
			checkRendered(t, n, cfg)
			if strings.Contains(f, "passphrase") && strings.Contains(string(cfg), v+"padding!") {
				t.Errorf("the passphrase is in the configuration:\n%s", cfg)
			}
		}
	}
	// A line end does not continue a value: what follows is a line of its own.
	if _, err := Parse("wifi.txt", []byte("country: DE\nssid: a\nopen: yes\n}\nnetwork={\n\tssid=\"evil\"\n")); err == nil {
		t.Error("a file with a network block of its own was accepted")
	}
	// The path of the CA file is written in quotes: one wpa_supplicant
	// could misread is refused.
	n, err := Parse("wifi.txt", []byte("country: DE\nssid: n\neap: peap\nidentity: a\npassword: b\nca: c.pem\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"", "relative/ca.pem", `/etc/"x`, "/etc/x\n}", "/etc/a b", "/etc/#x"} {
		if _, err := n.Config(p); err == nil {
			t.Errorf("Config(CA path %q) accepted", p)
		}
	}
}

func TestSummary(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"country: DE\nssid: home\npassphrase: abcdefgh\n", `"home", country DE, WPA2-Personal`},
		{"country: DE\nssid: \"a\\\"b\"\nhidden: yes\nopen: yes\n", `"a\\\"b", country DE, open (no key), hidden`},
		{"country: DE\nssid: c\neap: ttls\nphase2: pap\nidentity: me\npassword: pw\nca: c.pem\n", `"c", country DE, WPA2-Enterprise (TTLS, PAP)`},
	} {
		n, err := Parse("wifi.txt", []byte(tt.in))
		if err != nil {
			t.Fatal(err)
		}
		if got := n.Summary(); got != tt.want {
			t.Errorf("Summary = %s, want %s", got, tt.want)
		}
		if strings.Contains(n.Summary(), "abcdefgh") || strings.Contains(n.Summary(), "pw") {
			t.Errorf("Summary %s shows a secret", n.Summary())
		}
	}
}

// The lines a rendered configuration may have.
var (
	globalLine  = regexp.MustCompile(`^(ctrl_interface=/run/wpa_supplicant|update_config=0|country=[A-Z]{2})$`)
	networkLine = regexp.MustCompile(`^\t(ssid|psk|identity|anonymous_identity|password)=([0-9a-f]+)$|^\t(scan_ssid)=1$|^\t(proto)=RSN$|` +
		`^\t(key_mgmt)=(NONE|WPA-PSK|WPA-EAP)$|^\t(eap)=(PEAP|TTLS)$|^\t(ca_cert)="(/[A-Za-z0-9/._-]+)"$|^\t(phase2)="auth=(MSCHAPV2|PAP)"$`)
)

// checkRendered checks a configuration's shape line by line: comments that
// are the two header lines, the global settings, and one network block
// whose every line is a known key with a hex, fixed or safely quoted
// value; and that the block says what n says.
func checkRendered(t *testing.T, n *Network, cfg []byte) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(string(cfg), "\n"), "\n")
	if len(lines) < 8 || lines[0] != Header || lines[1] != SSIDComment+strconv.Quote(n.SSID) || lines[5] != "" || lines[6] != "network={" || lines[len(lines)-1] != "}" {
		t.Fatalf("configuration is not header, settings, one network block:\n%s", cfg)
	}
	if q, err := strconv.Unquote(strings.TrimPrefix(lines[1], SSIDComment)); err != nil || q != n.SSID {
		t.Fatalf("the SSID comment %q does not read back (%v)", lines[1], err)
	}
	for _, l := range lines[2:5] {
		if !globalLine.MatchString(l) {
			t.Fatalf("global line %q:\n%s", l, cfg)
		}
	}
	seen := map[string]string{}
	for _, l := range lines[7 : len(lines)-1] {
		m := networkLine.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("network block line %q is not one the renderer writes:\n%s", l, cfg)
		}
		var k, v string
		for i := 1; i < len(m); i += 2 {
			if m[i] != "" {
				k, v = m[i], m[i+1]
			}
		}
		if _, dup := seen[k]; dup {
			t.Fatalf("%s twice:\n%s", k, cfg)
		}
		seen[k] = v
	}
	unhex := func(k string) string {
		b, err := hex.DecodeString(seen[k])
		if err != nil {
			t.Fatalf("%s=%s: %v", k, seen[k], err)
		}
		return string(b)
	}
	if unhex("ssid") != n.SSID {
		t.Fatalf("ssid reads back as %q, want %q", unhex("ssid"), n.SSID)
	}
	if _, ok := seen["scan_ssid"]; ok != n.Hidden {
		t.Fatalf("scan_ssid %v for hidden %v", ok, n.Hidden)
	}
	switch n.Security {
	case Open:
		if seen["key_mgmt"] != "NONE" {
			t.Fatalf("open network: %v", seen)
		}
	case Personal:
		if seen["key_mgmt"] != "WPA-PSK" || unhex("psk") != string(n.PSK) {
			t.Fatalf("WPA2-Personal: %v", seen)
		}
	case Enterprise:
		if seen["key_mgmt"] != "WPA-EAP" || unhex("identity") != n.Identity || unhex("password") != n.Password ||
			unhex("anonymous_identity") != n.AnonymousIdentity || seen["ca_cert"] != testCA {
			t.Fatalf("WPA2-Enterprise: %v", seen)
		}
	default:
		t.Fatalf("security %v", n.Security)
	}
	// Each key only for the security that uses it.
	for k, only := range map[string]Security{"psk": Personal, "identity": Enterprise, "anonymous_identity": Enterprise,
		"password": Enterprise, "ca_cert": Enterprise, "eap": Enterprise, "phase2": Enterprise} {
		if _, ok := seen[k]; ok && n.Security != only {
			t.Fatalf("%s in a %v network:\n%s", k, n.Security, cfg)
		}
	}
}
