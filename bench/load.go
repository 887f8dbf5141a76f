package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/fencegate/fencegate/fence"
)

// The load: controllers are MQTT clients in this process, one connection
// each, each owning one actuator (its own fence scope), or, in the shared
// profile, commanding the same actuators as every other controller in
// turn. A controller keeps up to its window of commands in flight: it
// publishes them (QoS 1) without waiting for the broker's acknowledgement,
// and matches the answers by id: on its own reply topic, which its commands
// name, or, with SharedAnswers, on the actuators' shared result topics.
// Commands of one actuator are applied in arrival order, so pipelined
// commands with increasing seq are applied, not stale.

// answerWait is how long a controller waits for any answer before the
// phase fails: a gateway that stopped answering, not a slow one.
const answerWait = 30 * time.Second

// kind is what a command is meant to be.
type kind uint8

const (
	fresh kind = iota // above the fence: applied
	stale             // below the fence: answered stale, never written
	dup               // the controller's last applied command again: answered duplicate
	nKinds
)

// mix decides the kind of a controller's nth command (from 0) in a phase.
type mix func(n int) kind

// allFresh is every controller's mix outside the storm.
func allFresh(int) kind { return fresh }

// flapping is the storm's mix: nine stale commands in ten.
func flapping(n int) kind {
	if n%10 == 9 {
		return fresh
	}
	return stale
}

// allStale sends stale commands only.
func allStale(int) kind { return stale }

// limit is how long or how much a controller sends in a phase: until the
// deadline, or count commands; always at least one.
type limit struct {
	deadline time.Time
	count    int
}

func (l limit) more(n int) bool {
	if n == 0 {
		return true
	}
	if l.count > 0 {
		return n < l.count
	}
	return time.Now().Before(l.deadline)
}

// tally is what a controller saw in a phase.
type tally struct {
	latency  [nKinds][]time.Duration // by kind
	outcomes [nKinds]map[fence.Outcome]int
	first    time.Time
	last     time.Time // the last answer
	// heard counts the answers delivered to the controllers, theirs and
	// others' (a group's, over its run).
	heard int64
}

// heardPerCommand is the answers delivered per command answered.
func (t *tally) heardPerCommand() float64 {
	n := 0
	for k := range t.latency {
		n += len(t.latency[k])
	}
	if n == 0 {
		return 0
	}
	return float64(t.heard) / float64(n)
}

func newTally() *tally {
	t := &tally{}
	for k := range t.outcomes {
		t.outcomes[k] = map[fence.Outcome]int{}
	}
	return t
}

// merge adds o's figures to t.
func (t *tally) merge(o *tally) {
	for k := range t.latency {
		t.latency[k] = append(t.latency[k], o.latency[k]...)
		for out, n := range o.outcomes[k] {
			t.outcomes[k][out] += n
		}
	}
	if t.first.IsZero() || (!o.first.IsZero() && o.first.Before(t.first)) {
		t.first = o.first
	}
	if o.last.After(t.last) {
		t.last = o.last
	}
}

// answered returns the number of commands of kind k answered.
func (t *tally) answered(k kind) int { return len(t.latency[k]) }

