// Package client is the controller side of fencegate's protocol: it sends
// tokenized commands to a gateway over MQTT and returns the gateway's typed
// answers. A stale answer is normal recovery, not a transport error: it
// carries the gateway's current fence and state so that the controller can
// reread and decide.
package client

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/pahosec"
	"github.com/fencegate/fencegate/mqttsec"
	"github.com/fencegate/fencegate/wire"
)

// ErrTimeout is returned by Send when no answer arrived in time, although
// Send published the command again and again (see Options.Resend). The
// command may or may not have been decided, and a copy still queued in
// the broker may be decided later: reread the state, and send the same
// id, token and seq again (a duplicate is answered, never driven twice).
var ErrTimeout = errors.New("client: no answer from the gateway")

// StaleError is Send's error for a stale answer: the gateway's fence is at
// or above the command's (token, seq). It is normal recovery, not a fault:
// another holder has a newer token. Reread the state (Fence, State) and
// decide; do not retry blindly with the same token.
type StaleError struct{ Result fence.Result }

func (e *StaleError) Error() string {
	return fmt.Sprintf("client: stale: %s (fence %s, %s is %s)", e.Result.Error, e.Result.Fence, e.Result.Actuator, stateWord(e.Result.State))
}

// Fence returns the gateway's current fence of the scope.
func (e *StaleError) Fence() fence.Fence { return e.Result.Fence }

// State returns the actuator's current recorded state.
func (e *StaleError) State() fence.State { return e.Result.State }

// RejectedError is Send's error for a rejected answer: the command was
// malformed or not addressable, and nothing changed. Reason says why.
type RejectedError struct{ Result fence.Result }

func (e *RejectedError) Error() string { return "client: rejected: " + e.Result.Error }

// FailedError is Send's error for a failed answer: the gateway could not
// record the fence durably (nothing was driven) or could not drive the
// output (the fence was recorded). Retry with a higher seq once the gateway
// is healthy.
type FailedError struct{ Result fence.Result }

func (e *FailedError) Error() string { return "client: failed: " + e.Result.Error }

func stateWord(s fence.State) string {
	if s == fence.StateNone {
		return "unknown"
	}
	return s.String()
}

// answerErr maps an answer to Send's error: nil for applied and duplicate.
func answerErr(r fence.Result) error {
	switch r.Outcome {
	case fence.Applied, fence.Duplicate:
		return nil
	case fence.Stale:
		return &StaleError{r}
	case fence.Rejected:
		return &RejectedError{r}
	case fence.Failed:
		return &FailedError{r}
	}
	return fmt.Errorf("client: unknown outcome %q", r.Outcome)
}

// Options configure Dial.
type Options struct {
	Broker    string // e.g. tcp://127.0.0.1:1883
	Prefix    string // topic prefix; default wire.DefaultPrefix
	GatewayID string
	ClientID  string // default: a unique id
	Username  string
	// Password is sent with Username. With a Username but neither
	// Password nor PasswordFile, Dial takes the password from
	// $FENCEGATE_MQTT_PASSWORD, as the gateway and gateway send do.
	Password string
	// PasswordFile names a file that holds the password, alone on one line.
	PasswordFile string
	// TLS secures the connection with these files; a TLS broker URL
	// (ssl://, mqtts://, tls://, wss://) without it trusts the system's CAs.
	TLS *TLS
	// Names are the names of these options in error messages (e.g. a
	// program's flags); zero means the Options' field names.
	Names mqttsec.Names
	// Signer and Key, if set (both or neither), sign every command Send
	// sends for GatewayID (see package sign): the controller's name in the
	// gateway's configuration, and its private key (sign.ReadPrivateKey
	// reads the PATH.key of gateway keygen).
	Signer string
	Key    ed25519.PrivateKey
	// Resend is how long Send waits for an answer before it publishes its
	// command again, unchanged (the same id, token, seq and signature). It
	// goes on resending, the wait doubling up to MaxResend, until an answer
	// comes or its context ends, and resends at once when the gateway comes
	// online (goes from offline to online while this client listens; the
	// retained status a subscription delivers is no change) and when this
	// client has reconnected to the broker. A command
	// published while the gateway is stopped, one the broker dropped (its
	// queue for the gateway full, or its session lost) and an answer lost
	// with a connection are so recovered; a copy of a command that was
	// already applied is answered duplicate and drives nothing (or, once
	// 32 later commands of its scope were applied, stale). 0 means
	// DefaultResend; negative never resends.
	Resend time.Duration
}

