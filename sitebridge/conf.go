package sitebridge

import (
	cryptotls "crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/fencegate/fencegate/mqttsec"
	"github.com/fencegate/fencegate/wire"
)

// Options are what a bridge needs besides its file.
type Options struct {
	// Topics are the gateway's topics (its prefix and id).
	Topics wire.Topics
	// Inputs says the gateway publishes inputs.
	Inputs bool
	// Discovery and Birth are Home Assistant's discovery topic filter
	// and birth topic, if the gateway announces itself to it.
	Discovery, Birth string
	// Credentials is the directory Mosquitto reads the site's CA
	// (ca.crt) and this Pi's client certificate (client.crt, client.key)
	// from; the files there decide what is used.
	Credentials string
	// Password is this Pi's password on the site's broker; "" for none.
	Password string
	// HostID tells this Pi from others in the bridge's client id, so that
	// two Pis with one gateway id (a mistake the gateways themselves
	// refuse) do not also take each other's bridge connection.
	HostID string
}

// Route is one topic filter of the bridge and the way it goes.
type Route struct {
	Filter    string
	Direction string // in (site to Pi), out (Pi to site) or both
}

// Routes are the topics the bridge carries for a gateway, each the way
// the gateway uses it (see the package comment).
func Routes(o Options) []Route {
	t := o.Topics
	r := []Route{
		{t.SetFilter(), "in"},
		{t.Instance(), "both"},
		{t.ReplyFilter(), "out"},
		{t.ResultFilter(), "out"},
		{t.StateFilter(), "out"},
		{t.Status(), "out"},
	}
	if o.Inputs {
		r = append(r, Route{t.InputFilter(), "out"})
	}
	if o.Discovery != "" {
		r = append(r, Route{o.Discovery, "out"})
	}
	if o.Birth != "" {
		r = append(r, Route{o.Birth, "in"})
	}
	return r
}

// LinkTopic is where the bridge says whether it is up: 1, retained, on
// both brokers when it connects; 0 on the site's broker (its will) when
// the link is lost, and on the Pi's when it stops.
func LinkTopic(t wire.Topics) string { return strings.TrimSuffix(t.Status(), "status") + "bridge" }

// ConnectionName is the bridge's name in Mosquitto's configuration.
func ConnectionName(t wire.Topics) string { return "fencegate-" + t.GatewayID }

