package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/wire"
)

// retryNow wakes every Send to resend at once.
func (cl *Client) retryNow() {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.retryLocked()
}

func (cl *Client) retryLocked() {
	close(cl.retry)
	cl.retry = make(chan struct{})
}

// Send publishes c (QoS 1) and waits for its answer: the first answer
// with c's id, actuator, token and seq (see Answers) that arrives after
// the publish. Until it comes, Send publishes c again (Options.Resend).
// An empty c.ID is replaced by a unique one. With Options.Key, c is
// signed (after its id is set); otherwise it is sent as it is. The answer
// is always returned when there is one; the error is nil for applied and
// duplicate, a *StaleError, *RejectedError or *FailedError for those
// answers, an *OutputError for an applied or duplicate answer that says
// the actuator is not in the state c asked for, ErrTimeout when the
// context's deadline passed without an
// answer, or a transport or context error. A command the gateway would
// reject as malformed (no token, say: see wire.EncodeChecked) is not sent.
func (cl *Client) Send(ctx context.Context, c fence.Command) (fence.Result, error) {
	return cl.send(ctx, nil, c)
}

// A Guard is what a command is sent under: a lease and its fencing token.
// Package lease's *Lease is one.
type Guard interface {
	// Token is the lease's fencing token.
	Token() uint64
	// Check returns nil while the lease is held, by the holder's clock,
	// and an error that says why once it is not.
	Check() error
}

// SendUnder is Send under lease g: c must carry g's token, and c is
// published only while g is held, checked just before each publish. A
// controller that paused after it decided, past its lease, so publishes
// nothing: SendUnder returns g.Check's error (wrapped; for package lease,
// errors.Is(err, lease.ErrLost)) and no answer, and the controller must
// acquire the lease again and decide anew from what it reads then. Once
// the lease is lost after a first publish, SendUnder publishes no more
// copies and waits for the answer to those already sent until ctx ends.
// Under a guard no copy is handed to the MQTT client while it is
// disconnected, since it would publish it after the reconnect, whatever
// the lease; the reconnect resends instead, if the lease is still held.
func (cl *Client) SendUnder(ctx context.Context, g Guard, c fence.Command) (fence.Result, error) {
	if g == nil {
		return fence.Result{}, errors.New("client: not sent: SendUnder needs a lease (use Send to send without one)")
	}
	if c.Fence.Token != g.Token() {
		return fence.Result{}, fmt.Errorf("client: not sent: the command's token %d is not its lease's (%d)", c.Fence.Token, g.Token())
	}
	return cl.send(ctx, g, c)
}

func (cl *Client) send(ctx context.Context, g Guard, c fence.Command) (fence.Result, error) {
	if c.ID == "" {
		c.ID = cl.prefix + fmt.Sprint(cl.ids.Add(1))
	}
	c = cl.sign(c)
	payload, err := wire.EncodeChecked(wire.Request{Command: c, Reply: cl.reply})
	if err != nil {
		return fence.Result{}, fmt.Errorf("client: not sent: %w", err)
	}
	w := cl.expect(c.ID, func(r fence.Result) bool { return Answers(c, r) }, false)
	defer cl.forget(w)
	topic := cl.topics.Set(c.Actuator)
	if g != nil {
		if err := g.Check(); err != nil {
			return fence.Result{}, fmt.Errorf("client: not sent: %w", err)
		}
		defer cl.store.guard(payload, g)()
	}
	if cl.resend < 0 {
		if err := wait(ctx, cl.c.Publish(topic, 1, false, payload)); err != nil {
			return fence.Result{}, fmt.Errorf("client: publish: %w", err)
		}
		r, err := answer(ctx, w.ch)
		return r, cl.unanswered(checkOutput(c, r, err), g)
	}
	r, err := cl.resending(ctx, w, topic, payload, g)
	return r, cl.unanswered(checkOutput(c, r, err), g)
}

// unanswered adds to ErrTimeout why the answer may not have come, as the
// Python and Node-RED clients say it: the lease was lost (no copy was
// published since), the broker is not connected, or the gateway is
// offline (after a crash the broker keeps the command for it; after a
// clean stop it does not), has published no status, or is online, when
// the likeliest reason is a broker ACL that drops the answers on their way
// to the reply topic (Mosquitto acknowledges a forbidden publish and drops
// it, and delivers nothing on a forbidden subscription, without a word).
func (cl *Client) unanswered(err error, g Guard) error {
	if !errors.Is(err, ErrTimeout) {
		return err
	}
	cl.mu.Lock()
	status := cl.status
	cl.mu.Unlock()
	gw := cl.topics.GatewayID
	switch {
	case g != nil && g.Check() != nil:
		return fmt.Errorf("%w; the lease was lost meanwhile, so the command was not published again", err)
	case !cl.c.IsConnectionOpen():
		return fmt.Errorf("%w: not connected to the broker", err)
	case status == wire.StatusOnline && cl.reply != "":
		return fmt.Errorf("%w, which is online, on reply topic %s: if the broker has an ACL, it must let the gateway write %s# and this controller read its reply topic (docs/security.md, Broker ACLs)",
			err, cl.reply, cl.topics.ReplyBase())
	case status == wire.StatusOffline:
		return fmt.Errorf("%w: gateway %s is offline (its status says so). After a crash the broker keeps what was published for it, "+
			"and it is decided when the gateway is back online; after a clean stop it is not kept: reread the state once the gateway is online", err, gw)
	case status == "":
		return fmt.Errorf("%w: gateway %s has published no status: is the gateway id right, and is it running?", err, gw)
	}
	return err
}

