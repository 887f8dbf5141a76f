package mqttsec

import (
	"crypto/tls"
	"errors"
	"net"
	"net/url"
	"time"
)

// Dial opens a TLS connection to the host of the broker URL u.
//
// In TLS 1.3 the client's part of the handshake ends before the broker
// checks the client's certificate. A broker that refuses it sends an
// alert and closes the connection; a client that has written its CONNECT
// by then gets a reset from that write instead of the alert, and would
// say only "connection reset". The connection Dial returns reads the
// alert when a write fails, and returns it as the write's error.
func Dial(u *url.URL, conf *tls.Config, d *net.Dialer) (net.Conn, error) {
	if d == nil {
		d = &net.Dialer{Timeout: 30 * time.Second}
	}
	c, err := tls.DialWithDialer(d, "tcp", u.Host, conf)
	if err != nil {
		return nil, err
	}
	return alertConn{c}, nil
}

// alertConn is a TLS connection whose failed write returns the alert the
// peer sent before it closed the connection, if it sent one.
type alertConn struct{ *tls.Conn }

// alertWait bounds the wait for an alert after a failed write.
const alertWait = time.Second

func (c alertConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err == nil || !isClosed(err) {
		return n, err
	}
	c.Conn.SetReadDeadline(time.Now().Add(alertWait))
	_, rerr := c.Conn.Read(make([]byte, 1))
	if op := (*net.OpError)(nil); errors.As(rerr, &op) && op.Op == "remote error" {
		return n, rerr
	}
	return n, err
}
