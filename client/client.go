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
	// Reply is the topic the gateway answers this client's commands on:
	// one under <prefix>/<gateway>/reply/ (see wire.Topics.CheckReply),
	// which a broker ACL can keep to this client. The default is
	// <prefix>/<gateway>/reply/<Username>/<ClientID>, or without a
	// Username <prefix>/<gateway>/reply/<ClientID>. Each answer is
	// delivered to this client alone, however many controllers command
	// the same actuators.
	Reply string
	// SharedAnswers makes commands name no reply topic: the gateway
	// answers each on its actuator's shared result topic, to every
	// subscriber of it, and the client subscribes to them all. For a
	// gateway older than reply topics, which rejects a command that names
	// one.
	SharedAnswers bool
	// WatchShared subscribes to the shared result topics as well as the
	// reply topic, to Await the answers of commands published with
	// PublishRaw (which name no reply topic) or by others. Every answer
	// to such a command then reaches this client too.
	WatchShared bool
}

// DefaultResend is Options.Resend's default.
const DefaultResend = time.Second

// MaxResend bounds the wait between two resends of a command.
const MaxResend = 8 * time.Second

// Client is a connected controller. Its methods are safe for concurrent use.
type Client struct {
	topics wire.Topics
	reply  string // the topic commands name for their answers; "": none
	c      mqtt.Client
	ids    atomic.Uint64
	prefix string
	signer string
	key    ed25519.PrivateKey
	resend time.Duration // < 0: never
	store  *guardedStore // paho's: no replay of a command under a lost lease

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
		prefix: fmt.Sprintf("%s-%d-", o.ClientID, time.Now().UnixNano()%100000), signer: o.Signer, key: o.Key, resend: o.Resend,
		store: newGuardedStore()}
	if cl.resend == 0 {
		cl.resend = DefaultResend
	}
	if err := o.Check(); err != nil {
		return nil, err
	}
	if err := o.checkBase(); err != nil {
		return nil, err
	}
	var err error
	if cl.reply, err = o.replyTopic(cl.topics); err != nil {
		return nil, err
	}
	tlsConf, password, set, err := o.security()
	if err != nil {
		return nil, err
	}
	// A clean session: the subscriptions are made again on every connect,
	// since a broker that restarted may have lost them. Dial returns once
	// they are in place, so no answer to a command sent after it is lost.
	subscribed := make(chan error, 1)
	subs := cl.subscriptions(o.WatchShared)
	opts := mqtt.NewClientOptions().AddBroker(o.Broker).SetClientID(o.ClientID).
		SetUsername(o.Username).SetPassword(password).SetCleanSession(true).
		SetAutoReconnect(true).SetMaxReconnectInterval(10 * time.Second).
		SetConnectTimeout(5 * time.Second).SetOrderMatters(true).SetStore(cl.store).
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
	if topic == cl.reply {
		cl.answered(m.Payload())
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
		cl.answered(m.Payload())
	}
}

// answered takes an answer: to the Send or Await that waits for it, else
// kept for a later Await. cl.mu is held.
func (cl *Client) answered(payload []byte) {
	r, err := wire.DecodeResult(payload)
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

// testHookStatus, if set (by tests), is called before a status message is
// taken, with whether it is a retained one.
var testHookStatus func(retained bool)

func (cl *Client) notify() {
	close(cl.changed)
	cl.changed = make(chan struct{})
}

// PublishRaw publishes payload on actuator's command topic (QoS 1), as it
// is: for tools and tests that send what Send would not (malformed or
// retained commands). Await its answer by the id the payload carries: the
// client hears it on its reply topic if the payload names that, on the
// shared result topic with SharedAnswers or WatchShared.
func (cl *Client) PublishRaw(ctx context.Context, actuator string, payload []byte, retained bool) error {
	if err := wait(ctx, cl.c.Publish(cl.topics.Set(actuator), 1, retained, payload)); err != nil {
		return fmt.Errorf("client: publish: %w", err)
	}
	return nil
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

// ReplyTopic returns the topic this client's commands name for their
// answers; "" with SharedAnswers.
func (cl *Client) ReplyTopic() string { return cl.reply }

// Connected reports whether the connection to the broker is up now (it
// reconnects by itself after a loss).
func (cl *Client) Connected() bool { return cl.c.IsConnectionOpen() }

// Close disconnects.
func (cl *Client) Close() { cl.c.Disconnect(100) }
