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
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/fence"
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
	// Store is the identity of the fence store (fencelog.Store.ID), and
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
	poison *poisonGuard

	estMu sync.Mutex // one establish at a time

	mu         sync.Mutex         // guards the fields below
	client     mqtt.Client        // nil until Run
	netConn    *limitConn         // the connection paho opened last
	gen        int                // connection generation: +1 on every connect
	connEnd    context.CancelFunc // ends the context of connection gen
	connLost   <-chan struct{}    // closed when connection gen is lost
	ready      chan struct{}      // closed while commands are taken on connection gen
	probeWant  string             // the probe in flight, and
	probeGot   chan struct{}      // closed when it came back
	sawCommand bool               // a command arrived on the connection paho opened last
	refusing   bool               // another process serves the gateway id: no commands, ever

	// alone is held while a command is answered alone (see poisonGuard),
	// and for reading while others are answered: a lost connection is
	// then that answer's.
	alone sync.RWMutex

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
	l.poison = newPoisonGuard()
	return l
}

// Changed takes the recorded states of a scope's actuators, to be
// published retained; it never blocks (see actuator.Options.Changed).
func (l *Link) Changed(outputs []fence.Output) { l.states.update(outputs) }

// InputChanged publishes an input's level, retained (again after every
// connect, with the states).
func (l *Link) InputChanged(in wire.InputState) { l.states.input(in) }

// Status reports the broker connection.
func (l *Link) Status() Status {
	st := l.conn.status()
	st.Poison, st.LastPoison, st.LastPoisonAt = l.poison.status()
	return st
}

// connDone returns a channel closed when the connection up now is lost
// (closed already if none is up).
func (l *Link) connDone() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.connLost == nil {
		return closedChan
	}
	return l.connLost
}

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

	work := newBacklog(append(slices.Clone(l.opts.Actuators), "")) // "": the unknown actuators
	var wg sync.WaitGroup
	dispatch := l.deliver(ctx, work, &wg)
	wg.Add(1)
	go func() { defer wg.Done(); l.states.run(ctx) }()

	client := mqtt.NewClient(l.clientOptions(ctx, dispatch))
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
	l.goodbye(client, errors.Is(conflict, ErrConflict))
	client.Disconnect(250)
	l.serving.Unlock()
	work.close()
	wg.Wait()
	if errors.Is(conflict, ErrConflict) {
		return conflict
	}
	return nil
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
