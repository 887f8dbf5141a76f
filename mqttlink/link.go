// Package mqttlink is the gateway's MQTT client: it connects the fence core
// (a [Handler]) to a broker, speaking the protocol of package wire.
//
// # Delivery
//
// Commands arrive with QoS 1 on <prefix>/<gateway>/<actuator>/set. The link
// subscribes with a persistent session and acknowledges a command only after
// the handler decided it and its answer was queued, so a command the gateway
// crashed on is redelivered by the broker and then answered (duplicate, if it
// had been applied). Commands for one actuator are handled in arrival order;
// different actuators are handled concurrently.
//
// Each actuator's recorded state is published, retained, whenever the core
// reports a change ([Link.Changed]); the core reports a scope's changes in
// fence order, and the link publishes the newest state of each actuator
// last, so a retained state never goes back.
//
// # Being seen
//
// Every failed connection attempt is logged with its reason (refused, not
// authorised, bad user name or password, connection lost), without flooding
// the log, and kept for [Link.Status]. A refused subscription is retried
// with backoff, and the gateway says "online" only once it takes commands.
//
// # One process per gateway id
//
// Before it takes commands on a connection, the link announces its process
// on <prefix>/<gateway>/instance (a [wire.Claim]) and watches that topic.
// If another process announces itself for the same gateway id (a copied
// configuration, a second installation), both refuse commands and Run
// returns [ErrConflict]: two processes with two stores would each fence
// commands against their own record, and a stale controller could win on
// either.
//
// The package imports the fence types but neither the store nor any GPIO
// code: the core is reached only through Handler.
package mqttlink

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/pahosec"
	"github.com/fencegate/fencegate/mqttsec"
	"github.com/fencegate/fencegate/wire"
)

// Handler is the fence core as the link sees it (package actuator's Bank).
type Handler interface {
	// HandleBatch decides and carries out cmds, well-formed commands to
	// one actuator in the order they came (the commands it admits share
	// one commit), and answers a prefix of them, in their order: all of
	// them, or, with an error, those before the first that was not decided
	// (ctx ended while it waited). The commands not answered are left
	// unacknowledged, so that the broker delivers them again.
	HandleBatch(ctx context.Context, cmds []fence.Command) ([]fence.Result, error)
	// MaxBatch is the most commands of an actuator HandleBatch takes at
	// once: 1 for one it decides one at a time, so that the link looks at
	// its door and its context between them.
	MaxBatch(actuator string) int
	// Reject answers a command that could not be parsed or must not be
	// executed, for reason (a fence.Reason* code); nothing changes.
	Reject(c fence.Command, reason string, err error) fence.Result
}

// ErrConflict is returned by Run when another process serves the same
// gateway id.
var ErrConflict = errors.New("mqttlink: another gateway process uses this gateway id")

// Options configure a Link.
type Options struct {
	// Broker is the broker URL, e.g. tcp://127.0.0.1:1883.
	Broker string
	Topics wire.Topics
	// ClientID defaults to "fencegate-" + Topics.GatewayID. It must be
	// stable across restarts: the broker keeps the session (and any
	// unacknowledged commands) under it.
	ClientID string
	Username string
	Password string
	// TLS secures a connection to a TLS broker URL (ssl://, mqtts://,
	// tls://, wss://); nil uses paho's default (the system's CAs).
	TLS *tls.Config
	// Settings describe the connection's settings in the user's words, for
	// the reasons of failed connections (see mqttsec.Explain); a zero
	// Names means the gateway configuration's keys.
	Settings mqttsec.Settings
	// Actuators are the names commands may address; commands for other
	// names are rejected without a worker of their own.
	Actuators []string
	// Store is the identity of the fence store (fencelog.Log.ID), and
	// Version the gateway's version: both go into this process's claim.
	Store, Version string
	// Logger receives connection events. Nil discards.
	Logger *slog.Logger
	// Ready, if set, is called each time commands are taken on a new
	// connection: subscribed, claim unopposed, "online" published.
	Ready func()
	// Lost, if set, is called each time the broker connection is lost,
	// with why; it must not block (the dead-man of scopes that go safe
	// on it runs in a goroutine of its own).
	Lost func(err error)
	// Announce, if set, is published after each "online", and again, with
	// every state, whenever its birth message arrives.
	Announce *Announcement
}