// DefaultResend is Options.Resend's default.
const DefaultResend = time.Second

// MaxResend bounds the wait between two resends of a command.
const MaxResend = 8 * time.Second

// Client is a connected controller. Its methods are safe for concurrent use.
type Client struct {
	topics wire.Topics
	c      mqtt.Client
	ids    atomic.Uint64
	prefix string
	signer string
	key    ed25519.PrivateKey
	resend time.Duration // < 0: never

	mu      sync.Mutex
	waiting map[string][]*waiter    // Send and Await calls, by command id, oldest first
	unread  map[string]fence.Result // answers nobody waited for yet, by command id
	order   []string                // ids in unread, oldest first
	states  map[string]fence.Output
	inputs  map[string]wire.InputState
	status  string
	changed chan struct{} // closed and replaced on every state or status message
	// retry is closed and replaced when a resend is worth it at once: the
	// gateway came online, or this client subscribed again after a
	// reconnect (answers published meanwhile are lost).
	retry chan struct{}
}

// keepUnread is how many answers nobody waits for are kept for a later Await.
const keepUnread = 1024

var clientSeq atomic.Uint64

// Dial connects to the broker and subscribes to the gateway's answers,
// states and status. Its error says why the broker or its certificate was
// refused (see package mqttsec), naming the options to fix as o.Names
// says.
func Dial(ctx context.Context, o Options) (*Client, error) {
	if o.Prefix == "" {
		o.Prefix = wire.DefaultPrefix
	}
	if o.ClientID == "" {
		o.ClientID = fmt.Sprintf("fencegate-ctl-%d-%d", time.Now().UnixNano(), clientSeq.Add(1))
	}
	if err := o.signing(); err != nil {
		return nil, err
	}
	cl := &Client{topics: wire.Topics{Prefix: o.Prefix, GatewayID: o.GatewayID},
		waiting: map[string][]*waiter{}, unread: map[string]fence.Result{},
		states: map[string]fence.Output{}, inputs: map[string]wire.InputState{}, changed: make(chan struct{}), retry: make(chan struct{}),
		prefix: fmt.Sprintf("%s-%d-", o.ClientID, time.Now().UnixNano()%100000), signer: o.Signer, key: o.Key, resend: o.Resend}
	if cl.resend == 0 {
		cl.resend = DefaultResend
	}
	if err := o.Check(); err != nil {
		return nil, err
	}
	tlsConf, password, set, err := o.security()
	if err != nil {
		return nil, err
	}
	// A clean session: the subscriptions are made again on every connect,
	// since a broker that restarted may have lost them.
	subscribed := make(chan error, 1)
	subs := map[string]byte{cl.topics.ResultFilter(): 1, cl.topics.StateFilter(): 1, cl.topics.InputFilter(): 1, cl.topics.Status(): 1}
	opts := mqtt.NewClientOptions().AddBroker(o.Broker).SetClientID(o.ClientID).
		SetUsername(o.Username).SetPassword(password).SetCleanSession(true).
		SetAutoReconnect(true).SetMaxReconnectInterval(10 * time.Second).
		SetConnectTimeout(5 * time.Second).SetOrderMatters(true).
		SetOnConnectHandler(func(c mqtt.Client) {
			go func() { // not in paho's connect handler, which must not block
				tok := c.SubscribeMultiple(subs, cl.receive)
				var err error
				if !tok.WaitTimeout(10 * time.Second) {
					err = errors.New("no answer from the broker within 10s")
				} else if err = tok.Error(); err == nil {
					cl.retryNow()
				}
				select {
				case subscribed <- err: // Dial waits for the first
				default:
				}
			}()
		})
	pahosec.SetTLS(opts, tlsConf)
	cl.c = mqtt.NewClient(opts)
	if err := wait(ctx, cl.c.Connect()); err != nil {
		return nil, fmt.Errorf("client: connect %s: %w", o.Broker, pahosec.Explained(err, set))
	}
	select {
	case err := <-subscribed:
		if err == nil {
			return cl, nil
		}
		cl.c.Disconnect(0)
		return nil, fmt.Errorf("client: subscribe: %w", err)
	case <-ctx.Done():
		cl.c.Disconnect(0)
		return nil, fmt.Errorf("client: subscribe: %w", ctx.Err())
	}
}

