// Package mqttbroker is the embedded MQTT broker of the simulator and of the
// tests: github.com/mochi-mqtt/server/v2 on a loopback address, allowing
// every client. Only the simulator and tests import it; the path that
// `gateway run` takes does not (a dependency test says so).
//
// A retained publish and a subscription, exclusive: mochi (v2.7.9) stores a
// retained publish (TopicsIndex.RetainMessage) before it forwards it to the
// subscriptions in its index (Server.publishToSubscribers), and a
// subscription enters the index (TopicsIndex.Subscribe) before the retained
// messages are sent to it (Server.publishRetainedToClient), each on its
// client's goroutine with no lock in common. When a retained publish falls
// between the two steps of a subscription to its topic, the subscriber gets
// it twice: once from the index as retained (flagged), and once live
// (unflagged). A gateway subscribing (again) then refused a retained
// command for its flag and decided its second copy: rejected, then
// applied. A hook (retainLock) makes each retained publish and each
// subscription one step towards the other, under one mutex: a subscriber
// gets a retained publish either live or from the index, never both.
// (Mosquitto handles one packet at a time, and has no such window.)
//
// Known race in mochi (v2.7.9, the newest we can use): TopicsIndex.RetainMessage
// (topics.go) sets a topic particle's retainPath, a string, holding the index
// and particle locks; scanMessages, which a subscription to a filter with + or #
// runs to send it the retained messages, reads retainPath holding neither: any
// retained publish concurrent with such a subscribe whose filter matches the
// topic is a data race (upstream issue mochi-mqtt/server#200, closed
// unreproduced). Each publish writes the same topic from a new packet, and the
// halves of two such string headers are harmless together. Only the first
// retained message on a topic, or one clearing it, is not: the reader may see
// "", and miss the retained message, which it then gets live, as its
// subscription is already in the index; or, in theory, a length without its
// pointer, which would crash the broker in a map lookup. That window is a few
// instructions wide, so the simulator keeps the broker in process; the tests
// run it in a child built without -race (testenv.EmbeddedBroker), where such a
// crash would fail the test with the broker's log.
package mqttbroker

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/fencegate/fencegate/internal/sockerr"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
)

// ErrAddrInUse is returned by StartBroker when the address is taken, for
// example by a Mosquitto already running on 1883.
var ErrAddrInUse = errors.New("mqttbroker: address already in use")

// MaxPacket is the largest MQTT packet the broker reads, in bytes: a client
// that sends a larger one is disconnected before the broker reads it.
// fencegate's messages are far smaller (a command has at most 1 KiB), and
// without a limit every publish of up to 256 MB would be read whole, by
// the broker and then by each subscriber.
const MaxPacket = 64 << 10

// Broker is a running embedded MQTT broker that allows every client.
type Broker struct {
	srv  *mochi.Server
	addr string
}

// Start starts a broker listening on addr ("127.0.0.1:0" picks a
// free port). Close stops it.
func Start(addr string, log *slog.Logger) (*Broker, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = slog.New(connLog{log.Handler()})
	caps := mochi.NewDefaultServerCapabilities()
	caps.MaximumPacketSize = MaxPacket
	srv := mochi.New(&mochi.Options{InlineClient: true, Logger: log, Capabilities: caps})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		return nil, fmt.Errorf("mqttbroker: %w", err)
	}
	if err := srv.AddHook(new(retainLock), nil); err != nil {
		return nil, fmt.Errorf("mqttbroker: %w", err)
	}
	tcp := listeners.NewTCP(listeners.Config{ID: "tcp", Address: addr})
	if err := srv.AddListener(tcp); err != nil {
		if sockerr.AddrInUse(err) {
			return nil, fmt.Errorf("%w: %s", ErrAddrInUse, addr)
		}
		return nil, fmt.Errorf("mqttbroker: listen %s: %w", addr, err)
	}
	if err := srv.Serve(); err != nil {
		srv.Close()
		return nil, fmt.Errorf("mqttbroker: %w", err)
	}
	return &Broker{srv: srv, addr: tcp.Address()}, nil
}

// Addr returns the host:port the broker listens on.
func (b *Broker) Addr() string { return b.addr }

// URL returns the broker's URL for clients, tcp://host:port.
func (b *Broker) URL() string { return "tcp://" + b.addr }

// Port returns the port the broker listens on.
func (b *Broker) Port() string {
	_, p, _ := net.SplitHostPort(b.addr)
	return p
}

// Close stops the broker and disconnects its clients.
func (b *Broker) Close() error { return b.srv.Close() }

// retainLock holds one mutex from the start of each retained publish
// (OnPublish, before mochi stores it) and of each subscription
// (OnSubscribe, before the filter enters the index) until mochi has
// processed the packet (OnPacketProcessed: stored and forwarded; subscribed
// and sent the retained messages). mochi processes one client's packets
// one at a time and calls OnPacketProcessed after every packet whose
// processing it began, so a lock taken for a client's packet is released
// before that client's next packet. The mutex is held while mochi writes
// the acknowledgement to the client whose packet it processes (that client
// is reading); messages for other clients go to their queues, which never
// block.
type retainLock struct {
	mochi.HookBase
	mu   sync.Mutex
	held sync.Map // *mochi.Client → struct{}: the client whose packet holds mu
}

// ID implements mochi.Hook.
func (h *retainLock) ID() string { return "fencegate-retain-lock" }

// Provides implements mochi.Hook.
func (h *retainLock) Provides(b byte) bool {
	return b == mochi.OnPublish || b == mochi.OnSubscribe || b == mochi.OnPacketProcessed
}

func (h *retainLock) lock(cl *mochi.Client, pk packets.Packet) {
	if testHookRetainWait != nil {
		testHookRetainWait(pk)
	}
	h.mu.Lock()
	h.held.Store(cl, struct{}{})
}

// OnPublish implements mochi.Hook: a retained publish takes the lock.
func (h *retainLock) OnPublish(cl *mochi.Client, pk packets.Packet) (packets.Packet, error) {
	if pk.FixedHeader.Retain {
		h.lock(cl, pk)
	}
	return pk, nil
}

// OnSubscribe implements mochi.Hook: a subscription takes the lock.
func (h *retainLock) OnSubscribe(cl *mochi.Client, pk packets.Packet) packets.Packet {
	h.lock(cl, pk)
	return pk
}

// OnPacketProcessed implements mochi.Hook: the lock taken for the packet,
// if any, is released.
func (h *retainLock) OnPacketProcessed(cl *mochi.Client, _ packets.Packet, _ error) {
	if _, ok := h.held.LoadAndDelete(cl); ok {
		h.mu.Unlock()
	}
}

// testHookRetainWait, if set (by tests), is called with a retained publish
// or a subscription about to take the lock.
var testHookRetainWait func(packets.Packet)
