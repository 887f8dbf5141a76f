package sitebridge

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// otherKey is a private key of another certificate.
func otherKey(t *testing.T) string {
	b, err := os.ReadFile(testenv.MakeCerts(t).OtherClientKey)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// creds is a directory with the named files of a real PKI: the CA, a
// client certificate and its key.
func creds(t *testing.T, files ...string) string {
	certs := testenv.MakeCerts(t)
	from := map[string]string{"ca.crt": certs.CA, "client.crt": certs.Client, "client.key": certs.ClientKey}
	dir := t.TempDir()
	for _, f := range files {
		b, err := os.ReadFile(from[f])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// with is dir with file name holding text instead.
func with(t *testing.T, dir, name, text string) string {
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestConf(t *testing.T) {
	dir := creds(t, "ca.crt", "client.crt", "client.key")
	o := Options{Topics: wire.Topics{GatewayID: "gh-1"}, Inputs: true, Credentials: dir, Password: "a b#c", HostID: "0a1b2c3d"}
	got, err := Conf(Site{Broker: "tls://site:8883", Username: "u"}, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# bridge: this Pi's Mosquitto bridges fencegate/gh-1/ to the site's broker tls://site:8883 (TLS with the site's CA and this Pi's client certificate, user u with site/password)\n",
		"\nconnection fencegate-gh-1\naddress site:8883\nremote_clientid fencegate-bridge-gh-1-0a1b2c3d\nremote_username u\nremote_password a b#c\n",
		"bridge_cafile " + filepath.Join(dir, "ca.crt") + "\nbridge_certfile " + filepath.Join(dir, "client.crt") + "\nbridge_keyfile " + filepath.Join(dir, "client.key") + "\n",
		"\ncleansession true\nlocal_cleansession true\n",
		"\nkeepalive_interval 5\n",
		"\nnotification_topic fencegate/gh-1/bridge\n",
		"\ntopic fencegate/gh-1/+/set in 1\ntopic fencegate/gh-1/instance both 1\ntopic fencegate/gh-1/reply/# out 1\n",
		"\ntopic fencegate/gh-1/+/input out 1\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the bridge lacks %q:\n%s", want, got)
		}
	}
	// Only the claims go both ways: a state carried in would come back
	// from the site's retained copy, older than the Pi's.
	if n := len(regexp.MustCompile(`(?m) both 1$`).FindAllString(got, -1)); n != 1 {
		t.Errorf("%d topics both ways, want 1 (the instance claims):\n%s", n, got)
	}
}

func TestConfRefuses(t *testing.T) {
	none, ca, cert := creds(t), creds(t, "ca.crt"), creds(t, "ca.crt", "client.crt")
	gw := wire.Topics{GatewayID: "gh-1"}
	for _, c := range []struct {
		name string
		s    Site
		o    Options
		want string
	}{
		{"tls without ca", Site{Broker: "tls://s:8883"}, Options{Topics: gw, Credentials: none}, "put the CA that signed the site broker's certificate in the card's site/ca.crt"},
		{"cert over tcp", Site{Broker: "tcp://s:1883"}, Options{Topics: gw, Credentials: cert}, "not TLS, but a client certificate"},
		{"cert without key", Site{Broker: "tls://s:8883"}, Options{Topics: gw, Credentials: cert}, "only client.crt is there"},
		{"password without user", Site{Broker: "tls://s:8883"}, Options{Topics: gw, Credentials: ca, Password: "p"}, "names no username"},
		{"password with a line break", Site{Broker: "tls://s:8883", Username: "u"}, Options{Topics: gw, Credentials: ca, Password: "p\nconnection evil"}, "one MQTT forbids"},
		{"password not UTF-8", Site{Broker: "tls://s:8883", Username: "u"}, Options{Topics: gw, Credentials: ca, Password: "p\xffw"}, "not valid UTF-8"},
		{"password with U+FFFF", Site{Broker: "tls://s:8883", Username: "u"}, Options{Topics: gw, Credentials: ca, Password: "pw\uffff"}, "one MQTT forbids"},
		{"ca not a certificate", Site{Broker: "tls://s:8883"}, Options{Topics: gw, Credentials: with(t, creds(t), "ca.crt", "garbage\n")}, "holds no PEM certificate"},
		{"ca with a key", Site{Broker: "tls://s:8883"}, Options{Topics: gw, Credentials: with(t, creds(t), "ca.crt", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")}, "holds a private key"},
		{"key of another certificate", Site{Broker: "tls://s:8883"}, Options{Topics: gw, Credentials: with(t, creds(t, "ca.crt", "client.crt"), "client.key", otherKey(t))}, "are not a certificate and its key"},
		{"password with a space at its end", Site{Broker: "tls://s:8883", Username: "u"}, Options{Topics: gw, Credentials: ca, Password: "p "}, "begins or ends with a space"},
		{"id with a space", Site{Broker: "tcp://s:1883"}, Options{Topics: wire.Topics{GatewayID: "green house"}, Credentials: none}, "cannot carry"},
		{"off", Site{Off: true}, Options{Topics: gw}, "says off"},
	} {
		if _, err := Conf(c.s, c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}