// Announcement is a retained message about the gateway for others (Home
// Assistant's discovery), and the message on which they ask for it again
// (Home Assistant's birth message, after its restart).
type Announcement struct {
	Topic   string
	Payload []byte
	// BirthTopic and BirthPayload: a message with this payload on this
	// topic makes the link publish the announcement and every state again.
	BirthTopic, BirthPayload string
}

// Backoff bounds the waits between connection attempts and between retries
// of a refused subscription.
const (
	minBackoff = time.Second
	maxBackoff = 30 * time.Second
)

// writeWait bounds paho's waits to hand a packet to the connection and to
// write it (its default is 30 s for the first and no bound for the
// second): a publish that paho took as connected just as the connection
// closed, or a broker that stopped reading, never holds a worker, or the
// stop that waits for the workers, for longer.
const writeWait = 5 * time.Second

// byeWait bounds a clean stop's goodbye: the unsubscription and the offline
// status.
const byeWait = 2 * time.Second

// Link is a gateway's MQTT connection. Create it with New, feed it the
// core's state changes with Changed, and Run it.
type Link struct {
	opts  Options
	h     Handler
	t     wire.Topics
	log   *slog.Logger
	claim wire.Claim

	states *statePublisher
	conn   *connState
	guard  *instanceGuard

	estMu sync.Mutex // one establish at a time

	mu         sync.Mutex         // guards the fields below
	client     mqtt.Client        // nil until Run
	netConn    *limitConn         // the connection paho opened last
	gen        int                // connection generation: +1 on every connect
	connEnd    context.CancelFunc // ends the context of connection gen
	ready      chan struct{}      // closed while commands are taken on connection gen
	probeWant  string             // the probe in flight, and
	probeGot   chan struct{}      // closed when it came back
	sawCommand bool               // a command arrived on the connection paho opened last
	refusing   bool               // another process serves the gateway id: no commands, ever

	// serving is held for reading while a command is decided, answered
	// and acknowledged; Run holds it to stop, so that a command answered
	// is acknowledged before the connection closes.
	serving sync.RWMutex
}

// New returns a link for h; nothing connects until Run.
func New(opts Options, h Handler) *Link {
	if opts.Topics.Prefix == "" {
		opts.Topics.Prefix = wire.DefaultPrefix
	}
	if opts.ClientID == "" {
		opts.ClientID = "fencegate-" + opts.Topics.GatewayID
	}
	opts.Settings = settings(opts)
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	host, _ := os.Hostname()
	var nonce [8]byte
	rand.Read(nonce[:])
	started, ok := processStart(os.Getpid())
	if !ok {
		started = time.Now()
	}
	ticks, _ := processTicks(os.Getpid())
	l := &Link{opts: opts, h: h, t: opts.Topics, log: log, ready: make(chan struct{}),
		claim: wire.Claim{Instance: hex.EncodeToString(nonce[:]), Store: opts.Store, Host: host, Machine: machineID(), PID: os.Getpid(),
			Started: started.UTC().Truncate(time.Second), Boot: bootID(), Ticks: ticks, Version: opts.Version}}
	l.states = newStatePublisher(l)
	l.conn = newConnState(opts.Settings, opts.ClientID, opts.Topics.GatewayID, log)
	l.guard = newInstanceGuard(l)
	return l
}

// Changed takes the recorded states of a scope's actuators, to be
// published retained; it never blocks (see actuator.Options.Changed).
func (l *Link) Changed(outputs []fence.Output) { l.states.update(outputs) }

// InputChanged publishes an input's level, retained (again after every
// connect, with the states).
func (l *Link) InputChanged(in wire.InputState) { l.states.input(in) }

// Status reports the broker connection.
func (l *Link) Status() Status { return l.conn.status() }

