package mqttlink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/wire"
)

// settleTime is how long a starting gateway waits, after announcing itself,
// for a process that may still serve its gateway id: one that claimed it
// last with another store or from another host. A live one answers within
// a round trip, or, if this start took over its broker session (the same
// client id), once it has reconnected, which it does at once.
var settleTime = 3 * time.Second

// instanceGuard claims the gateway id on every connection and watches for
// another process claiming it (see the package comment).
type instanceGuard struct {
	l          *Link
	onConflict func(error)

	mu        sync.Mutex // guards the fields below
	gen       int        // the connection whose claim is in progress or done
	claimed   bool       // a claim succeeded on an earlier connection of this process
	echo      chan struct{}
	echoed    bool
	previous  []wire.Claim    // other processes' claims delivered before the echo
	suspect   []wire.Claim    // before the first claim succeeded, claims of other processes that may still be live
	living    []wire.Claim    // before the first claim succeeded, claims of processes of this host that run, as far as /proc tells
	retained  chan wire.Claim // while confirming: the retained claim
	foreign   chan wire.Claim
	conflict  bool // another process serves the id: the door is closed
	announced bool // and it has been said (found)
}

func newInstanceGuard(l *Link) *instanceGuard {
	return &instanceGuard{l: l, echo: make(chan struct{}), foreign: make(chan wire.Claim, 1)}
}

// claimEchoWait bounds the wait for this process's own claim to come
// back from the broker.
var claimEchoWait = 10 * time.Second

// errDeaf marks a connection on which the broker delivers nothing to the
// gateway, not even its own claim: an ACL that starves the instance topic,
// or a broker that handed the connection's session to another connection
// with the same client id and left this one open but deaf (mochi-mqtt
// does, when two connections take the session over at once). No command
// can come on it: the link drops it and connects anew.
var errDeaf = errors.New("mqttlink: the broker delivers nothing on this connection")

