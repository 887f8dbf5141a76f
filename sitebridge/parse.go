package sitebridge

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/fencegate/fencegate/mqttsec"
	"github.com/fencegate/fencegate/wire"
)

// MaxFile is the largest bridge file read: a few lines, so anything larger
// is not one.
const MaxFile = 16 << 10

// Site is a bridge file: how this Pi's Mosquitto reaches the site's broker.
type Site struct {
	// Off says the file turns the bridge off (its one line is "off").
	Off bool
	// Broker is the site broker's URL (tcp://, mqtt://, or a TLS scheme).
	Broker string
	// Username is this Pi's user on the site's broker; "" for none
	// (a broker that takes the client certificate alone).
	Username string
	// ClientID is the bridge's client id on the site's broker; "" lets
	// Conf make one from the gateway id and the host id.
	ClientID string
}

// Parse reads a bridge file: "key: value" lines (broker, username,
// client_id), # comments, or the single line "off". name is the file's
// name for errors, which name its line.
func Parse(r io.Reader, name string) (Site, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFile+1))
	if err != nil {
		return Site{}, fmt.Errorf("%s: %w", name, err)
	}
	if len(data) > MaxFile {
		return Site{}, fmt.Errorf("%s: more than %d bytes: a bridge file is a few lines (broker, username)", name, MaxFile)
	}
	if bytes.HasPrefix(data, []byte{0xff, 0xfe}) || bytes.HasPrefix(data, []byte{0xfe, 0xff}) {
		return Site{}, fmt.Errorf("%s: saved as UTF-16 (Notepad's \"Unicode\"): save it as UTF-8", name)
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var s Site
	seen := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), MaxFile+1)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSuffix(sc.Text(), "\r")
		at := fmt.Sprintf("%s line %d", name, n)
		if !utf8.ValidString(line) {
			return Site{}, fmt.Errorf("%s: not valid UTF-8: save the file as UTF-8 (or plain ASCII)", at)
		}
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if line == "off" {
			if len(seen) > 0 {
				return Site{}, fmt.Errorf("%s: \"off\" turns the bridge off and stands alone; remove the other lines, or this one", at)
			}
			s.Off = true
			seen["off"] = n
			continue
		}
		// The line itself is never repeated in an error: a line that is
		// not what it should be may be a password.
		key, value, ok := strings.Cut(line, ":")
		if !ok || strings.ContainsAny(strings.TrimSpace(key), " \t") {
			return Site{}, fmt.Errorf("%s: not \"key: value\" (broker, username, client_id), nor \"off\"", at)
		}
		key, value = strings.ToLower(strings.TrimSpace(key)), unquote(strings.TrimSpace(value))
		if s.Off {
			return Site{}, fmt.Errorf("%s: the file says \"off\" (line %d); a bridge that is off takes no settings", at, seen["off"])
		}
		if prev, dup := seen[key]; dup {
			return Site{}, fmt.Errorf("%s: %s is given twice (first on line %d); keep one", at, key, prev)
		}
		seen[key] = n
		if err := checkValue(value); err != nil {
			return Site{}, fmt.Errorf("%s: %s: %v", at, key, err)
		}
		switch key {
		case "broker":
			b, err := brokerURL(value)
			if err != nil {
				return Site{}, fmt.Errorf("%s: broker: %v", at, err)
			}
			s.Broker = b
		case "username":
			if strings.ContainsAny(value, " \t/+#:") {
				return Site{}, fmt.Errorf("%s: username %q has a space, '/', '+', '#' or ':', which a bridge's configuration or the site's ACL cannot carry; ask for a user name without them", at, clip(value))
			}
			s.Username = value
		case "client_id":
			if err := checkClientID(value); err != nil {
				return Site{}, fmt.Errorf("%s: client_id: %v", at, err)
			}
			s.ClientID = value
		case "password", "remote_password":
			return Site{}, fmt.Errorf("%s: the password does not go in bridge.txt: put it alone in the card's site/password, which the Pi takes off the card (and then overwrite this file, or give the account a new password)", at)
		default:
			return Site{}, fmt.Errorf("%s: not a key of a bridge file, which has broker, username and client_id (or the single line \"off\")", at)
		}
	}
	if err := sc.Err(); err != nil {
		return Site{}, fmt.Errorf("%s: %w", name, err)
	}
	if !s.Off && s.Broker == "" {
		return Site{}, fmt.Errorf("%s: no broker: add a line such as \"broker: tls://broker.site.lan:8883\" (the site's broker), or write \"off\" to turn the bridge off", name)
	}
	return s, nil
}

// unquote strips one pair of double quotes around v, as people write
// values in configuration files.
func unquote(v string) string {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return v[1 : len(v)-1]
	}
	return v
}

// brokerURL checks a site broker's URL: one Mosquitto's bridge can dial
// (TCP or TLS; not WebSockets, not a path, no credentials in it).
func brokerURL(v string) (string, error) {
	b, err := mqttsec.BrokerURL(v)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(b)
	if err != nil {
		return "", err
	}
	switch {
	case u.User != nil:
		return "", errors.New("the URL holds a user or password: give the user on a line of its own (username:) and the password in site/password")
	case u.Scheme == "ws" || u.Scheme == "wss":
		return "", fmt.Errorf("%s: Mosquitto's bridge speaks MQTT over TCP or TLS, not WebSockets: use the broker's tcp:// or tls:// port", u.Scheme)
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.Fragment != "":
		return "", errors.New("a broker URL is scheme://host:port, without a path or query")
	}
	if err := checkHost(u.Hostname()); err != nil {
		return "", err
	}
	return b, nil
}

// checkHost allows a host name or an IPv4 address: what Mosquitto's
// bridge address line takes (an IPv6 literal in brackets it cannot
// resolve).
func checkHost(h string) error {
	if ip := net.ParseIP(h); ip != nil {
		if ip.To4() == nil {
			return fmt.Errorf("%s is an IPv6 address, which Mosquitto's bridge cannot dial as written: give the site broker's host name", h)
		}
		return nil
	}
	if len(h) > 253 {
		return errors.New("the host name is longer than 253 characters")
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("%q is not a host name (labels of 1 to 63 letters, digits and '-', between dots)", clip(h))
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return fmt.Errorf("%q is not a host name (letters, digits, '-' and dots)", clip(h))
			}
		}
	}
	return nil
}

// checkValue refuses what a Mosquitto configuration line cannot carry:
// Mosquitto refuses to load a configuration with text that is not valid
// UTF-8 or holds what MQTT forbids in a string (control characters,
// U+FFFE, U+FFFF...), and a broker that does not start takes the gateway
// on it down too. The error never repeats the value: it may be a
// password.
func checkValue(v string) error {
	if v == "" {
		return errors.New("empty")
	}
	if len(v) > 1024 {
		return fmt.Errorf("%d bytes: too long for a setting", len(v))
	}
	if !utf8.ValidString(v) {
		return errors.New("not valid UTF-8 (a file saved in another encoding, such as Windows' ANSI?): retype it, saved as UTF-8")
	}
	for i, r := range []rune(v) {
		if err := wire.CheckTopicText(string(r)); err != nil {
			return fmt.Errorf("character %d (U+%04X) is one MQTT forbids in text (a control character or a non-character): retype the value", i+1, r)
		}
	}
	return nil
}

// checkClientID allows what every MQTT broker takes as a client id.
func checkClientID(v string) error {
	if len(v) > 128 {
		return fmt.Errorf("%d bytes: keep a client id to 128", len(v))
	}
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:", r)) {
			return fmt.Errorf("%q: use letters, digits, - _ . and : only", clip(v))
		}
	}
	return nil
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}
