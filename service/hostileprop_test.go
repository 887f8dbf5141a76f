package service_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// propConfig: pump, a climate scope of two, and valve, the canary whose
// commands show after each case that the gateway still answers.
const propConfig = `id: %s
mqtt:
  broker: %s
store: %s
board: sim
http: 127.0.0.1:0
actuators:
  - {name: pump, pin: GPIO17}
  - {name: fan, pin: GPIO22, scope: climate}
  - {name: heater, pin: GPIO23, scope: climate}
  - {name: valve, pin: GPIO27}
`

// pins are the targets' pins on the sim board, and scopes their fences.
var (
	pins   = map[string]string{"pump": "GPIO17", "fan": "GPIO22", "heater": "GPIO23"}
	scopes = map[string]string{"pump": "pump", "fan": "climate", "heater": "climate"}
)

// TestHostileCommands is a property test through a real broker: commands
// whose every field (and reply topic, and topic) is drawn at random from
// hostile sets (control characters, invalid UTF-8, non-characters, huge
// and fractional numbers, NaN and Infinity, duplicate and look-alike keys,
// deep nesting, 256 KiB strings, wrong types) go to a running gateway, one
// at a time. After each:
//
//   - a command with a hostile field was not applied: no fence moved, no
//     recorded state, no pin; its answer is rejected;
//   - a command whose every field is valid was decided by the fence rule;
//   - a good command to another actuator is answered within a second;
//   - the pins equal the recorded states;
//
// and the gateway never leaves the broker (one connection throughout, no
// poison message). FENCEGATE_HOSTILE_CASES sets the cases per broker
// (make test: 1000; make fuzz: more), FENCEGATE_HOSTILE_SEED replays a
// run (its seed is printed).
func TestHostileCommands(t *testing.T) {
	cases := 1000
	if s := os.Getenv("FENCEGATE_HOSTILE_CASES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("FENCEGATE_HOSTILE_CASES=%q: want a number of cases", s)
		}
		cases = n
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FENCEGATE_HOSTILE_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("FENCEGATE_HOSTILE_SEED=%q: want the seed a run printed", s)
		}
		seed = n
	}
	t.Logf("seed %d (FENCEGATE_HOSTILE_SEED=%d replays it), %d cases per broker", seed, seed, cases)
	forEachBroker(t, func(t *testing.T, broker string) {
		hostileRun(t, broker, seed, cases)
	})
}

// heard is an answer, and the topic it came on.
type heard struct {
	topic string
	res   fence.Result
}

