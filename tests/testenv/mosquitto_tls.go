package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TLSBrokerOptions configure MosquittoTLS.
type TLSBrokerOptions struct {
	// Certs is where the broker's CA, certificate and key come from.
	Certs *Certs
	// Expired serves Certs.Expired instead of Certs.Server.
	Expired bool
	// RequireCertificate makes clients present a certificate signed by
	// Certs.CA (Mosquitto's require_certificate true).
	RequireCertificate bool
	// Users, if not nil, are the only clients allowed (name → password,
	// through a password file made with mosquitto_passwd); nil allows
	// anonymous clients.
	Users map[string]string
}

// TLSBroker is a Mosquitto with a TLS listener.
type TLSBroker struct {
	// URL is ssl://127.0.0.1:PORT.
	URL string
	dir string
	cmd *exec.Cmd
}

// MosquittoTLS starts a real Mosquitto whose only listener, on a reserved
// loopback port (see Port), speaks TLS with o's certificates and, with
// o.Users, requires a user name and password. It is killed when t ends.
func MosquittoTLS(t testing.TB, o TLSBrokerOptions) *TLSBroker {
	t.Helper()
	b := &TLSBroker{dir: t.TempDir()}
	cert, key := o.Certs.Server, o.Certs.ServerKey
	if o.Expired {
		cert, key = o.Certs.Expired, o.Certs.ExpiredKey
	}
	text := fmt.Sprintf("cafile %s\ncertfile %s\nkeyfile %s\nrequire_certificate %v\nset_tcp_nodelay true\npersistence false\nmax_queued_messages %d\n",
		o.Certs.CA, cert, key, o.RequireCertificate, QueuedMessages)
	if o.Users == nil {
		text += "allow_anonymous true\n"
	} else {
		b.WritePasswords(t, o.Users)
		text += fmt.Sprintf("allow_anonymous false\npassword_file %s\n", filepath.Join(b.dir, "passwd"))
	}
	if os.Geteuid() == 0 {
		// Started as root, Mosquitto becomes user mosquitto, who cannot
		// read this test's files.
		text += "user root\n"
	}
	url, cmd := mosquitto(t, text)
	b.URL, b.cmd = "ssl://"+strings.TrimPrefix(url, "tcp://"), cmd
	return b
}

// WritePasswords replaces the broker's password file with users (name →
// password); Reload makes it take effect.
func (b *TLSBroker) WritePasswords(t testing.TB, users map[string]string) {
	t.Helper()
	pw := filepath.Join(b.dir, "passwd")
	os.Remove(pw)
	writePasswd(t, pw, users)
}

// writePasswd adds users (name → password) to Mosquitto's password file
// path, creating it if it is missing, with mosquitto_passwd.
func writePasswd(t testing.TB, pw string, users map[string]string) {
	t.Helper()
	passwd := Program(t, "mosquitto_passwd")
	for name, secret := range users {
		args := []string{"-b", pw, name, secret}
		if _, err := os.Stat(pw); err != nil {
			args = append([]string{"-c"}, args...)
		}
		if out, err := exec.Command(passwd, args...).CombinedOutput(); err != nil {
			t.Fatalf("mosquitto_passwd: %v: %s", err, out)
		}
	}
}

// Reload makes Mosquitto read its password file again (SIGHUP).
func (b *TLSBroker) Reload(t testing.TB) {
	t.Helper()
	if err := b.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}
