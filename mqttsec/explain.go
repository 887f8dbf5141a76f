package mqttsec

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Settings describe a connection for Explain: the names of its settings
// and the values that matter to its faults. It holds no password.
type Settings struct {
	Names Names
	// Broker is the broker URL.
	Broker string
	// TLS holds the files and server name in use; it matters only for a
	// TLS broker URL.
	TLS TLS
	// Username is the user name sent, "" for none.
	Username string
	// PasswordFrom says where the password sent came from, in the user's
	// words ("mqtt.password_file /etc/fencegate/mqtt.password",
	// "$FENCEGATE_MQTT_PASSWORD"); "" if none was sent.
	PasswordFrom string
}

// Explain says why a connection attempt with settings s failed, as a
// person can act on it, when err is a TLS fault; "" for other errors. (The
// broker's refusals of credentials come as MQTT return codes: see
// NotAuthorised and BadCredentials.)
func Explain(err error, s Settings) string {
	n := s.Names
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		op       *net.OpError
	)
	switch {
	case err == nil:
		return ""
	case errors.As(err, &unknown):
		return s.unknownCA(unknown.Cert)
	case errors.As(err, &hostname):
		return s.wrongName(hostname)
	case errors.As(err, &invalid):
		return certInvalid(invalid, time.Now())
	case errors.As(err, &op) && op.Op == "remote error":
		return s.alert(strings.TrimPrefix(op.Err.Error(), "tls: "))
	case strings.Contains(err.Error(), "first record does not look like a TLS handshake"):
		return fmt.Sprintf("the broker does not speak TLS on this port: use the port of its TLS listener (often 8883) in %s, or tcp:// for a plain one", n.Broker)
	case isClosed(err) && IsTLSURL(s.Broker):
		return fmt.Sprintf("the broker closed the connection during the TLS handshake: is %s its TLS listener? (the broker's log says why it closed it)", hostOf(s.Broker))
	}
	return ""
}

// NotAuthorised is the reason for an MQTT 3.1.1 CONNACK "not authorised"
// (return code 5), which Mosquitto sends for a wrong password.
func NotAuthorised(s Settings) string {
	return "not authorised: " + s.credentials() + " (Mosquitto answers a wrong password this way)"
}

// BadCredentials is the reason for a CONNACK "bad user name or password"
// (return code 4).
func BadCredentials(s Settings) string {
	return "bad user name or password: " + s.credentials()
}

// credentials says which credentials the broker refused.
func (s Settings) credentials() string {
	n := s.Names
	switch {
	case s.Username == "":
		return fmt.Sprintf("the broker takes no anonymous clients: set %s and its password (%s or $%s)", n.Username, n.PasswordFile, EnvPassword)
	case s.PasswordFrom == "":
		return fmt.Sprintf("the broker refused user %q without a password: give the password in %s or $%s", s.Username, n.PasswordFile, EnvPassword)
	}
	return fmt.Sprintf("the broker refused user %q with the password from %s: check both against the broker's password file", s.Username, s.PasswordFrom)
}

// unknownCA explains a broker certificate chain that ends at c, which no
// trusted CA signed.
func (s Settings) unknownCA(c *x509.Certificate) string {
	n := s.Names
	where := "a CA this system trusts"
	fix := fmt.Sprintf("set %s to the certificate of the CA that signed it", n.CAFile)
	if s.TLS.CAFile != "" {
		where = fmt.Sprintf("a CA in %s %s", n.CAFile, s.TLS.CAFile)
		fix = "put the certificate of the CA that signed the broker's certificate in that file"
	}
	switch {
	case c == nil:
		return fmt.Sprintf("the broker's certificate is not signed by %s: %s", where, fix)
	case c.Issuer.String() == c.Subject.String() && len(c.DNSNames)+len(c.IPAddresses) > 0 && s.TLS.CAFile == "":
		return fmt.Sprintf("the broker's certificate is self-signed (%s): set %s to that certificate itself, "+
			"or give the broker a certificate signed by a CA", certName(c.Subject.CommonName, c.Subject.String()), n.CAFile)
	case c.Issuer.String() == c.Subject.String() && len(c.DNSNames)+len(c.IPAddresses) > 0:
		return fmt.Sprintf("the broker's certificate is self-signed (%s), and not in %s %s: put that certificate itself there, "+
			"or give the broker a certificate signed by a CA in it", certName(c.Subject.CommonName, c.Subject.String()), n.CAFile, s.TLS.CAFile)
	case c.Issuer.String() == c.Subject.String():
		// The broker sent its CA along, and that is the one missing.
		return fmt.Sprintf("the broker's certificate is not signed by %s (it is signed by %s): %s",
			where, certName(c.Subject.CommonName, c.Subject.String()), fix)
	}
	return fmt.Sprintf("the broker's certificate is not signed by %s (it is signed by %s): %s",
		where, certName(c.Issuer.CommonName, c.Issuer.String()), fix)
}

