package mqttlink

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

func publishPacket(topic string, qos byte, retain bool, id uint16, payload []byte) *packets.PublishPacket {
	p := packets.NewControlPacket(packets.Publish).(*packets.PublishPacket)
	p.TopicName, p.Qos, p.Retain, p.MessageID, p.Payload = topic, qos, retain, id, payload
	return p
}

// describe says what a packet carries (not its remaining length, which
// only a written packet has).
func describe(p packets.ControlPacket) string {
	if p, ok := p.(*packets.PublishPacket); ok {
		return fmt.Sprintf("PUBLISH %s qos %d id %d retain %v dup %v payload %q", p.TopicName, p.Qos, p.MessageID, p.Retain, p.Dup, p.Payload)
	}
	return fmt.Sprintf("%T", p)
}

// chunked writes to w in pieces of at most n bytes, so that the filter
// reads packets split anywhere.
type chunked struct {
	w io.Writer
	n int
}

func (c chunked) Write(p []byte) (int, error) {
	for i := 0; i < len(p); i += c.n {
		if _, err := c.w.Write(p[i:min(i+c.n, len(p))]); err != nil {
			return i, err
		}
	}
	return len(p), nil
}

// TestLimitConn: the MaxPacket filter passes packets of up to MaxPacket
// bytes on unchanged, in any pieces, and replaces a larger PUBLISH by a
// stand-in with its topic, flags and packet id, its size and its first
// wire.MaxPayload bytes, reading the rest into nothing. A larger packet of
// another kind ends the stream with an error.
func TestLimitConn(t *testing.T) {
	big := []byte(`{"id":"big-1","token":1,"holder":"` + strings.Repeat("h", 200<<10) + `"}`)
	small := []byte(`{"id":"small-1","token":1}`)
	edge := bytes.Repeat([]byte("e"), MaxPacket-len("f/g/a/set")-4) // a packet of exactly MaxPacket bytes
	in := []packets.ControlPacket{
		publishPacket("f/g/a/set", 1, false, 7, small),
		publishPacket("f/g/a/set", 1, false, 8, big),
		packets.NewControlPacket(packets.Pingresp),
		publishPacket("f/g/a/set", 0, true, 0, big[:MaxPacket]),
		publishPacket("f/g/a/set", 1, false, 9, edge),
		publishPacket("f/g/b/set", 2, false, 10, big[:MaxPacket+1]),
	}
	want := []packets.ControlPacket{
		in[0],
		publishPacket("f/g/a/set", 1, false, 8, []byte(fmt.Sprintf("%s%d\x00%s", standIn, len(big), big[:wire.MaxPayload]))),
		in[2],
		publishPacket("f/g/a/set", 0, true, 0, []byte(fmt.Sprintf("%s%d\x00%s", standIn, MaxPacket, big[:wire.MaxPayload]))),
		in[4],
		publishPacket("f/g/b/set", 2, false, 10, []byte(fmt.Sprintf("%s%d\x00%s", standIn, MaxPacket+1, big[:wire.MaxPayload]))),
	}
	for _, n := range []int{1, 3, 4096, 1 << 20} {
		t.Run(fmt.Sprintf("pieces of %d bytes", n), func(t *testing.T) {
			client, server := net.Pipe()
			defer client.Close()
			go func() {
				for _, p := range in {
					if p.Write(chunked{server, n}) != nil {
						return
					}
				}
				// A SUBACK of more than MaxPacket bytes: no broker's.
				(&packets.SubackPacket{FixedHeader: packets.FixedHeader{MessageType: packets.Suback}, MessageID: 1,
					ReturnCodes: make([]byte, MaxPacket+1)}).Write(chunked{server, n})
				server.Close()
			}()
			r := newLimitConn(client)
			for i, w := range want {
				got, err := packets.ReadPacket(r)
				if err != nil {
					t.Fatalf("packet %d: %v", i, err)
				}
				if describe(got) != describe(w) {
					t.Errorf("packet %d = %.200s…, want %.200s…", i, describe(got), describe(w))
				}
			}
			if got, err := packets.ReadPacket(r); err == nil || !strings.Contains(err.Error(), "the limit is 65536") {
				t.Errorf("after a SUBACK of %d bytes: %v, %v; want an error naming the limit", MaxPacket+4, got, err)
			}
		})
	}
}

// TestOversizedAnswered: through a broker that forwards any size
// (Mosquitto without max_packet_size), a command of any size above the
// limit is answered rejected, invalid, with its size and its id, however
// the link received it (whole, or as a stand-in), and acknowledged: the
// next command on the actuator, published after it, is decided.
func TestOversizedAnswered(t *testing.T) {
	broker := testenv.Mosquitto(t)
	topics := wire.Topics{GatewayID: testenv.ID(t, "big")}
	h := &countHandler{}
	startLink(t, Options{Broker: broker, Topics: topics, Actuators: []string{"a"}, Store: "s"}, h)
	ctl := testctl.Connect(t, broker, topics)
	for i, size := range []int{wire.MaxPayload + 1, MaxPacket - 100, MaxPacket + 1, 4 << 20} {
		id := fmt.Sprint("big-", i)
		head := `{"id":"` + id + `","token":1,"holder":"`
		payload := head + strings.Repeat("h", size-len(head)-2) + `"}`
		ctl.Publish(t, "a", []byte(payload), false)
		res := ctl.Result(t, id)
		if want := fmt.Sprintf("payload is %d bytes; the limit is %d", size, wire.MaxPayload); res.Outcome != fence.Rejected || res.Reason != fence.ReasonInvalid || res.Error != want {
			t.Errorf("a command of %d bytes: %s (%s) %q, want rejected (invalid) %q", size, res.Outcome, res.Reason, res.Error, want)
		}
	}
	if res := ctl.Send(t, fence.Command{ID: "after", Actuator: "a", Fence: fence.Fence{Token: 2}, State: fence.StateOn}); res.Outcome != fence.Applied {
		t.Errorf("the command after the oversized ones: %s %s", res.Outcome, res.Error)
	}
	if n := h.n.Load(); n != 1 {
		t.Errorf("the core decided %d commands, want 1 (the oversized ones are refused before it)", n)
	}
}

// A reader blocked on a connection the link aborts gets the link's error,
// not "use of closed network connection", which paho takes for its own
// disconnect and ignores (the link's refetch would then wait for a failed
// keepalive, 30 s or more, instead of reconnecting at once).
func TestAbortedConnSaysWhy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			io.Copy(io.Discard, c) // until the other end closes
		}
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := newLimitConn(raw)
	read := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 16))
		read <- err
	}()
	c.abort(errRefetch)
	if err := <-read; !errors.Is(err, errRefetch) {
		t.Fatalf("the blocked read returned %v, want %v", err, errRefetch)
	}
}
