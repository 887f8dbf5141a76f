package site

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// A stream is a controller on the site's broker that sends commands to
// one node's gateway, one at a time, until stopped: ctl raises its token
// of a scope with every command, and when a command is not answered within
// answerWait it rereads the state once the link is back, and checks that
// what the site holds then is the gateway's own; old sends the token 5,
// below every fence, as a controller that paused past its lease, and
// never rereads.
type stream struct {
	nd     *node
	user   string
	cli    *client.Client
	prefix string // of its command ids
	every  time.Duration
	wait   time.Duration

	run    sync.Mutex // held for each command; pause holds it
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	tokens map[string]uint64 // the last token sent, by scope
	sent   map[string]*sent  // by command id
	n      counts
}

// sent is a command and what its controller saw of it.
type sent struct {
	cmd     fence.Command
	scope   string
	outcome fence.Outcome // "" unanswered
	err     string        // why unanswered
}

// counts are a stream's commands so far.
type counts struct {
	sent, applied, duplicate, stale, unanswered, reread atomic.Int64
}

// oldToken is the stale controller's token, below every fence the
// controllers of ctl make.
const oldToken = 5

// firstToken is the token below ctl's first.
const firstToken = 100

// startStream starts a stream of user's commands to the node's gateway.
func (nd *node) startStream(user string) *stream {
	t := nd.h.t
	t.Helper()
	s := &stream{nd: nd, user: user, cli: nd.dial(nd.h.site.URL, user), prefix: testenv.ID(t, fmt.Sprintf("n%d-%s", nd.n, user)),
		every: pace, wait: answerWait, done: make(chan struct{}), tokens: map[string]uint64{}, sent: map[string]*sent{}}
	if user == "old" {
		s.every, s.wait = 100*time.Millisecond, time.Second
	}
	for _, a := range actuators {
		s.tokens[a.scope] = firstToken
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	t.Cleanup(s.stop)
	go s.loop()
	return s
}

// stop stops the stream and waits until its last command is done.
func (s *stream) stop() {
	s.cancel()
	<-s.done
}

// pause waits until the stream's command in progress is done and holds
// the next one until resume.
func (s *stream) pause()  { s.run.Lock() }
func (s *stream) resume() { s.run.Unlock() }

func (s *stream) loop() {
	defer close(s.done)
	for k := 0; s.ctx.Err() == nil; k++ {
		s.run.Lock()
		s.one(k)
		s.run.Unlock()
		select {
		case <-s.ctx.Done():
		case <-time.After(s.every):
		}
	}
}

// one sends the stream's k-th command and handles what comes of it.
func (s *stream) one(k int) {
	t := s.nd.h.t
	a := actuators[k%len(actuators)]
	if s.user == "old" {
		a = actuators[k%2] // the pump and the fan: both scopes
	}
	c := fence.Command{ID: fmt.Sprintf("%s-%d", s.prefix, k), Actuator: a.name, Holder: s.user, State: fence.StateOff}
	if (k/len(actuators))%2 == 0 {
		c.State = fence.StateOn
	}
	s.mu.Lock()
	if s.user == "old" {
		c.Fence.Token, c.State = oldToken, fence.StateOn
	} else {
		s.tokens[a.scope]++
		c.Fence.Token = s.tokens[a.scope]
	}
	rec := &sent{cmd: c, scope: a.scope}
	s.sent[c.ID] = rec
	s.mu.Unlock()
	s.n.sent.Add(1)

	ctx, cancel := context.WithTimeout(s.ctx, s.wait)
	res, err := s.cli.Send(ctx, c)
	cancel()
	s.mu.Lock()
	rec.outcome = res.Outcome
	if err != nil && res.Outcome == "" {
		rec.err = err.Error()
	}
	s.mu.Unlock()
	switch res.Outcome {
	case fence.Applied:
		s.n.applied.Add(1)
	case fence.Duplicate:
		s.n.duplicate.Add(1)
	case fence.Stale:
		s.n.stale.Add(1)
		// Another controller holds a newer token (the node's own, in the
		// retained trap): this one takes one above it, as a controller
		// that acquires its lease again.
		s.mu.Lock()
		s.tokens[a.scope] = max(s.tokens[a.scope], res.Fence.Token)
		s.mu.Unlock()
	case "":
		if s.ctx.Err() != nil {
			return // stopped: it may have been published, and decided
		}
		s.n.unanswered.Add(1)
		if s.user == "ctl" {
			s.reread(c, err)
		}
	default:
		t.Errorf("node %d: controller %s: command %s (%s at %s) answered %s: %s", s.nd.n, s.user, c.ID, c.Actuator, c.Fence, res.Outcome, res.Error)
	}
	if s.user == "old" && (res.Outcome == fence.Applied || res.Outcome == fence.Duplicate) {
		t.Errorf("node %d: the stale controller's command %s (%s on at token %d, below the fence) was answered %s at fence %s: a stale command was applied",
			s.nd.n, c.ID, c.Actuator, oldToken, res.Outcome, res.Fence)
	}
}

// reread is what a controller does once a command was not answered: it
// waits until the link is back, and the state of the actuator it reads
// on the site must then be the gateway's own.
func (s *stream) reread(c fence.Command, why error) {
	t := s.nd.h.t
	start := time.Now()
	for {
		w := s.nd.back()
		if w == "" {
			break
		}
		if s.ctx.Err() != nil {
			return
		}
		if time.Since(start) > linkWait {
			t.Errorf("node %d: command %s (%s at %s) was not answered (%v), and the link was not back within %v to reread: %s", s.nd.n, c.ID, c.Actuator, c.Fence, why, linkWait, w)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	back := time.Now()
	for {
		w := s.nd.sameState(s.user, c.Actuator)
		if w == "" {
			s.n.reread.Add(1)
			return
		}
		if s.ctx.Err() != nil {
			return
		}
		if time.Since(back) > convergeWait {
			t.Errorf("node %d: command %s (%s at %s) was not answered (%v); %v after the link was back, the state controller %s rereads on the site is not the gateway's: %s",
				s.nd.n, c.ID, c.Actuator, c.Fence, why, convergeWait, s.user, w)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// snapshot returns the stream's counts now.
func (s *stream) snapshot() tally {
	return tally{s.n.sent.Load(), s.n.applied.Load(), s.n.duplicate.Load(), s.n.stale.Load(), s.n.unanswered.Load(), s.n.reread.Load()}
}

// tally is a stream's counts at one time.
type tally struct{ sent, applied, duplicate, stale, unanswered, reread int64 }

func (a tally) minus(b tally) tally {
	return tally{a.sent - b.sent, a.applied - b.applied, a.duplicate - b.duplicate, a.stale - b.stale, a.unanswered - b.unanswered, a.reread - b.reread}
}

func (a tally) plus(b tally) tally {
	return tally{a.sent + b.sent, a.applied + b.applied, a.duplicate + b.duplicate, a.stale + b.stale, a.unanswered + b.unanswered, a.reread + b.reread}
}

func (a tally) String() string {
	return fmt.Sprintf("sent %d: applied %d, duplicate %d, stale %d, unanswered %d (reread %d)", a.sent, a.applied, a.duplicate, a.stale, a.unanswered, a.reread)
}

// records returns a copy of what the stream sent and saw, by command id.
func (s *stream) records() map[string]sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]sent, len(s.sent))
	for id, r := range s.sent {
		m[id] = *r
	}
	return m
}

// spray publishes the stale controller's commands every every, without
// waiting for answers, until ctx ends; then it collects the answers that
// came, and returns how many were sent and how many answered stale.
func (s *stream) spray(ctx context.Context, every time.Duration) (n, stale int) {
	t := s.nd.h.t
	var ids []string
	for k := 0; ctx.Err() == nil; k++ {
		a := actuators[k%2]
		c := fence.Command{ID: fmt.Sprintf("%s-spray-%d", s.prefix, k), Actuator: a.name, Holder: s.user, Fence: fence.Fence{Token: oldToken}, State: fence.StateOn}
		s.mu.Lock()
		s.sent[c.ID] = &sent{cmd: c, scope: a.scope}
		s.mu.Unlock()
		pctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if err := s.cli.PublishRaw(pctx, a.name, wire.EncodeRequest(wire.Request{Command: c, Reply: s.cli.ReplyTopic()}), false); err != nil {
			t.Errorf("node %d: the stale controller's command %s: %v", s.nd.n, c.ID, err)
		}
		cancel()
		ids = append(ids, c.ID)
		s.n.sent.Add(1)
		select {
		case <-ctx.Done():
		case <-time.After(every):
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for _, id := range ids {
		actx, cancel := context.WithDeadline(context.Background(), deadline)
		res, _ := s.cli.Await(actx, id)
		cancel()
		s.mu.Lock()
		s.sent[id].outcome = res.Outcome
		s.mu.Unlock()
		switch res.Outcome {
		case fence.Stale:
			stale++
			s.n.stale.Add(1)
		case "":
			s.n.unanswered.Add(1)
		default:
			t.Errorf("node %d: the stale controller's command %s (token %d, below the fence) was answered %s at fence %s", s.nd.n, id, oldToken, res.Outcome, res.Fence)
		}
	}
	return len(ids), stale
}
