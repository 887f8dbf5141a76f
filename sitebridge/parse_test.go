package sitebridge

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       Site
	}{
		{"tls", "# the site\nbroker: tls://broker.site.lan:8883\nusername: gh-1\n", Site{Broker: "tls://broker.site.lan:8883", Username: "gh-1"}},
		{"default port", "broker: tcp://broker.site.lan\n", Site{Broker: "tcp://broker.site.lan:1883"}},
		{"windows", "\xef\xbb\xbfbroker: mqtts://b:8883\r\nusername: u # this Pi\r\nclient_id: pi-7\r\n", Site{Broker: "mqtts://b:8883", Username: "u", ClientID: "pi-7"}},
		{"capitals and quotes", "Broker: \"tls://b.site.lan:8883\"\nUSERNAME: \"pi-1\"\n", Site{Broker: "tls://b.site.lan:8883", Username: "pi-1"}},
		{"off", "# no bridge any more\noff\n", Site{Off: true}},
	} {
		got, err := Parse(strings.NewReader(c.text), "bridge.txt")
		if err != nil || got != c.want {
			t.Errorf("%s: got %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
}

// Each bad file is refused with its line, and a word of what to do.
func TestParseRefuses(t *testing.T) {
	for _, c := range []struct{ name, text, want string }{
		{"empty", "", "no broker: add a line"},
		{"no scheme", "broker: broker.site.lan:8883\n", "line 1: broker: no scheme: want tcp://HOST:PORT"},
		{"websocket", "broker: wss://b:443\n", "not WebSockets"},
		{"credentials in url", "broker: tls://u:secret@b:8883\n", "holds a user or password"},
		{"path", "broker: tcp://b:1883/x\n", "without a path"},
		{"password", "broker: tcp://b:1883\npassword: hunter2\n", "line 2: the password does not go in bridge.txt"},
		{"unknown", "broker: tcp://b:1883\nbrokr: x\n", `line 2: not a key of a bridge file`},
		{"twice", "broker: tcp://b:1883\nbroker: tcp://c:1883\n", "line 2: broker is given twice (first on line 1)"},
		{"not key value", "broker tcp://b:1883\n", "line 1: not \"key: value\""},
		{"utf-16", "\xff\xfeb\x00r\x00", "saved as UTF-16"},
		{"non-character", "broker: tcp://b:1883\nusername: a\xef\xbf\xbeb\n", "line 2: username: character 2 (U+FFFE) is one MQTT forbids"},
		{"ipv6", "broker: tcp://[::1]:1883\n", "IPv6 address"},
		{"two hosts", "broker: tcp://h:1883,h2:1883\n", "is not a host name"},
		{"quote in host", "broker: tcp://h'x:1883\n", "is not a host name"},
		{"acl characters in user", "broker: tcp://b:1883\nusername: a:b\n", "has a space, '/', '+', '#' or ':'"},
		{"off and more", "off\nbroker: tcp://b:1883\n", "says \"off\" (line 1)"},
		{"more and off", "broker: tcp://b:1883\noff\n", "line 2: \"off\" turns the bridge off and stands alone"},
		{"control", "broker: tcp://b:1883\nusername: a\x1bb\n", "line 2: username: character 2 (U+001B) is one MQTT forbids"},
		{"newline in value", "broker: tcp://b:1883\nusername: a\rremote_password x\n", "control character"},
		{"invalid utf-8", "broker: tcp://b:1883\nusername: \xff\xfe\n", "line 2: not valid UTF-8"},
		{"nul", "broker: tcp://b:1883\x00\n", "control character"},
		{"space in user", "broker: tcp://b:1883\nusername: a b\n", "has a space"},
		{"client id", "broker: tcp://b:1883\nclient_id: a/b\n", "client_id: \"a/b\": use letters"},
		{"empty value", "broker:\n", "line 1: broker: empty"},
		{"huge", "broker: tcp://b:1883\n" + strings.Repeat("#", MaxFile), "more than"},
		{"long line", "username: " + strings.Repeat("u", 5000) + "\n", "too long"},
		{"port", "broker: tcp://b:99999\n", "not a port"},
	} {
		_, err := Parse(strings.NewReader(c.text), "bridge.txt")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "bridge.txt") {
			t.Errorf("%s: got %v; want an error naming bridge.txt with %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error repeats the password: %v", c.name, err)
		}
	}
	// A line that is no setting may be a password: never repeated.
	for _, line := range []string{"Sup3r:Secret!", "site password: Hunter2-Secret", "Hunter2-Secret", "username: Hunter2\x01x"} {
		_, err := Parse(strings.NewReader("broker: tcp://b:1883\n"+line+"\n"), "bridge.txt")
		if err == nil || strings.Contains(err.Error(), "Sup3r") || strings.Contains(err.Error(), "Hunter2") {
			t.Errorf("line %q: %v; want an error that does not repeat it", line, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("broker: tls://b:8883\nusername: u\n")
	f.Add("off\n")
	f.Add("broker: tcp://b\nclient_id: x\n")
	f.Fuzz(func(t *testing.T, text string) {
		s, err := Parse(strings.NewReader(text), "bridge.txt")
		if err != nil {
			return
		}
		for _, v := range []string{s.Broker, s.Username, s.ClientID} {
			if strings.ContainsAny(v, "\r\n\x00") {
				t.Fatalf("accepted a value with a line break or NUL: %+v", s)
			}
		}
		if s.Off != (s.Broker == "") {
			t.Fatalf("accepted a file that is neither off nor names a broker: %+v", s)
		}
	})
}
