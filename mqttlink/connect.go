package mqttlink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/fencegate/fencegate/internal/pahosec"
	"github.com/fencegate/fencegate/wire"
)

// clientOptions are paho's options for the link: a persistent session,
// acknowledgements the link sends itself, dispatch for every message, and
// the handlers that follow the connection (failed, lost, connected: then
// establish takes commands on it).
func (l *Link) clientOptions(ctx context.Context, dispatch mqtt.MessageHandler) *mqtt.ClientOptions {
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
		l.connEnd, l.connLost = end, cctx.Done()
		l.mu.Unlock()
		go l.establish(cctx, c, gen, dispatch)
	})
	return co
}

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
		if errors.Is(err, errDeaf) {
			l.redial(err) // the next connection establishes itself
			return
		}
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
	if err := await(ctx, send(c, l.t.Probe(), 1, false, want), "publish the probe on "+l.t.Probe()); err != nil {
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
	// Before the connection's context ends: an answer alone that waits
	// for it is then still the one being answered.
	blame := l.poison.lost()
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
	l.guard.lost(l.conn.lost(err, blame))
	if l.opts.Lost != nil {
		l.opts.Lost(err)
	}
}

// goodbye unsubscribes (unless another process serves the gateway id:
// conflict) and publishes the offline status, if the connection is open.
func (l *Link) goodbye(client mqtt.Client, conflict bool) {
	if !client.IsConnectionOpen() {
		return
	}
	// The goodbye is bounded as a whole: a broker that does not take it
	// sees the connection close without a DISCONNECT, and publishes the
	// last will (offline) itself.
	bye := make(chan struct{})
	go func() {
		defer close(bye)
		if !conflict {
			// A clean stop: commands published while the gateway is
			// away are not kept for it. In a conflict the session may
			// be another process's too (the same client id): leave it.
			client.Unsubscribe(l.t.SetFilter()).WaitTimeout(byeWait)
		}
		send(client, l.t.Status(), 1, true, wire.StatusOffline).WaitTimeout(byeWait)
	}()
	select {
	case <-bye:
	case <-time.After(byeWait):
	}
}

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
	return send(c, topic, qos, retained, payload), true
}

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
