package mqttsec

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Default ports of a broker URL that names none, as Mosquitto listens and
// the Python client takes them.
const (
	DefaultPort    = 1883 // tcp, mqtt
	DefaultTLSPort = 8883 // ssl, tls, mqtts, mqtt+ssl, tcps
)

// wantURL is what every broker URL error asks for.
const wantURL = "want tcp://HOST:PORT, e.g. tcp://127.0.0.1:1883, or ssl://HOST:PORT for TLS"

// BrokerURL checks a broker URL by the one rule that the gateway's
// configuration (mqtt.broker) and every command that takes --broker
// follow: SCHEME://HOST:PORT, the scheme tcp or mqtt, or for TLS ssl,
// tls, mqtts, mqtt+ssl or tcps, or a WebSocket's ws or wss. It returns
// the URL with the scheme's port (DefaultPort, DefaultTLSPort) if it names
// none; a WebSocket URL is returned as it is. Its error says what is wrong
// and what to write instead, without the URL, which may hold a password:
// the caller names the setting and the URL (see Redacted).
func BrokerURL(s string) (string, error) {
	if !strings.Contains(s, "://") {
		// url.Parse would take host:port for a scheme and an opaque part,
		// or fail on the colon ("first path segment in URL cannot
		// contain colon"): name the likely fix instead.
		if host, port, err := net.SplitHostPort(s); err == nil && host != "" && !strings.Contains(s, "@") {
			if _, err := strconv.ParseUint(port, 10, 16); err == nil {
				return "", fmt.Errorf("no scheme: want tcp://HOST:PORT: write tcp://%s (or ssl://%s for TLS)", s, s)
			}
		}
		return "", errors.New("no scheme: " + wantURL)
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may hold a password
		}
		return "", fmt.Errorf("%v: %s", err, wantURL)
	}
	port := ""
	switch scheme := strings.ToLower(u.Scheme); {
	case scheme == "tcp" || scheme == "mqtt":
		port = strconv.Itoa(DefaultPort)
	case scheme == "ws" || scheme == "wss":
	case IsTLSScheme(scheme):
		port = strconv.Itoa(DefaultTLSPort)
	default:
		return "", fmt.Errorf("scheme %q: want tcp://HOST:PORT, or ssl://HOST:PORT for TLS (mqtt, mqtts, tls, ws and wss work too)", u.Scheme)
	}
	if u.Hostname() == "" {
		return "", errors.New("no host: " + wantURL)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
			return "", fmt.Errorf("port %s is not a port (1 to 65535): %s", p, wantURL)
		}
		return s, nil
	}
	if port != "" {
		u.Host = net.JoinHostPort(u.Hostname(), port)
		return u.String(), nil
	}
	return s, nil
}

// Redacted is a broker URL for a message, as it was given but with its
// password replaced by xxxxx; for a text that is no URL, what follows its
// last @ alone.
func Redacted(s string) string {
	if u, err := url.Parse(s); err == nil && strings.Contains(s, "://") {
		if _, has := u.User.Password(); has {
			return u.Redacted()
		}
		return s
	}
	if i := strings.LastIndex(s, "@"); i >= 0 {
		return "…" + s[i:]
	}
	return s
}
