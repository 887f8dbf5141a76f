package mqttlink

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync/atomic"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"golang.org/x/net/proxy"

	"github.com/fencegate/fencegate/mqttsec"
	"github.com/fencegate/fencegate/wire"
)

// MaxPacket is the largest MQTT packet the link reads whole, in bytes. The
// MQTT client library (paho) reads every packet whole, whatever its size
// (up to 256 MB), and has no limit of its own: the link therefore reads the
// connection through a filter that passes smaller packets on unchanged and
// replaces a larger PUBLISH by a stand-in of a few hundred bytes, reading
// the rest of it into nothing. The stand-in keeps the publish's topic,
// flags and packet id, so that it is answered (rejected: "payload is N
// bytes; the limit is 1024") and acknowledged like any command, and the
// payload's first wire.MaxPayload bytes, for its id. A larger packet of
// another kind (the broker's own) closes the connection.
const MaxPacket = 64 << 10

// standIn starts the payload of an oversized publish's stand-in: a NUL (no
// JSON text begins with one), this text, the payload's size in decimal, a
// NUL, and the payload's first bytes. A payload of at most MaxPacket bytes
// that looks like a stand-in is taken for one: it says its own size, and
// is refused like any oversized payload.
const standIn = "\x00fencegate: oversized payload of "

// oversized reports whether payload is a stand-in, and if so the size of
// the payload it replaced and that payload's first bytes.
func oversized(payload []byte) (size int, head []byte, ok bool) {
	rest, ok := bytes.CutPrefix(payload, []byte(standIn))
	if !ok {
		return 0, nil, false
	}
	n, head, ok := bytes.Cut(rest, []byte{0})
	if !ok {
		return 0, nil, false
	}
	size, err := strconv.Atoi(string(n))
	if err != nil {
		return 0, nil, false
	}
	return size, head, true
}

// decode decodes the command payload of a message for actuator name: a
// stand-in is refused for the size of the payload it replaced.
func decode(name string, payload []byte) (wire.Request, error) {
	if size, head, ok := oversized(payload); ok {
		c, err := wire.Oversized(name, size, head)
		return wire.Request{Command: c}, err
	}
	return wire.DecodeRequest(name, payload)
}

// limitConn is a connection whose reads pass through the MaxPacket filter
// (see MaxPacket); writes go straight through.
type limitConn struct {
	net.Conn
	r    *bufio.Reader
	out  []byte // bytes ready for the reader: a fixed header, or a stand-in
	pass int    // bytes of the current packet still to pass on unchanged
	err  error  // the error that ended the stream

	aborted atomic.Pointer[error] // why the link closed it, if it did
}

func newLimitConn(c net.Conn) *limitConn {
	return &limitConn{Conn: c, r: bufio.NewReaderSize(c, 4096)}
}

// Read implements net.Conn.
func (c *limitConn) Read(p []byte) (int, error) {
	n, err := c.read(p)
	if err != nil {
		if why := c.aborted.Load(); why != nil {
			err = *why
		}
	}
	return n, err
}

// abort closes the connection, and its reader gets err. paho ignores the
// error of a connection closed under it ("use of closed network
// connection"), taking it for its own disconnect: it would notice the loss
// only when a keepalive went unanswered.
func (c *limitConn) abort(err error) {
	c.aborted.Store(&err)
	c.Conn.Close()
}

func (c *limitConn) read(p []byte) (int, error) {
	for len(c.out) == 0 && c.pass == 0 {
		if c.err != nil {
			return 0, c.err
		}
		c.err = c.next()
	}
	if len(c.out) > 0 {
		n := copy(p, c.out)
		c.out = c.out[n:]
		return n, nil
	}
	if len(p) > c.pass {
		p = p[:c.pass]
	}
	n, err := c.r.Read(p)
	c.pass -= n
	if err != nil && c.pass > 0 {
		c.err = err
	}
	return n, err
}

