package testenv

import (
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy relays TCP connections from a reserved loopback port (see Port)
// to another address, and can cut the link: Cut closes every connection
// it relays and stops listening, so that new ones are refused, as a
// network between two machines that fails; Restore listens again on the
// same port.
type Proxy struct {
	// Addr is where the proxy listens: 127.0.0.1:PORT.
	Addr string
	to   string

	mu       sync.Mutex
	ln       net.Listener // nil while cut
	relays   map[*relay]bool
	accepted int // connections accepted, in all
	relayed  int // connections relayed to the other end, in all
	done     chan struct{}
	closed   bool
}

// relay is one connection the proxy relays.
type relay struct {
	in, out net.Conn
	back    atomic.Int64 // bytes from the other end
}

// NewProxy starts a Proxy to to (host:port). It stops when t ends.
func NewProxy(t testing.TB, to string) *Proxy {
	t.Helper()
	p := &Proxy{Addr: fmt.Sprintf("127.0.0.1:%d", Port(t)), to: to, relays: map[*relay]bool{}}
	t.Cleanup(p.close)
	if err := p.Restore(); err != nil {
		t.Fatal(err)
	}
	return p
}

// Cut closes every connection the proxy relays and stops listening: a
// new connection is refused until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	ln, done := p.ln, p.done
	p.ln = nil
	relays := p.relays
	p.relays = map[*relay]bool{}
	p.mu.Unlock()
	if ln != nil {
		ln.Close()
		<-done
	}
	for r := range relays {
		r.in.Close()
		r.out.Close()
	}
}

// Restore listens again on the proxy's port, after Cut. Its port is
// reserved (Port): only a program that did not reserve it can have taken
// it meanwhile, and then Restore fails.
func (p *Proxy) Restore() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil || p.closed {
		return nil
	}
	var ln net.Listener
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if ln, err = net.Listen("tcp4", p.Addr); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("testenv: proxy to %s: listen again on %s: %v", p.to, p.Addr, err)
	}
	p.ln, p.done = ln, make(chan struct{})
	go p.serve(ln, p.done)
	return nil
}

// Cutting reports whether the link is cut (Cut, not yet Restore).
func (p *Proxy) Cutting() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ln == nil
}

// Up reports whether the link carries a connection now: one the proxy
// relays, open, on which the other end has answered (sent a byte).
func (p *Proxy) Up() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for r := range p.relays {
		if r.back.Load() > 0 {
			return true
		}
	}
	return false
}

// Counts returns how many connections the proxy has accepted and how many
// of them it relayed (the other end took them), since it started.
func (p *Proxy) Counts() (accepted, relayed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted, p.relayed
}

func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.Cut()
}

func (p *Proxy) serve(ln net.Listener, done chan struct{}) {
	defer close(done)
	for {
		in, err := ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.accepted++
		live := p.ln == ln
		p.mu.Unlock()
		if !live {
			in.Close()
			continue
		}
		go p.relay(in, ln)
	}
}

func (p *Proxy) relay(in net.Conn, ln net.Listener) {
	out, err := net.DialTimeout("tcp", p.to, 2*time.Second)
	if err != nil {
		in.Close() // the other end is down: so is this connection
		return
	}
	r := &relay{in: in, out: out}
	p.mu.Lock()
	if p.ln != ln { // cut meanwhile
		p.mu.Unlock()
		in.Close()
		out.Close()
		return
	}
	p.relays[r] = true
	p.relayed++
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); io.Copy(out, in); out.Close(); in.Close() }()
	go func() { defer wg.Done(); io.Copy(countingWriter{in, &r.back}, out); in.Close(); out.Close() }()
	wg.Wait()
	p.mu.Lock()
	delete(p.relays, r)
	p.mu.Unlock()
}

// countingWriter adds the bytes written through it to n.
type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}