// Run connects to the broker, serves commands until ctx is done, then
// publishes the offline status and disconnects. It keeps reconnecting while
// the broker is unreachable. It returns ErrConflict (wrapped, naming the
// other process) when another process serves the same gateway id.
func (l *Link) Run(ctx context.Context) error {
	if l.opts.Broker == "" {
		return errors.New("mqttlink: no broker")
	}
	running.Store(l.claim.Instance, true)
	defer running.Delete(l.claim.Instance)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	l.guard.onConflict = func(err error) { cancel(err) }

	names := append(slices.Clone(l.opts.Actuators), "") // "": the unknown actuators
	work := newBacklog(names)
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := max(1, min(maxBatch, l.h.MaxBatch(name)))
			if name == "" {
				batch = 1 // the unknown actuators' queue holds many names
			}
			for {
				ds, ok := work.take(name, batch)
				if !ok {
					return
				}
				ms := make([]mqtt.Message, len(ds))
				for i, d := range ds {
					ms[i] = d.m
				}
				l.serve(ctx, ds[0].name, ms)
				if n := work.done(ds); n > 0 {
					l.refetch(n)
				}
			}
		}()
	}
	wg.Add(1)
	go func() { defer wg.Done(); l.states.run(ctx) }()

	co := mqtt.NewClientOptions().
		AddBroker(l.opts.Broker).
		SetClientID(l.opts.ClientID).
		SetUsername(l.opts.Username).
		SetPassword(l.opts.Password).
		SetProtocolVersion(4).
		SetCleanSession(false).
		SetOrderMatters(true).
		SetAutoAckDisabled(true).
		SetAutoReconnect(true).
		SetConnectRetry(false).
		SetMaxReconnectInterval(maxBackoff).
		SetKeepAlive(30*time.Second).
		SetConnectTimeout(5*time.Second).
		SetWriteTimeout(writeWait).
		SetWill(l.t.Status(), wire.StatusOffline, 1, true).
		SetStore(sessionStore{mqtt.NewMemoryStore()})
	// Commands redelivered from the persistent session can arrive before
	// the subscription of this connection is in place, so the dispatcher is
	// also the default handler: no command is ever dropped unanswered. They
	// wait in their actuator's queue until the link takes commands.
	dispatch := func(_ mqtt.Client, m mqtt.Message) {
		if m.Topic() == l.t.Probe() {
			l.delivered(string(m.Payload()))
			m.Ack()
			return
		}
		name, ok := l.t.Actuator(m.Topic())
		if ok {
			l.delivered("")
		}
		if !ok {
			if m.Topic() == l.t.Instance() {
				l.guard.received(m)
			}
			m.Ack() // not a command topic of ours
			return
		}
		if work.put(name, m) {
			if testHookQueued != nil {
				testHookQueued(name, m.Payload())
			}
		} else {
			// The reader must never block: it also delivers the claims
			// and probes the link may be waiting for. Unacknowledged, the
			// command comes again when the link reconnects, as soon as the
			// backlog is empty (see BacklogBytes).
			l.conn.dropped(name)
		}
	}
	pahosec.SetTLS(co, l.opts.TLS)
	co.SetCustomOpenConnectionFn(openConn(co.CustomOpenConnectionFn, func(c *limitConn) { // packets read whole are at most MaxPacket bytes
		l.mu.Lock()
		l.netConn = c
		// A new connection: no command has come on it yet. Not in the
		// connect handler, which paho runs after the connection may have
		// delivered commands from the session (they prove delivery, and a
		// broker with a full queue would drop the probe that stands in).
		l.sawCommand = false
		l.mu.Unlock()
	}))
	co.SetDefaultPublishHandler(dispatch)
	co.SetConnectionNotificationHandler(func(_ mqtt.Client, n mqtt.ConnectionNotification) {
		switch n := n.(type) {
		case mqtt.ConnectionNotificationFailed:
			l.conn.failed(n.Reason)
		case mqtt.ConnectionNotificationLost:
			if client := l.clientOrNil(); client != nil && client.IsConnectionOpen() {
				// paho reports a loss and the next connect in separate
				// goroutines: this loss is older than the connection up now.
				return
			}
			l.connectionLost(n.Reason)
		}
	})
	co.SetOnConnectHandler(func(c mqtt.Client) {
		if testHookOnConnect != nil {
			testHookOnConnect()
		}
		l.conn.connected()
		l.mu.Lock()
		l.gen++
		gen := l.gen
		l.probeGot = nil
		if l.connEnd != nil {
			l.connEnd()
		}
		cctx, end := context.WithCancel(ctx)
		l.connEnd = end
		l.mu.Unlock()
		go l.establish(cctx, c, gen, dispatch)
	})
	client := mqtt.NewClient(co)
	l.mu.Lock()
	l.client = client
	l.mu.Unlock()

	l.log.Info("connecting to broker", "broker", l.opts.Broker, "client_id", l.opts.ClientID, "tls", mqttsec.IsTLSURL(l.opts.Broker),
		"username", l.opts.Username, "password_from", l.opts.Settings.PasswordFrom)
	l.connect(ctx, client)
	<-ctx.Done()

	// The commands being decided are answered and acknowledged first, and
	// the publishes in progress end (each within writeWait); none starts
	// after this (see publish).
	l.serving.Lock()
	conflict := context.Cause(ctx)
	if client.IsConnectionOpen() {
		// The goodbye is bounded as a whole: a broker that does not take it
		// sees the connection close without a DISCONNECT, and publishes the
		// last will (offline) itself.
		bye := make(chan struct{})
		go func() {
			defer close(bye)
			if !errors.Is(conflict, ErrConflict) {
				// A clean stop: commands published while the gateway is
				// away are not kept for it. In a conflict the session may
				// be another process's too (the same client id): leave it.
				client.Unsubscribe(l.t.SetFilter()).WaitTimeout(byeWait)
			}
			client.Publish(l.t.Status(), 1, true, wire.StatusOffline).WaitTimeout(byeWait)
		}()
		select {
		case <-bye:
		case <-time.After(byeWait):
		}
	}
	client.Disconnect(250)
	l.serving.Unlock()
	work.close()
	wg.Wait()
	if errors.Is(conflict, ErrConflict) {
		return conflict
	}
	return nil
}

