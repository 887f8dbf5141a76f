package main

import (
	"errors"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/mqttsec"
	"github.com/fencegate/fencegate/wire"
)

// sendNames are gateway send's flags, as its messages name them.
var sendNames = mqttsec.Names{Broker: "--broker", CAFile: "--tls-ca", CertFile: "--tls-cert", KeyFile: "--tls-key",
	ServerName: "--tls-server-name", Username: "--username", PasswordFile: "--password-file"}

// brokerFlags are gateway send's flags for the broker connection.
type brokerFlags struct {
	fs                                     *flagSet
	broker, prefix, username, passwordFile *string
	ca, cert, key, serverName              *string
}

func addBrokerFlags(fs *flagSet) *brokerFlags {
	return &brokerFlags{
		fs:           fs,
		broker:       fs.String("broker", "tcp://127.0.0.1:1883", "MQTT broker URL; ssl://HOST:PORT for TLS (with the system's CAs unless --tls-ca)"),
		prefix:       fs.String("prefix", wire.DefaultPrefix, "topic prefix"),
		username:     fs.String("username", "", "MQTT user name (the password comes from --password-file, or $"+mqttsec.EnvPassword+")"),
		passwordFile: fs.String("password-file", "", "file that holds the MQTT password, alone on one line"),
		ca:           fs.String("tls-ca", "", "TLS: file of the CA certificates (PEM) the broker's certificate must be signed by"),
		cert:         fs.String("tls-cert", "", "TLS: this controller's certificate (PEM), for a broker that requires one; with --tls-key"),
		key:          fs.String("tls-key", "", "TLS: the private key of --tls-cert (PEM)"),
		serverName:   fs.String("tls-server-name", "", "TLS: the name the broker's certificate must be for (default: the host of --broker)"),
	}
}

// options returns the client options the flags give for gateway gw; bad
// combinations are usage errors.
func (b *brokerFlags) options(gw string) (client.Options, error) {
	broker, err := b.fs.broker(*b.broker)
	if err != nil {
		return client.Options{}, err
	}
	o := client.Options{Broker: broker, Prefix: *b.prefix, GatewayID: gw, Username: *b.username, PasswordFile: *b.passwordFile, Names: sendNames}
	if *b.ca != "" || *b.cert != "" || *b.key != "" || *b.serverName != "" {
		o.TLS = &client.TLS{CAFile: *b.ca, CertFile: *b.cert, KeyFile: *b.key, ServerName: *b.serverName}
	}
	if err := o.Check(); err != nil {
		return o, &exitError{exitUsage, err}
	}
	return o, nil
}

// dialErr is the exit of a failed client.Dial: a file a flag names that
// cannot be used is a configuration error.
func dialErr(err error) error {
	var fe *mqttsec.FileError
	if errors.As(err, &fe) {
		return configErr(err)
	}
	return err
}
