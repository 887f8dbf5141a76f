// Package mqttsec secures a connection to an MQTT broker: TLS settings and
// a password read from files, and the reasons a broker (or this side's
// check of the broker) refused a connection, in words that name the
// setting to change.
//
// The gateway's configuration, gateway send and package client all use
// it, so each says the same about the same fault, each in the names its
// user knows the settings by ([Names]): configuration keys such as
// mqtt.tls.ca_file, or flags such as --tls-ca.
//
// Nothing here ever puts a password into an error or a message: a
// password file's problems are told by its path and shape (empty, more
// than one line), never by its content.
package mqttsec

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/user"
	"runtime"
	"strconv"
	"strings"
)

// EnvPassword is the environment variable that holds a broker password
// when no file or setting names one.
const EnvPassword = "FENCEGATE_MQTT_PASSWORD"

// TLS names the files and server name of a TLS connection to a broker.
type TLS struct {
	// CAFile holds the PEM certificates of the CAs the broker's
	// certificate must be signed by; "" trusts the system's CAs.
	CAFile string
	// CertFile and KeyFile are this client's certificate and its private
	// key (PEM), both or neither.
	CertFile, KeyFile string
	// ServerName is the name the broker's certificate must be for; ""
	// takes the host of the broker URL.
	ServerName string
}

// Names are the names a program's user knows its settings by, for
// messages: configuration keys (mqtt.tls.ca_file) or flags (--tls-ca).
type Names struct {
	Broker, CAFile, CertFile, KeyFile, ServerName, Username, PasswordFile string
}

// GatewayNames are the names of the gateway configuration's broker
// settings.
func GatewayNames() Names {
	return Names{Broker: "mqtt.broker", CAFile: "mqtt.tls.ca_file", CertFile: "mqtt.tls.cert_file", KeyFile: "mqtt.tls.key_file",
		ServerName: "mqtt.tls.server_name", Username: "mqtt.username", PasswordFile: "mqtt.password_file"}
}

// IsTLSScheme reports whether a broker URL with this scheme is dialled
// with TLS (as paho does: ssl, tls, mqtts, mqtt+ssl, tcps, wss).
func IsTLSScheme(scheme string) bool {
	switch scheme {
	case "ssl", "tls", "mqtts", "mqtt+ssl", "tcps", "wss":
		return true
	}
	return false
}

// IsTLSURL reports whether broker is a URL with a TLS scheme.
func IsTLSURL(broker string) bool {
	u, err := url.Parse(broker)
	return err == nil && IsTLSScheme(u.Scheme)
}

// FileError is a file named by a setting that cannot be used. Its message
// names the setting and the path, says what is wrong and how to fix it.
type FileError struct {
	Setting string // e.g. mqtt.tls.ca_file
	Path    string
	Why     string
	Err     error // the underlying error, if any
}

func (e *FileError) Error() string { return fmt.Sprintf("%s %s: %s", e.Setting, e.Path, e.Why) }

func (e *FileError) Unwrap() error { return e.Err }