func wait(ctx context.Context, t mqtt.Token) error {
	select {
	case <-t.Done():
		return t.Error()
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (cl *Client) receive(_ mqtt.Client, m mqtt.Message) {
	topic := m.Topic()
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if topic == cl.topics.Status() {
		if testHookStatus != nil {
			testHookStatus(m.Retained())
		}
		s := string(m.Payload())
		if s == wire.StatusOnline && cl.status != s && !m.Retained() {
			// The gateway came online just now: commands published while
			// it was away may have been dropped. A retained status, which
			// every subscription delivers, tells how the gateway is, not
			// that it changed; resending on it would publish every
			// command twice (the copy answered duplicate). A status
			// missed while this client was away is its reconnect's to
			// resend for (see Dial).
			cl.retryLocked()
		}
		cl.status = s
		cl.notify()
		return
	}
	switch _, kind := cl.topics.Parse(topic); kind {
	case wire.KindState:
		if o, err := wire.DecodeState(m.Payload()); err == nil {
			cl.states[o.Actuator] = o
			cl.notify()
		}
	case wire.KindInput:
		if in, err := wire.DecodeInputState(m.Payload()); err == nil {
			if cur, ok := cl.inputs[in.Input]; !ok || cur.Seq <= in.Seq {
				cl.inputs[in.Input] = in // never back to an older change
			}
			cl.notify()
		}
	case wire.KindResult:
		r, err := wire.DecodeResult(m.Payload())
		if err != nil {
			return
		}
		if w := cl.claim(r); w != nil {
			w.ch <- r
			return
		}
		if _, dup := cl.unread[r.ID]; !dup {
			cl.order = append(cl.order, r.ID)
		}
		cl.unread[r.ID] = r
		if len(cl.order) > keepUnread {
			delete(cl.unread, cl.order[0])
			cl.order = cl.order[1:]
		}
	}
}

// testHookStatus, if set (by tests), is called before a status message is
// taken, with whether it is a retained one.
var testHookStatus func(retained bool)

func (cl *Client) notify() {
	close(cl.changed)
	cl.changed = make(chan struct{})
}

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
// answer, or a transport or context error.
func (cl *Client) Send(ctx context.Context, c fence.Command) (fence.Result, error) {
	if c.ID == "" {
		c.ID = cl.prefix + fmt.Sprint(cl.ids.Add(1))
	}
	c = cl.sign(c)
	w := cl.expect(c.ID, func(r fence.Result) bool { return Answers(c, r) }, false)
	defer cl.forget(w)
	topic, payload := cl.topics.Set(c.Actuator), wire.EncodeCommand(c)
	if cl.resend < 0 {
		if err := wait(ctx, cl.c.Publish(topic, 1, false, payload)); err != nil {
			return fence.Result{}, fmt.Errorf("client: publish: %w", err)
		}
		r, err := answer(ctx, w.ch)
		return r, checkOutput(c, r, err)
	}
	r, err := cl.resending(ctx, w, topic, payload)
	return r, checkOutput(c, r, err)
}

// resending publishes payload on topic, and again after each wait without
// an answer for w (see Options.Resend), until the answer comes or ctx
// ends. It returns the last publish's error if no publish ever succeeded.
func (cl *Client) resending(ctx context.Context, w *waiter, topic string, payload []byte) (fence.Result, error) {
	var published bool
	var pubErr error
	interval := cl.resend
	for {
		cl.mu.Lock()
		retry := cl.retry
		cl.mu.Unlock()
		tok := cl.c.Publish(topic, 1, false, payload)
		done := tok.Done()
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

// PublishRaw publishes payload on actuator's command topic (QoS 1), as it
// is: for tools and tests that send what Send would not (malformed or
// retained commands). Await its answer by the id the payload carries.
func (cl *Client) PublishRaw(ctx context.Context, actuator string, payload []byte, retained bool) error {
	if err := wait(ctx, cl.c.Publish(cl.topics.Set(actuator), 1, retained, payload)); err != nil {
		return fmt.Errorf("client: publish: %w", err)
	}
	return nil
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

// ctxErr is the error of a wait for an answer that ctx ended.
func ctxErr(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ErrTimeout
	}
	return ctx.Err()
}

// State returns the latest retained state seen for actuator.
func (cl *Client) State(actuator string) (fence.Output, bool) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	o, ok := cl.states[actuator]
	return o, ok
}

// WaitState waits until actuator's state satisfies ok.
func (cl *Client) WaitState(ctx context.Context, actuator string, ok func(fence.Output) bool) (fence.Output, error) {
	o, err := waitFor(ctx, cl, cl.states, actuator, ok)
	if err != nil {
		return o, fmt.Errorf("client: state of %s: %w", actuator, err)
	}
	return o, nil
}

// WaitInput waits until the retained level of the gateway's input name
// satisfies ok (nil: any).
func (cl *Client) WaitInput(ctx context.Context, name string, ok func(wire.InputState) bool) (wire.InputState, error) {
	in, err := waitFor(ctx, cl, cl.inputs, name, ok)
	if err != nil {
		return in, fmt.Errorf("client: input %s: %w", name, err)
	}
	return in, nil
}

// waitFor waits until m[key], which cl.mu guards, is there and satisfies
// ok (nil: any); it returns the last value seen and ctx's error if ctx
// ends first.
func waitFor[T any](ctx context.Context, cl *Client, m map[string]T, key string, ok func(T) bool) (T, error) {
	for {
		cl.mu.Lock()
		v, have := m[key]
		ch := cl.changed
		cl.mu.Unlock()
		if have && (ok == nil || ok(v)) {
			return v, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return v, ctx.Err()
		}
	}
}

// Actuators returns the names of the gateway's actuators whose retained
// state this client has seen, sorted. A gateway that has been online
// retains the state of each of its actuators, and Dial's subscription
// receives them at once.
func (cl *Client) Actuators() []string {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return slices.Sorted(maps.Keys(cl.states))
}

// Unknown says, for an error message, that the gateway has no actuator of
// that name, and which it has (see Actuators).
func (cl *Client) Unknown(actuator string) string {
	names := cl.Actuators()
	if len(names) == 0 {
		return fmt.Sprintf("no actuator %q on gateway %q, which has published the state of none (has it been online?)", actuator, cl.topics.GatewayID)
	}
	return fmt.Sprintf("no actuator %q on gateway %q; its actuators are %s", actuator, cl.topics.GatewayID, strings.Join(names, ", "))
}

// Scope returns the fence scope of actuator, as the gateway publishes it in
// the actuator's retained state: the name to lock in the lease service
// before commanding the actuator. Actuators that share a scope share one
// lease and one fence; locking the actuator's own name instead would let
// two controllers each hold "the" lease of one fence.
//
// It waits for the retained state until ctx is done: the gateway must have
// been online at least once with this actuator configured.
func (cl *Client) Scope(ctx context.Context, actuator string) (string, error) {
	o, err := cl.WaitState(ctx, actuator, nil)
	if err != nil {
		if len(cl.Actuators()) > 0 {
			return "", fmt.Errorf("client: %s: %w", cl.Unknown(actuator), err)
		}
		return "", fmt.Errorf("client: no state for actuator %q from gateway %q (is the name right, and has the gateway been online?): %w",
			actuator, cl.topics.GatewayID, err)
	}
	if o.Scope == "" {
		return "", fmt.Errorf("client: gateway %q does not say which fence scope %q belongs to (a gateway older than this client); upgrade the gateway", cl.topics.GatewayID, actuator)
	}
	return o.Scope, nil
}

// WaitStatus waits until the gateway's status is want ("online" or "offline").
func (cl *Client) WaitStatus(ctx context.Context, want string) error {
	for {
		cl.mu.Lock()
		s, ch := cl.status, cl.changed
		cl.mu.Unlock()
		if s == want {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("client: gateway status is %q, want %q: %w", s, want, ctx.Err())
		}
	}
}

// Publish sends a raw payload to topic with QoS 1, for tools that speak to
// other topics on the same broker.
func (cl *Client) Publish(ctx context.Context, topic string, payload []byte, retained bool) error {
	return wait(ctx, cl.c.Publish(topic, 1, retained, payload))
}

// Close disconnects.
func (cl *Client) Close() { cl.c.Disconnect(100) }