func hostileRun(t *testing.T, broker string, seed uint64, cases int) {
	id := testenv.ID(t, "prop")
	cfg, err := config.Parse(fmt.Appendf(nil, propConfig, id, broker, filepath.Join(t.TempDir(), "fence.db")))
	if err != nil {
		t.Fatal(err)
	}
	g := startConfig(t, cfg)
	tp := g.topics()
	ctl := testctl.Connect(t, broker, tp)
	ctl.WaitStatus(t, "online")

	// Every answer, in the order the gateway published them (one
	// publisher, one subscription: the broker keeps its order).
	answers := make(chan heard, 4096)
	obs := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(broker).SetClientID(testenv.ID(t, "obs")))
	if tok := obs.Connect(); !tok.WaitTimeout(testctl.Timeout) || tok.Error() != nil {
		t.Fatalf("observer: connect: %v", tok.Error())
	}
	t.Cleanup(func() { obs.Disconnect(100) })
	if tok := obs.Subscribe(tp.ResultFilter(), 1, func(_ mqtt.Client, m mqtt.Message) { hear(answers, m) }); !tok.WaitTimeout(testctl.Timeout) || tok.Error() != nil {
		t.Fatalf("observer: subscribe: %v", tok.Error())
	}
	if tok := obs.Subscribe(tp.ReplyFilter(), 1, func(_ mqtt.Client, m mqtt.Message) { hear(answers, m) }); !tok.WaitTimeout(testctl.Timeout) || tok.Error() != nil {
		t.Fatalf("observer: subscribe: %v", tok.Error())
	}
	pub := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(broker).SetClientID(testenv.ID(t, "pub")).SetAutoReconnect(false))
	if tok := pub.Connect(); !tok.WaitTimeout(testctl.Timeout) || tok.Error() != nil {
		t.Fatalf("publisher: connect: %v", tok.Error())
	}
	t.Cleanup(func() { pub.Disconnect(100) })
	publish := func(topic string, payload []byte) {
		t.Helper()
		if tok := pub.Publish(topic, 1, false, payload); !tok.WaitTimeout(testctl.Timeout) || tok.Error() != nil {
			t.Fatalf("publish on %.60q: %v (connected %v)", topic, tok.Error(), pub.IsConnectionOpen())
		}
	}

	// Each scope starts with a fence and an output on.
	ctl.Send(t, cmd("s-1", "pump", 10, 0, fence.StateOn))
	ctl.Send(t, cmd("s-2", "fan", 10, 0, fence.StateOn))
	ctl.Send(t, cmd("s-3", "valve", 1, 0, fence.StateOn))
	fences := map[string]fence.Fence{"pump": {Token: 10}, "climate": {Token: 10}}
	states := map[string]fence.State{"pump": fence.StateOn, "fan": fence.StateOn, "heater": fence.StateOff}
	connBefore := apiStatus(t, g.info.HTTP).Broker
	drain(answers)

	rng := rand.New(rand.NewPCG(seed, 0x686f7374696c65))
	canary := uint64(1)
	counts := map[string]int{}
	// First, every hostile text in a reply topic, in a command otherwise
	// valid and above the fence (applied, if the reply check missed it);
	// then the random cases.
	directed := slices.Concat(hostileText, badUTF8)
	for n := range len(directed) + cases {
		target := []string{"pump", "fan", "heater"}[rng.IntN(3)]
		var c hostileCase
		if n < len(directed) {
			c = replyCase(tp, n, directed[n], fences[scopes[target]])
		} else {
			c = genCase(rng, tp, n, target, fences[scopes[target]])
		}
		counts[c.class]++
		switch {
		case c.raw != "":
			rawPublish(t, broker, c.raw, c.payload)
			target = "pump"
		case len(c.payload) > 60<<10:
			// A broker may refuse so large a packet (the embedded one
			// does) and disconnect its sender: a client of its own.
			rawPublish(t, broker, tp.Set(target), c.payload)
		default:
			publish(tp.Set(target), c.payload)
		}
		// A stale probe to the same actuator is answered after the case
		// (one actuator's commands are decided in order), with its fence
		// and state now; then the canary, on an actuator of its own.
		probe := fmt.Sprintf("p-%d", n)
		publish(tp.Set(target), []byte(fmt.Sprintf(`{"id":%q,"token":1,"state":"off"}`, probe)))
		canary++
		cid := fmt.Sprintf("c-%d", n)
		sent := time.Now()
		on := fence.StateOff
		if canary%2 == 0 {
			on = fence.StateOn
		}
		publish(tp.Set("valve"), wire.EncodeCommand(fence.Command{ID: cid, Actuator: "valve", Fence: fence.Fence{Token: canary}, State: on}))

		var mine []fence.Result // the case's answers
		var now fence.Result    // the probe's
		gotProbe, gotCanary := false, false
		deadline := time.After(5 * time.Second)
		for !gotProbe || !gotCanary {
			select {
			case h := <-answers:
				switch {
				case h.res.ID == cid:
					gotCanary = true
					if d := time.Since(sent); d > time.Second || h.res.Outcome != fence.Applied {
						t.Errorf("case %d (%s): the canary was answered %s after %v; want applied within 1s", n, c.name, h.res.Outcome, d)
					}
				case h.res.ID == probe:
					gotProbe, now = true, h.res
				case !gotProbe:
					mine = append(mine, h.res)
				default:
					t.Errorf("case %d (%s): an answer after the probe's: %+v", n, c.name, h.res)
				}
			case <-deadline:
				t.Fatalf("case %d (%s): payload %.300q: probe answered %v, canary %v, within 5 s; status %+v",
					n, c.name, c.payload, gotProbe, gotCanary, apiStatus(t, g.info.HTTP).Broker)
			}
		}
		before, after := fences[scopes[target]], now.Fence
		applied := len(mine) == 1 && mine[0].Outcome == fence.Applied
		switch {
		case c.raw != "" && len(mine) > 0:
			t.Errorf("case %d (%s): a command on topic %.60q the broker refuses was answered: %+v", n, c.name, c.raw, mine)
		case len(c.payload) > 60<<10 && len(mine) > 1, len(c.payload) <= 60<<10 && c.raw == "" && len(mine) != 1:
			t.Errorf("case %d (%s): payload %.300q: %d answers before the probe's, want 1: %+v", n, c.name, c.payload, len(mine), mine)
		case c.class == "hostile" && (after != before || now.State != states[target] || applied):
			t.Errorf("case %d (%s): payload %.300q, a hostile command, moved fence %v -> %v, state %s -> %s (answers %+v)",
				n, c.name, c.payload, before, after, states[target], now.State, mine)
		case c.class == "hostile" && len(mine) == 1 && mine[0].Outcome != fence.Rejected:
			t.Errorf("case %d (%s): payload %.300q, a hostile command, was answered %s (%s), want rejected", n, c.name, c.payload, mine[0].Outcome, mine[0].Error)
		case after != before && (!applied || mine[0].Fence != after):
			t.Errorf("case %d (%s): payload %.300q: fence %v -> %v without an applied answer: %+v", n, c.name, c.payload, before, after, mine)
		case c.class == "valid" && before.Less(c.pair) && (!applied || after != c.pair || now.State != c.state):
			t.Errorf("case %d (%s): payload %.300q, a valid command above the fence %v, answered %+v; fence now %v state %s",
				n, c.name, c.payload, before, mine, after, now.State)
		case c.class == "valid" && !before.Less(c.pair) && (len(mine) != 1 || mine[0].Outcome != fence.Stale || after != before):
			t.Errorf("case %d (%s): payload %.300q, a valid command not above the fence %v, answered %+v", n, c.name, c.payload, before, mine)
		}
		if t.Failed() {
			t.Fatalf("stopped at case %d; FENCEGATE_HOSTILE_SEED=%d replays it", n, seed)
		}
		fences[scopes[target]] = after
		states[target] = now.State
		if latch := g.latch(t); latch[pins[target]] != (now.State == fence.StateOn) {
			t.Fatalf("case %d (%s): pin %s is %v, the recorded state %s", n, c.name, pins[target], latch[pins[target]], now.State)
		}
	}
	conn := apiStatus(t, g.info.HTTP).Broker
	if !conn.Connected || !conn.Since.Equal(connBefore.Since) || conn.Poison != 0 {
		t.Errorf("broker connection after hostile input: %+v, before %+v; want the same connection, no poison", conn, connBefore)
	}
	t.Logf("%d directed and %d random cases: %v", len(directed), cases, counts)
}

