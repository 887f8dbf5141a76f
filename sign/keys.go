package sign

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// KeyFile and PubFile name the files of a key pair written to path: the
// private key (PKCS#8 PEM, mode 0600) and the public key line.
func KeyFile(path string) string { return path + ".key" }

// PubFile names the public key file of the key pair at path; see KeyFile.
func PubFile(path string) string { return path + ".pub" }

// WriteKeyPair makes a new Ed25519 key pair from random (crypto/rand if
// nil) and writes it to KeyFile(path), mode 0600, and PubFile(path). It
// refuses to overwrite either file: a controller's key is replaced on
// purpose, by removing the old one first. It returns the public key.
func WriteKeyPair(path string, random io.Reader) (ed25519.PublicKey, error) {
	if random == nil {
		random = rand.Reader
	}
	keyPath, pubPath := KeyFile(path), PubFile(path)
	for _, p := range []string{keyPath, pubPath} {
		if _, err := os.Lstat(p); err == nil {
			return nil, fmt.Errorf("sign: %s exists; keygen never overwrites a key (remove it first if you mean to replace it)", p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("sign: %w", err)
		}
	}
	pub, priv, err := ed25519.GenerateKey(random)
	if err != nil {
		return nil, fmt.Errorf("sign: generate key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	if err := writeNew(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	if err := writeNew(pubPath, []byte(FormatPublicKey(pub)+"\n"), 0o644); err != nil {
		os.Remove(keyPath)
		return nil, err
	}
	return pub, nil
}

// writeNew creates path with b, failing if it exists, and syncs it.
func writeNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	if err := f.Chmod(mode); err != nil { // exactly mode, whatever the umask
		f.Close()
		os.Remove(path)
		return fmt.Errorf("sign: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("sign: write %s: %w", path, err)
	}
	return nil
}

// ReadPrivateKey reads a private key that WriteKeyPair wrote (a PKCS#8
// PEM "PRIVATE KEY" holding an Ed25519 key). Its errors say what is wrong
// with the file, never what it holds.
func ReadPrivateKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	const want = "want the PATH.key that gateway keygen --out PATH wrote"
	block, _ := pem.Decode(b)
	switch {
	case block == nil:
		if _, err := ParsePublicKey(string(b)); err == nil {
			return nil, fmt.Errorf("sign: %s is a public key; %s", path, want)
		}
		return nil, fmt.Errorf("sign: %s is not a PEM file; %s", path, want)
	case block.Type != "PRIVATE KEY":
		return nil, fmt.Errorf("sign: %s holds a PEM %q, not a \"PRIVATE KEY\" (PKCS#8); %s", path, block.Type, want)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("sign: %s: not a PKCS#8 private key; %s", path, want)
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("sign: %s holds a %T, not an Ed25519 key; %s", path, k, want)
	}
	return key, nil
}
