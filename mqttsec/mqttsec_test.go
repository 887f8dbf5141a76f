package mqttsec_test

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/mqttsec"
	"github.com/fencegate/fencegate/tests/testenv"
)

var names = mqttsec.GatewayNames()

func write(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestConfigFiles: every unusable file is an error that names its setting
// and path and says what is wrong; usable files give a configuration that
// verifies the broker against the CA file and presents the client
// certificate.
func TestConfigFiles(t *testing.T) {
	c := testenv.MakeCerts(t)
	dir := t.TempDir()
	encrypted := write(t, dir, "enc.key", "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n")
	der := write(t, dir, "ca.der", "\x30\x82\x01\x0a binary")
	tests := []struct {
		name  string
		files mqttsec.TLS
		want  []string // fragments of the one error, in order; none: no error
	}{
		{"missing CA file", mqttsec.TLS{CAFile: filepath.Join(dir, "nope.crt")},
			[]string{"mqtt.tls.ca_file " + filepath.Join(dir, "nope.crt") + ": no such file"}},
		{"CA file is a directory", mqttsec.TLS{CAFile: dir}, []string{"mqtt.tls.ca_file " + dir + ": is a directory"}},
		{"CA file is empty", mqttsec.TLS{CAFile: write(t, dir, "empty.crt", "")}, []string{"empty.crt: is empty", "certificate of the CA"}},
		{"CA file holds a key", mqttsec.TLS{CAFile: c.ClientKey}, []string{"holds a PRIVATE KEY, not a certificate"}},
		{"CA file is DER", mqttsec.TLS{CAFile: der}, []string{"is not PEM", "openssl x509 -inform der"}},
		{"certificate without key", mqttsec.TLS{CertFile: c.Client}, []string{"mqtt.tls.cert_file is set without mqtt.tls.key_file"}},
		{"key without certificate", mqttsec.TLS{KeyFile: c.ClientKey}, []string{"mqtt.tls.key_file is set without mqtt.tls.cert_file"}},
		{"key of another certificate", mqttsec.TLS{CertFile: c.Client, KeyFile: c.ServerKey},
			[]string{"mqtt.tls.key_file " + c.ServerKey + ": is not the key of mqtt.tls.cert_file " + c.Client}},
		{"encrypted key", mqttsec.TLS{CertFile: c.Client, KeyFile: encrypted}, []string{"enc.key: is encrypted with a passphrase", "openssl pkey"}},
		{"certificate and key swapped", mqttsec.TLS{CertFile: c.ClientKey, KeyFile: c.Client},
			[]string{"mqtt.tls.cert_file", "holds a PRIVATE KEY, not a certificate", "mqtt.tls.key_file", "holds no PEM private key"}},
		{"two bad files, two errors", mqttsec.TLS{CAFile: filepath.Join(dir, "nope.crt"), CertFile: c.Client, KeyFile: filepath.Join(dir, "nope.key")},
			[]string{"mqtt.tls.ca_file", "no such file", "mqtt.tls.key_file", "no such file"}},
		{"CA, certificate and key", mqttsec.TLS{CAFile: c.CA, CertFile: c.Client, KeyFile: c.ClientKey, ServerName: "localhost"}, nil},
		{"nothing: the system's CAs", mqttsec.TLS{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conf, err := tt.files.Config(names)
			if len(tt.want) == 0 {
				if err != nil || conf == nil {
					t.Fatalf("Config = %v, %v; want a configuration", conf, err)
				}
				if conf.InsecureSkipVerify || conf.MinVersion < tls.VersionTLS12 || conf.ServerName != tt.files.ServerName ||
					(tt.files.CAFile != "") != (conf.RootCAs != nil) || (tt.files.CertFile != "") != (len(conf.Certificates) == 1) {
					t.Errorf("Config = %+v, want verification on, TLS 1.2 or later, the server name, the CA pool and the certificate as given", conf)
				}
				return
			}
			if err == nil {
				t.Fatalf("Config = nil error, want one with %q", tt.want)
			}
			rest := err.Error()
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("error %q: want %q (in order: %q)", err, w, tt.want)
				}
				rest = rest[i+len(w):]
			}
		})
	}
}

