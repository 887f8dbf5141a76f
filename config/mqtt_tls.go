package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"sort"
	"strings"

	"github.com/fencegate/fencegate/mqttsec"
)

// TLS configures a TLS connection to the broker (mqtt.tls). A relative
// path is relative to the configuration file's directory.
type TLS struct {
	// CAFile holds the certificates (PEM) of the CAs the broker's
	// certificate must be signed by; empty trusts the system's CAs.
	CAFile string `yaml:"ca_file,omitempty"`
	// CertFile and KeyFile are the gateway's client certificate and its
	// private key (PEM), both or neither.
	CertFile string `yaml:"cert_file,omitempty"`
	KeyFile  string `yaml:"key_file,omitempty"`
	// ServerName is the name the broker's certificate must be for;
	// empty takes the host of mqtt.broker.
	ServerName string `yaml:"server_name,omitempty"`
}

// names are the configuration's names of the broker settings.
var names = mqttsec.GatewayNames()

// Security is what a gateway's broker connection is secured with.
type Security struct {
	// TLS is nil for a plain broker URL (tcp://, mqtt://, ws://); for a
	// TLS URL without mqtt.tls it trusts the system's CAs.
	TLS *tls.Config
	// Password is the broker password, "" for none. Never log it.
	Password string
	// Settings describe the connection for mqttsec's messages; they hold
	// no password.
	Settings mqttsec.Settings
}

// security is what Load read for the broker connection.
type security struct {
	read           bool
	tls            *tls.Config
	password, from string
	exposed        []string // warnings about secret files open to every user
}

// Security returns what the broker connection is secured with: the TLS
// settings and the password that Load read from mqtt.tls's files and
// mqtt.password_file (or, when the configuration names no password, from
// $FENCEGATE_MQTT_PASSWORD), or the inline mqtt.password. A configuration
// from Parse reads no files and no environment: its Security fails if it
// names files.
func (m *MQTT) Security() (Security, error) {
	s := Security{Settings: mqttsec.Settings{Names: names, Broker: m.Broker, Username: m.Username}}
	if m.TLS != nil {
		s.Settings.TLS = mqttsec.TLS{CAFile: m.TLS.CAFile, CertFile: m.TLS.CertFile, KeyFile: m.TLS.KeyFile, ServerName: m.TLS.ServerName}
	}
	if m.sec.read {
		s.TLS, s.Password, s.Settings.PasswordFrom = m.sec.tls, m.sec.password, m.sec.from
		return s, nil
	}
	if m.TLS != nil || m.PasswordFile != "" {
		return s, errors.New("config: mqtt.tls and mqtt.password_file name files, which only config.Load reads")
	}
	if mqttsec.IsTLSURL(m.Broker) {
		s.TLS, _ = mqttsec.TLS{}.Config(names)
	}
	if m.Password != "" {
		s.Password, s.Settings.PasswordFrom = m.Password, "mqtt.password"
	}
	return s, nil
}

// Warnings are problems of the configuration that do not stop the
// gateway: a password inline in the file, a secret file every user may
// read, a password sent unencrypted over the network.
func (c *Config) Warnings() []string {
	var out []string
	m := &c.MQTT
	if m.Password != "" {
		out = append(out, fmt.Sprintf("%smqtt.password holds the broker password in the configuration file itself: "+
			"move it to a file of its own named by mqtt.password_file (readable by the gateway's user only, e.g. root:fencegate 0640), "+
			"or to $%s", c.at("mqtt.password"), mqttsec.EnvPassword))
	}
	if m.sec.read && m.Username != "" && m.sec.password == "" {
		out = append(out, fmt.Sprintf("%smqtt.username is set but no password is given (mqtt.password_file, or $%s): the broker gets the user name alone",
			c.at("mqtt.username"), mqttsec.EnvPassword))
	}
	if u, err := url.Parse(m.Broker); err == nil && !mqttsec.IsTLSScheme(u.Scheme) && !loopback(u.Hostname()) &&
		(m.Password != "" || m.PasswordFile != "" || m.sec.password != "") {
		out = append(out, fmt.Sprintf("%sthe broker password goes over the network unencrypted (mqtt.broker %s): use the broker's TLS listener (ssl://) with mqtt.tls",
			c.at("mqtt.broker"), redacted(m.Broker)))
	}
	return append(out, m.sec.exposed...)
}

