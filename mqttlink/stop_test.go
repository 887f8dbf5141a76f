package mqttlink

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// stallConn is a connection whose writes a test can hold, as a broker that
// stops reading (hung, or behind a link that went silent without a reset)
// holds them once the socket buffers are full. Close releases them.
type stallConn struct {
	net.Conn
	stalled atomic.Bool
	closed  chan struct{}
	once    sync.Once
}

func (c *stallConn) Write(p []byte) (int, error) {
	if c.stalled.Load() {
		<-c.closed
		return 0, net.ErrClosed
	}
	return c.Conn.Write(p)
}

func (c *stallConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// stopBound is how long a clean stop may take, whatever the broker does.
const stopBound = 10 * time.Second

// TestStopIsBounded (a clean stop hung for 30 s): the link stops
// while paho cannot hand a packet to the connection, as when the broker
// stops reading or when a worker publishes just as the stop disconnects
// (paho took the publish as connected, and no one reads it any more). paho
// waits 30 s for such a publish by default; the stop must not wait for
// it. A hook holds the connection's writes, and another counts the state
// publishes: once the third begins, the first two fill paho's pipeline (one
// being written, one handed on), so every later packet waits, the stop's
// own included. The broker then sees the connection close without a
// DISCONNECT and publishes the gateway's last will: offline.
func TestStopIsBounded(t *testing.T) {
	conns := make(chan *stallConn, 4)
	testHookConn = func(c net.Conn) net.Conn {
		s := &stallConn{Conn: c, closed: make(chan struct{})}
		conns <- s
		return s
	}
	begun := make(chan string, 16)
	testHookStatePublish = func(o fence.Output) {
		select {
		case begun <- o.Actuator:
		default:
		}
	}
	t.Cleanup(func() { testHookConn, testHookStatePublish = nil, nil }) // after the link stops

	broker := testenv.EmbeddedBroker(t)
	topics := wire.Topics{GatewayID: testenv.ID(t, "stall")}
	l := startLink(t, Options{Broker: broker, Topics: topics, Actuators: []string{"a", "b", "c"}, Store: "s"}, &countHandler{})
	ctl := testctl.Connect(t, broker, topics)
	ctl.WaitStatus(t, wire.StatusOnline)

	conn := <-conns
	conn.stalled.Store(true)
	var outs []fence.Output
	for _, name := range []string{"a", "b", "c"} {
		outs = append(outs, fence.Output{Actuator: name, Scope: name, State: fence.StateOn, Fence: fence.Fence{Token: 1}})
	}
	l.Changed(outs)
	l.states.poke()
	for _, want := range []string{"a", "b", "c"} {
		select {
		case got := <-begun:
			if got != want {
				t.Fatalf("state publish of %s began, want %s", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the state publish of %s did not begin within 10 s", want)
		}
	}

	err, took := l.stop(t, 2*time.Minute)
	if err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	t.Logf("the stop took %v with the broker not reading (bound %v)", took.Round(time.Millisecond), stopBound)
	if took > stopBound {
		t.Errorf("the stop took %v, want at most %v: it waited for a packet paho could not hand on", took.Round(time.Millisecond), stopBound)
	}
	ctl.WaitStatus(t, wire.StatusOffline)
}
