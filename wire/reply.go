package wire

import (
	"errors"
	"fmt"
	"strings"
)

// ReplyLevel is the topic level under a gateway's base of the topics its
// answers go to when a command names one:
//
//	<prefix>/<gateway>/reply/<controller>[/...]
//
// One level per controller lets a broker ACL give each controller its own
// answers and nobody else's (Mosquitto: pattern read
// <prefix>/+/reply/%u/#, %u being the controller's user name), and lets
// the gateway publish to all of them (topic write
// <prefix>/<gateway>/reply/#). No actuator or input may have
// this name: its topics would lie among the controllers' answers.
const ReplyLevel = "reply"

// MaxReply is the longest reply topic a command may name, in bytes: long
// enough for a prefix, a gateway id, a client id and a level or two of
// the controller's own, short enough that a command keeps room for its
// other fields within MaxPayload.
const MaxReply = 256

// Reply returns the reply topic of a controller that names itself
// controller (its MQTT client id or user name, as the broker's ACL pins
// it), with no levels of its own.
func (t Topics) Reply(controller string) string { return t.ReplyBase() + controller }

// ReplyBase is the part every reply topic of this gateway starts with.
func (t Topics) ReplyBase() string { return t.base() + ReplyLevel + "/" }

// ReplyFilter is the subscription filter for every reply topic of this
// gateway: with ResultFilter, an observer's view of every answer.
func (t Topics) ReplyFilter() string { return t.ReplyBase() + "#" }

// CheckReply says what is wrong with a command's reply topic, or nil: it
// must lie under ReplyBase with at least one level after it, have no
// empty level, no wildcard, nothing CheckTopicText refuses (a control
// character, a non-character, invalid UTF-8: a broker closes the
// connection of a client that publishes on such a topic), be at most
// MaxReply bytes, and not be one of the gateway's own topics (the
// commands of an actuator named reply would be; answering there would
// send the gateway its own answers as commands).
func (t Topics) CheckReply(topic string) error {
	base := t.ReplyBase()
	switch rest, under := strings.CutPrefix(topic, base); {
	case topic == "":
		return errors.New("reply is empty: name the topic your answers go to, or leave reply out for the shared result topic")
	case len(topic) > MaxReply:
		return fmt.Errorf("reply topic is %d bytes; the limit is %d", len(topic), MaxReply)
	case strings.ContainsAny(topic, "+#"):
		return fmt.Errorf("reply topic %q has a wildcard (+ #): answers go to one topic, named in full", topic)
	case CheckTopicText(topic) != nil:
		return fmt.Errorf("reply topic: %w; name a topic of printable characters", CheckTopicText(topic))
	case !under || rest == "":
		return fmt.Errorf("reply topic %q is outside this gateway's reply topics: use %s<your client id>[/...]", topic, base)
	case strings.Contains(rest, "//") || strings.HasSuffix(rest, "/") || strings.HasPrefix(rest, "/"):
		return fmt.Errorf("reply topic %q has an empty level", topic)
	}
	// The gateway's own topics under the level reply: the commands,
	// states and answers an actuator named reply would have, which no
	// actuator may be.
	switch rest, _ := strings.CutPrefix(topic, base); rest {
	case "set", "result", "state", "input":
		return fmt.Errorf("reply topic %q is one of the gateway's own topics; choose another level after %s", topic, base)
	}
	if _, kind := t.Parse(topic); kind != KindNone {
		return fmt.Errorf("reply topic %q is one of the gateway's own topics; choose another level after %s", topic, base)
	}
	return nil
}
