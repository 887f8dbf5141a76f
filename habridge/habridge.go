// Package habridge lets Home Assistant command fencegate's actuators the
// fenced way. It is an ordinary controller: Home Assistant's switches and
// numbers (announced through MQTT discovery, package hass) publish "on" or
// "off", or a set-point in percent, on the bridge's own topics, never the
// gateway's; for each, the bridge
// holds the etcd lease of the actuator's fence scope (one etcd session,
// package lease), sends a tokenized command (package client), and reports
// the gateway's answer back to Home Assistant, retained, as the switch's
// attributes. A stale answer means another controller took the scope:
// the bridge lets its lease go, acquires it again (a higher token) and
// sends the command once more.
package habridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/hass"
	"github.com/fencegate/fencegate/internal/pahosec"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/wire"
)

// Options configure a bridge.
type Options struct {
	// Client is the connection to the gateway (its broker, which Home
	// Assistant shares, the gateway's id and topic prefix, credentials);
	// the bridge's own connection for Home Assistant's topics uses the
	// same broker and credentials.
	Client client.Options
	// Etcd are the lease service's endpoints; TTL the leases' time to live
	// in seconds (0: 10).
	Etcd []string
	TTL  int
	// Actuators are the actuators Home Assistant may switch on and off;
	// Setpoints the set-point outputs it may set (in percent).
	Actuators, Setpoints []string
	// Name is the bridge's name: the holder of its commands.
	Name string
	// DiscoveryPrefix is Home Assistant's ("": hass.DefaultPrefix), and
	// BridgePrefix begins the bridge's topics ("": hass.DefaultBridgePrefix).
	DiscoveryPrefix, BridgePrefix string
	// Wait bounds the wait for a scope's lease held by another controller
	// (0: 30 s); the command then fails, and says so.
	Wait time.Duration
	// Idle is how long the bridge keeps a scope's lease after its last
	// command (0: one minute); then it lets the lease go, so that other
	// controllers of the scope can have it.
	Idle    time.Duration
	Version string
	Logger  *slog.Logger
}

// Outcome is what the bridge reports, retained, on an actuator's outcome
// topic after each command: Home Assistant shows it as the switch's
// attributes.
type Outcome struct {
	Outcome fence.Outcome `json:"last_outcome"`
	Asked   string        `json:"last_asked"`
	Token   uint64        `json:"token,omitempty"`
	Seq     uint64        `json:"seq"`
	Reason  string        `json:"reason,omitempty"`
	Error   string        `json:"error,omitempty"`
	At      time.Time     `json:"at"`
}

// bridge is a running bridge.
type bridge struct {
	o        Options
	log      *slog.Logger
	topics   hass.BridgeTopics
	gw       *client.Client
	etcd     *clientv3.Client
	ha       mqtt.Client
	disc     hass.Discovery
	queues   map[string]chan request // per actuator, in the order Home Assistant sent them
	setpoint map[string]bool         // the actuators that take set-points

	mu     sync.Mutex // guards scopes
	scopes map[string]*scope
}

// scope is a fence scope's lease, while the bridge holds it; its lock
// keeps the scope's commands in order.
type scope struct {
	mu    sync.Mutex
	l     *lease.Lease
	next  uint64      // the next command's seq under l
	last  time.Time   // when the last command ended
	timer *time.Timer // lets l go once the scope was idle long enough
}

// checkTopicParts refuses a name or prefix of o that would make a topic
// a broker refuses (a wildcard, a control character, invalid UTF-8; a /
// in a name): the bridge would lose its connection at the first publish
// on it, at every reconnect.
func checkTopicParts(o Options) error {
	for _, a := range slices.Concat(o.Actuators, o.Setpoints) {
		if err := wire.CheckLevel(a); err != nil {
			return fmt.Errorf("habridge: actuator %q is no actuator's name (letters, digits, _ and -, as the gateway's configuration has it): %v", a, err)
		}
	}
	for _, p := range []struct{ what, v string }{{"discovery prefix", o.DiscoveryPrefix}, {"bridge prefix", o.BridgePrefix}} {
		if err := wire.CheckPrefix(p.v); err != nil {
			return fmt.Errorf("habridge: %s %q: %v", p.what, p.v, err)
		}
	}
	return nil
}

