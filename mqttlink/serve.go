package mqttlink

import (
	"context"
	"errors"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/wire"
)

// serve handles ms, command messages to actuator name in the order they
// came, and acknowledges each once answered. The well-formed commands
// among them go to the core together (a batch shares one commit); a
// malformed or retained one is rejected in its turn. While the link does
// not take commands (connecting, claiming, shutting down, or in conflict)
// the messages wait; at shutdown they stay unacknowledged, so that the
// broker redelivers them to the next session.
func (l *Link) serve(ctx context.Context, name string, ms []mqtt.Message) {
	if testHookServe != nil {
		for _, m := range ms {
			testHookServe(name, m.Payload())
		}
	}
	if !l.waitReady(ctx) {
		return
	}
	l.serving.RLock()
	defer l.serving.RUnlock()
	if ctx.Err() != nil {
		return // stopping: not decided
	}
	cmds := make([]fence.Command, len(ms))
	bad := make([]error, len(ms))
	why := make([]string, len(ms)) // the reason of each bad one
	to := make([]string, len(ms))  // where each answer goes
	shared := l.t.Result(name)
	for i, m := range ms {
		cmds[i], to[i], why[i], bad[i] = l.read(name, shared, m.Payload())
	}
	// results answers the messages decided, a prefix of ms: those after
	// it were not decided (the door closed, or the link is stopping).
	results := make([]fence.Result, 0, len(ms))
	for i := 0; i < len(ms); {
		switch {
		case ms[i].Retained():
			results = append(results, l.h.Reject(cmds[i], fence.ReasonRetained, errors.New("retained command refused: commands must not be retained (clear it with an empty retained publish)")))
			i++
			continue
		case bad[i] != nil:
			results = append(results, l.h.Reject(cmds[i], why[i], bad[i]))
			i++
			continue
		}
		j := i + 1
		for j < len(ms) && !ms[j].Retained() && bad[j] == nil {
			j++
		}
		if !l.open() {
			break // the door closed while they waited: not decided
		}
		res, err := l.h.HandleBatch(ctx, cmds[i:j])
		results = append(results, res...)
		if err != nil {
			break // not decided: the broker delivers them again
		}
		i = j
	}
	l.mu.Lock()
	c := l.client
	l.mu.Unlock()
	// QoS 0: an answer lost with the connection is replaced by the answer
	// to the redelivered command, and a QoS 1 publish in flight at a
	// connection loss would keep its message id for good in a persistent
	// session whose store does not resend it (see sessionStore). A
	// command's acknowledgement goes only after its answer is written:
	// paho sends acknowledgements and publishes from separate queues, and a
	// broker that has the acknowledgement must have had the answer before
	// it.
	toks := make([]mqtt.Token, len(results))
	for i, res := range results {
		toks[i] = c.Publish(to[i], 0, false, wire.EncodeResult(res))
	}
	l.states.poke() // the states the decisions changed, after their answers
	// One timer for all of them: paho's WaitTimeout makes one each.
	wait := time.NewTimer(answerWait)
	defer wait.Stop()
	for i, tok := range toks {
		select {
		case <-tok.Done():
		case <-wait.C:
			return // not acknowledged: the broker delivers them again, and they are answered again
		}
		if tok.Error() != nil || !c.IsConnectionOpen() {
			return
		}
		ms[i].Ack()
	}
}

// read decodes a command to actuator name, and says where its answer goes:
// to the reply topic it names if that is one the gateway answers on, else
// to the actuator's shared result topic, shared; with an error, the reason of the
// rejection. A command whose reply topic is wrong is rejected (answered on
// the shared topic, so that its sender can see why), not carried out
// with its answer lost.
func (l *Link) read(name, shared string, payload []byte) (c fence.Command, to, reason string, err error) {
	r, err := decode(name, payload)
	to, reason = shared, fence.ReasonInvalid
	if r.Reply == "" {
		return r.Command, to, reason, err
	}
	if rerr := l.t.CheckReply(r.Reply); rerr != nil {
		if err == nil {
			reason, err = fence.ReasonReplyTopic, rerr
		}
		return r.Command, to, reason, err
	}
	return r.Command, r.Reply, reason, err
}

// answerWait bounds the wait for a batch's answers to be written.
const answerWait = 5 * time.Second
