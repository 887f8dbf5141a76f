// Package mqttlink is fencegate's MQTT wire protocol: the topics, the JSON
// payloads of commands, answers and state, and the client that connects a
// [Handler] (the fence core) to a broker.
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
// The package imports the fence types but neither the store nor any GPIO
// code: the core is reached only through Handler.
package mqttlink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/wire"
)

// Handler is the fence core as the link sees it.
type Handler interface {
	// Handle decides and carries out a well-formed command.
	Handle(ctx context.Context, c fence.Command) fence.Result
	// Reject answers a command that could not be parsed or must not be
	// executed; nothing changes.
	Reject(c fence.Command, reason error) fence.Result
	// Output returns an actuator's recorded state, for the state topic.
	Output(actuator string) (fence.Output, error)
	// Peers returns the actuators that share actuator's fence scope,
	// itself included: their state messages carry the scope's fence.
	Peers(actuator string) []string
}

// Options configure Run.
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
	// Actuators are the names commands may address; commands for other
	// names are rejected without a worker of their own.
	Actuators []string
	// Logger receives connection events. Nil discards.
	Logger *slog.Logger
	// Ready, if set, is called once the first subscription is in place.
	Ready func()
}

// QueueLen is the number of commands buffered per actuator before the link
// stops reading from the broker.
const QueueLen = 256

// Run connects to the broker, serves commands until ctx is done, then
// publishes the offline status and disconnects. It keeps reconnecting while
// the broker is unreachable.
func Run(ctx context.Context, opts Options, h Handler) error {
	if opts.Broker == "" {
		return errors.New("mqttlink: no broker")
	}
	if opts.Topics.Prefix == "" {
		opts.Topics.Prefix = wire.DefaultPrefix
	}
	if opts.ClientID == "" {
		opts.ClientID = "fencegate-" + opts.Topics.GatewayID
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := opts.Topics

	type delivery struct {
		c mqtt.Client
		m mqtt.Message
	}
	work := make(map[string]chan delivery, len(opts.Actuators))
	var wg sync.WaitGroup
	for _, name := range opts.Actuators {
		ch := make(chan delivery, QueueLen)
		work[name] = ch
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range ch {
				serve(ctx, d.c, t, h, name, d.m)
			}
		}()
	}

	var readyOnce sync.Once
	co := mqtt.NewClientOptions().
		AddBroker(opts.Broker).
		SetClientID(opts.ClientID).
		SetUsername(opts.Username).
		SetPassword(opts.Password).
		SetCleanSession(false).
		SetOrderMatters(true).
		SetAutoAckDisabled(true).
		SetAutoReconnect(true).
		SetConnectRetry(true).
		SetConnectRetryInterval(time.Second).
		SetMaxReconnectInterval(10*time.Second).
		SetKeepAlive(30*time.Second).
		SetConnectTimeout(5*time.Second).
		SetWill(t.Status(), "offline", 1, true).
		SetStore(sessionStore{mqtt.NewMemoryStore()})
	// Commands redelivered from the persistent session can arrive before
	// the subscription of this connection is in place, so the dispatcher is
	// also the default handler: no command is ever dropped unanswered.
	dispatch := func(c mqtt.Client, m mqtt.Message) {
		name, ok := t.Actuator(m.Topic())
		if !ok && m.Topic() != t.Set(name) {
			m.Ack() // not a command topic of ours
			return
		}
		if ch := work[name]; ch != nil {
			ch <- delivery{c, m}
			return
		}
		serve(ctx, c, t, h, name, m) // rejected at once: unknown actuator
	}
	co.SetDefaultPublishHandler(dispatch)
	co.SetConnectionLostHandler(func(_ mqtt.Client, err error) {
		log.Warn("broker connection lost", "broker", opts.Broker, "err", err)
	})
	co.SetOnConnectHandler(func(c mqtt.Client) {
		log.Info("connected to broker", "broker", opts.Broker, "client_id", opts.ClientID)
		for _, name := range opts.Actuators {
			publishState(c, t, h, name, log)
		}
		tok := c.Subscribe(t.SetFilter(), 1, dispatch)
		go func() {
			if !tok.WaitTimeout(10 * time.Second) {
				log.Error("subscribe timed out", "topic", t.SetFilter())
				return
			}
			if err := tok.Error(); err != nil {
				log.Error("subscribe failed", "topic", t.SetFilter(), "err", err)
				return
			}
			// online means: subscribed, commands are taken.
			c.Publish(t.Status(), 1, true, "online")
			if opts.Ready != nil {
				readyOnce.Do(opts.Ready)
			}
		}()
	})
	client := mqtt.NewClient(co)

	log.Info("connecting to broker", "broker", opts.Broker)
	ct := client.Connect() // with ConnectRetry this keeps trying in the background
	select {
	case <-ct.Done():
		if err := ct.Error(); err != nil {
			return fmt.Errorf("mqttlink: connect %s: %w", opts.Broker, err)
		}
	case <-ctx.Done():
	}
	<-ctx.Done()

	if client.IsConnected() {
		client.Unsubscribe(t.SetFilter()).WaitTimeout(time.Second)
		client.Publish(t.Status(), 1, true, "offline").WaitTimeout(time.Second)
	}
	client.Disconnect(250)
	for _, ch := range work {
		close(ch)
	}
	wg.Wait()
	return nil
}

// serve handles one command message and acknowledges it once answered.
// During shutdown it leaves the message unacknowledged, so that the broker
// redelivers it to the next session.
func serve(ctx context.Context, c mqtt.Client, t wire.Topics, h Handler, name string, m mqtt.Message) {
	if ctx.Err() != nil {
		return
	}
	defer m.Ack()
	var res fence.Result
	cmd, err := wire.DecodeCommand(name, m.Payload())
	switch {
	case m.Retained():
		res = h.Reject(cmd, errors.New("retained command refused: commands must not be retained (clear it with an empty retained publish)"))
	case err != nil:
		res = h.Reject(cmd, err)
	default:
		res = h.Handle(ctx, cmd)
	}
	c.Publish(t.Result(name), 1, false, wire.EncodeResult(res))
	if res.Outcome == fence.Applied || res.Outcome == fence.Failed {
		for _, peer := range h.Peers(name) {
			publishState(c, t, h, peer, nil)
		}
	}
}

func publishState(c mqtt.Client, t wire.Topics, h Handler, name string, log *slog.Logger) {
	o, err := h.Output(name)
	if err != nil {
		if log != nil {
			log.Error("read state", "actuator", name, "err", err)
		}
		return
	}
	c.Publish(t.State(name), 1, true, wire.EncodeState(o))
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
