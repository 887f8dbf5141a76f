package main

import (
	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/sign"
)

// signFlags are gateway send's --key and --signer.
type signFlags struct{ key, signer *string }

func addSignFlags(fs *flagSet) signFlags {
	return signFlags{
		key:    fs.String("key", "", "sign the command with this controller's private key (the PATH.key of gateway keygen); with --signer"),
		signer: fs.String("signer", "", "the controller's name in the gateway's configuration (controllers: name); with --key"),
	}
}

// apply reads the key into o: both flags or neither.
func (f signFlags) apply(o *client.Options) error {
	switch {
	case *f.key == "" && *f.signer == "":
		return nil
	case *f.key == "":
		return usageErr("--signer %s needs --key PATH.key, the controller's private key (gateway keygen --out PATH writes it)", *f.signer)
	case *f.signer == "":
		return usageErr("--key needs --signer NAME, the controller's name in the gateway's configuration (controllers: name)")
	}
	key, err := sign.ReadPrivateKey(*f.key)
	if err != nil {
		return usageErr("--key: %v", err)
	}
	o.Signer, o.Key = *f.signer, key
	return nil
}