// Config reads t's files and returns the TLS configuration of a
// connection to the broker: the broker's certificate must be signed by a
// CA of t.CAFile (or of the system), be valid now and be for the server
// name. Its error joins a *FileError per unusable file, named as n says.
func (t TLS) Config(n Names) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	var errs []error
	if t.CAFile != "" {
		pool, err := ReadCA(n.CAFile, t.CAFile)
		if err != nil {
			errs = append(errs, err)
		}
		c.RootCAs = pool
	}
	switch {
	case t.CertFile != "" && t.KeyFile != "":
		cert, err := ReadKeyPair(n.CertFile, t.CertFile, n.KeyFile, t.KeyFile)
		if err != nil {
			errs = append(errs, err)
		}
		c.Certificates = []tls.Certificate{cert}
	case t.CertFile != "":
		errs = append(errs, fmt.Errorf("%s is set without %s: give both (the client certificate and its private key) or neither", n.CertFile, n.KeyFile))
	case t.KeyFile != "":
		errs = append(errs, fmt.Errorf("%s is set without %s: give both (the client certificate and its private key) or neither", n.KeyFile, n.CertFile))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

// CheckServerName says what is wrong with a server name setting, "" if
// nothing.
func CheckServerName(name string) string {
	if name == "" || strings.ContainsAny(name, ":/@ \t") && net.ParseIP(name) == nil {
		return "want a host name as the broker's certificate names it, without scheme or port, e.g. broker.lan or 192.168.1.10"
	}
	return ""
}

// ReadCA reads the PEM certificates of path (named by setting) into a
// pool.
func ReadCA(setting, path string) (*x509.CertPool, error) {
	b, err := readFile(setting, path)
	if err != nil {
		return nil, err
	}
	certs, why := parseCerts(b)
	if why != "" {
		return nil, &FileError{Setting: setting, Path: path, Why: why + ": give the certificate of the CA that signed the broker's certificate (PEM)"}
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// ReadKeyPair reads a client certificate and its private key.
func ReadKeyPair(certSetting, certPath, keySetting, keyPath string) (tls.Certificate, error) {
	certPEM, cerr := readFile(certSetting, certPath)
	keyPEM, kerr := readFile(keySetting, keyPath)
	if cerr == nil {
		if _, why := parseCerts(certPEM); why != "" {
			cerr = &FileError{Setting: certSetting, Path: certPath, Why: why + ": give this client's certificate (PEM)"}
		}
	}
	if kerr == nil {
		if why := checkKey(keyPEM); why != "" {
			kerr = &FileError{Setting: keySetting, Path: keyPath, Why: why}
		}
	}
	if err := errors.Join(cerr, kerr); err != nil {
		return tls.Certificate{}, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		why := strings.TrimPrefix(err.Error(), "tls: ")
		if strings.Contains(why, "does not match") {
			why = fmt.Sprintf("is not the key of %s %s (their public keys differ): give the key that was made with that certificate", certSetting, certPath)
		}
		return tls.Certificate{}, &FileError{Setting: keySetting, Path: keyPath, Why: why, Err: err}
	}
	return pair, nil
}

// ReadPassword reads the password in path (named by setting): the file's
// one line, without its line break. An empty file or one of more lines is
// an error that never shows the content.
func ReadPassword(setting, path string) (string, error) {
	b, err := readFile(setting, path)
	if err != nil {
		return "", err
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	switch {
	case s == "":
		return "", &FileError{Setting: setting, Path: path, Why: "is empty: write the broker password into it, alone on one line"}
	case strings.ContainsAny(s, "\r\n"):
		return "", &FileError{Setting: setting, Path: path, Why: fmt.Sprintf("has %d lines: it must hold the password alone, on one line", strings.Count(s, "\n")+1)}
	}
	return s, nil
}

// Exposed says why a file holding a secret is open to too many users, ""
// if it is not (or cannot be stat'ed, or on Windows).
func Exposed(setting, path string) string {
	fi, err := os.Stat(path)
	if err != nil || runtime.GOOS == "windows" {
		return ""
	}
	if fi.Mode().Perm()&0o007 != 0 {
		return fmt.Sprintf("%s %s can be read by every user of this machine (mode %04o): chmod 0640 (group of the gateway's user) or 0600",
			setting, path, fi.Mode().Perm())
	}
	return ""
}

// readFile reads path, with a FileError that says how to fix what
// stopped it.
func readFile(setting, path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		return b, nil
	}
	fe := &FileError{Setting: setting, Path: path, Err: err}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		fe.Why = "no such file: correct the path, or create the file"
	case errors.Is(err, fs.ErrPermission):
		fe.Why = fmt.Sprintf("permission denied: %s cannot read it; make it readable by that user "+
			"(for the gateway's service: chown root:fencegate %s && chmod 0640 %s, and the same group may enter its directory)", whoami(), path, path)
	default:
		if fi, serr := os.Stat(path); serr == nil && fi.IsDir() {
			fe.Why = "is a directory: give the file in it"
		} else {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				fe.Why = pe.Err.Error()
			} else {
				fe.Why = err.Error()
			}
		}
	}
	return nil, fe
}

// whoami names this process's user for messages.
func whoami() string {
	uid := os.Geteuid()
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return fmt.Sprintf("user %s (uid %d)", u.Username, uid)
	}
	return fmt.Sprintf("uid %d", uid)
}

// parseCerts returns the certificates of a PEM file, or what is wrong
// with it.
func parseCerts(b []byte) ([]*x509.Certificate, string) {
	var certs []*x509.Certificate
	var other []string
	rest := b
	for {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			other = append(other, blk.Type)
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Sprintf("certificate %d is damaged: %v", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	switch {
	case len(certs) > 0:
		return certs, ""
	case len(other) > 0:
		return nil, fmt.Sprintf("holds a %s, not a certificate", other[0])
	case len(bytes.TrimSpace(b)) == 0:
		return nil, "is empty"
	case !bytes.Contains(b, []byte("-----BEGIN")):
		return nil, "is not PEM (perhaps DER: convert it with openssl x509 -inform der -in FILE -out FILE.pem)"
	}
	return nil, "holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
}

// checkKey says what is wrong with a private key file, "" if nothing.
func checkKey(b []byte) string {
	rest := b
	for {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		switch {
		case blk == nil && len(bytes.TrimSpace(b)) == 0:
			return "is empty: give this client's private key (PEM)"
		case blk == nil:
			return "holds no PEM private key (-----BEGIN PRIVATE KEY-----): give this client's private key"
		case blk.Type == "ENCRYPTED PRIVATE KEY" || blk.Headers["Proc-Type"] == "4,ENCRYPTED":
			return "is encrypted with a passphrase, which nothing could type in at start: decrypt it (openssl pkey -in KEY -out KEY.plain) and keep the plain key readable by the gateway's user only"
		case strings.HasSuffix(blk.Type, "PRIVATE KEY"):
			return ""
		}
	}
}
