package mqttlink

import (
	"context"
	"fmt"
	"sync"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/wire"
)

// settleTime is how long a starting gateway waits, after announcing itself,
// for a process that may still serve its gateway id: one whose claim is
// retained and whose status still says online. A live one answers within
// a round trip, or, if this start took over its broker session (the same
// client id), once it has reconnected.
var settleTime = 3 * time.Second

// instanceGuard claims the gateway id on every connection and watches for
// another process claiming it (see the package comment).
type instanceGuard struct {
	l          *Link
	onConflict func(error)

	mu       sync.Mutex // guards the fields below
	gen      int        // the connection whose claim is in progress or done
	claimed  bool       // a claim succeeded on an earlier connection of this process
	echo     chan struct{}
	echoed   bool
	previous []wire.Claim // other processes' retained claims seen before the echo
	status   string       // the retained status seen before the echo
	foreign  chan wire.Claim
	conflict bool
}

func newInstanceGuard(l *Link) *instanceGuard {
	return &instanceGuard{l: l, echo: make(chan struct{}), foreign: make(chan wire.Claim, 1)}
}

// claim announces this process on connection gen and checks that no other
// process serves the gateway id. It returns nil once commands may be
// taken, ErrConflict (wrapped) if another process serves the id, or
// another error to retry.
func (g *instanceGuard) claim(ctx context.Context, c mqtt.Client, gen int) error {
	t := g.l.t
	g.mu.Lock()
	if g.conflict {
		g.mu.Unlock()
		return ErrConflict
	}
	g.gen, g.echoed, g.previous, g.status = gen, false, nil, ""
	g.echo = make(chan struct{})
	g.foreign = make(chan wire.Claim, 1)
	echo, foreign := g.echo, g.foreign
	first := !g.claimed
	g.mu.Unlock()

	tok := c.SubscribeMultiple(map[string]byte{t.Instance(): 1, t.Status(): 1}, func(_ mqtt.Client, m mqtt.Message) {
		g.received(m)
		m.Ack()
	})
	if !tok.WaitTimeout(10 * time.Second) {
		return fmt.Errorf("subscribe to %s: no answer from the broker within 10s", t.Instance())
	}
	if err := tok.Error(); err != nil {
		return fmt.Errorf("subscribe to %s: %w", t.Instance(), err)
	}
	for topic, code := range tok.(*mqtt.SubscribeToken).Result() {
		if code == 0x80 {
			return fmt.Errorf("the broker refused the subscription to %s (check its ACL: user %q must be allowed to read and write %s)",
				topic, g.l.opts.Username, topic)
		}
	}
	mine := g.l.claim
	mine.Connection = gen
	if tok := c.Publish(t.Instance(), 1, true, wire.EncodeClaim(mine)); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return fmt.Errorf("publish this gateway's claim on %s: %v", t.Instance(), tok.Error())
	}
	select {
	case <-echo:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("the broker did not deliver this gateway's claim on %s back within 10s (the ACL must let user %q read and write it)",
			t.Instance(), g.l.opts.Username)
	case <-ctx.Done():
		return ctx.Err()
	}

	g.mu.Lock()
	previous, status := g.previous, g.status
	g.mu.Unlock()
	for _, p := range previous {
		if !first {
			// This process claimed the id on an earlier connection; a claim
			// of another process in its place was published since.
			return g.found(c, p)
		}
		if p.Store != g.l.claim.Store && p.Store != "" {
			g.l.log.Warn("the process that served this gateway id before used another fence store: was the store replaced?",
				"previous", p.String(), "store", g.l.claim.Store)
		} else {
			g.l.log.Info("taking over from the previous process", "previous", p.String())
		}
	}
	if first && len(previous) > 0 && status == wire.StatusOnline {
		// The previous process did not say goodbye: it may still run.
		g.l.log.Info("the previous process did not go offline; waiting to make sure it is gone", "wait", settleTime.String())
		select {
		case <-time.After(settleTime):
		case p := <-foreign:
			return g.found(c, p)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.conflict {
		return ErrConflict
	}
	g.claimed = true
	return nil
}

// received takes a message on the instance or status topic.
func (g *instanceGuard) received(m mqtt.Message) {
	t := g.l.t
	g.mu.Lock()
	defer g.mu.Unlock()
	if m.Topic() == t.Status() {
		if !g.echoed {
			g.status = string(m.Payload())
		}
		return
	}
	c, err := wire.DecodeClaim(m.Payload())
	switch {
	case err != nil:
		return // not a claim (an empty retained message clears the topic)
	case c.Instance == g.l.claim.Instance:
		if c.Connection == g.gen && !g.echoed {
			g.echoed = true
			close(g.echo)
		}
	case !g.echoed:
		// Delivered before this connection's own claim came back: retained,
		// or queued in the session while this process was away. Published
		// before this process claimed the id on this connection.
		g.previous = append(g.previous, c)
	default:
		// Published after this process claimed the id on this connection:
		// another process serves the id right now.
		select {
		case g.foreign <- c:
		default:
		}
		if !g.conflict {
			go g.found(nil, c)
		}
	}
}

// found handles another process serving the gateway id: this one refuses
// commands, says so loudly and tells the other one, and Run ends with
// ErrConflict.
func (g *instanceGuard) found(c mqtt.Client, other wire.Claim) error {
	g.mu.Lock()
	already := g.conflict
	g.conflict = true
	g.mu.Unlock()
	why := fmt.Sprintf("another gateway process serves gateway id %q: %s; this one is %s. Both stop taking commands: two processes with two fence stores would each let a stale controller win. Stop one of them, or give it its own id",
		g.l.t.GatewayID, other.String(), g.l.claim.String())
	err := fmt.Errorf("%w: %s", ErrConflict, why)
	if already {
		return err
	}
	g.l.log.Error("gateway id in use by another process", "id", g.l.t.GatewayID, "other", other.String(), "reason", why)
	g.l.conn.conflict(why)
	if c == nil {
		g.l.mu.Lock()
		c = g.l.client
		g.l.mu.Unlock()
	}
	if c != nil {
		// Tell the other process, in case it has not noticed us.
		mine := g.l.claim
		mine.Conflict = other.Instance
		c.Unsubscribe(g.l.t.SetFilter()).WaitTimeout(time.Second)
		c.Publish(g.l.t.Instance(), 1, true, wire.EncodeClaim(mine)).WaitTimeout(time.Second)
	}
	if g.onConflict != nil {
		g.onConflict(err)
	}
	return err
}
