package main

import (
	"fmt"
	"io"

	"github.com/fencegate/fencegate/sign"
)

func cmdKeygen(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("keygen", "--out PATH", `
Makes a controller's Ed25519 key pair for signed commands: PATH.key, the
private key (PKCS#8 PEM, mode 0600), which stays with the controller
(gateway send --key PATH.key, or package client), and PATH.pub, the public
key line to paste into the gateway's configuration under controllers:. It
never overwrites a file. The gateway itself never reads a private key.`)
	out := fs.String("out", "", "where to write: PATH.key and PATH.pub (required)")
	if err := fs.parseNoArgs(args, stdout, stderr); err != nil {
		return err
	}
	if *out == "" {
		return usageErr("--out PATH is required (it writes PATH.key and PATH.pub)")
	}
	pub, err := sign.WriteKeyPair(*out, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, `wrote %s (private key, mode 0600: keep it with the controller, never on the gateway)
wrote %s (public key)
Add the controller to the gateway's configuration, with its name and the fence scopes it may command:
controllers:
  - name: NAME
    public_key: "%s"
    scopes: [SCOPE]
`, sign.KeyFile(*out), sign.PubFile(*out), sign.FormatPublicKey(pub))
	return nil
}