// claim announces this process on connection gen and checks that no other
// process serves the gateway id. It returns nil once commands may be
// taken, ErrConflict (wrapped) if another process serves the id, or
// another error to retry.
func (g *instanceGuard) claim(ctx context.Context, c mqtt.Client, gen int) error {
	t := g.l.t
	g.mu.Lock()
	if g.conflict {
		g.mu.Unlock()
		return ErrConflict
	}
	g.gen, g.echoed, g.previous = gen, false, nil
	g.echo = make(chan struct{})
	g.foreign = make(chan wire.Claim, 1)
	echo, foreign := g.echo, g.foreign
	g.mu.Unlock()

	if err := g.subscribe(ctx, c); err != nil {
		return err
	}
	mine := g.l.claim
	mine.Connection = gen
	if err := await(ctx, send(c, t.Instance(), 1, true, wire.EncodeClaim(mine)), "publish this gateway's claim on "+t.Instance()); err != nil {
		return err
	}
	select {
	case <-echo:
	case <-time.After(claimEchoWait):
		return fmt.Errorf("%w: this gateway's own claim on %s did not come back within %v (the ACL must let user %q read and write it); connecting anew",
			errDeaf, t.Instance(), claimEchoWait, g.l.opts.Username)
	case <-ctx.Done():
		return ctx.Err()
	}

	g.mu.Lock()
	previous := g.previous
	g.mu.Unlock()
	for _, p := range previous {
		switch g.aliveness(p) {
		case ended:
			if p.Store != g.l.claim.Store {
				g.l.log.Warn("the process that served this gateway id before used another fence store: was the store replaced?",
					"previous", p.String(), "this", g.l.claim.String())
			} else {
				g.l.log.Info("taking over from the previous process, which has ended", "previous", p.String())
			}
		case alive:
			g.l.log.Warn("the process that served this gateway id last still runs on this host; waiting for it to end, or to answer",
				"previous", p.String(), "this", g.l.claim.String())
		case unknown:
			// received made it a suspect: it may still run.
			g.l.log.Warn("the process that served this gateway id last ran on another host; making sure it is gone (was the gateway moved?)",
				"previous", p.String(), "this", g.l.claim.String(), "wait", settleTime.String())
		}
	}
	g.mu.Lock()
	waited := len(g.living) > 0
	g.mu.Unlock()
	if err := g.awaitLiving(ctx, c, foreign); err != nil {
		return err
	}
	g.mu.Lock()
	settle := len(g.suspect) > 0
	g.mu.Unlock()
	if settle {
		// A whole settle time on one connection, however many connections
		// it takes: the suspect may be the one taking this one over.
		select {
		case <-time.After(settleTime):
		case p := <-foreign:
			return g.found(c, p)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if settle || waited {
		// And the claim retained now must still be this one's: a process
		// that found this one and stopped says so in the claim it leaves
		// (tell), and the live message may have been lost while this one
		// was away, or not yet handled when that process ended.
		if err := g.confirm(ctx, c, gen); err != nil {
			return err
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.conflict {
		return ErrConflict
	}
	g.claimed, g.suspect, g.living = true, nil, nil
	return nil
}

// errUnsure is claim's error while a process of this host that served the
// gateway id still runs, as far as /proc tells, but has not answered this
// process's claim: see awaitLiving.
var errUnsure = errors.New("a process on this host that served this gateway id still runs but does not answer")

// awaitLiving waits, a settle time at most, until every process of this
// host that served the gateway id and runs, as /proc says (g.living), has
// ended; a live gateway answers this process's claim instead, and that is
// a conflict. /proc alone cannot tell a gateway that serves from one on
// its way out (killed, and not yet gone) or stopped (SIGSTOP), so this
// is no conflict yet: ErrConflict would make the gateway exit 78, which
// the service manager does not restart, and leave the outputs without a
// gateway for good. The guard, unsure, returns errUnsure instead, and
// establish claims again with backoff, for as long as it takes: the door
// stays closed meanwhile, no command passes, and the gateway comes
// online once that process has ended, or stops with ErrConflict if it
// answers.
func (g *instanceGuard) awaitLiving(ctx context.Context, c mqtt.Client, foreign chan wire.Claim) error {
	settled := time.After(settleTime)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		g.mu.Lock()
		g.living = slices.DeleteFunc(g.living, func(p wire.Claim) bool { return g.aliveness(p) != alive })
		living, conflict := slices.Clone(g.living), g.conflict
		g.mu.Unlock()
		switch {
		case conflict:
			return ErrConflict
		case len(living) == 0:
			return nil
		}
		select {
		case <-tick.C:
		case p := <-foreign:
			return g.found(c, p)
		case <-settled:
			return fmt.Errorf("%w (%s): it may be ending (killed, and not yet gone) or stopped; this one takes no commands until it has ended, and stops if it answers",
				errUnsure, living[0].String())
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// markConflict records a conflict and closes the link's door at once, so
// that no command passes from here on; it reports whether this is the
// first. The caller holds g.mu.
func (g *instanceGuard) markConflict() bool {
	if g.conflict {
		return false
	}
	g.conflict = true
	g.l.closeDoor()
	return true
}

// lost is told that the connection was lost, and whether the broker closed
// it right after accepting it. While this process makes sure that a
// previous process is gone, that is the previous process taking the
// session back (the same client id): it is alive.
func (g *instanceGuard) lost(takenOver bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	others := append(slices.Clone(g.suspect), g.living...)
	if takenOver && len(others) > 0 && g.markConflict() {
		go g.found(nil, others[len(others)-1])
	}
}

// confirm subscribes afresh and checks that the retained claim is this
// process's claim of connection gen.
func (g *instanceGuard) confirm(ctx context.Context, c mqtt.Client, gen int) error {
	t := g.l.t
	got := make(chan wire.Claim, 1)
	g.mu.Lock()
	g.retained = got
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.retained = nil
		g.mu.Unlock()
	}()
	if err := g.subscribe(ctx, c); err != nil {
		return err
	}
	select {
	case r := <-got:
		if r.Instance != g.l.claim.Instance {
			return g.found(c, r)
		}
		if r.Connection != gen {
			return fmt.Errorf("the retained claim on %s is an older one of this process: retrying", t.Instance())
		}
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("the broker did not deliver the retained claim on %s within 10s: retrying", t.Instance())
	case <-ctx.Done():
		return ctx.Err()
	}
}

// subscribe subscribes to the instance topic afresh. A broker delivers the
// retained claim on a new subscription, but need not on one the session
// already had (mochi does not), and the session may have one from an
// earlier process. QoS 0: claims must not wait behind commands. A
// restarted gateway holds the commands its session queued until it has
// claimed the id; at QoS 1 they would fill the broker's in-flight window
// (Mosquitto's max_inflight_messages) and the claims would never come.
func (g *instanceGuard) subscribe(ctx context.Context, c mqtt.Client) error {
	t := g.l.t
	if err := await(ctx, c.Unsubscribe(t.Instance()), "unsubscribe from "+t.Instance()); err != nil {
		return err
	}
	return subscribe(ctx, c, t.Instance(), 0, func(_ mqtt.Client, m mqtt.Message) {
		if testHookLoseClaim == nil || !testHookLoseClaim(m) {
			g.received(m)
		}
		m.Ack()
	}, g.l.opts.Username)
}

// liveness says whether the process of a claim runs now.
type liveness int

const (
	unknown liveness = iota // another host, or this system cannot tell
	ended                   // from this host, and its process is gone
	alive                   // from this host, and its process runs
)

// running holds the claims' instances of this process's links while they
// run.
var running sync.Map

// aliveness tells whether the process of claim c runs now: on this host
// (Linux), its pid exists and started when the claim says (not a reused
// pid). Claims that carry the boot and the start in clock ticks are judged
// by them, exactly, since a wall-clock step (NTP setting the clock of a
// Raspberry Pi, which has no RTC, after the gateway started) moves the
// start times computed from the clock; older claims by the start time, to
// within 2 s.
func (g *instanceGuard) aliveness(c wire.Claim) liveness {
	if !sameHost(c, g.l.claim) {
		return unknown
	}
	if c.PID == g.l.claim.PID {
		// This process: a link that ran before this one (a service
		// restarted in process, as tests do), or one that runs beside it.
		if _, ok := running.Load(c.Instance); ok {
			return alive
		}
		return ended
	}
	if !processesKnown {
		return unknown
	}
	if me := g.l.claim; c.Boot != "" && me.Boot != "" {
		if c.Boot != me.Boot {
			return ended // a process of an earlier boot
		}
		if ticks, ok := processTicks(c.PID); !ok || ticks != c.Ticks {
			return ended // gone, or the pid was reused
		}
		return alive
	}
	start, ok := processStart(c.PID)
	if !ok {
		return ended
	}
	if d := start.UTC().Truncate(time.Second).Sub(c.Started); d < -2*time.Second || d > 2*time.Second {
		return ended // the pid was reused
	}
	return alive
}

// sameHost says whether claims a and b come from one machine: by their
// machine ids where both have one, else by host name.
func sameHost(a, b wire.Claim) bool {
	if a.Machine != "" && b.Machine != "" {
		return a.Machine == b.Machine
	}
	return a.Host == b.Host
}

// received takes a message on the instance topic.
func (g *instanceGuard) received(m mqtt.Message) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, err := wire.DecodeClaim(m.Payload())
	g.l.log.Debug("claim received", "claim", string(m.Payload()), "retained", m.Retained(), "duplicate", m.Duplicate(), "echoed", g.echoed, "gen", g.gen)
	if err == nil && g.retained != nil && m.Retained() {
		select {
		case g.retained <- c:
		default:
		}
		return
	}
	switch {
	case err != nil:
		return // not a claim (an empty retained message clears the topic)
	case c.Instance == g.l.claim.Instance:
		if c.Connection == g.gen && !g.echoed {
			g.echoed = true
			close(g.echo)
		}
	case c.Conflict == g.l.claim.Instance:
		// Another process found this one serving its gateway id, and says
		// so: whenever it was published, it is about this process.
		if g.markConflict() {
			go g.found(nil, c)
		}
	case !g.echoed && g.aliveness(c) == alive:
		// Another gateway on this machine (or in this process), running
		// now as far as /proc tells: one that serves answers this
		// process's claim (a conflict); one that does not is waited for
		// (see awaitLiving). One whose claim is of a later connection
		// than the last one seen of it has claimed again meanwhile: it
		// serves, though its answers may not come (two connections with
		// one client id take the session from each other, and a broker
		// may leave the one it took it from open but deaf). Waiting for
		// each other, neither would ever stop.
		if slices.ContainsFunc(g.living, func(p wire.Claim) bool { return p.Instance == c.Instance && p.Connection < c.Connection }) {
			if g.markConflict() {
				go g.found(nil, c)
			}
			return
		}
		g.previous = append(g.previous, c)
		g.living = append(g.living, c)
	case !g.echoed:
		// Delivered before this connection's own claim came back: retained
		// (perhaps restored by a broker from its persistence file), or
		// queued in the session while this process was away. A process on
		// this machine that has ended is no one; one elsewhere may still
		// run: a suspect, until a settle time shows otherwise.
		g.previous = append(g.previous, c)
		if g.aliveness(c) == unknown {
			g.suspect = append(g.suspect, c)
		}
	case g.aliveness(c) == ended:
		// Published after this process claimed the id, but by a process
		// of this host that has ended: no one serves with it. A broker
		// handed an old retained claim back: a bridge's site broker
		// replays its retained claims on every reconnect, and one that
		// last heard of this gateway before it restarted replays the
		// previous run's. The broker now keeps that claim: this
		// process's own goes back on top, so that a process starting
		// later finds this one.
		g.l.log.Info("an old claim of an ended process came back (a bridge replaying the site's retained claim?); claiming the id again", "previous", c.String())
		go g.reclaim()
	default:
		// Published after this process claimed the id on this connection:
		// another process serves the id right now.
		select {
		case g.foreign <- c:
		default:
		}
		if g.markConflict() {
			go g.found(nil, c)
		}
	}
}

// reclaim publishes this process's claim of its current connection again,
// retained.
func (g *instanceGuard) reclaim() {
	g.mu.Lock()
	mine := g.l.claim
	mine.Connection = g.gen
	g.mu.Unlock()
	g.l.mu.Lock()
	c := g.l.client
	g.l.mu.Unlock()
	if c == nil {
		return
	}
	if err := await(context.Background(), send(c, g.l.t.Instance(), 1, true, wire.EncodeClaim(mine)), "publish this gateway's claim again on "+g.l.t.Instance()); err != nil {
		g.l.log.Warn("could not claim the gateway id again", "err", err)
	}
}

// found handles another process serving the gateway id: this one refuses
// commands, says so loudly and tells the other one, and Run ends with
// ErrConflict.
func (g *instanceGuard) found(c mqtt.Client, other wire.Claim) error {
	g.mu.Lock()
	g.markConflict()
	already := g.announced
	g.announced = true
	g.mu.Unlock()
	why := fmt.Sprintf("another gateway process serves gateway id %q: %s; this one is %s. Both stop taking commands: two processes with two fence stores would each let a stale controller win. Stop one of them, or give it its own id",
		g.l.t.GatewayID, other.String(), g.l.claim.String())
	err := fmt.Errorf("%w: %s", ErrConflict, why)
	if already {
		return err
	}
	g.l.log.Error("gateway id in use by another process", "id", g.l.t.GatewayID, "other", other.String(), "reason", why)
	g.l.conn.conflict(why)
	if c == nil {
		g.l.mu.Lock()
		c = g.l.client
		g.l.mu.Unlock()
	}
	g.tell(c, other)
	if testHookConflict != nil {
		testHookConflict()
	}
	if g.onConflict != nil {
		g.onConflict(err)
	}
	return err
}

// testHookLoseClaim, if set (by tests), tells which messages on the
// instance topic are lost on the way (QoS 0: a broker may drop them).
var testHookLoseClaim func(mqtt.Message) bool

// testHookConflict, if set (by tests), is called once a conflict is
// announced, before the link is told to stop.
var testHookConflict func()
