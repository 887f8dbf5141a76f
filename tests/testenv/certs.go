package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Certs are PEM files of a small public key infrastructure made for one
// test: a CA, a server certificate it signed for 127.0.0.1 and localhost,
// an expired one for the same names, a client certificate, and a second CA
// with a client certificate of its own. Each key file is next to its
// certificate (0600).
type Certs struct {
	Dir string
	// CA signed Server, Expired and Client; OtherCA signed OtherClient
	// and nothing the broker uses.
	CA, OtherCA string
	// Server and its key: valid now, for 127.0.0.1 and localhost.
	Server, ServerKey string
	// Expired and its key: for the same names, valid until an hour ago.
	Expired, ExpiredKey string
	// Future and its key: for the same names, valid from tomorrow.
	Future, FutureKey string
	// SelfSigned and its key: for the same names, signed by itself.
	SelfSigned, SelfSignedKey string
	// Client and its key: a client certificate (CN "gateway") signed by CA.
	Client, ClientKey string
	// OtherClient and its key: a client certificate signed by OtherCA.
	OtherClient, OtherClientKey string
}

// MakeCerts makes a Certs in a new temporary directory.
func MakeCerts(t testing.TB) *Certs {
	t.Helper()
	return makeCerts(t, 0, "127.0.0.1")
}

// MakePiCerts is MakeCerts for the emulated Raspberry Pi: Server is also
// for 10.0.2.2 (the host, as QEMU's user network shows it to the Pi), and
// the CAs, Server, Client and OtherClient are valid since 2020, since the
// Pi's clock lags (it has none, and starts at the image's date until it
// has the time from the network).
func MakePiCerts(t testing.TB) *Certs {
	t.Helper()
	return makeCerts(t, time.Since(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)), "127.0.0.1", "10.0.2.2")
}

// makeCerts makes a Certs whose valid certificates are valid from back
// before now (besides their usual hour or two), the server's for
// localhost and the addresses.
func makeCerts(t testing.TB, back time.Duration, addresses ...string) *Certs {
	t.Helper()
	var ips []net.IP
	for _, a := range addresses {
		ips = append(ips, net.ParseIP(a))
	}
	dir := t.TempDir()
	c := &Certs{Dir: dir}
	mk := &certMaker{t: t, dir: dir, back: back}
	ca, caKey := mk.ca("fencegate test CA", "ca.crt")
	other, otherKey := mk.ca("another CA", "other-ca.crt")
	c.CA, c.OtherCA = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "other-ca.crt")
	now := time.Now()
	server := func(name string, notBefore, notAfter time.Time) (string, string) {
		return mk.leaf(name, ca, caKey, &x509.Certificate{
			Subject:     pkix.Name{CommonName: "broker"},
			NotBefore:   notBefore,
			NotAfter:    notAfter,
			DNSNames:    []string{"localhost"},
			IPAddresses: ips,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		})
	}
	c.Server, c.ServerKey = server("server", now.Add(-48*time.Hour-back), now.Add(24*time.Hour))
	c.Expired, c.ExpiredKey = server("expired", now.Add(-48*time.Hour), now.Add(-time.Hour))
	c.Future, c.FutureKey = server("future", now.Add(24*time.Hour), now.Add(48*time.Hour))
	c.SelfSigned, c.SelfSignedKey = mk.leaf("self-signed", nil, nil, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "broker"},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(24 * time.Hour),
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	client := func(name string, ca *x509.Certificate, key *ecdsa.PrivateKey) (string, string) {
		return mk.leaf(name, ca, key, &x509.Certificate{
			Subject:     pkix.Name{CommonName: "gateway"},
			NotBefore:   now.Add(-time.Hour - back),
			NotAfter:    now.Add(24 * time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		})
	}
	c.Client, c.ClientKey = client("client", ca, caKey)
	c.OtherClient, c.OtherClientKey = client("other-client", other, otherKey)
	return c
}

type certMaker struct {
	t      testing.TB
	dir    string
	serial int64
	back   time.Duration // how much earlier than usual the CAs are valid from
}

func (m *certMaker) key() *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		m.t.Fatal(err)
	}
	return k
}

// ca makes a self-signed CA and writes its certificate to file.
func (m *certMaker) ca(cn, file string) (*x509.Certificate, *ecdsa.PrivateKey) {
	key := m.key()
	m.serial++
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(m.serial),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-72*time.Hour - m.back),
		NotAfter:              time.Now().Add(72 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		m.t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		m.t.Fatal(err)
	}
	m.write(file, "CERTIFICATE", der, 0o644)
	return cert, key
}

// leaf makes a certificate from tmpl signed by ca (nil: by itself), and
// writes it to NAME.crt and its key to NAME.key.
func (m *certMaker) leaf(name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, tmpl *x509.Certificate) (certFile, keyFile string) {
	key := m.key()
	m.serial++
	tmpl.SerialNumber = big.NewInt(m.serial)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	if ca == nil {
		ca, caKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		m.t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		m.t.Fatal(err)
	}
	return m.write(name+".crt", "CERTIFICATE", der, 0o644), m.write(name+".key", "PRIVATE KEY", kder, 0o600)
}

func (m *certMaker) write(file, typ string, der []byte, mode os.FileMode) string {
	p := filepath.Join(m.dir, file)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
		m.t.Fatal(err)
	}
	return p
}