// refetch closes the connection, so that paho reconnects and the broker
// delivers again the n commands dropped while the backlog was full: MQTT
// redelivers a session's unacknowledged messages at a reconnect, and a
// broker keeps sending a connected client new ones meanwhile.
func (l *Link) refetch(n int) {
	l.log.Warn("reconnecting to receive again the commands dropped while the backlog was full", "dropped", n)
	l.conn.refetching(n)
	l.mu.Lock()
	c := l.netConn
	l.mu.Unlock()
	if c != nil {
		c.abort(errRefetch)
	}
}

// errRefetch is what paho reads from a connection the link closed to
// receive again the commands dropped from a full backlog.
var errRefetch = errors.New("mqttlink: the link closed the connection to receive again the commands dropped from its full backlog")

// connect makes the first connection, retrying with backoff until it
// succeeds or ctx ends; later losses are paho's to reconnect.
func (l *Link) connect(ctx context.Context, client mqtt.Client) {
	wait := minBackoff
	for {
		tok := client.Connect()
		select {
		case <-tok.Done():
		case <-ctx.Done():
			return
		}
		if tok.Error() == nil {
			return
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return
		}
		wait = min(2*wait, maxBackoff)
	}
}

// establish takes commands on connection gen, whose context ctx ends when
// the connection is lost: it claims the gateway id, subscribes to the
// command topics, checks that they are delivered, and says online; a
// refused or unanswered step is retried with backoff while the connection
// lasts.
func (l *Link) establish(ctx context.Context, c mqtt.Client, gen int, dispatch mqtt.MessageHandler) {
	l.estMu.Lock() // the previous connection's, if any, ends at once: its context has
	defer l.estMu.Unlock()
	if testHookEstablish != nil {
		testHookEstablish(gen)
	}
	if gen > 1 {
		// A reconnect: commands are not taken until online says so again.
		// The retained status may still say online: a broker that restarted
		// kept it (and publishes no last will for a connection of before).
		if _, ok := l.publish(ctx, c, l.t.Status(), 1, true, wire.StatusOffline); !ok {
			return
		}
	}
	wait := minBackoff
	for ctx.Err() == nil {
		err := l.guard.claim(ctx, c, gen)
		if err == nil {
			err = l.subscribe(ctx, c, l.t.SetFilter(), dispatch)
		}
		if err == nil {
			err = l.probe(ctx, c, gen)
		}
		if err == nil {
			break
		}
		if errors.Is(err, ErrConflict) || ctx.Err() != nil {
			return
		}
		l.conn.subscribeFailed(err)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return
		}
		wait = min(2*wait, maxBackoff)
	}
	if ctx.Err() != nil {
		return
	}
	l.mu.Lock()
	if l.gen != gen || ctx.Err() != nil {
		l.mu.Unlock()
		return
	}
	close(l.ready)
	l.mu.Unlock()
	l.conn.subscribed(l.t.SetFilter())
	// online means: subscribed, unopposed, commands are taken.
	if tok, ok := l.publish(ctx, c, l.t.Status(), 1, true, wire.StatusOnline); !ok {
		return // stopping: offline follows
	} else if err := await(ctx, tok, "publish the online status"); err != nil {
		l.log.Warn("could not publish the online status", "err", err)
	}
	l.states.republish()
	if a := l.opts.Announce; a != nil {
		l.announce(ctx, c)
		err := subscribe(ctx, c, a.BirthTopic, 1, func(_ mqtt.Client, m mqtt.Message) {
			m.Ack() // acknowledgements are the link's to send (see serve)
			if string(m.Payload()) == a.BirthPayload {
				go l.announce(ctx, c) // a publish may wait for paho's queue: never in its reader
				l.states.republish()
			}
		}, l.opts.Username)
		if err != nil && ctx.Err() == nil {
			l.log.Warn("could not subscribe to the birth message; the announcement is published at each connect only",
				"topic", a.BirthTopic, "err", err)
		}
	}
	if l.opts.Ready != nil {
		l.opts.Ready()
	}
}

