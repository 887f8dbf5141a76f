package mqttlink

import (
	"errors"
	"fmt"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/internal/pahosec"
	"github.com/fencegate/fencegate/wire"
)

// A process that found another serving its gateway id tells it before it
// stops: a claim of its own that names the other (Claim.Conflict), left
// retained on the instance topic. The other may not have noticed this one.
// Without the word, the other, waiting for this one to end (awaitLiving),
// would see it end, take that for a clean stop, and take commands with its
// own store.
//
// The word goes on a connection of its own (a client id of its own, a
// clean session, no will): this process's own connection is often gone by
// then, since the other process taking the session over (the same client
// id) is how it found it, and a publish on a connection paho still thinks
// open could wait in vain. The connection reads the claim back, so that a
// broker that dropped it (an ACL that lets the connection publish but not
// write the topic) is told from one that kept it, and it watches for a
// while: the other process publishes its own claim right after it
// subscribes, and one that came just after this one's would replace it on
// the broker; this one then says it again.

var (
	// tellWait bounds each step: connect, subscribe, and the claim's
	// round trip.
	tellWait = 5 * time.Second
	// tellWatch is how long the word is watched once it is on the broker.
	tellWatch = 2 * time.Second
)

// tell leaves other the claim that names it; c, the link's connection, is
// used only if a connection of its own cannot be had.
func (g *instanceGuard) tell(c mqtt.Client, other wire.Claim) {
	mine := g.l.claim
	mine.Conflict = other.Instance
	payload := wire.EncodeClaim(mine)
	err := g.tellAlone(payload, other.Instance)
	if err == nil {
		return
	}
	var refused *connectError
	if errors.As(err, &refused) && c != nil && c.IsConnectionOpen() {
		if tok := send(c, g.l.t.Instance(), 1, true, payload); tok.WaitTimeout(tellWait) && tok.Error() == nil {
			g.l.log.Warn("told the other process on this gateway's own connection; a connection of its own was refused", "other", other.String(), "err", err)
			return
		}
	}
	g.l.log.Error("cannot tell the other process that two serve this gateway id: it may take commands with its own store once this one has stopped; stop it, or give it another id",
		"other", other.String(), "topic", g.l.t.Instance(), "err", err)
}

// connectError is a connection for the word that could not be had.
type connectError struct{ err error }

func (e *connectError) Error() string { return "connect: " + e.err.Error() }
func (e *connectError) Unwrap() error { return e.err }

// tellAlone says payload, this process's claim naming the process other,
// on a connection of its own; see the comment at the top of this file.
func (g *instanceGuard) tellAlone(payload []byte, other string) error {
	o, topic := g.l.opts, g.l.t.Instance()
	co := mqtt.NewClientOptions().AddBroker(o.Broker).SetClientID(o.ClientID + "-conflict-" + g.l.claim.Instance).
		SetUsername(o.Username).SetPassword(o.Password).SetProtocolVersion(4).SetCleanSession(true).
		SetAutoReconnect(false).SetConnectTimeout(tellWait).SetWriteTimeout(tellWait)
	pahosec.SetTLS(co, o.TLS)
	c := mqtt.NewClient(co)
	defer c.Disconnect(100)
	late := func(what string) error {
		return fmt.Errorf("%s: the broker %s did not answer within %v", what, o.Broker, tellWait)
	}
	if tok := c.Connect(); !tok.WaitTimeout(tellWait) {
		return &connectError{late("connect")}
	} else if err := tok.Error(); err != nil {
		return &connectError{err}
	}
	claims := make(chan wire.Claim, 64)
	tok := c.Subscribe(topic, 1, func(_ mqtt.Client, m mqtt.Message) {
		if cl, err := wire.DecodeClaim(m.Payload()); err == nil {
			select {
			case claims <- cl:
			default:
			}
		}
	})
	if !tok.WaitTimeout(tellWait) {
		return late("subscribe to " + topic)
	} else if err := tok.Error(); err != nil {
		return fmt.Errorf("subscribe to %s: %w", topic, err)
	}
	say := func() error {
		tok := send(c, topic, 1, true, payload)
		if !tok.WaitTimeout(tellWait) {
			return late("publish on " + topic)
		}
		return tok.Error()
	}
	if err := say(); err != nil {
		return err
	}
	if testHookSaid != nil {
		testHookSaid()
	}
	echo := time.After(tellWait)
	var watched <-chan time.Time // set once the word came back
	for said := 1; ; {
		select {
		case cl := <-claims:
			switch {
			case cl.Instance == g.l.claim.Instance && cl.Conflict == other && watched == nil:
				watched = time.After(tellWatch)
			case cl.Instance == other && watched != nil && said < 5:
				// The other's claim, published after the word: it
				// replaced it on the broker.
				if err := say(); err != nil {
					return err
				}
				said++
			}
		case <-echo:
			if watched == nil {
				return fmt.Errorf("the broker took the claim on %s but did not deliver it back within %v: does its ACL let user %q write and read it?",
					topic, tellWait, o.Username)
			}
		case <-watched:
			return nil
		}
	}
}

// testHookSaid, if set (by tests), is called once the broker took the
// word, before it is watched.
var testHookSaid func()