// run sends commands with up to window in flight, of the kinds m gives,
// until l says stop, and waits for every answer. done, if set, counts
// answers for the progress bar.
func (ctl *controller) run(ctx context.Context, window int, m mix, l limit, done func()) (*tally, error) {
	t := newTally()
	type pending struct {
		at      time.Time
		k       kind
		topic   string
		payload []byte // of a fresh command
	}
	inflight := map[string]pending{}
	timer := time.NewTimer(answerWait)
	defer timer.Stop()
	for n := 0; ; {
		for len(inflight) < window && l.more(n) {
			k := m(n)
			var id, topic string
			var payload []byte
			if _, busy := inflight[ctl.last.id]; k == dup && ctl.last.id != "" && !busy {
				id, topic, payload = ctl.last.id, ctl.last.topic, ctl.last.payload
			} else {
				if k == dup {
					k = fresh // nothing applied yet, or its duplicate is still in flight
				}
				id, topic, payload = ctl.next(k)
			}
			at := time.Now()
			if t.first.IsZero() {
				t.first = at
			}
			p := pending{at: at, k: k, topic: topic}
			if k == fresh {
				p.payload = payload
			}
			inflight[id] = p
			ctl.c.Publish(topic, 1, false, payload) // its answer, or the timeout, tells
			n++
		}
		if len(inflight) == 0 {
			return t, nil
		}
		timer.Reset(answerWait)
		select {
		case a := <-ctl.answers:
			p, ok := inflight[a.id]
			if !ok {
				continue // a redelivered command's second answer
			}
			delete(inflight, a.id)
			if p.k == fresh && a.outcome == fence.Applied {
				ctl.last.id, ctl.last.topic, ctl.last.payload = a.id, p.topic, p.payload
			}
			t.latency[p.k] = append(t.latency[p.k], a.at.Sub(p.at))
			t.outcomes[p.k][a.outcome]++
			t.last = a.at
			if done != nil {
				done()
			}
		case <-timer.C:
			return nil, fmt.Errorf("bench: controller of %s: no answer within %v (%d commands in flight); is the gateway stuck or gone?", ctl.name, answerWait, len(inflight))
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// group is a set of controllers that run a phase together.
type group []*controller

// run runs every controller of g with its mix (mixes[i], or allFresh) and
// limit (limits(i)) and returns their merged tally.
func (g group) run(ctx context.Context, window int, mixes []mix, limits func(i int) limit, done func()) (*tally, error) {
	total := newTally()
	heard := g.heard()
	defer func() { total.heard = g.settled() - heard }()
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i, ctl := range g {
		m := mix(allFresh)
		if i < len(mixes) && mixes[i] != nil {
			m = mixes[i]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t, err := ctl.run(ctx, window, m, limits(i), done)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = err
					cancel()
				}
				return
			}
			total.merge(t)
		}()
	}
	wg.Wait()
	return total, first
}

// heard is the answers delivered to g's controllers so far.
func (g group) heard() int64 {
	var n int64
	for _, c := range g {
		n += c.heard.Load()
	}
	return n
}

// settled is g.heard once no more answers arrive: the copies of the last
// answers, delivered to the controllers that did not ask for them (shared
// answers), can come after the last controller has its own.
func (g group) settled() int64 {
	n := g.heard()
	for range 100 {
		time.Sleep(20 * time.Millisecond)
		m := g.heard()
		if m == n {
			return m
		}
		n = m
	}
	return n
}

func (g group) close() {
	for _, c := range g {
		c.close()
	}
}

// split divides a phase's commands among n controllers: each at least one.
func split(commands, n, i int) int {
	if commands <= 0 {
		return 0
	}
	c := commands / n
	if i < commands%n {
		c++
	}
	return max(c, 1)
}

// begin starts the gateway of res (name, res.Actuators, commits slowed by
// delay) and connects its controllers; it sets res's start time and idle
// memory. The caller closes the controllers and kills the gateway.
func (o *Options) begin(ctx context.Context, res *Result, name string, delay time.Duration) (*gateway, group, error) {
	o.prog.next(name+": gateway start", limit{})
	gw, err := startGateway(ctx, o, name, res.Actuators, delay)
	if err != nil {
		return nil, nil, err
	}
	res.OnlineMs = ms(gw.up)
	g, err := o.dial(ctx, gw.id, gw.topics, topology{res.Controllers, res.Window, res.Shared})
	if err != nil {
		gw.kill()
		return nil, nil, err
	}
	if u, err := gw.usage(); err == nil && u.RSS > 0 {
		res.IdleRSSMB = ptr(mb(u.RSS))
		if u.RSSAnon > 0 {
			res.IdleAnonMB = ptr(mb(u.RSSAnon))
		}
	}
	return gw, g, nil
}

// load runs one fleet-like profile (single, fleet, shared, sdcard): a
// gateway with its actuators, its controllers' warm-up, and one measured
// phase.
func (o *Options) load(ctx context.Context, r *Report, profile, name string, size int, delay time.Duration) (Result, error) {
	n, m, w := o.shape(profile, size)
	res := Result{Name: name, Profile: profile, Actuators: n, Controllers: m, Window: w, CommitDelayMs: ms(delay), SharedAnswers: o.SharedAnswers}
	if profile == Shared {
		res.Shared = n
	}
	e, err := o.echo(ctx, topology{m, w, res.Shared})
	if err != nil {
		return res, err
	}
	res.EchoPerS, res.EchoP50Ms, res.EchoAnswersPerCommand = &e.perS, &e.latency.P50, &e.heard
	gw, g, err := o.begin(ctx, &res, name, delay)
	if err != nil {
		return res, err
	}
	defer gw.kill()
	defer g.close()
	answered := o.prog.count()
	if err := o.warmup(ctx, g, w, name); err != nil {
		return res, fmt.Errorf("bench: %s: %w\n%s", name, err, gw.stderr)
	}
	before, err := gw.measure(ctx)
	if err != nil {
		return res, err
	}
	o.prog.next(name, o.phaseLimit())
	t, err := g.run(ctx, w, nil, o.limit(m), o.prog.answer)
	if err != nil {
		return res, fmt.Errorf("bench: %s: %w\n%s", name, err, gw.stderr)
	}
	after, err := gw.measure(ctx)
	if err != nil {
		return res, err
	}
	res.phase(t, before, after)
	res.Latency = latencyOf(t.latency[fresh])
	res.AnswersPerCommand = t.heardPerCommand()
	ps, err := gw.stop()
	if err != nil {
		return res, err
	}
	res.usage(before, after, ps, o.prog.count()-answered)
	res.ratios(r, ms(delay))
	return res, nil
}

// storm runs the storm profile on one gateway: a calm phase (the calm
// controllers alone), the storm (with the flapping controllers), and the
// stale commands alone, to count their syncs.
func (o *Options) storm(ctx context.Context, r *Report) (Result, error) {
	n, m, w := o.shape(Storm, 0)
	flappers := max(1, m/4)
	res := Result{Name: Storm, Profile: Storm, Actuators: n, Controllers: m, Window: w}
	st := &StormResult{Flapping: flappers, Calm: m - flappers}
	res.Storm = st
	gw, all, err := o.begin(ctx, &res, Storm, 0)
	if err != nil {
		return res, err
	}
	defer gw.kill()
	defer all.close()
	answered := o.prog.count()
	flap, calm := all[:flappers], all[flappers:]
	if err := o.warmup(ctx, all, w, Storm); err != nil {
		return res, fmt.Errorf("bench: storm: %w\n%s", err, gw.stderr)
	}
	fail := func(err error) (Result, error) { return res, fmt.Errorf("bench: storm: %w\n%s", err, gw.stderr) }

	// Calm: the calm controllers alone.
	o.prog.next("storm: without the storm", o.phaseLimit())
	tc, err := calm.run(ctx, w, nil, o.limit(len(calm)), o.prog.answer)
	if err != nil {
		return fail(err)
	}
	calmLat := latencyOf(tc.latency[fresh])
	st.CalmP99Ms = calmLat.P99

	// The storm: the same calm load, and the flapping controllers.
	before, err := gw.measure(ctx)
	if err != nil {
		return res, err
	}
	o.prog.next("storm: the storm", o.phaseLimit())
	lim := o.limit(m)
	var tf *tally
	var ferr error
	flapDone := make(chan struct{})
	go func() {
		defer close(flapDone)
		mixes := make([]mix, len(flap))
		for i := range mixes {
			mixes[i] = flapping
		}
		tf, ferr = flap.run(ctx, w, mixes, lim, o.prog.answer)
	}()
	ts, err := calm.run(ctx, w, nil, func(i int) limit { return lim(i + flappers) }, o.prog.answer)
	<-flapDone
	if err == nil {
		err = ferr
	}
	if err != nil {
		return fail(err)
	}
	after, err := gw.measure(ctx)
	if err != nil {
		return res, err
	}
	stormLat := latencyOf(ts.latency[fresh])
	st.StormP99Ms = stormLat.P99
	st.StaleSent = tf.answered(stale)
	st.StaleAnswered = tf.outcomes[stale][fence.Stale]
	both := newTally()
	both.merge(ts)
	both.merge(tf)
	res.phase(both, before, after)
	res.Latency = stormLat

	// The stale commands alone: what they cost the store.
	o.prog.next("storm: stale commands alone", o.phaseLimit())
	b2, err := gw.measure(ctx)
	if err != nil {
		return res, err
	}
	stales := make([]mix, len(flap))
	for i := range stales {
		stales[i] = allStale
	}
	tst, err := flap.run(ctx, w, stales, o.limit(len(flap)), o.prog.answer)
	if err != nil {
		return fail(err)
	}
	a2, err := gw.measure(ctx)
	if err != nil {
		return res, err
	}
	st.StaleOnly = tst.answered(stale)
	st.StaleOnlyStale = tst.outcomes[stale][fence.Stale]
	st.StaleOnlySyncs = 2 * (a2.commits - b2.commits)
	st.StaleOnlySeconds = tst.last.Sub(tst.first).Seconds()

	ps, err := gw.stop()
	if err != nil {
		return res, err
	}
	res.usage(before, after, ps, o.prog.count()-answered)
	res.ratios(r, 0)
	return res, nil
}
