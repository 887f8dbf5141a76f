package client

import (
	"fmt"
	"strings"

	"github.com/fencegate/fencegate/wire"
)

// replyTopic returns the topic o's commands name for their answers: o.Reply,
// or the reply topic of o's client id; "" with SharedAnswers. It says what
// is wrong with a reply topic the gateway would not answer on.
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
	if strings.ContainsAny(o.ClientID, "+#/") {
		return "", fmt.Errorf("client: client id %q cannot be the level of its reply topic (%s<client id>): it has + # or /; choose another client id, or set Reply", o.ClientID, t.ReplyBase())
	}
	reply := t.Reply(o.ClientID)
	if err := t.CheckReply(reply); err != nil {
		return "", fmt.Errorf("client: the reply topic of client id %q: %w; choose a shorter client id, or set Reply", o.ClientID, err)
	}
	return reply, nil
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