// subscribe subscribes and checks the broker's answer: a SUBACK with
// return code 0x80 is a refusal (an ACL), which paho does not report as an
// error.
func (l *Link) subscribe(ctx context.Context, c mqtt.Client, filter string, h mqtt.MessageHandler) error {
	return subscribe(ctx, c, filter, 1, h, l.opts.Username)
}

// probe checks that the broker delivers the command topics to this
// gateway: some brokers (Mosquitto, for MQTT 3.1.1) grant a subscription
// that their ACL then silently starves. A probe published on a command
// topic must come back, unless a command already did on this connection
// (then commands may fill the broker's in-flight window, and the probe
// would wait behind them).
func (l *Link) probe(ctx context.Context, c mqtt.Client, gen int) error {
	want := fmt.Sprintf("%s-%d", l.claim.Instance, gen)
	l.mu.Lock()
	if l.sawCommand {
		l.mu.Unlock()
		return nil
	}
	got := make(chan struct{})
	l.probeWant, l.probeGot = want, got
	l.mu.Unlock()
	if err := await(ctx, c.Publish(l.t.Probe(), 1, false, want), "publish the probe on "+l.t.Probe()); err != nil {
		return err
	}
	select {
	case <-got:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("the broker granted the subscription to %s but delivers nothing on it (a probe on %s did not come back within 5s): "+
			"its ACL must let user %q read and write %s; or its queue for this client is full (Mosquitto: raise max_queued_messages as docs/protocol.md says)",
			l.t.SetFilter(), l.t.Probe(), l.opts.Username, l.t.SetFilter())
	case <-ctx.Done():
		return ctx.Err()
	}
}

// delivered notes a message on the command topics: a command ("") or a
// probe.
func (l *Link) delivered(probe string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if probe == "" {
		l.sawCommand = true
	}
	if l.probeGot != nil && (probe == "" || probe == l.probeWant) {
		close(l.probeGot)
		l.probeGot = nil
	}
}

func (l *Link) connectionLost(err error) {
	l.mu.Lock()
	if l.connEnd != nil {
		l.connEnd()
		l.connEnd = nil
	}
	select {
	case <-l.ready:
		l.ready = make(chan struct{}) // commands wait for the next connection
	default:
	}
	l.mu.Unlock()
	l.guard.lost(l.conn.lost(err))
	if l.opts.Lost != nil {
		l.opts.Lost(err)
	}
}

