// Package pahosec joins package mqttsec to the paho MQTT client, for the
// gateway's link and the controllers' client: it secures a paho client's
// connection and explains paho's connection errors.
package pahosec

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"

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

// Explain says why a paho connection attempt with settings s failed, in
// words a person can act on, as the gateway's log and gateway send say
// it: the broker refused the client, its credentials or TLS failed, or
// the broker could not be reached; "" for other errors.
func Explain(err error, s mqttsec.Settings) string {
	var (
		op  *net.OpError
		dns *net.DNSError
	)
	switch {
	case errors.Is(err, packets.ErrorRefusedBadUsernameOrPassword):
		return mqttsec.BadCredentials(s)
	case errors.Is(err, packets.ErrorRefusedNotAuthorised):
		return mqttsec.NotAuthorised(s)
	}
	if why := mqttsec.Explain(err, s); why != "" {
		return why
	}
	switch {
	case err == nil:
		return ""
	case errors.Is(err, packets.ErrorRefusedIDRejected):
		return "identifier rejected: the broker does not accept the client id (set mqtt.client_id)"
	case errors.Is(err, packets.ErrorRefusedServerUnavailable):
		return "the broker says it is unavailable"
	case errors.Is(err, packets.ErrorRefusedBadProtocolVersion):
		return "the broker does not speak MQTT 3.1.1"
	case errors.As(err, &dns):
		return fmt.Sprintf("host %q not found (check %s)", dns.Name, s.Names.Broker)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("connection refused: nothing listens at %s (is the broker running? is the port right?)", hostPort(s.Broker))
	case errors.As(err, &op) && op.Timeout():
		return "timed out: the broker did not answer (network down, firewall, or wrong address)"
	case IsEOF(err):
		return "the broker closed the connection"
	}
	return ""
}

// hostPort is the host:port of a broker URL.
func hostPort(broker string) string {
	if u, err := url.Parse(broker); err == nil && u.Host != "" {
		return u.Host
	}
	return broker
}

// IsEOF reports an error of a connection the other side closed.
func IsEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
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
