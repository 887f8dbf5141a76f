package service_test

import (
	"crypto/ed25519"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sign"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// hostileConfig: pump, a climate scope of two, and a door that takes
// commands signed by ctl-a only (whose scopes are door and climate).
const hostileConfig = `id: %s
mqtt:
  broker: %s
store: %s
board: sim
http: 127.0.0.1:0
actuators:
  - {name: pump, pin: GPIO17}
  - {name: fan, pin: GPIO22, scope: climate}
  - {name: heater, pin: GPIO23, scope: climate}
  - {name: door, pin: GPIO27, require_signature: true}
controllers:
  - {name: ctl-a, public_key: "%s", scopes: [door, climate]}
`

// TestHostileInput sends a real gateway, through a real broker, every kind
// of hostile command: each is answered rejected, with its reason and an
// error that says what is wrong, and changes nothing: no fence, recorded
// state or pin moves (API and latch file), the gateway keeps its broker
// connection, and the next honest command is decided against the fences
// as they were.
func TestHostileInput(t *testing.T) {
	key := ed25519.NewKeyFromSeed([]byte(strings.Repeat("h", ed25519.SeedSize)))
	other := ed25519.NewKeyFromSeed([]byte(strings.Repeat("o", ed25519.SeedSize)))
	forEachBroker(t, func(t *testing.T, broker string) {
		id := testenv.ID(t, "hostile")
		cfg, err := config.Parse(fmt.Appendf(nil, hostileConfig, id, broker, filepath.Join(t.TempDir(), "fence.db"),
			sign.FormatPublicKey(key.Public().(ed25519.PublicKey))))
		if err != nil {
			t.Fatal(err)
		}
		g := startConfig(t, cfg)
		ctl := testctl.Connect(t, broker, g.topics())
		ctl.WaitStatus(t, "online")
		signed := func(c fence.Command) fence.Command { return sign.Sign(key, "ctl-a", id, c) }

		// The state before: each scope with a fence and an output on.
		expect(t, ctl.Send(t, cmd("b-1", "pump", 42, 3, fence.StateOn)), fence.Applied, fence.Fence{Token: 42, Seq: 3}, fence.StateOn)
		expect(t, ctl.Send(t, cmd("b-2", "fan", 7, 0, fence.StateOn)), fence.Applied, fence.Fence{Token: 7}, fence.StateOn)
		expect(t, ctl.Send(t, signed(cmd("b-3", "door", 5, 0, fence.StateOn))), fence.Applied, fence.Fence{Token: 5}, fence.StateOn)
		apiBefore, latchBefore := g.api(t), g.latch(t)
		connBefore := apiStatus(t, g.info.HTTP).Broker

		// signedAs signs c as signer with key, edits it, and encodes it.
		signedAs := func(c fence.Command, key ed25519.PrivateKey, signer string, edit func(*fence.Command)) string {
			c = sign.Sign(key, signer, id, c)
			if edit != nil {
				edit(&c)
			}
			return string(wire.EncodeCommand(c))
		}
		tests := []struct {
			name, actuator, payload string
			id                      string // the answer's id: "" where the payload's cannot be read
			reason, want            string
		}{
			{"oversized", "pump", `{"token":99,"state":"off","holder":"` + strings.Repeat("h", 2*wire.MaxPayload) + `"}`, "", fence.ReasonInvalid, "the limit is 1024"},
			// Far above the 1 KiB limit, but within the 64 KiB packets the brokers
			// take: a larger packet is refused by the broker itself (the embedded
			// one, and Mosquitto with max_packet_size), which disconnects the
			// sender, and never reaches the gateway (see TestOversizedCommand).
			{"oversized by far", "pump", `{"token":99,"holder":"` + strings.Repeat("h", 60<<10) + `"}`, "", fence.ReasonInvalid, "the limit is 1024"},
			{"deep nesting", "pump", `{"id":"h-deep","token":99,"holder":` + strings.Repeat("[", 400) + strings.Repeat("]", 400) + `}`, "h-deep", fence.ReasonInvalid, "holder must be a string"},
			{"deep nesting, oversized", "pump", strings.Repeat(`{"a":`, 9000) + "1" + strings.Repeat("}", 9000), "", fence.ReasonInvalid, "the limit is 1024"},
			{"invalid UTF-8", "pump", "{\"token\":99,\"state\":\"off\",\"holder\":\"\xff\xfe\"}", "", fence.ReasonInvalid, "not valid UTF-8"},
			{"token 2^63", "pump", `{"id":"h-2^63","token":9223372036854775808,"state":"off"}`, "h-2^63", fence.ReasonInvalid, "too large"},
			{"token 2^64", "pump", `{"id":"h-2^64","token":18446744073709551616,"state":"off"}`, "h-2^64", fence.ReasonInvalid, "too large"},
			{"seq past 2^63", "pump", `{"id":"h-seq","token":42,"seq":99999999999999999999,"state":"off"}`, "h-seq", fence.ReasonInvalid, "seq must be an integer"},
			{"float token", "pump", `{"id":"h-float","token":99.0,"state":"off"}`, "h-float", fence.ReasonInvalid, "got 99.0"},
			{"exponent token", "pump", `{"id":"h-exp","token":9.9e1,"state":"off"}`, "h-exp", fence.ReasonInvalid, "got 9.9e1"},
			{"negative token", "pump", `{"id":"h-neg","token":-99,"state":"off"}`, "h-neg", fence.ReasonInvalid, "negative"},
			{"negative seq", "pump", `{"id":"h-negseq","token":42,"seq":-1,"state":"off"}`, "h-negseq", fence.ReasonInvalid, "negative"},
			{"duplicate token, low then high", "pump", `{"id":"h-dup1","token":1,"token":99,"state":"off"}`, "h-dup1", fence.ReasonInvalid, `field "token" appears twice`},
			{"duplicate token, high then low", "pump", `{"id":"h-dup2","token":99,"token":1,"state":"off"}`, "h-dup2", fence.ReasonInvalid, `field "token" appears twice`},
			{"duplicate token, escaped key", "pump", `{"id":"h-dup3","token":99,"\u0074oken":1}`, "h-dup3", fence.ReasonInvalid, `field "token" appears twice`},
			{"duplicate state", "pump", `{"id":"h-dup4","token":99,"state":"on","state":"off"}`, "h-dup4", fence.ReasonInvalid, `field "state" appears twice`},
			{"token as string", "pump", `{"id":"h-str","token":"99","state":"off"}`, "h-str", fence.ReasonInvalid, "token must be an integer"},
			{"state as bool", "pump", `{"id":"h-bool","token":99,"state":true}`, "h-bool", fence.ReasonInvalid, "state must be a string"},
			{"id as number", "pump", `{"id":12,"token":99}`, "", fence.ReasonInvalid, "id must be a string"},
			{"array", "pump", `[{"token":99}]`, "", fence.ReasonInvalid, "must be a JSON object"},
			{"empty", "pump", ``, "", fence.ReasonInvalid, "empty payload"},
			{"unknown field", "pump", `{"id":"h-field","token":99,"actuator":"door"}`, "h-field", fence.ReasonInvalid, `unknown field "actuator"`},
			{"unknown actuator", "nope", `{"id":"h-nope","token":99,"state":"on"}`, "h-nope", fence.ReasonUnknownActuator, `unknown actuator "nope"`},
			{"actuator in capitals", "PUMP", `{"id":"h-caps","token":99,"state":"on"}`, "h-caps", fence.ReasonUnknownActuator, `unknown actuator "PUMP"`},
			{"unicode actuator", "pümp-植物", `{"id":"h-uni","token":99,"state":"on"}`, "h-uni", fence.ReasonUnknownActuator, `unknown actuator "pümp-植物"`},
			{"long actuator", strings.Repeat("p", wire.MaxName), `{"id":"h-long","token":99,"state":"on"}`, "h-long", fence.ReasonUnknownActuator, "unknown actuator"},
			{"probe topic", "$probe", `{"id":"h-probe","token":99,"state":"on"}`, "", "", ""}, // the gateway's own: taken as a probe, not decided
			{"unsigned", "door", `{"id":"h-unsigned","token":99,"state":"off"}`, "h-unsigned", fence.ReasonUnsigned, "signed"},
			{"unknown signer", "door", signedAs(cmd("h-who", "door", 99, 0, fence.StateOff), other, "ctl-z", nil), "h-who", fence.ReasonUnknownSigner, "ctl-z"},
			{"signature by another key", "door", signedAs(cmd("h-forged", "door", 99, 0, fence.StateOff), other, "ctl-a", nil), "h-forged", fence.ReasonBadSignature, "signature"},
			{"signature of another command", "door", signedAs(cmd("h-edited", "door", 99, 0, fence.StateOn), key, "ctl-a", func(c *fence.Command) { c.State = fence.StateOff }), "h-edited", fence.ReasonBadSignature, "signature"},
			{"signature for another actuator", "door", signedAs(cmd("h-moved", "heater", 99, 0, fence.StateOff), key, "ctl-a", nil), "h-moved", fence.ReasonBadSignature, "signature"},
			{"signed out of scope", "pump", signedAs(cmd("h-scope", "pump", 99, 0, fence.StateOff), key, "ctl-a", nil), "h-scope", fence.ReasonOutOfScope, "pump"},
			{"signer without sig", "door", `{"id":"h-nosig","token":99,"state":"off","signer":"ctl-a"}`, "h-nosig", fence.ReasonInvalid, "signer and sig go together"},
			{"sig not base64", "door", `{"id":"h-b64","token":99,"state":"off","signer":"ctl-a","sig":"!!"}`, "h-b64", fence.ReasonInvalid, "sig must be standard base64"},
			{"sig too short", "door", `{"id":"h-short","token":99,"state":"off","signer":"ctl-a","sig":"AAAA"}`, "h-short", fence.ReasonInvalid, "sig holds 3 bytes"},
		}
		for _, tt := range tests {
			ctl.Drain()
			ctl.Publish(t, tt.actuator, []byte(tt.payload), false)
			if tt.want == "" {
				continue
			}
			res := ctl.Result(t, tt.id)
			if res.Outcome != fence.Rejected || res.Reason != tt.reason || !strings.Contains(res.Error, tt.want) {
				t.Errorf("%s: answer %s reason %q error %.200q; want rejected, reason %q, an error mentioning %q",
					tt.name, res.Outcome, res.Reason, res.Error, tt.reason, tt.want)
			}
			if res.Actuator != tt.actuator {
				t.Errorf("%s: answer for actuator %.40q, want %.40q", tt.name, res.Actuator, tt.actuator)
			}
			if a, ok := apiBefore[tt.actuator]; ok && (res.Fence != a.Fence || res.State.String() != a.State) {
				t.Errorf("%s: answer carries fence %v state %q, want the current %v %q", tt.name, res.Fence, res.State, a.Fence, a.State)
			}
		}

		// Topics no actuator can have: the broker refuses a publish with a
		// wildcard, and routes none with another level to the gateway. A
		// command to a name longer than wire.MaxName is acknowledged
		// unanswered: its answer, naming it three times, could pass a
		// broker's packet limit (and past 65,535 bytes paho would cut the
		// answer's topic); so is one to the name reply, whose answers
		// would lie among the controllers' reply topics.
		stray := watchStray(t, broker, g.topics())
		longest := wire.MaxTopic - len(g.topics().Set(""))
		for _, name := range []string{"+", "#", "pu+mp", "pump/x", "pump/#", strings.Repeat("n", longest), strings.Repeat("n", wire.MaxName+1), wire.ReplyLevel} {
			rawPublish(t, broker, g.topics().Set(name), []byte(`{"id":"h-topic","token":99,"state":"off"}`))
		}

		// Nothing moved, and the gateway stayed connected throughout.
		if got := g.latch(t); fmt.Sprint(got) != fmt.Sprint(latchBefore) {
			t.Errorf("latch changed by hostile input: %v -> %v", latchBefore, got)
		}
		for name, a := range g.api(t) {
			b := apiBefore[name]
			if a.Fence != b.Fence || a.State != b.State || a.Level != b.Level || a.Holder != b.Holder {
				t.Errorf("%s changed by hostile input: %+v -> %+v", name, b, a)
			}
		}
		if conn := apiStatus(t, g.info.HTTP).Broker; !conn.Connected || !conn.Since.Equal(connBefore.Since) {
			t.Errorf("broker connection after hostile input: %+v, before %+v; want the same connection", conn, connBefore)
		}
		// The fences are where they were: the next pair above each is applied.
		expect(t, ctl.Send(t, cmd("b-4", "pump", 42, 4, fence.StateOff)), fence.Applied, fence.Fence{Token: 42, Seq: 4}, fence.StateOff)
		expect(t, ctl.Send(t, cmd("b-5", "heater", 7, 1, fence.StateOn)), fence.Applied, fence.Fence{Token: 7, Seq: 1}, fence.StateOn)
		expect(t, ctl.Send(t, signed(cmd("b-6", "door", 5, 1, fence.StateOff))), fence.Applied, fence.Fence{Token: 5, Seq: 1}, fence.StateOff)
		if h, ok := ctl.TryResult("h-topic", 200*time.Millisecond); ok {
			t.Errorf("a command on a topic no actuator can have was answered: %+v", h)
		}
		if s := stray(); len(s) > 0 {
			t.Errorf("messages outside the gateway's topics: %.80q", s)
		}
	})
}

// rawPublish publishes payload on topic from a client of its own (a broker
// may disconnect a client for a topic it refuses), and waits until the
// broker took it or refused it.
func rawPublish(t *testing.T, broker, topic string, payload []byte) {
	t.Helper()
	c := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(broker).SetClientID(testenv.ID(t, "raw")).SetAutoReconnect(false))
	if tok := c.Connect(); !tok.WaitTimeout(testctl.Timeout) || tok.Error() != nil {
		t.Fatalf("raw client: connect: %v", tok.Error())
	}
	defer c.Disconnect(100)
	tok := c.Publish(topic, 1, false, payload)
	if !tok.WaitTimeout(2 * time.Second) {
		t.Logf("publish to %.60q (%d bytes): no acknowledgement (the broker refused it)", topic, len(topic))
		return
	}
	t.Logf("publish to %.60q (%d bytes): %v", topic, len(topic), tok.Error())
}

