// Package wire is fencegate's MQTT wire protocol: the topic layout of a
// gateway, and the JSON payloads of commands, answers, states and the
// gateway's status. It is the one place that knows them: the gateway's
// MQTT link, the controller client, the simulator and the tests all build
// topics and payloads here. docs/protocol.md specifies the same protocol
// for people and for controllers in other languages.
//
// It imports only the standard library and package fence.
package wire

import (
	"strings"
)

// DefaultPrefix is the first topic level when a gateway's configuration
// sets no mqtt.topic_prefix.
const DefaultPrefix = "fencegate"

// Status payloads, retained on Topics.Status.
const (
	// StatusOnline means the gateway is subscribed and takes commands.
	StatusOnline = "online"
	// StatusOffline means it does not (stopped, crashed, or disconnected:
	// the broker publishes it as the gateway's last will).
	StatusOffline = "offline"
)

// Topics names the topics of one gateway:
//
//	<prefix>/<gateway>/<actuator>/set      commands (controllers publish, QoS 1, never retained)
//	<prefix>/<gateway>/<actuator>/result   answers (the gateway publishes, QoS 1)
//	<prefix>/<gateway>/<actuator>/state    each actuator's recorded state (retained)
//	<prefix>/<gateway>/<input>/input       each input's level (retained)
//	<prefix>/<gateway>/status              online or offline (retained; the last will says offline)
//	<prefix>/<gateway>/instance            which process serves the gateway id (retained)
//	<prefix>/<gateway>/$probe/set          the gateway's own test that commands reach it
type Topics struct {
	Prefix    string // the first level(s); empty means DefaultPrefix
	GatewayID string
}

// Set returns the command topic of actuator.
func (t Topics) Set(actuator string) string { return t.base() + actuator + "/set" }

// Result returns the answer topic of actuator.
func (t Topics) Result(actuator string) string { return t.base() + actuator + "/result" }

// State returns the retained state topic of actuator.
func (t Topics) State(actuator string) string { return t.base() + actuator + "/state" }

// Input returns the retained level topic of a digital input.
func (t Topics) Input(name string) string { return t.base() + name + "/input" }

// InputFilter is the subscription filter for every input topic.
func (t Topics) InputFilter() string { return t.base() + "+/input" }

// Status returns the gateway's retained availability topic.
func (t Topics) Status() string { return t.base() + "status" }

// Instance returns the topic on which the process serving the gateway id
// announces itself (see Claim).
func (t Topics) Instance() string { return t.base() + "instance" }

// Probe returns the topic on which a gateway checks, after subscribing,
// that the broker delivers its command topics to it. It matches SetFilter
// but names no actuator ($ is not allowed in actuator names).
func (t Topics) Probe() string { return t.base() + "$probe/set" }

// SetFilter is the subscription filter for every command topic.
func (t Topics) SetFilter() string { return t.base() + "+/set" }

// ResultFilter is the subscription filter for every answer topic.
func (t Topics) ResultFilter() string { return t.base() + "+/result" }

// StateFilter is the subscription filter for every state topic.
func (t Topics) StateFilter() string { return t.base() + "+/state" }

func (t Topics) base() string {
	p := t.Prefix
	if p == "" {
		p = DefaultPrefix
	}
	return p + "/" + t.GatewayID + "/"
}

// Kind says which of an actuator's topics a topic is.
type Kind int

// Kinds of actuator topics.
const (
	KindNone   Kind = iota // not an actuator topic of this gateway
	KindSet                // <actuator>/set
	KindResult             // <actuator>/result
	KindState              // <actuator>/state
	KindInput              // <input>/input
)

// Parse returns the actuator an actuator topic of this gateway names, and
// which topic it is; KindNone for any other topic, and for a name whose
// answer could not be published (a wildcard, a character CheckTopicText
// refuses, or so long that the answer topic would not fit in MQTT's 65,535 bytes).
func (t Topics) Parse(topic string) (actuator string, kind Kind) {
	rest, ok := strings.CutPrefix(topic, t.base())
	if !ok {
		return "", KindNone
	}
	name, leaf, ok := strings.Cut(rest, "/")
	if !ok || strings.Contains(leaf, "/") || !t.answerable(name) {
		return "", KindNone
	}
	switch leaf {
	case "set":
		return name, KindSet
	case "result":
		return name, KindResult
	case "state":
		return name, KindState
	case "input":
		return name, KindInput
	}
	return "", KindNone
}

// MaxTopic is the longest topic MQTT can carry, in bytes: its length is
// written in two bytes.
const MaxTopic = 1<<16 - 1

// MaxName is the longest actuator level the gateway answers a command on,
// in bytes: far above any name a configuration can have (64), and short
// enough that an answer to an unknown actuator, which names it in its
// topic and twice in its payload, stays a few kilobytes, within any
// broker's packet limit.
const MaxName = 256

// answerable reports whether name can be the actuator level of this
// gateway's topics: not empty, at most MaxName bytes, not ReplyLevel (its
// answers would lie among the controllers'), nothing CheckTopicText
// refuses, no wildcard (+ #) and no /, as MQTT wants of the topics the gateway publishes on, and
// short enough for the longest of them (the answer topic) to fit. A
// command on any other topic cannot be answered: a broker refuses (and
// disconnects) a publish on a topic with a wildcard, and paho cuts a
// longer topic to 65,535 bytes, which would send the answer out on a
// topic that is none of the gateway's.
func (t Topics) answerable(name string) bool {
	return len(name) <= MaxName && name != ReplyLevel && CheckLevel(name) == nil &&
		len(t.Result(name)) <= MaxTopic
}

// Actuator returns the actuator named by a command topic.
func (t Topics) Actuator(topic string) (string, bool) {
	if name, kind := t.Parse(topic); kind == KindSet {
		return name, true
	}
	return "", false
}
