package client

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"os"

	"github.com/fencegate/fencegate/mqttsec"
)

// TLS names the files and server name of a TLS connection to the broker,
// whose URL must then be a TLS one (ssl://, mqtts://, tls://, wss://): a CA
// file ("" trusts the system's CAs), this controller's certificate and key
// for a broker that requires client certificates (both or neither), and
// the name the broker's certificate must be for ("" takes the URL's host).
type TLS = mqttsec.TLS

// optionNames are the names of the options in messages, unless
// Options.Names says otherwise.
var optionNames = mqttsec.Names{Broker: "Options.Broker", CAFile: "Options.TLS.CAFile", CertFile: "Options.TLS.CertFile",
	KeyFile: "Options.TLS.KeyFile", ServerName: "Options.TLS.ServerName", Username: "Options.Username", PasswordFile: "Options.PasswordFile"}

func (o *Options) names() mqttsec.Names {
	if o.Names == (mqttsec.Names{}) {
		return optionNames
	}
	return o.Names
}

// Check says what is wrong with o's broker settings, without reading a
// file or connecting: a user name or password in the broker URL, TLS
// settings with a URL that is not a TLS one, a certificate without its
// key, a password without a user name, or two passwords. Dial checks the
// same.
func (o Options) Check() error {
	n := o.names()
	u, err := url.Parse(o.Broker)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may hold a password
		}
		return fmt.Errorf("client: %s is not a URL: %v", n.Broker, err)
	}
	var errs []error
	if u.User != nil {
		errs = append(errs, fmt.Errorf("client: %s: remove the user name and password from the URL: use %s and %s", n.Broker, n.Username, n.PasswordFile))
	}
	if t := o.TLS; t != nil {
		if !mqttsec.IsTLSScheme(u.Scheme) {
			errs = append(errs, fmt.Errorf("client: TLS settings are given, but %s %s is not a TLS URL, so the connection would not be encrypted: use ssl://%s (the broker's TLS listener)",
				n.Broker, u.Redacted(), u.Hostname()+":8883"))
		}
		switch {
		case t.CertFile != "" && t.KeyFile == "":
			errs = append(errs, fmt.Errorf("client: %s is set without %s: give both or neither", n.CertFile, n.KeyFile))
		case t.KeyFile != "" && t.CertFile == "":
			errs = append(errs, fmt.Errorf("client: %s is set without %s: give both or neither", n.KeyFile, n.CertFile))
		}
		if t.ServerName != "" {
			if why := mqttsec.CheckServerName(t.ServerName); why != "" {
				errs = append(errs, fmt.Errorf("client: %s %q: %s", n.ServerName, t.ServerName, why))
			}
		}
	}
	switch {
	case o.Password != "" && o.PasswordFile != "":
		errs = append(errs, fmt.Errorf("client: give the password once: %s, or the password itself", n.PasswordFile))
	case (o.Password != "" || o.PasswordFile != "") && o.Username == "":
		errs = append(errs, fmt.Errorf("client: a password needs %s: MQTT sends a password only with a user name", n.Username))
	}
	return errors.Join(errs...)
}

// security reads o's TLS files and password file (or, with a user name and
// no password given, $FENCEGATE_MQTT_PASSWORD): the TLS configuration (nil
// for a plain URL), the password, and the settings for messages.
// Credentials returns what Dial connects with: the TLS configuration (nil
// for a broker URL without TLS) and the password, read from PasswordFile
// or $FENCEGATE_MQTT_PASSWORD as Dial would. A program that opens an MQTT
// connection of its own next to a Client's (a bridge) uses it.
func (o Options) Credentials() (*tls.Config, string, error) {
	c, p, _, err := o.security()
	return c, p, err
}

func (o Options) security() (*tls.Config, string, mqttsec.Settings, error) {
	n := o.names()
	s := mqttsec.Settings{Names: n, Broker: o.Broker, Username: o.Username}
	var conf *tls.Config
	if mqttsec.IsTLSURL(o.Broker) {
		var t mqttsec.TLS
		if o.TLS != nil {
			t = *o.TLS
		}
		s.TLS = t
		c, err := t.Config(n)
		if err != nil {
			return nil, "", s, fmt.Errorf("client: %w", err)
		}
		conf = c
	}
	password := o.Password
	switch {
	case o.PasswordFile != "":
		pw, err := mqttsec.ReadPassword(n.PasswordFile, o.PasswordFile)
		if err != nil {
			return nil, "", s, fmt.Errorf("client: %w", err)
		}
		password, s.PasswordFrom = pw, n.PasswordFile+" "+o.PasswordFile
	case o.Password != "":
		s.PasswordFrom = "the given password"
	case o.Username != "":
		if pw := os.Getenv(mqttsec.EnvPassword); pw != "" {
			password, s.PasswordFrom = pw, "$"+mqttsec.EnvPassword
		}
	}
	return conf, password, s, nil
}
