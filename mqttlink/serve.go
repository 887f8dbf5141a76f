package mqttlink

import (
	"context"
	"errors"
	"fmt"
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
// broker redelivers them to the next session. A suspect of the poison
// guard is answered alone (see poisonGuard).
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
	keys := make([]uint64, len(ms))
	for i, m := range ms {
		keys[i] = l.poison.key(name, m.Payload())
	}
	for len(ms) > 0 {
		i := 0
		for i < len(ms) && l.poison.verdict(keys[i], ms[i].Duplicate()) == answerNormally {
			i++
		}
		ok := true
		switch {
		case i > 0:
			ok = l.answer(ctx, name, ms[:i], keys[:i])
		default:
			i = 1
			ok = l.answerAlone(ctx, name, ms[0], keys[0])
		}
		if !ok {
			return // the rest stay unacknowledged: the broker delivers them again
		}
		ms, keys = ms[i:], keys[i:]
	}
}

// decide decides ms, and says where each answer goes: the results are
// a prefix of ms, those after it were not decided (the door closed, or
// the link is stopping).
func (l *Link) decide(ctx context.Context, name string, ms []mqtt.Message) (results []fence.Result, to []string) {
	cmds := make([]fence.Command, len(ms))
	bad := make([]error, len(ms))
	why := make([]string, len(ms)) // the reason of each bad one
	to = make([]string, len(ms))   // where each answer goes
	shared := l.t.Result(name)
	for i, m := range ms {
		cmds[i], to[i], why[i], bad[i] = l.read(name, shared, m.Payload())
	}
	results = make([]fence.Result, 0, len(ms))
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
	return results, to[:len(results)]
}

// answer decides ms, answers them and acknowledges each once its answer
// is written; it reports whether all of them were.
func (l *Link) answer(ctx context.Context, name string, ms []mqtt.Message, keys []uint64) bool {
	results, to := l.decide(ctx, name, ms)
	c := l.clientOrNil()
	l.alone.RLock() // no answer goes out while one is answered alone
	defer l.alone.RUnlock()
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
		toks[i], _ = l.reply(c, name, to[i], res)
	}
	l.poison.wrote(keys[:len(results)])
	l.states.poke() // the states the decisions changed, after their answers
	// One timer for all of them: paho's WaitTimeout makes one each.
	wait := time.NewTimer(answerWait)
	defer wait.Stop()
	for i, tok := range toks {
		select {
		case <-tok.Done():
		case <-wait.C:
			return false // not acknowledged: the broker delivers them again, and they are answered again
		}
		if errors.Is(tok.Error(), errSetAside) {
			l.setAside(ms[i], keys[i], name, results[i], to[i], tok.Error().Error())
			continue
		}
		if tok.Error() != nil || !c.IsConnectionOpen() {
			return false
		}
		ms[i].Ack()
	}
	return len(results) == len(ms)
}

// answerAlone decides m, a command the poison guard does not answer with
// others, and answers it alone: its answer, then a probe that the broker
// acknowledges only after it took the answer; m is acknowledged after
// both, and no other answer of the link goes out meanwhile. If the
// connection is lost before, m is poison. A command the guard sets aside
// is decided and acknowledged, and its answer is not sent.
func (l *Link) answerAlone(ctx context.Context, name string, m mqtt.Message, key uint64) bool {
	results, to := l.decide(ctx, name, []mqtt.Message{m})
	if len(results) == 0 {
		return false
	}
	// Decided outside the lock: a drive may take seconds (a Modbus write
	// that times out), and the other actuators' answers wait on it.
	l.alone.Lock()
	defer l.alone.Unlock()
	lost := l.connDone()
	select {
	case <-lost:
		return false // lost while it was decided: not this answer's doing; it comes again
	default:
	}
	v := l.poison.verdict(key, m.Duplicate()) // again: a loss meanwhile may have changed it
	res := results[0]
	if v == setAside {
		why := "a poison message: the broker closed the connection each time this command's answer was written"
		if !l.poison.isPoison(key) {
			why = "the broker closed the connection on two answers within a minute, and this command came again after one of those losses: " +
				"its answer may be another such; a controller that sends it again gets its answer"
		}
		l.setAside(m, key, name, res, to[0], why)
		return true
	}
	c := l.clientOrNil()
	l.poison.answering(commandText(name, res, to[0]))
	defer l.poison.answering("")
	tok, size := l.reply(c, name, to[0], res)
	if errors.Is(tok.Error(), errSetAside) {
		l.setAside(m, key, name, res, to[0], fmt.Sprintf("its answer is %d bytes: %v", size, tok.Error()))
		return true
	}
	proof := send(c, l.t.Probe(), 1, false, "answered "+res.ID)
	l.states.poke()
	wait := time.NewTimer(answerWait)
	defer wait.Stop()
	proven := true
	for _, t := range []mqtt.Token{tok, proof} {
		select {
		case <-t.Done():
			proven = proven && t.Error() == nil
		case <-lost:
			proven = false
		case <-wait.C:
			return false // not acknowledged: it comes again, a suspect still
		}
	}
	if proven && c.IsConnectionOpen() {
		l.poison.cleared(key)
		m.Ack()
		return true
	}
	// Not proven: the connection is going (paho may tell it a little
	// later). The next command is not answered alone until it is told,
	// so that the loss is this answer's, not the next one's.
	select {
	case <-lost:
		l.poison.condemn(key, size)
	case <-wait.C:
	}
	return false
}

// commandText names a command to actuator name, decided as res, whose
// answer goes on topic to, for people (the log, Status).
func commandText(name string, res fence.Result, to string) string {
	return fmt.Sprintf("command %q to actuator %s (%s, answer on %q)", res.ID, name, res.Outcome, to)
}

// setAside acknowledges m, a command to actuator name decided as res,
// without its answer (to go on topic to), and says why.
func (l *Link) setAside(m mqtt.Message, key uint64, name string, res fence.Result, to, why string) {
	what := commandText(name, res, to)
	m.Ack()
	l.poison.setAside(key, what)
	l.log.Error("command acknowledged without its answer; it is decided and recorded as any other", "command", what, "why", why)
	l.states.poke()
}

// reply publishes the answer res to a command to actuator name on topic
// to, and returns its size as a packet. An answer that cannot go there (a
// check that missed a topic the broker refuses, see send) goes to the
// actuator's shared result topic, saying so; its token fails only if
// that fails too. An answer as large as one the broker closed the
// connection on is not published: its token fails with errSetAside.
func (l *Link) reply(c mqtt.Client, name, to string, res fence.Result) (mqtt.Token, int) {
	payload := wire.EncodeResult(res)
	size := packetSize(to, payload)
	if l.poison.tooLarge(size) {
		return failed{errSetAside}, size
	}
	tok := send(c, to, 0, false, payload)
	if f, ok := tok.(failed); ok {
		l.log.Error("answer not sent where the command asked: the broker would refuse the topic", "actuator", name, "command", res.ID, "err", f.err)
		to = l.t.Result(name)
		size = packetSize(to, payload)
		tok = send(c, to, 0, false, payload)
	}
	return tok, size
}

// errSetAside: an answer not published, its command acknowledged (see
// poisonGuard.tooLarge).
var errSetAside = errors.New("set aside: an answer as large as one the broker closed the connection on")

// packetSize is the size of a QoS 0 PUBLISH of payload on topic: its
// fixed header (at most 5 bytes), the topic's length and the topic, the
// payload.
func packetSize(topic string, payload []byte) int { return 5 + 2 + len(topic) + len(payload) }

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
