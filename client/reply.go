package client

import (
	"fmt"
	"strings"

	"github.com/fencegate/fencegate/wire"
)

// replyTopic returns the topic o's commands name for their answers: o.Reply,
// or by default <prefix>/<gateway>/reply/[<user name>/]<client id>; "" with
// SharedAnswers. The user name comes first because it is what a broker's
// ACL knows a controller by (Mosquitto's %u): the ACL of docs/security.md
// lets each user read the reply topics under its name and no others, and
// each connection of that user (its client id) has a topic of its own. It
// says what is wrong with a reply topic the gateway would not answer on.
func (o Options) replyTopic(t wire.Topics) (string, error) {
	if o.SharedAnswers {
		if o.Reply != "" {
			return "", fmt.Errorf("client: Reply %q is set with SharedAnswers: commands name a reply topic or none; choose one", o.Reply)
		}
		return "", nil
	}
	if o.Reply != "" {
		if err := t.CheckReply(o.Reply); err != nil {
			return "", fmt.Errorf("client: Reply: %w", err)
		}
		return o.Reply, nil
	}
	for _, l := range []struct{ what, v string }{{"user name", o.Username}, {"client id", o.ClientID}} {
		if strings.ContainsAny(l.v, "+#/") {
			return "", fmt.Errorf("client: %s %q cannot be a level of the reply topic (%s[<user name>/]<client id>): it has + # or /; choose another %s, or set Reply",
				l.what, l.v, t.ReplyBase(), l.what)
		}
		// The broker would close the connection of whoever publishes on
		// a topic that holds it: the gateway's, answering.
		if err := wire.CheckTopicText(l.v); err != nil {
			return "", fmt.Errorf("client: %s %q cannot be a level of the reply topic (%s[<user name>/]<client id>): %v; choose a %s of printable characters, or set Reply",
				l.what, l.v, t.ReplyBase(), err, l.what)
		}
	}
	level := o.ClientID
	if o.Username != "" {
		level = o.Username + "/" + o.ClientID
	}
	reply := t.Reply(level)
	if err := t.CheckReply(reply); err != nil {
		return "", fmt.Errorf("client: the reply topic of client id %q: %w; choose a shorter client id, or set Reply", o.ClientID, err)
	}
	return reply, nil
}

// checkBase says what is wrong with the gateway id and topic prefix of o
// as levels of the topics the client publishes and subscribes on, or
// nil: no wildcard, no / in the id, no empty level in the prefix,
// nothing a broker refuses in a topic (wire.CheckTopicText).
func (o Options) checkBase() error {
	switch {
	case strings.ContainsAny(o.GatewayID, "+#/"):
		return fmt.Errorf("client: GatewayID %q is not a gateway's id (letters, digits, _ and -)", o.GatewayID)
	case strings.ContainsAny(o.Prefix, "+#") || strings.Contains("/"+o.Prefix+"/", "//"):
		return fmt.Errorf("client: Prefix %q has a wildcard (+ #) or an empty level", o.Prefix)
	}
	if err := wire.CheckTopicText(o.GatewayID); err != nil {
		return fmt.Errorf("client: GatewayID: %v", err)
	}
	if err := wire.CheckTopicText(o.Prefix); err != nil {
		return fmt.Errorf("client: Prefix: %v", err)
	}
	return nil
}

// ReplyTopic returns the topic the commands of a client dialled with o
// would name for their answers ("" with SharedAnswers), or what is wrong
// with it, as Dial checks it before it connects: o.Reply, or the one made
// of o.Username and o.ClientID (Dial makes up a client id when it is
// empty; this does not).
func (o Options) ReplyTopic() (string, error) {
	if o.Prefix == "" {
		o.Prefix = wire.DefaultPrefix
	}
	return o.replyTopic(wire.Topics{Prefix: o.Prefix, GatewayID: o.GatewayID})
}

// subscriptions are the topics a client subscribes to on every connect: its
// answers (its reply topic, and the shared result topics if it names none
// or watches them), and the gateway's states, inputs and status.
func (cl *Client) subscriptions(watchShared bool) map[string]byte {
	subs := map[string]byte{cl.topics.StateFilter(): 1, cl.topics.InputFilter(): 1, cl.topics.Status(): 1}
	if cl.reply != "" {
		subs[cl.reply] = 1
	}
	if cl.reply == "" || watchShared {
		subs[cl.topics.ResultFilter()] = 1
	}
	return subs
}
