// Package pahosec joins package mqttsec to the paho MQTT client, for the
// gateway's link and the controllers' client: it secures a paho client's
// connection and explains paho's connection errors.
package pahosec

import (
	"crypto/tls"
	"errors"
	"net"
	"net/url"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/fencegate/fencegate/mqttsec"
)

// SetTLS makes co connect with conf and, for a TLS broker URL over TCP
// (ssl, tls, mqtts, mqtt+ssl, tcps), with mqttsec.Dial, so that a refused
// client certificate is reported as the broker's alert. (paho's own dialer
// would take a SOCKS proxy from $all_proxy; this one connects directly.)
// Call it after the broker is added.
func SetTLS(co *mqtt.ClientOptions, conf *tls.Config) {
	co.SetTLSConfig(conf)
	if len(co.Servers) == 0 {
		return
	}
	for _, b := range co.Servers {
		if b.Scheme == "wss" || !mqttsec.IsTLSScheme(b.Scheme) {
			return
		}
	}
	co.SetCustomOpenConnectionFn(func(u *url.URL, o mqtt.ClientOptions) (net.Conn, error) {
		return mqttsec.Dial(u, o.TLSConfig, o.Dialer)
	})
}

// Explain says why a paho connection attempt with settings s failed, when
// the broker refused the credentials or TLS failed; "" for other errors.
func Explain(err error, s mqttsec.Settings) string {
	switch {
	case errors.Is(err, packets.ErrorRefusedBadUsernameOrPassword):
		return mqttsec.BadCredentials(s)
	case errors.Is(err, packets.ErrorRefusedNotAuthorised):
		return mqttsec.NotAuthorised(s)
	}
	return mqttsec.Explain(err, s)
}

// Explained is err with Explain's reason as its message (err's own if
// Explain has none); it unwraps to err.
func Explained(err error, s mqttsec.Settings) error {
	if why := Explain(err, s); why != "" {
		return &explained{why, err}
	}
	return err
}

type explained struct {
	why string
	err error
}

func (e *explained) Error() string { return e.why }
func (e *explained) Unwrap() error { return e.err }
