package wifi

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// LoadCA reads the CA file the network's ca names, from dir (the folder
// of wifi.txt), and returns its certificates as PEM: only CERTIFICATE
// blocks that parse, nothing else of the file. A file with a private key,
// or with no certificate, is refused, naming the file as file (wifi.txt)
// names it.
func (n *Network) LoadCA(dir string) ([]byte, error) {
	if n.CA == "" {
		return nil, nil
	}
	path := filepath.Join(dir, n.CA)
	bad := func(format string, a ...any) error {
		return &LineError{File: path, Msg: fmt.Sprintf(format, a...)}
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, bad("not found: wifi.txt's ca: names it; put the CA certificate's PEM file next to wifi.txt under that name")
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && !st.Mode().IsRegular() {
		return nil, bad("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > MaxSize {
		return nil, bad("more than %d KiB: a CA certificate is a few KiB; is this the right file?", MaxSize>>10)
	}
	var out bytes.Buffer
	for rest := data; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		switch {
		case strings.Contains(blk.Type, "PRIVATE KEY"):
			return nil, bad("holds a private key (%s): the Pi needs only the CA's certificate; keep the key off the card, and make a new one, since this card had it", blk.Type)
		case blk.Type != "CERTIFICATE":
			continue
		}
		// Not required to be a CA's: a network whose server has a
		// self-signed certificate is trusted through that certificate.
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return nil, bad("a certificate that does not parse: %v", err)
		}
		pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: blk.Bytes})
	}
	if out.Len() == 0 {
		return nil, bad("no PEM certificate in it (-----BEGIN CERTIFICATE-----): export the CA's certificate as PEM (Base-64)")
	}
	return out.Bytes(), nil
}