// TestReadPassword: a password file's one line, with or without its line
// break; an empty file, or one of more lines, is an error that never
// shows what the file holds.
func TestReadPassword(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct{ text, want, err string }{
		{"s3cret-Pw\n", "s3cret-Pw", ""},
		{"s3cret-Pw", "s3cret-Pw", ""},
		{"s3cret-Pw\r\n", "s3cret-Pw", ""},
		{" spaced pw \n", " spaced pw ", ""},
		{"", "", "is empty"},
		{"\n", "", "is empty"},
		{"user:s3cret-Pw\nother-Line\n", "", "has 2 lines"},
	} {
		p := write(t, dir, "pw", tt.text)
		got, err := mqttsec.ReadPassword("mqtt.password_file", p)
		if tt.err == "" {
			if err != nil || got != tt.want {
				t.Errorf("ReadPassword(%q) = %q, %v; want %q", tt.text, got, err, tt.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "mqtt.password_file "+p+": "+tt.err) {
			t.Errorf("ReadPassword(%q) = %q, %v; want an error %q", tt.text, got, err, tt.err)
		}
		if err != nil && (strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "other-Line")) {
			t.Errorf("ReadPassword's error shows the file's content: %v", err)
		}
	}
	if _, err := mqttsec.ReadPassword("--password-file", filepath.Join(dir, "none")); err == nil || !strings.Contains(err.Error(), "--password-file") {
		t.Errorf("missing file: %v, want an error naming --password-file", err)
	}
}

// TestExposed: a secret file every user may read is worth a warning; one
// for the owner and group only is not.
func TestExposed(t *testing.T) {
	p := write(t, t.TempDir(), "pw", "x\n")
	for _, tt := range []struct {
		mode os.FileMode
		warn bool
	}{{0o600, false}, {0o640, false}, {0o644, true}, {0o604, true}} {
		if err := os.Chmod(p, tt.mode); err != nil {
			t.Fatal(err)
		}
		if got := mqttsec.Exposed("mqtt.password_file", p); (got != "") != tt.warn || tt.warn && !strings.Contains(got, "chmod 0640") {
			t.Errorf("mode %04o: Exposed = %q, want a warning: %v", tt.mode, got, tt.warn)
		}
	}
}

// tlsServer serves TLS handshakes on loopback with cert and key, requiring
// client certificates signed by clientCA if it is set; after a handshake
// it writes one byte and closes.
func tlsServer(t *testing.T, certFile, keyFile, clientCA string) string {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	conf := &tls.Config{Certificates: []tls.Certificate{cert}}
	if clientCA != "" {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM([]byte(read(t, clientCA)))
		conf.ClientCAs, conf.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				if c.(*tls.Conn).Handshake() == nil {
					c.Write([]byte{1})
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// dial does what an MQTT client does first: a handshake, then a read (in
// TLS 1.3 the server refuses a client certificate only after the client's
// handshake is done).
func dial(addr string, conf *tls.Config) error {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, conf)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Read(make([]byte, 1))
	return err
}

// TestExplainHandshakes runs real TLS handshakes over loopback, with each
// fault a broker connection can have, and checks that Explain names the
// fault and the setting to fix.
func TestExplainHandshakes(t *testing.T) {
	c := testenv.MakeCerts(t)
	good := tlsServer(t, c.Server, c.ServerKey, "")
	expired := tlsServer(t, c.Expired, c.ExpiredKey, "")
	future := tlsServer(t, c.Future, c.FutureKey, "")
	selfSigned := tlsServer(t, c.SelfSigned, c.SelfSignedKey, "")
	mutual := tlsServer(t, c.Server, c.ServerKey, c.CA)
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	go func() {
		for {
			c, err := plain.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("not TLS at all, a plain MQTT listener\n"))
			c.Close()
		}
	}()
	tests := []struct {
		name  string
		addr  string
		files mqttsec.TLS
		want  []string // fragments of Explain's reason; none: the connection works
	}{
		{"good", good, mqttsec.TLS{CAFile: c.CA}, nil},
		{"good, with the server name", good, mqttsec.TLS{CAFile: c.CA, ServerName: "localhost"}, nil},
		{"wrong CA", good, mqttsec.TLS{CAFile: c.OtherCA},
			[]string{"the broker's certificate is not signed by a CA in mqtt.tls.ca_file " + c.OtherCA, `"fencegate test CA"`}},
		{"the system's CAs", good, mqttsec.TLS{},
			[]string{"not signed by a CA this system trusts", "set mqtt.tls.ca_file"}},
		{"wrong server name", good, mqttsec.TLS{CAFile: c.CA, ServerName: "broker.example"},
			[]string{"the broker's certificate is for localhost, 127.0.0.1, not for \"broker.example\" (mqtt.tls.server_name)"}},
		{"expired", expired, mqttsec.TLS{CAFile: c.CA},
			[]string{"the broker's certificate expired at", "renew it on the broker"}},
		{"not yet valid", future, mqttsec.TLS{CAFile: c.CA},
			[]string{"the broker's certificate is valid only from", "is the clock right?"}},
		{"self-signed", selfSigned, mqttsec.TLS{CAFile: c.CA},
			[]string{`the broker's certificate is self-signed ("broker"), and not in mqtt.tls.ca_file ` + c.CA + ": put that certificate itself there"}},
		{"self-signed, the system's CAs", selfSigned, mqttsec.TLS{},
			[]string{`the broker's certificate is self-signed ("broker"): set mqtt.tls.ca_file to that certificate itself`}},
		{"self-signed, given as the CA", selfSigned, mqttsec.TLS{CAFile: c.SelfSigned}, nil},
		{"client certificate missing", mutual, mqttsec.TLS{CAFile: c.CA},
			[]string{"the broker requires a client certificate", "set mqtt.tls.cert_file and mqtt.tls.key_file"}},
		{"client certificate of another CA", mutual, mqttsec.TLS{CAFile: c.CA, CertFile: c.OtherClient, KeyFile: c.OtherClientKey},
			[]string{"the broker refused this client's certificate, mqtt.tls.cert_file " + c.OtherClient}},
		{"client certificate", mutual, mqttsec.TLS{CAFile: c.CA, CertFile: c.Client, KeyFile: c.ClientKey}, nil},
		{"not a TLS listener", plain.Addr().String(), mqttsec.TLS{CAFile: c.CA},
			[]string{"the broker does not speak TLS on this port", "mqtt.broker"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conf, err := tt.files.Config(names)
			if err != nil {
				t.Fatal(err)
			}
			err = dial(tt.addr, conf)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("dial = %v, want a connection", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("dial = nil error, want %q", tt.want)
			}
			why := mqttsec.Explain(err, mqttsec.Settings{Names: names, Broker: "ssl://" + tt.addr, TLS: tt.files})
			t.Logf("%v\n\t→ %s", err, why)
			for _, w := range tt.want {
				if !strings.Contains(why, w) {
					t.Errorf("Explain(%v) = %q, want %q", err, why, w)
				}
			}
		})
	}
}