// next reads the next packet's fixed header and prepares it: passed on, or
// replaced by a stand-in.
func (c *limitConn) next() error {
	first, err := c.r.ReadByte()
	if err != nil {
		return err
	}
	size, lenBytes, err := readLength(c.r)
	if err != nil {
		return err
	}
	if size <= MaxPacket {
		c.out = append(append(c.out[:0], first), lenBytes...)
		c.pass = size
		return nil
	}
	const publish = 3
	if first>>4 != publish {
		return fmt.Errorf("mqttlink: the broker sent a packet of type %d and %d bytes; the limit is %d", first>>4, size, MaxPacket)
	}
	// topic, packet id (QoS 1 and 2), payload
	var n [2]byte
	if _, err := io.ReadFull(c.r, n[:]); err != nil {
		return err
	}
	topicLen := int(binary.BigEndian.Uint16(n[:]))
	vh := 2 + topicLen
	if qos := first >> 1 & 3; qos > 0 {
		vh += 2
	}
	if vh > size {
		return fmt.Errorf("mqttlink: malformed PUBLISH from the broker: a topic of %d bytes in a packet of %d", topicLen, size)
	}
	header := make([]byte, vh)
	copy(header, n[:])
	if _, err := io.ReadFull(c.r, header[2:]); err != nil {
		return err
	}
	payload := size - vh
	head := make([]byte, min(payload, wire.MaxPayload))
	if _, err := io.ReadFull(c.r, head); err != nil {
		return err
	}
	if _, err := io.CopyN(io.Discard, c.r, int64(payload-len(head))); err != nil {
		return err
	}
	body := append(header, standIn+strconv.Itoa(payload)+"\x00"...)
	body = append(body, head...)
	c.out = append(append(append(c.out[:0], first), encodeLength(len(body))...), body...)
	return nil
}

// readLength reads an MQTT remaining length, returning it and its bytes.
func readLength(r io.ByteReader) (int, []byte, error) {
	var v, shift int
	var raw []byte
	for i := 0; i < 4; i++ {
		b, err := r.ReadByte()
		if err != nil {
			return 0, nil, err
		}
		raw = append(raw, b)
		v |= int(b&0x7f) << shift
		if b&0x80 == 0 {
			return v, raw, nil
		}
		shift += 7
	}
	return 0, nil, errors.New("mqttlink: malformed remaining length from the broker")
}

// encodeLength encodes an MQTT remaining length.
func encodeLength(n int) []byte {
	var b []byte
	for {
		d := byte(n % 128)
		n /= 128
		if n > 0 {
			d |= 0x80
		}
		b = append(b, d)
		if n == 0 {
			return b
		}
	}
}

// openConn returns the function that opens the link's connections: paho's
// own way for the broker URL's scheme (or open, if set: package pahosec's
// for TLS), read through the MaxPacket filter, and wrapped by
// testHookConn if a test set it.
func openConn(open mqtt.OpenConnectionFunc, opened func(*limitConn)) mqtt.OpenConnectionFunc {
	return func(u *url.URL, o mqtt.ClientOptions) (net.Conn, error) {
		var c net.Conn
		var err error
		if open != nil {
			c, err = open(u, o)
		} else {
			c, err = dial(u, o)
		}
		if err != nil {
			return nil, err
		}
		lc := newLimitConn(c)
		opened(lc)
		c = lc
		if testHookConn != nil {
			c = testHookConn(c)
		}
		return c, nil
	}
}

// dial opens a connection as paho does for the schemes that package
// pahosec leaves to it (it takes TLS over TCP).
func dial(u *url.URL, o mqtt.ClientOptions) (net.Conn, error) {
	d := o.Dialer
	if d == nil {
		d = &net.Dialer{Timeout: o.ConnectTimeout}
	}
	switch u.Scheme {
	case "ws", "wss":
		ws := *u
		ws.User = nil // as paho: gorilla's websocket takes no user in the URL
		return mqtt.NewWebsocket(ws.String(), o.TLSConfig, o.ConnectTimeout, o.HTTPHeaders, o.WebsocketOptions)
	case "ssl", "tls", "mqtts", "mqtt+ssl", "tcps":
		return mqttsec.Dial(u, o.TLSConfig, d)
	case "mqtt", "tcp":
		return proxy.FromEnvironmentUsing(d).Dial("tcp", u.Host)
	case "unix":
		if u.Host != "" {
			return d.Dial("unix", u.Host)
		}
		return d.Dial("unix", u.Path)
	}
	return nil, fmt.Errorf("mqttlink: unknown protocol %q in %s", u.Scheme, u.Redacted())
}
