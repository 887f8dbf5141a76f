package mqttlink

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// heldConn is a real TCP connection whose writes a test can hold (the
// next write waits until release) or fail, and counts.
type heldConn struct {
	net.Conn
	mu      sync.Mutex
	writes  int
	hold    chan struct{} // if set, the next write waits until it is closed
	holding chan struct{} // closed once a write is held
	fail    error
}

func (c *heldConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes++
	hold, holding, fail := c.hold, c.holding, c.fail
	c.hold = nil
	c.mu.Unlock()
	if hold != nil {
		close(holding)
		<-hold
	}
	if fail != nil {
		return 0, fail
	}
	return c.Conn.Write(p)
}

// holdNext makes the next write wait; it returns the channel closed once
// that write is held, and the function that releases it.
func (c *heldConn) holdNext() (held <-chan struct{}, release func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	hold, holding := make(chan struct{}), make(chan struct{})
	c.hold, c.holding = hold, holding
	return holding, sync.OnceFunc(func() { close(hold) })
}

func (c *heldConn) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes
}

// tcpPair returns the link's end of a loopback TCP connection (held, and
// wrapped as the link wraps a broker connection) and the broker's end.
func tcpPair(t *testing.T) (*limitConn, *heldConn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer := <-accepted
	if peer == nil {
		t.Fatal("accept failed")
	}
	h := &heldConn{Conn: c}
	lc := newLimitConn(h)
	t.Cleanup(func() { lc.Close(); peer.Close() })
	return lc, h, peer
}

// While one write is in the kernel (held here), the packets paho writes
// meanwhile are queued without waiting, and go together in the next
// write, in paho's order: a command's acknowledgement never overtakes its
// answer.
func TestWriteQueueGathersInOrder(t *testing.T) {
	lc, h, peer := tcpPair(t)
	held, release := h.holdNext()
	var want bytes.Buffer
	packet := func(i int) []byte { return fmt.Appendf(nil, "answer %d;ack %d;", i, i) }
	if _, err := lc.Write(packet(0)); err != nil {
		t.Fatal(err)
	}
	want.Write(packet(0))
	<-held
	start := time.Now()
	for i := 1; i < 100; i++ {
		if _, err := lc.Write(packet(i)); err != nil {
			t.Fatal(err)
		}
		want.Write(packet(i))
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("99 writes behind a held one took %v; want them queued at once", d)
	}
	release()
	got := make([]byte, want.Len())
	peer.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(peer, got); err != nil {
		t.Fatalf("the broker's end read %q, %v", got, err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("the broker's end read\n%q\nwant\n%q", got, want.Bytes())
	}
	if n := h.count(); n != 2 {
		t.Errorf("100 packets took %d writes; want 2 (the held one, then the 99 queued behind it together)", n)
	}
}

// Close writes what is queued before it closes (paho's DISCONNECT is the
// last packet it writes): the broker reads everything, then the end.
func TestWriteQueueCloseWritesQueued(t *testing.T) {
	lc, h, peer := tcpPair(t)
	held, release := h.holdNext()
	lc.Write([]byte("answer;"))
	<-held
	lc.Write([]byte("ack;disconnect"))
	closed := make(chan error, 1)
	go func() { closed <- lc.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a write was held; want it to wait for the queue", err)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	peer.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(peer)
	if err != nil || string(got) != "answer;ack;disconnect" {
		t.Errorf("the broker's end read %q, %v; want every queued byte, then the end", got, err)
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := lc.Write([]byte("late")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Write after Close: %v, want net.ErrClosed", err)
	}
}

// Close does not wait for ever for a broker that stopped reading.
func TestWriteQueueCloseIsBounded(t *testing.T) {
	lc, h, _ := tcpPair(t)
	held, release := h.holdNext()
	defer release()
	lc.Write([]byte("answer;"))
	<-held
	lc.Write([]byte("ack;"))
	start := time.Now()
	lc.Close()
	if d := time.Since(start); d > closeFlushWait+2*time.Second {
		t.Errorf("Close took %v with a write stuck; want about closeFlushWait (%v)", d, closeFlushWait)
	}
}

// A write that fails fails every later one, and paho's reader sees the
// loss at once, with why, instead of at the next keepalive.
func TestWriteQueueFailureIsSeen(t *testing.T) {
	lc, h, _ := tcpPair(t)
	h.mu.Lock()
	h.fail = errors.New("broken pipe (injected)")
	h.mu.Unlock()
	lc.Write([]byte("answer;"))
	done := make(chan error, 1)
	go func() {
		_, err := lc.Read(make([]byte, 10))
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "writing to the broker: broken pipe (injected)") {
			t.Errorf("paho's reader got %v; want the write's failure", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("paho's reader saw nothing 10 s after a write failed")
	}
	if _, err := lc.Write([]byte("ack;")); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Errorf("Write after a failed write: %v, want that failure", err)
	}
}

// A full queue makes Write wait, as a full socket would, until paho's
// write deadline; room lets it go on.
func TestWriteQueueFullWaitsUntilDeadline(t *testing.T) {
	lc, h, peer := tcpPair(t)
	go io.Copy(io.Discard, peer)
	held, release := h.holdNext()
	lc.Write([]byte("first"))
	<-held
	big := make([]byte, maxQueued)
	if _, err := lc.Write(big); err != nil {
		t.Fatal(err)
	}
	lc.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	start := time.Now()
	if _, err := lc.Write([]byte("one more")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("Write to a full queue: %v, want os.ErrDeadlineExceeded", err)
	}
	if d := time.Since(start); d < 40*time.Millisecond || d > 5*time.Second {
		t.Errorf("Write to a full queue gave up after %v; want about the 50 ms deadline", d)
	}
	lc.SetWriteDeadline(time.Time{})
	wrote := make(chan error, 1)
	go func() { _, err := lc.Write([]byte("one more")); wrote <- err }()
	release()
	select {
	case err := <-wrote:
		if err != nil {
			t.Errorf("Write once the queue had room: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Write still waiting 10 s after the queue drained")
	}
}