// waitReady waits until commands are taken; false if ctx ended first.
func (l *Link) waitReady(ctx context.Context) bool {
	for {
		if ctx.Err() != nil {
			return false
		}
		l.mu.Lock()
		ready, refusing := l.ready, l.refusing
		l.mu.Unlock()
		if refusing {
			if testHookParked != nil {
				testHookParked()
			}
			<-ctx.Done()
			return false
		}
		select {
		case <-ready:
			if l.open() && ctx.Err() == nil {
				return true
			}
		case <-ctx.Done():
			return false
		}
	}
}

// testHookEstablish, if set (by tests), is called when the link begins to
// take commands on connection gen (1, 2, … for each connect).
var testHookEstablish func(gen int)

// testHookOnConnect, if set (by tests), runs first in paho's connect
// handler, which paho runs in a goroutine of its own, racing the messages
// the new connection delivers.
var testHookOnConnect func()

// testHookQueued, if set (by tests), is called with each command message
// put in its actuator's queue, and testHookServe with each one its
// actuator's worker takes from it.
var testHookQueued, testHookServe func(actuator string, payload []byte)

// testHookConn, if set (by tests), wraps each connection the link opens.
var testHookConn func(net.Conn) net.Conn

// testHookParked, if set (by tests), is called when a command waits at a
// door closed for good.
var testHookParked func()

// open reports whether commands are taken right now.
func (l *Link) open() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refusing {
		return false
	}
	select {
	case <-l.ready:
		return true
	default:
		return false
	}
}

// closeDoor stops taking commands for good (another process serves the
// gateway id): commands that have not reached the core stay undecided and
// unacknowledged.
func (l *Link) closeDoor() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refusing = true
	select {
	case <-l.ready:
		l.ready = make(chan struct{})
	default:
	}
}

// serve handles ms, command messages to actuator name in the order they
// came, and acknowledges each once answered. The well-formed commands
// among them go to the core together (a batch shares one commit); a
// malformed or retained one is rejected in its turn. While the link does
// not take commands (connecting, claiming, shutting down, or in conflict)
// the messages wait; at shutdown they stay unacknowledged, so that the
// broker redelivers them to the next session.
func (l *Link) serve(ctx context.Context, name string, ms []mqtt.Message) {
	if testHookServe != nil {
		for _, m := range ms {
			testHookServe(name, m.Payload())
		}
	}
	if !l.waitReady(ctx) {
		return
	}
	l.serving.RLock()
	defer l.serving.RUnlock()
	if ctx.Err() != nil {
		return // stopping: not decided
	}
	cmds := make([]fence.Command, len(ms))
	bad := make([]error, len(ms))
	for i, m := range ms {
		cmds[i], bad[i] = decode(name, m.Payload())
	}
	// results answers the messages decided, a prefix of ms: those after
	// it were not decided (the door closed, or the link is stopping).
	results := make([]fence.Result, 0, len(ms))
	for i := 0; i < len(ms); {
		switch {
		case ms[i].Retained():
			results = append(results, l.h.Reject(cmds[i], fence.ReasonRetained, errors.New("retained command refused: commands must not be retained (clear it with an empty retained publish)")))
			i++
			continue
		case bad[i] != nil:
			results = append(results, l.h.Reject(cmds[i], fence.ReasonInvalid, bad[i]))
			i++
			continue
		}
		j := i + 1
		for j < len(ms) && !ms[j].Retained() && bad[j] == nil {
			j++
		}
		if !l.open() {
			break // the door closed while they waited: not decided
		}
		res, err := l.h.HandleBatch(ctx, cmds[i:j])
		results = append(results, res...)
		if err != nil {
			break // not decided: the broker delivers them again
		}
		i = j
	}
	l.mu.Lock()
	c := l.client
	l.mu.Unlock()
	// QoS 0: an answer lost with the connection is replaced by the answer
	// to the redelivered command, and a QoS 1 publish in flight at a
	// connection loss would keep its message id for good in a persistent
	// session whose store does not resend it (see sessionStore). A
	// command's acknowledgement goes only after its answer is written:
	// paho sends acknowledgements and publishes from separate queues, and a
	// broker that has the acknowledgement must have had the answer before
	// it.
	toks := make([]mqtt.Token, len(results))
	topic := l.t.Result(name)
	for i, res := range results {
		toks[i] = c.Publish(topic, 0, false, wire.EncodeResult(res))
	}
	l.states.poke() // the states the decisions changed, after their answers
	// One timer for all of them: paho's WaitTimeout makes one each.
	wait := time.NewTimer(answerWait)
	defer wait.Stop()
	for i, tok := range toks {
		select {
		case <-tok.Done():
		case <-wait.C:
			return // not acknowledged: the broker delivers them again, and they are answered again
		}
		if tok.Error() != nil || !c.IsConnectionOpen() {
			return
		}
		ms[i].Ack()
	}
}

