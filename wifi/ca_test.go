package wifi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCert returns a self-signed CA certificate and its key, as PEM.
func testCert(t *testing.T) (cert, key []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})
}

func TestLoadCA(t *testing.T) {
	cert, key := testCert(t)
	n := &Network{CA: "ca.pem"}
	for _, tt := range []struct {
		name, file string
		want       string // the certificate back, or this in the error
	}{
		{"certificate", string(cert), ""},
		{"Windows line ends and text around it", "Subject: test CA\r\n" + strings.ReplaceAll(string(cert), "\n", "\r\n") + "trailing\r\n", ""},
		{"with its key", string(cert) + string(key), "holds a private key (EC PRIVATE KEY)"},
		{"no certificate", "hello\n", "no PEM certificate in it"},
		{"DER", string(mustDER(t, cert)), "no PEM certificate in it"},
		{"broken certificate", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "a certificate that does not parse"},
		{"huge", strings.Repeat("x", MaxSize+1), "more than 64 KiB"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "ca.pem"), []byte(tt.file), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := n.LoadCA(dir)
			if tt.want == "" {
				if err != nil || string(got) != string(cert) {
					t.Fatalf("LoadCA = %q, %v; want the certificate", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), filepath.Join(dir, "ca.pem")+": ") {
				t.Fatalf("LoadCA = %v, want %q naming the file", err, tt.want)
			}
		})
	}
	if _, err := n.LoadCA(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("LoadCA of a missing file = %v", err)
	}
	if got, err := (&Network{}).LoadCA(t.TempDir()); got != nil || err != nil {
		t.Errorf("LoadCA without ca = %q, %v; want nothing", got, err)
	}
}

func mustDER(t *testing.T, p []byte) []byte {
	b, _ := pem.Decode(p)
	if b == nil {
		t.Fatal("no PEM")
	}
	return b.Bytes
}
