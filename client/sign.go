package client

import (
	"crypto/ed25519"
	"errors"
	"fmt"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sign"
)

// signing checks Options.Signer and Options.Key: both or neither.
func (o Options) signing() error {
	switch {
	case o.Signer == "" && o.Key == nil:
		return nil
	case o.Signer == "":
		return errors.New("client: Options.Key is set but Signer is not: name the controller as the gateway's configuration does (controllers: name)")
	case o.Key == nil:
		return fmt.Errorf("client: Options.Signer is %q but Key is not set: load the controller's private key with sign.ReadPrivateKey", o.Signer)
	case len(o.Key) != ed25519.PrivateKeySize:
		return fmt.Errorf("client: Options.Key has %d bytes, not an Ed25519 private key's %d", len(o.Key), ed25519.PrivateKeySize)
	}
	return nil
}

// sign signs c for the client's gateway if the client has a key; otherwise
// c goes as it is (unsigned, or signed by the caller).
func (cl *Client) sign(c fence.Command) fence.Command {
	if cl.key == nil {
		return c
	}
	return sign.Sign(cl.key, cl.signer, cl.topics.GatewayID, c)
}