// Run runs the bridge until ctx ends.
func Run(ctx context.Context, o Options) error {
	if o.Name == "" {
		o.Name = "ha-bridge"
	}
	if o.Wait == 0 {
		o.Wait = 30 * time.Second
	}
	if o.Idle == 0 {
		o.Idle = time.Minute
	}
	if len(o.Actuators)+len(o.Setpoints) == 0 {
		return errors.New("habridge: no actuators: name the ones Home Assistant may command")
	}
	if err := checkTopicParts(o); err != nil {
		return err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &bridge{o: o, log: log, topics: hass.BridgeTopics{Prefix: o.BridgePrefix, GatewayID: o.Client.GatewayID},
		queues: map[string]chan request{}, setpoint: map[string]bool{}, scopes: map[string]*scope{}}
	for _, a := range slices.Concat(o.Actuators, o.Setpoints) {
		if b.queues[a] != nil {
			return fmt.Errorf("habridge: actuator %q is named twice: a switch or a set-point, once", a)
		}
		b.queues[a] = make(chan request, queueLen)
	}
	for _, a := range o.Setpoints {
		b.setpoint[a] = true
	}
	gwTopics := wire.Topics{Prefix: o.Client.Prefix, GatewayID: o.Client.GatewayID}
	if gwTopics.Prefix == "" {
		gwTopics.Prefix = wire.DefaultPrefix
	}
	var err error
	if b.disc, err = hass.NewBridge(hass.BridgeOptions{Prefix: o.DiscoveryPrefix, Bridge: b.topics, Gateway: gwTopics,
		Name: o.Name, Version: o.Version, Actuators: o.Actuators, Setpoints: o.Setpoints}); err != nil {
		return err
	}
	if b.etcd, err = clientv3.New(clientv3.Config{Endpoints: o.Etcd, DialTimeout: 5 * time.Second}); err != nil {
		return fmt.Errorf("habridge: etcd %v: %w", o.Etcd, err)
	}
	defer b.etcd.Close()
	if b.gw, err = client.Dial(ctx, o.Client); err != nil {
		return err
	}
	defer b.gw.Close()
	// One worker per actuator takes its commands in the order they came:
	// "on" then "off" must leave it off.
	var workers sync.WaitGroup
	for a, q := range b.queues {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for {
				select {
				case r := <-q:
					b.command(ctx, a, r)
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	defer workers.Wait()
	if err := b.connectHA(ctx); err != nil {
		return err
	}
	defer func() {
		b.ha.Publish(b.topics.Status(), 1, true, wire.StatusOffline).WaitTimeout(2 * time.Second)
		b.ha.Disconnect(250)
	}()
	log.Info("Home Assistant bridge running", "gateway", o.Client.GatewayID, "actuators", o.Actuators, "setpoints", o.Setpoints, "commands", b.topics.SetFilter(),
		"discovery", b.disc.Topic)
	<-ctx.Done()
	b.mu.Lock()
	for _, s := range b.scopes {
		s.mu.Lock()
		if s.timer != nil {
			s.timer.Stop()
		}
		if s.l != nil {
			s.l.Release(context.Background())
			s.l = nil
		}
		s.mu.Unlock()
	}
	b.mu.Unlock()
	return nil
}

// connectHA connects the bridge's own MQTT client: its last will says
// offline; at every connect it subscribes to its command topics and Home
// Assistant's birth message, says online and publishes its discovery.
func (b *bridge) connectHA(ctx context.Context) error {
	tlsConf, password, err := b.o.Client.Credentials()
	if err != nil {
		return err
	}
	opts := mqtt.NewClientOptions().AddBroker(b.o.Client.Broker).
		SetClientID(fmt.Sprintf("fencegate-ha-bridge-%s-%d", b.o.Client.GatewayID, time.Now().UnixNano())).
		SetUsername(b.o.Client.Username).SetPassword(password).SetCleanSession(true).SetAutoReconnect(true).
		SetMaxReconnectInterval(10*time.Second).SetConnectTimeout(5*time.Second).
		SetWill(b.topics.Status(), wire.StatusOffline, 1, true)
	pahosec.SetTLS(opts, tlsConf)
	opts.SetOnConnectHandler(func(c mqtt.Client) {
		go func() { // not in paho's connect handler, which must not block
			subs := map[string]byte{b.topics.SetFilter(): 1, b.disc.BirthTopic: 1}
			if tok := c.SubscribeMultiple(subs, b.receive(ctx)); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
				b.log.Error("cannot subscribe to Home Assistant's commands", "topics", subs, "err", tok.Error())
				return
			}
			c.Publish(b.topics.Status(), 1, true, wire.StatusOnline)
			c.Publish(b.disc.Topic, 1, true, b.disc.Payload)
		}()
	})
	b.ha = mqtt.NewClient(opts)
	tok := b.ha.Connect()
	select {
	case <-tok.Done():
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := tok.Error(); err != nil {
		return fmt.Errorf("habridge: connect %s: %w", b.o.Client.Broker, err)
	}
	return nil
}

// receive handles Home Assistant's messages: a command (in a goroutine of
// its own, so that paho's reader never waits for a lease or an answer),
// or its birth message.
func (b *bridge) receive(ctx context.Context) mqtt.MessageHandler {
	return func(c mqtt.Client, m mqtt.Message) {
		if m.Topic() == b.disc.BirthTopic {
			if string(m.Payload()) == b.disc.BirthPayload {
				go c.Publish(b.disc.Topic, 1, true, b.disc.Payload) // a publish may wait for paho's queue: never in its reader
			}
			return
		}
		name, ok := b.topics.Actuator(m.Topic())
		q := b.queues[name]
		if !ok || q == nil {
			b.log.Warn("command for an actuator the bridge does not serve", "topic", m.Topic())
			return
		}
		r, err := parseRequest(string(m.Payload()), b.setpoint[name])
		if err != nil {
			go b.report(name, Outcome{Outcome: fence.Rejected, Asked: string(m.Payload()), Reason: fence.ReasonInvalid,
				Error: err.Error(), At: time.Now().UTC()})
			return
		}
		select {
		case q <- r: // never blocks paho's reader
		default:
			go b.report(name, Outcome{Outcome: fence.Rejected, Asked: r.String(), Reason: "busy",
				Error: fmt.Sprintf("%d commands for %s wait already; nothing was sent", queueLen, name), At: time.Now().UTC()})
		}
	}
}

// queueLen bounds the commands that wait for an actuator's worker.
const queueLen = 64

// request is what Home Assistant asked of an actuator: a state, or a
// set-point.
type request struct {
	state    fence.State
	setpoint bool
	duty     fence.Duty
}

func (r request) String() string {
	if r.setpoint {
		return r.duty.String()
	}
	return r.state.String()
}

// parseRequest reads Home Assistant's payload: a switch's "on" or "off",
// or a number's set-point in percent. Home Assistant's number is a float
// ("42", "42.5", or one a slider's arithmetic left as 42.300000000000004):
// it is taken to the protocol's step, 0.01 %, and the answer's duty says
// what was recorded.
func parseRequest(payload string, setpoint bool) (request, error) {
	p := strings.ToLower(strings.TrimSpace(payload))
	if !setpoint {
		switch p {
		case "on":
			return request{state: fence.StateOn}, nil
		case "off":
			return request{state: fence.StateOff}, nil
		}
		return request{}, fmt.Errorf("want on or off, got %q", payload)
	}
	f, err := strconv.ParseFloat(p, 64)
	if err != nil || !(f >= 0 && f <= 100) { // NaN fails both
		return request{}, fmt.Errorf("want a set-point in percent, from 0 to 100, got %q", payload)
	}
	d := fence.Duty(math.Round(f * float64(fence.FullDuty) / 100))
	return request{setpoint: true, duty: d, state: d.State()}, nil
}

// command sends r to actuator under its scope's lease, and reports the
// answer.
func (b *bridge) command(ctx context.Context, actuator string, r request) {
	out := Outcome{Asked: r.String()}
	defer func() {
		out.At = time.Now().UTC()
		b.report(actuator, out)
	}()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	name, err := b.gw.Scope(sctx, actuator)
	cancel()
	if err != nil {
		out.Outcome, out.Error = fence.Failed, err.Error()
		return
	}
	b.mu.Lock()
	sc := b.scopes[name]
	if sc == nil {
		sc = &scope{}
		b.scopes[name] = sc
	}
	b.mu.Unlock()
	sc.mu.Lock()
	defer sc.mu.Unlock()
	defer b.idleLater(sc, name)
	for attempt := 0; attempt < 2; attempt++ {
		if err := b.hold(ctx, sc, name); err != nil {
			out.Outcome, out.Error = fence.Failed, err.Error()
			return
		}
		c := fence.Command{ID: fmt.Sprintf("%s-%d-%d", b.o.Name, sc.l.Token(), sc.next), Actuator: actuator, Holder: b.o.Name,
			Fence: fence.Fence{Token: sc.l.Token(), Seq: sc.next}, State: r.state, Setpoint: r.setpoint, Duty: r.duty}
		sc.next++
		out.Token, out.Seq = c.Fence.Token, c.Fence.Seq
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		res, err := b.gw.SendUnder(cctx, sc.l, c) // nothing is published once the lease is lost
		cancel()
		out.Outcome, out.Reason, out.Error = res.Outcome, res.Reason, res.Error
		var stale *client.StaleError
		switch {
		case errors.As(err, &stale):
			// Another controller holds the scope now, with a higher
			// token: let ours go, wait for the scope again, send again.
			b.log.Warn("stale: another controller took the scope; acquiring it again", "scope", name, "fence", stale.Fence().String())
			sc.l.Release(context.Background())
			sc.l = nil
			continue
		case err != nil && res.Outcome == "":
			out.Outcome, out.Error = fence.Failed, err.Error()
		}
		b.log.Info("command", "actuator", actuator, "asked", r.String(), "outcome", out.Outcome, "token", c.Fence.Token, "seq", c.Fence.Seq)
		return
	}
}

// idleLater lets sc's lease go once the scope had no command for
// Options.Idle. sc.mu must be held.
func (b *bridge) idleLater(sc *scope, name string) {
	sc.last = time.Now()
	if sc.timer != nil {
		sc.timer.Stop()
	}
	sc.timer = time.AfterFunc(b.o.Idle, func() {
		sc.mu.Lock()
		defer sc.mu.Unlock()
		if sc.l == nil || time.Since(sc.last) < b.o.Idle {
			return // let go already, or a command came meanwhile (its own timer follows)
		}
		b.log.Info("letting the scope's lease go after its idle time", "scope", name, "idle", b.o.Idle.String())
		sc.l.Release(context.Background())
		sc.l = nil
	})
}

// hold makes sure sc holds its scope's lease, acquiring it (waiting up to
// Options.Wait for another holder) if it has none or lost it.
func (b *bridge) hold(ctx context.Context, sc *scope, name string) error {
	if sc.l != nil {
		select {
		case <-sc.l.Lost():
			b.log.Warn("the scope's lease was lost (etcd unreachable for longer than its TTL); acquiring it again", "scope", name)
			sc.l = nil
		default:
			return nil
		}
	}
	// The lease lives as long as the bridge (ctx); only the wait is bounded.
	l, err := lease.Acquire(ctx, b.etcd, lease.Options{Gateway: b.o.Client.GatewayID, Scope: name, TTL: b.o.TTL, Wait: b.o.Wait})
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return fmt.Errorf("another controller has held scope %s's lease for %v; nothing was sent", name, b.o.Wait)
		}
		return err
	}
	sc.l, sc.next = l, 0
	b.log.Info("holding the scope's lease", "scope", name, "token", l.Token())
	return nil
}

// report publishes an actuator's outcome, retained, for Home Assistant.
// It does not wait for the broker's acknowledgement.
func (b *bridge) report(actuator string, o Outcome) {
	p, err := json.Marshal(o)
	if err != nil {
		return
	}
	b.ha.Publish(b.topics.Outcome(actuator), 1, true, p)
}
