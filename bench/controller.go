package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/wire"
)

// controller is one MQTT client commanding one actuator, or, in the shared
// profile, several in turn.
type controller struct {
	name   string // the actuator; its first one in the shared profile
	id     string // its client id, and the prefix of command ids
	broker string
	topics wire.Topics
	// actuators are the shared profile's: each command goes to the next,
	// under a token of its own from tokens (one source for all the
	// controllers, as a lease service's revisions), so that the commands
	// of different controllers contend for each actuator's fence.
	actuators []string
	tokens    *atomic.Uint64
	// reply is the topic its commands name for their answers; "": none,
	// the answers come on the shared result topics.
	reply   string
	c       mqtt.Client
	answers chan answer
	// heard counts the answers delivered to it, its own and others'.
	heard atomic.Int64

	token, staleToken uint64
	seq               uint64 // the last seq sent with token
	on                bool   // the state of the last fresh command
	n                 int    // commands sent, for ids
	reconnects        int    // for a new client id each time
	// last is the last fresh command answered applied, which a duplicate
	// sends again.
	last struct {
		id, topic string
		payload   []byte
	}
}

type answer struct {
	id      string
	outcome fence.Outcome
	at      time.Time
}

// newController returns a controller (not connected) of actuator name of
// the gateway (or echo) at topics. window bounds its answers in flight.
// Its commands name its reply topic, unless sharedAnswers.
func newController(broker, clientID string, topics wire.Topics, name string, window int, sharedAnswers bool) *controller {
	ctl := &controller{name: name, id: clientID, broker: broker, topics: topics,
		answers: make(chan answer, 2*window+16), token: 2, staleToken: 1}
	if !sharedAnswers {
		ctl.reply = topics.Reply(clientID)
	}
	return ctl
}

// answerTopic is where the controller's answers come: its reply topic, or
// the shared result topic of its actuator (of every actuator, in the
// shared profile).
func (ctl *controller) answerTopic() string {
	switch {
	case ctl.reply != "":
		return ctl.reply
	case ctl.actuators != nil:
		return ctl.topics.ResultFilter()
	}
	return ctl.topics.Result(ctl.name)
}

// connect connects the controller and subscribes to its answers.
func (ctl *controller) connect(ctx context.Context) error {
	clientID := ctl.id
	if ctl.reconnects > 0 {
		clientID = fmt.Sprintf("%s-r%d", ctl.id, ctl.reconnects)
	}
	c, err := connect(ctx, ctl.broker, clientID)
	if err != nil {
		return err
	}
	mine := ctl.id + "-"
	handler := func(_ mqtt.Client, m mqtt.Message) {
		at := time.Now()
		ctl.heard.Add(1)
		r, err := wire.DecodeResult(m.Payload())
		if err != nil || !strings.HasPrefix(r.ID, mine) {
			return // not an answer of ours; the phase times out if one is missing
		}
		ctl.answers <- answer{id: r.ID, outcome: r.Outcome, at: at}
	}
	topic := ctl.answerTopic()
	if err := waitToken(ctx, c.Subscribe(topic, 1, handler)); err != nil {
		c.Disconnect(0)
		return fmt.Errorf("bench: subscribe to %s: %w", topic, err)
	}
	ctl.c = c
	return nil
}

// reconnect disconnects the controller, between phases (nothing in
// flight), and connects it again, as a controller that restarted; it goes
// on with its token and seq. It takes a new client id: the embedded broker
// (mochi-mqtt v2.7.9) sometimes loses the subscription of a clean-session
// client that comes back at once with the same id, and its answers with it
// (TestSoakCatchesALeak failed so; see docs/simulator.md).
func (ctl *controller) reconnect(ctx context.Context) error {
	ctl.c.Disconnect(50)
	ctl.reconnects++
	return ctl.connect(ctx)
}

// connect connects an MQTT client with a clean session that does not
// reconnect: a lost connection fails the benchmark instead of blurring it.
func connect(ctx context.Context, broker, clientID string) (mqtt.Client, error) {
	o := mqtt.NewClientOptions().AddBroker(broker).SetClientID(clientID).SetCleanSession(true).
		SetAutoReconnect(false).SetConnectRetry(false).SetOrderMatters(true).
		SetConnectTimeout(5 * time.Second).SetKeepAlive(30 * time.Second)
	c := mqtt.NewClient(o)
	if err := waitToken(ctx, c.Connect()); err != nil {
		return nil, fmt.Errorf("bench: connect to the broker %s: %w", broker, err)
	}
	return c, nil
}

func waitToken(ctx context.Context, t mqtt.Token) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	select {
	case <-t.Done():
		return t.Error()
	case <-ctx.Done():
		return errors.New("no answer from the broker within 10s")
	}
}

func (ctl *controller) close() { ctl.c.Disconnect(50) }

// next returns the id, topic and payload of the controller's next command
// of kind k: a fresh one raises seq and toggles the output, so that every
// applied command drives the pin; a stale one carries a token below the
// fence. In the shared profile a fresh one goes to the next actuator with
// the next token of all the controllers': applied, or stale if a later
// token reached the actuator first.
func (ctl *controller) next(k kind) (id, topic string, payload []byte) {
	ctl.n++
	c := fence.Command{ID: ctl.id + "-" + strconv.Itoa(ctl.n), Actuator: ctl.name, Holder: "bench"}
	if len(ctl.actuators) > 0 {
		c.Actuator = ctl.actuators[ctl.n%len(ctl.actuators)]
	}
	switch {
	case k == fresh && ctl.tokens != nil:
		ctl.on = !ctl.on
		c.Fence = fence.Fence{Token: ctl.tokens.Add(1)}
	case k == fresh:
		ctl.seq++
		ctl.on = !ctl.on
		c.Fence = fence.Fence{Token: ctl.token, Seq: ctl.seq}
	default:
		c.Fence = fence.Fence{Token: ctl.staleToken, Seq: uint64(ctl.n)}
	}
	c.State = fence.StateOff
	if ctl.on {
		c.State = fence.StateOn
	}
	return c.ID, ctl.topics.Set(c.Actuator), wire.EncodeRequest(wire.Request{Command: c, Reply: ctl.reply})
}