// watchStray subscribes to every topic of broker and returns a function
// that lists the topics seen so far on which only the gateway publishes
// (all but commands) and that are not its answer, state, status or
// instance topics.
func watchStray(t *testing.T, broker string, tp wire.Topics) func() []string {
	t.Helper()
	var mu sync.Mutex
	var stray []string
	c := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(broker).SetClientID(testenv.ID(t, "watch")))
	if tok := c.Connect(); !tok.WaitTimeout(testctl.Timeout) || tok.Error() != nil {
		t.Fatalf("watch client: connect: %v", tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	tok := c.Subscribe("#", 0, func(_ mqtt.Client, m mqtt.Message) {
		_, kind := tp.Parse(m.Topic())
		own := kind == wire.KindResult || kind == wire.KindState || m.Topic() == tp.Status() || m.Topic() == tp.Instance() ||
			tp.CheckReply(m.Topic()) == nil // an answer on the reply topic its command named
		if !own && !strings.HasSuffix(m.Topic(), "/set") { // commands are the test's own
			mu.Lock()
			stray = append(stray, m.Topic())
			mu.Unlock()
		}
	})
	if !tok.WaitTimeout(testctl.Timeout) || tok.Error() != nil {
		t.Fatalf("watch client: subscribe: %v", tok.Error())
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(stray)
	}
}