// Conf renders the Mosquitto configuration of the bridge s (which must
// not be Off). Its first line, "# bridge: ...", says in a sentence what
// it bridges.
func Conf(s Site, o Options) (string, error) {
	if s.Off {
		return "", errors.New("the bridge file says off: there is no bridge to write")
	}
	for _, r := range Routes(o) {
		if strings.ContainsAny(r.Filter, " \t\"") {
			return "", fmt.Errorf("topic %q has a space or a quote, which a Mosquitto bridge's topic line cannot carry: give the gateway an id (and topic prefix) without one", r.Filter)
		}
	}
	u, err := url.Parse(s.Broker)
	if err != nil || u.Port() == "" {
		return "", fmt.Errorf("broker %q: want scheme://host:port", mqttsec.Redacted(s.Broker))
	}
	tls := mqttsec.IsTLSScheme(strings.ToLower(u.Scheme))
	file := func(n string) (string, bool) {
		p := filepath.Join(o.Credentials, n)
		st, err := os.Stat(p)
		return p, err == nil && st.Mode().IsRegular() && st.Size() > 0
	}
	ca, hasCA := file("ca.crt")
	cert, hasCert := file("client.crt")
	key, hasKey := file("client.key")
	switch {
	case tls && !hasCA:
		return "", fmt.Errorf("broker %s is TLS, but there is no site CA (%s): put the CA that signed the site broker's certificate in the card's site/ca.crt", s.Broker, ca)
	case !tls && (hasCert || hasKey):
		return "", fmt.Errorf("broker %s is not TLS, but a client certificate is there (site/client.crt, site/client.key): use the broker's tls:// port, or remove them", s.Broker)
	case hasCert != hasKey:
		return "", fmt.Errorf("a client certificate needs both site/client.crt and site/client.key; only %s is there", map[bool]string{true: "client.crt", false: "client.key"}[hasCert])
	}
	// Mosquitto would load files it cannot use and fail at every
	// reconnect, saying so only in its log: checked here, said at boot.
	if tls {
		if err := checkCA(ca); err != nil {
			return "", err
		}
	}
	if hasCert {
		if _, err := cryptotls.LoadX509KeyPair(cert, key); err != nil {
			return "", fmt.Errorf("site/client.crt and site/client.key are not a certificate and its key (%v): give the key without a passphrase, PEM-encoded, made with this certificate", err)
		}
	}
	if o.Password != "" {
		if err := checkValue(o.Password); err != nil {
			return "", fmt.Errorf("site/password: %v", err)
		}
		if strings.TrimSpace(o.Password) != o.Password {
			return "", errors.New("site/password begins or ends with a space, which Mosquitto's configuration drops: give the account a password without one")
		}
		if s.Username == "" {
			return "", errors.New("site/password is there but bridge.txt names no username: add \"username: NAME\" (this Pi's user on the site's broker)")
		}
	}
	id := s.ClientID
	if id == "" {
		id = "fencegate-bridge-" + o.Topics.GatewayID
		if o.HostID != "" {
			id += "-" + o.HostID
		}
		if err := checkClientID(id); err != nil {
			return "", fmt.Errorf("the bridge's client id from the gateway id: %v: set client_id in bridge.txt", err)
		}
	}
	var b strings.Builder
	line := func(f string, a ...any) { fmt.Fprintf(&b, f+"\n", a...) }
	how := "plain TCP"
	if tls {
		how = "TLS with the site's CA"
		if hasCert {
			how += " and this Pi's client certificate"
		}
	}
	who := "no user"
	if s.Username != "" {
		who = "user " + s.Username
		if o.Password != "" {
			who += " with site/password"
		}
	}
	line("# bridge: this Pi's Mosquitto bridges %s to the site's broker %s (%s, %s)", strings.TrimSuffix(o.Topics.Status(), "status"), s.Broker, how, who)
	line("# Written by gateway bridge at every boot (docs/site.md); edit the card's bridge.txt instead.")
	line("connection %s", ConnectionName(o.Topics))
	line("address %s", u.Host)
	line("remote_clientid %s", id)
	if s.Username != "" {
		line("remote_username %s", s.Username)
	}
	if o.Password != "" {
		line("remote_password %s", o.Password)
	}
	if tls {
		line("bridge_cafile %s", ca)
		if hasCert {
			line("bridge_certfile %s", cert)
			line("bridge_keyfile %s", key)
		}
	}
	// A clean session on both sides: commands published at the site
	// while the link is down are not kept to act late when it comes
	// back (the controller times out, rereads and decides again), and
	// the gateway's answers of that time are not delivered late; its
	// retained states, status and claim go to the site again on each
	// connect, as Mosquitto does for a bridge.
	line("cleansession true")
	line("local_cleansession true")
	line("bridge_protocol_version mqttv311")
	line("try_private true")
	// A link that drops packets without closing is seen within about
	// two keep-alives (10 s at Mosquitto's least, 5 s): until then the
	// site's broker still sends commands into it, and TCP delivers them
	// if the link comes back, late by up to about a controller's wait
	// for an answer (docs/site.md). Retried with backoff, so that a site
	// broker restarting is not hammered.
	line("keepalive_interval 5")
	line("restart_timeout 2 30")
	line("start_type automatic")
	line("notifications true")
	line("notification_topic %s", LinkTopic(o.Topics))
	for _, r := range Routes(o) {
		line("topic %s %s 1", r.Filter, r.Direction)
	}
	return b.String(), nil
}

// SiteACL renders the lines the site broker's ACL (Mosquitto's acl_file)
// needs for the bridge's user: what the bridge reads there and writes.
func SiteACL(user string, o Options) (string, error) {
	if user == "" || strings.ContainsAny(user, "/+#: \t\n\r") {
		return "", fmt.Errorf("user %q: a broker user name for an ACL, without '/', '+', '#', ':' or spaces", user)
	}
	for _, r := range Routes(o) {
		if strings.ContainsAny(r.Filter, " \t\"") {
			return "", fmt.Errorf("topic %q has a space or a quote, which a Mosquitto bridge's topic line cannot carry: give the gateway an id (and topic prefix) without one", r.Filter)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# The site broker's ACL for the bridge of fencegate gateway %q (gateway bridge --site-acl).\n", o.Topics.GatewayID)
	fmt.Fprintf(&b, "user %s\n", user)
	for _, r := range Routes(o) {
		access := map[string]string{"in": "read", "out": "write", "both": "readwrite"}[r.Direction]
		fmt.Fprintf(&b, "topic %s %s\n", access, r.Filter)
	}
	fmt.Fprintf(&b, "topic write %s\n", LinkTopic(o.Topics))
	return b.String(), nil
}

// checkCA checks that the file at path holds at least one PEM
// certificate and nothing else that matters: a CA, not a key.
func checkCA(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("site/ca.crt: %w", err)
	}
	n := 0
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		switch {
		case strings.Contains(blk.Type, "PRIVATE KEY"):
			return errors.New("site/ca.crt holds a private key: it takes the site CA's certificate alone (and that key must not travel on a card)")
		case blk.Type == "CERTIFICATE":
			if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
				return fmt.Errorf("site/ca.crt: a certificate that does not parse: %v", err)
			}
			n++
		}
	}
	if n == 0 {
		return errors.New("site/ca.crt holds no PEM certificate (-----BEGIN CERTIFICATE-----): put the site CA's certificate there, PEM-encoded")
	}
	return nil
}