func hear(ch chan<- heard, m mqtt.Message) {
	if r, err := wire.DecodeResult(m.Payload()); err == nil {
		ch <- heard{m.Topic(), r}
	}
}

func drain(ch <-chan heard) {
	for {
		select {
		case <-ch:
		case <-time.After(200 * time.Millisecond):
			return
		}
	}
}

// A hostileCase is one command: its payload, the topic it goes on if not
// its actuator's command topic (one the broker refuses), and its class:
// "valid" (every field valid: the fence rule decides it), "hostile" (a
// field the gateway must refuse: rejected, nothing moves) or "odd" (fields
// whose fate depends on rules this test does not model, a pulse to a
// plain output, say: any answer, but a fence moves only with applied).
type hostileCase struct {
	name    string
	payload []byte
	raw     string
	class   string
	pair    fence.Fence
	state   fence.State
}

// hostileText holds strings a topic or a field must not take whole.
var hostileText = []string{"\x00", "\n", "\x01", "\a", "\x1b[2J", "\x7f", "\u0085", "\u009f", "\ufdd0", "\ufffe", "\uffff", "\U0001fffe", "\U0010ffff"}

// badUTF8 are byte strings that are not UTF-8.
var badUTF8 = []string{"\xff", "\xfe\xfe", "\xc0\xaf", "\xed\xa0\x80", "\xe2\x82", "\xf4\x90\x80\x80", "a\x80b"}