func (s Settings) wrongName(e x509.HostnameError) string {
	n := s.Names
	var names []string
	if e.Certificate != nil {
		names = append(names, e.Certificate.DNSNames...)
		for _, ip := range e.Certificate.IPAddresses {
			names = append(names, ip.String())
		}
	}
	if len(names) == 0 {
		return fmt.Sprintf("the broker's certificate names no host (no subject alternative names; the common name does not count): "+
			"make it again with the broker's host names and addresses as subject alternative names (it was checked for %q)", e.Host)
	}
	if s.TLS.ServerName != "" {
		return fmt.Sprintf("the broker's certificate is for %s, not for %q (%s): set %s to a name it is for",
			strings.Join(names, ", "), e.Host, n.ServerName, n.ServerName)
	}
	return fmt.Sprintf("the broker's certificate is for %s, not for %q (the host in %s): connect to a name it is for in %s, or set %s to one",
		strings.Join(names, ", "), e.Host, n.Broker, n.Broker, n.ServerName)
}

func certInvalid(e x509.CertificateInvalidError, now time.Time) string {
	c := e.Cert
	what := "the broker's certificate"
	if c != nil && c.IsCA {
		what = fmt.Sprintf("the CA certificate %s in the broker's chain", certName(c.Subject.CommonName, c.Subject.String()))
	}
	// No current time in these reasons: a reason that changes with every
	// attempt would be logged at every attempt.
	switch {
	case e.Reason == x509.Expired && c != nil && now.After(c.NotAfter):
		return fmt.Sprintf("%s expired at %s: renew it on the broker (if it has not expired, this machine's clock is wrong)",
			what, c.NotAfter.UTC().Format(time.RFC3339))
	case e.Reason == x509.Expired && c != nil:
		return fmt.Sprintf("%s is valid only from %s, which this machine's clock says is still to come: is the clock right? "+
			"(a Raspberry Pi has no clock of its own until NTP sets it; timedatectl shows whether it is synchronised)",
			what, c.NotBefore.UTC().Format(time.RFC3339))
	case e.Reason == x509.IncompatibleUsage:
		return what + " may not be used for a server (its extended key usage): make it again for server authentication"
	}
	return fmt.Sprintf("%s is not valid: %v", what, e.Error())
}

// alert explains a TLS alert the broker sent.
func (s Settings) alert(a string) string {
	n := s.Names
	if s.TLS.CertFile == "" {
		switch a {
		case "certificate required", "handshake failure", "bad certificate", "certificate unknown":
			return fmt.Sprintf("the broker requires a client certificate (it said %q): set %s and %s to this client's certificate and key, "+
				"signed by a CA the broker trusts (Mosquitto: its cafile)", a, n.CertFile, n.KeyFile)
		}
	} else {
		switch a {
		case "unknown certificate authority", "bad certificate", "certificate unknown", "certificate expired",
			"certificate revoked", "unsupported certificate", "access denied", "certificate required":
			return fmt.Sprintf("the broker refused this client's certificate, %s %s (it said %q): it must be signed by a CA the broker trusts "+
				"(Mosquitto: its cafile), valid now, and for client authentication", n.CertFile, s.TLS.CertFile, a)
		}
	}
	return fmt.Sprintf("the broker ended the TLS handshake (it said %q); its log says why", a)
}

func certName(cn, full string) string {
	if cn != "" {
		return fmt.Sprintf("%q", cn)
	}
	return fmt.Sprintf("%q", full)
}

func hostOf(broker string) string {
	if u, err := url.Parse(broker); err == nil && u.Host != "" {
		return u.Host
	}
	return broker
}

func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}