// maxBatch bounds the commands of one actuator that go to the core
// together.
const maxBatch = 64

// announce publishes the announcement, retained, without waiting for its
// acknowledgement.
func (l *Link) announce(ctx context.Context, c mqtt.Client) {
	a := l.opts.Announce
	l.publish(ctx, c, a.Topic, 1, true, a.Payload)
}

// publish publishes on c, unless ctx (the link's, or the connection's) has
// ended: Run waits for the publishes in progress before it says goodbye
// and disconnects, and none starts after that, so nothing the link
// publishes follows its offline status, and no worker the stop waits for is
// left in a publish that paho accepted as connected just as the connection
// closed. ok is false if nothing was published.
func (l *Link) publish(ctx context.Context, c mqtt.Client, topic string, qos byte, retained bool, payload any) (tok mqtt.Token, ok bool) {
	l.serving.RLock()
	defer l.serving.RUnlock()
	if ctx.Err() != nil {
		return nil, false
	}
	return c.Publish(topic, qos, retained, payload), true
}

// answerWait bounds the wait for a batch's answers to be written.
const answerWait = 5 * time.Second

func (l *Link) clientOrNil() mqtt.Client {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.client
}

// await waits for tok: its error, ctx's, or a timeout after 10 s.
func await(ctx context.Context, tok mqtt.Token, what string) error {
	select {
	case <-tok.Done():
		if err := tok.Error(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", what, ctx.Err())
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s: no answer from the broker within 10s", what)
	}
}

// subscribe subscribes c to filter and checks the broker's answer, which
// paho does not: a SUBACK code other than a granted QoS is a refusal (0x80
// in MQTT 3.1.1; a broker may send others).
//
// One is not: 0x91, "packet identifier in use", which the embedded broker
// (mochi) sends when the SUBSCRIBE's packet id is also the id of a message
// it is delivering to this client: it keeps one id space for both
// directions, and a resumed session's queued commands take the low ids a
// new client starts with. paho gives each attempt the next id, so trying
// again gets past them.
func subscribe(ctx context.Context, c mqtt.Client, filter string, qos byte, h mqtt.MessageHandler, user string) error {
	for range 1 << 16 {
		tok := c.Subscribe(filter, qos, h)
		if err := await(ctx, tok, "subscribe to "+filter); err != nil {
			return err
		}
		st, ok := tok.(*mqtt.SubscribeToken)
		if !ok {
			return nil
		}
		code := st.Result()[filter]
		switch {
		case code == 0x91:
			continue
		case code > 2:
			return fmt.Errorf("the broker refused the subscription to %s (SUBACK code 0x%02x; check its ACL: user %q must be allowed to read and write it)",
				filter, code, user)
		}
		return nil
	}
	return fmt.Errorf("the broker refused every packet id for the subscription to %s (SUBACK code 0x91)", filter)
}

// sessionStore is paho's memory store without outbound publishes.
//
// paho resends stored outbound publishes when a session resumes, and does so
// concurrently with publishes made from the connect handler or by workers
// right after a reconnect, racing on the same packet (paho issue #703) and
// sending answers twice. fencegate needs no resend: an answer whose publish
// was lost with the connection was followed on the same connection by the
// command's acknowledgement, which was lost too, so the broker redelivers the
// command and the gateway answers it again (as a duplicate). States and the
// status are republished on every connect.
type sessionStore struct{ mqtt.Store }

// Put implements mqtt.Store.
func (s sessionStore) Put(key string, m packets.ControlPacket) {
	if _, ok := m.(*packets.PublishPacket); ok && strings.HasPrefix(key, "o.") {
		return
	}
	s.Store.Put(key, m)
}