// resending publishes payload on topic, and again after each wait without
// an answer for w (see Options.Resend), until the answer comes or ctx
// ends. It returns the last publish's error if no publish ever succeeded.
// Under a guard g, each copy is published only while g is held and the
// connection is up: the first one was checked by the caller.
func (cl *Client) resending(ctx context.Context, w *waiter, topic string, payload []byte, g Guard) (fence.Result, error) {
	var published bool
	var pubErr error
	interval := cl.resend
	for n := 0; ; n++ {
		cl.mu.Lock()
		retry := cl.retry
		cl.mu.Unlock()
		var done <-chan struct{}
		var tok mqtt.Token
		if g == nil || (n == 0 || g.Check() == nil) && cl.c.IsConnectionOpen() {
			tok = cl.c.Publish(topic, 1, false, payload)
			done = tok.Done()
		}
		timer := time.NewTimer(interval)
	waiting:
		for {
			select {
			case r := <-w.ch:
				timer.Stop()
				return r, answerErr(r)
			case <-done:
				done = nil
				if err := tok.Error(); err != nil {
					pubErr = err
				} else {
					published = true
				}
			case <-timer.C:
				interval = min(2*interval, MaxResend)
				break waiting
			case <-retry:
				timer.Stop()
				interval = cl.resend
				break waiting
			case <-ctx.Done():
				timer.Stop()
				if !published && pubErr != nil {
					return fence.Result{}, fmt.Errorf("client: publish: %w", pubErr)
				}
				return fence.Result{}, ctxErr(ctx)
			}
		}
	}
}

// Answers reports whether r is an answer to command c: it has c's id,
// actuator, token and seq, as docs/protocol.md asks controllers to match
// answers (every subscriber sees every answer of the gateway, and an id
// alone may be reused for another actuator or pair). A command rejected as
// invalid is answered with the token and seq the gateway read before the
// error, 0 for those it did not read; such an answer matches too.
func Answers(c fence.Command, r fence.Result) bool {
	if r.ID != c.ID || r.Actuator != c.Actuator {
		return false
	}
	if r.Command == c.Fence {
		return true
	}
	return r.Outcome == fence.Rejected && r.Reason == fence.ReasonInvalid &&
		(r.Command.Token == 0 || r.Command.Token == c.Fence.Token) &&
		(r.Command.Seq == 0 || r.Command.Seq == c.Fence.Seq)
}

// Await waits for the answer to the command with the given id: one that
// already arrived unclaimed (the newest 1024 are kept), or the next one.
// Its result and error are as Send's.
func (cl *Client) Await(ctx context.Context, id string) (fence.Result, error) {
	w := cl.expect(id, nil, true)
	defer cl.forget(w)
	return answer(ctx, w.ch)
}

// Discard forgets every answer that arrived unclaimed.
func (cl *Client) Discard() {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	clear(cl.unread)
	cl.order = nil
}

// waiter is a Send or Await call waiting for an answer.
type waiter struct {
	id    string
	match func(fence.Result) bool // nil: any answer with the id
	ch    chan fence.Result       // buffered: receives at most one answer
}

// expect registers a waiter for answers with id that match (nil: every
// one). With unread, an answer that already arrived unclaimed is delivered
// at once: Await's answer may come before Await is called. Send does not
// take those: they answer earlier copies of its command, not the one it
// is about to publish.
func (cl *Client) expect(id string, match func(fence.Result) bool, unread bool) *waiter {
	w := &waiter{id: id, match: match, ch: make(chan fence.Result, 1)}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if r, ok := cl.unread[id]; ok && unread {
		delete(cl.unread, id)
		cl.order = slices.DeleteFunc(cl.order, func(s string) bool { return s == id })
		w.ch <- r
		return w
	}
	cl.waiting[id] = append(cl.waiting[id], w)
	return w
}

// claim removes and returns the oldest waiter that r answers, or nil.
// cl.mu must be held.
func (cl *Client) claim(r fence.Result) *waiter {
	ws := cl.waiting[r.ID]
	for i, w := range ws {
		if w.match == nil || w.match(r) {
			cl.drop(r.ID, i)
			return w
		}
	}
	return nil
}

// drop removes the i-th waiter for id. cl.mu must be held.
func (cl *Client) drop(id string, i int) {
	ws := slices.Delete(cl.waiting[id], i, i+1)
	if len(ws) == 0 {
		delete(cl.waiting, id)
		return
	}
	cl.waiting[id] = ws
}

func (cl *Client) forget(w *waiter) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if i := slices.Index(cl.waiting[w.id], w); i >= 0 {
		cl.drop(w.id, i)
	}
}

func answer(ctx context.Context, ch chan fence.Result) (fence.Result, error) {
	select {
	case r := <-ch:
		return r, answerErr(r)
	case <-ctx.Done():
		return fence.Result{}, ctxErr(ctx)
	}
}