// badNumbers are values no integer field takes (raw JSON).
var badNumbers = []string{"-1", "1.5", "1e3", "9223372036854775808", "18446744073709551616", "99999999999999999999999",
	"NaN", "Infinity", "-Infinity", "1e999", `"12"`, `"４２"`, "true", "null", "[]", "{}", "0x10", "+5", "-0", "1_000", `" 42 "`}

// replyCase is a command to a scope whose fence is f, valid and above
// the fence but for bad in its reply topic.
func replyCase(tp wire.Topics, n int, bad string, f fence.Fence) hostileCase {
	reply := tp.ReplyBase() + "ctl" + bad + "x"
	q, _ := json.Marshal(reply)
	if !utf8.ValidString(reply) {
		q = []byte(`"` + reply + `"`) // json.Marshal would mend it
	}
	pair := fence.Fence{Token: f.Token + 1}
	return hostileCase{name: fmt.Sprintf("reply with %+q", bad), class: "hostile", pair: pair, state: fence.StateOn,
		payload: fmt.Appendf(nil, `{"id":"d-%d","token":%d,"state":"on","reply":%s}`, n, pair.Token, q)}
}

// genCase draws one command to actuator target of gateway tp, whose
// scope's fence is f.
func genCase(rng *rand.Rand, tp wire.Topics, n int, target string, f fence.Fence) hostileCase {
	c := hostileCase{class: "valid"}
	var names []string
	// Half the cases are drawn from the valid choices alone, so that
	// commands the gateway must apply come between the hostile ones.
	clean := rng.IntN(2) == 0
	draw := func(k int) int {
		if clean {
			return k - 1
		}
		return rng.IntN(k)
	}
	hostile := func(what string) {
		c.class = "hostile"
		names = append(names, what)
	}
	odd := func(what string) {
		if c.class == "valid" {
			c.class = "odd"
		}
		names = append(names, what)
	}
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	type field struct{ key, val string }
	var fs []field
	str := func(s string) string { b, _ := json.Marshal(s); return string(b) } // JSON's escapes: the gateway reads the characters
	raw := func(s string) string { return `"` + s + `"` }                      // bytes as they are, invalid UTF-8 included

	// id: a string, or something else.
	switch draw(12) {
	case 0:
		hostile("id not a string")
		fs = append(fs, field{"id", pick([]string{"12", "true", "null", "[]", `{"a":1}`})})
	case 1:
		hostile("id not UTF-8")
		fs = append(fs, field{"id", raw("h-" + pick(badUTF8))})
	default:
		fs = append(fs, field{"id", str(fmt.Sprintf("h-%d", n))})
	}
	// token and seq: around the fence, or bad.
	c.pair = fence.Fence{Token: uint64(max(1, int64(f.Token)+int64(rng.IntN(4))-1)), Seq: uint64(rng.IntN(3))}
	if draw(8) == 0 {
		hostile("bad token")
		fs = append(fs, field{"token", pick(append(badNumbers, "0"))})
	} else {
		fs = append(fs, field{"token", strconv.FormatUint(c.pair.Token, 10)})
	}
	switch draw(10) {
	case 0:
		hostile("bad seq")
		fs = append(fs, field{"seq", pick(badNumbers)})
	case 1, 2, 3, 4:
		if c.pair.Seq > 0 {
			fs = append(fs, field{"seq", strconv.FormatUint(c.pair.Seq, 10)})
		}
	default:
		c.pair.Seq = 0
	}
	// state: on or off, or not a state.
	c.state = fence.StateOn
	if rng.IntN(2) == 0 {
		c.state = fence.StateOff
	}
	switch draw(9) {
	case 0:
		hostile("bad state")
		fs = append(fs, field{"state", pick([]string{`"оn"`, `"on\u0000"`, `"o\nn"`, `""`, "1", "true", "null", `"ON "`, `["on"]`, `"\u200bon"`})})
	default:
		fs = append(fs, field{"state", str(c.state.String())})
	}
	// holder: text, or something else.
	switch draw(12) {
	case 0:
		hostile("holder not UTF-8")
		fs = append(fs, field{"holder", raw(pick(badUTF8))})
	case 1:
		hostile("holder nested")
		d := 1 + rng.IntN(3000)
		fs = append(fs, field{"holder", strings.Repeat("[", d) + strings.Repeat("]", d)})
	case 2:
		hostile("holder of 256 KiB")
		fs = append(fs, field{"holder", str(strings.Repeat("h", 256<<10))})
	case 3:
		fs = append(fs, field{"holder", str("ctl-é-日本-\U0001F600")})
	case 4:
		odd("holder with a control character")
		fs = append(fs, field{"holder", str("ctl" + pick(hostileText))})
	}
	// reply: a good one, or one the gateway must not answer on.
	switch draw(6) {
	case 0:
		bad := pick(hostileText)
		hostile(fmt.Sprintf("reply with %+q", bad))
		fs = append(fs, field{"reply", str(tp.ReplyBase() + "ctl" + bad + "x")})
	case 1:
		hostile("reply not UTF-8")
		fs = append(fs, field{"reply", raw(tp.ReplyBase() + "ctl" + pick(badUTF8))})
	case 2:
		hostile("reply elsewhere")
		fs = append(fs, field{"reply", str(pick([]string{"x/y", tp.ReplyBase(), tp.ReplyBase() + "a//b", tp.ReplyBase() + "+", tp.ReplyBase() + "#",
			tp.Set("pump"), tp.ReplyBase() + strings.Repeat("r", wire.MaxReply), tp.Status()}))})
	case 3:
		fs = append(fs, field{"reply", str(tp.ReplyBase() + "ctl-é/" + strconv.Itoa(n))})
	}
	// Fields this test does not model.
	switch draw(14) {
	case 0:
		odd("pulse")
		fs = append(fs, field{"pulse_ms", strconv.Itoa(rng.IntN(5000))})
	case 1:
		odd("duty")
		fs = append(fs, field{"duty", pick([]string{"0", "50", "100", "0.04", "100.5", "-1"})})
	case 2:
		odd("reset")
		fs = append(fs, field{"reset", "true"})
	case 3:
		odd("signed")
		fs = append(fs, field{"signer", str("ctl-a")}, field{"sig", str(strings.Repeat("A", 86) + "==")})
	case 4:
		hostile("duty not a number")
		fs = append(fs, field{"duty", pick([]string{"NaN", "Infinity", `"50"`, `"4_2"`, "1e999", "true"})})
	}
	// The object's shape: look-alike and repeated keys, extra fields.
	switch draw(14) {
	case 0:
		hostile("look-alike key")
		fs = append(fs, field{pick([]string{"tоken", "ѕtate", "token\u200b", "Token", "id "}), "1"})
	case 1:
		hostile("key twice")
		k := fs[rng.IntN(len(fs))]
		fs = append(fs, k)
	case 2:
		hostile("unknown field")
		fs = append(fs, field{"actuator", str("valve")})
	}
	rng.Shuffle(len(fs), func(i, j int) { fs[i], fs[j] = fs[j], fs[i] })
	var b strings.Builder
	b.WriteByte('{')
	for i, f := range fs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(str(f.key) + ":" + f.val)
	}
	b.WriteByte('}')
	c.payload = []byte(b.String())
	// Or no command at all.
	switch draw(40) {
	case 0:
		hostile("not an object")
		c.payload = []byte(pick([]string{"", "[]", `"on"`, "42", "null", "{", `{"id":"x"`, `{"token":5}x`, "\xff\xfe"}))
	case 1:
		hostile("deep nesting")
		d := 1 + rng.IntN(9000)
		c.payload = []byte(strings.Repeat(`{"a":`, d) + "1" + strings.Repeat("}", d))
	case 2:
		hostile("a topic the broker refuses")
		c.raw = tp.Set(pick([]string{"pu\nmp", "+", "#", "pu\x00mp", "pump\uffff", "pu\xffmp"}))
	}
	if len(c.payload) > wire.MaxPayload && c.class != "hostile" {
		hostile("oversized")
	}
	if c.class != "hostile" && c.class != "odd" && len(names) == 0 {
		names = append(names, "valid")
	}
	c.name = strings.Join(names, ", ")
	return c
}