// at returns "line N: " for the key at path, "" if its line is unknown.
func (c *Config) at(path string) string {
	if l := c.lines[path]; l > 0 {
		return fmt.Sprintf("line %d: ", l)
	}
	return ""
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkSecurity checks mqtt's TLS and password keys, without reading
// files.
func (c *Config) checkSecurity() []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	m := &c.MQTT
	u, err := url.Parse(m.Broker)
	if err == nil && u.User != nil {
		bad("mqtt.broker: remove the user name and password from the URL (it is shown in logs and /api/status): " +
			"use mqtt.username and mqtt.password_file")
	}
	if t := m.TLS; t != nil {
		if err == nil && u.Scheme != "" && !mqttsec.IsTLSScheme(u.Scheme) {
			want := "ssl://" + u.Hostname() + ":8883"
			if u.Scheme == "ws" {
				want = "wss://" + u.Host + u.Path
			}
			bad("mqtt.tls is set, but mqtt.broker %s is not a TLS URL, so the connection would not be encrypted: "+
				"use the broker's TLS listener, e.g. %s, or remove mqtt.tls", redacted(m.Broker), want)
		}
		switch {
		case t.CertFile != "" && t.KeyFile == "":
			bad("mqtt.tls.cert_file is set without mqtt.tls.key_file: give both (the gateway's client certificate and its private key) or neither")
		case t.KeyFile != "" && t.CertFile == "":
			bad("mqtt.tls.key_file is set without mqtt.tls.cert_file: give both (the gateway's client certificate and its private key) or neither")
		}
		if t.ServerName != "" {
			if why := mqttsec.CheckServerName(t.ServerName); why != "" {
				bad("mqtt.tls.server_name %q: %s", t.ServerName, why)
			}
		}
	}
	switch {
	case m.Password != "" && m.PasswordFile != "":
		bad("mqtt.password_file and mqtt.password are both set: keep mqtt.password_file and delete mqtt.password")
	case m.PasswordFile != "" && m.Username == "":
		bad("mqtt.password_file needs mqtt.username: MQTT sends a password only with a user name")
	case m.Password != "" && m.Username == "":
		bad("mqtt.password needs mqtt.username: MQTT sends a password only with a user name")
	}
	return errs
}

// files returns pointers to t's file names; none if t is nil.
func (t *TLS) files() []*string {
	if t == nil {
		return nil
	}
	return []*string{&t.CAFile, &t.CertFile, &t.KeyFile}
}

// readSecurity reads the files of mqtt.tls and mqtt.password_file, and
// $FENCEGATE_MQTT_PASSWORD when no password is configured. Each unusable
// file is an error at its key's line.
func (c *Config) readSecurity() error {
	m := &c.MQTT
	var errs []error
	sec := security{read: true}
	if m.TLS != nil || mqttsec.IsTLSURL(m.Broker) {
		var t mqttsec.TLS
		if m.TLS != nil {
			t = mqttsec.TLS{CAFile: m.TLS.CAFile, CertFile: m.TLS.CertFile, KeyFile: m.TLS.KeyFile, ServerName: m.TLS.ServerName}
		}
		conf, err := t.Config(names)
		if err != nil {
			errs = append(errs, err)
		}
		sec.tls = conf
		if why := mqttsec.Exposed(names.KeyFile, t.KeyFile); t.KeyFile != "" && why != "" {
			sec.exposed = append(sec.exposed, c.at(names.KeyFile)+why)
		}
	}
	switch {
	case m.PasswordFile != "":
		pw, err := mqttsec.ReadPassword(names.PasswordFile, m.PasswordFile)
		if err != nil {
			errs = append(errs, err)
		}
		sec.password, sec.from = pw, names.PasswordFile+" "+m.PasswordFile
		if why := mqttsec.Exposed(names.PasswordFile, m.PasswordFile); why != "" {
			sec.exposed = append(sec.exposed, c.at(names.PasswordFile)+why)
		}
	case m.Password != "":
		sec.password, sec.from = m.Password, "mqtt.password"
	case m.Username != "":
		if pw := os.Getenv(mqttsec.EnvPassword); pw != "" {
			sec.password, sec.from = pw, "$"+mqttsec.EnvPassword
		}
	}
	if len(errs) > 0 {
		return c.atLines(errors.Join(errs...))
	}
	m.sec = sec
	return nil
}

// atLines puts each of err's errors (joined) at the line of the key it
// names, in line order.
func (c *Config) atLines(err error) error {
	var flat []error
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		flat = append(flat, e)
	}
	walk(err)
	probs := make([]problem, 0, len(flat))
	for _, e := range flat {
		p := problem{msg: e.Error()}
		var fe *mqttsec.FileError
		if errors.As(e, &fe) {
			p.line = c.lines[fe.Setting]
		} else {
			key, _, _ := strings.Cut(p.msg, " ")
			p.line = c.lines[key]
		}
		probs = append(probs, p)
	}
	sort.SliceStable(probs, func(i, j int) bool { return probs[i].line < probs[j].line })
	errs := make([]error, len(probs))
	for i, p := range probs {
		errs[i] = p
	}
	return errors.Join(errs...)
}
