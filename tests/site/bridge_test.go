package site

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// TestBridge: three gateways, each on its own Mosquitto bridged to the
// site's broker by the configuration gateway bridge writes, each bridge
// through a proxy the test cuts; a controller on the site's broker streams
// commands to each gateway with rising tokens, and a stale one (token 5)
// keeps trying. Throughout:
//
//   - no command is applied twice, and no stale one (each gateway's audit
//     trail: each applied pair is above every pair applied before it in
//     its scope);
//   - every command is answered, or its controller times out and, once
//     the link is back, reads on the site the state the gateway itself
//     has (its API).
//
// The steps: (1) one link cut mid-stream and restored, then all three;
// the site's broker stopped and started again mid-stream (SIGTERM, then
// SIGKILL; with persistence); (2) the retained trap: while a link is cut,
// a controller on the gateway's own Mosquitto raises the fence; once
// restored the site must hold the new state, never its older copy, and
// still after a second cut; the link topic reads 0 on the site while cut
// and 1 after; (3) a gateway stopped and started again while its link is
// cut keeps serving once it is restored (the site replays the claim of the
// run before: not a conflict), and the site holds its new claim and its
// online status; (3b) the site's broker, killed again, comes back with the
// claim of gateway 3's first run, which must not stop the second either;
// (4) a second process with the first gateway's id and a
// store of its own, on a fourth bridged Mosquitto, is refused (exit 78)
// while the stale controller keeps sending.
func TestBridge(t *testing.T) {
	testenv.Program(t, "mosquitto")
	testenv.Program(t, "mosquitto_passwd")
	h := newSite(t, 3)
	h.startNodes()
	h.t.Logf("site up, three gateways online on it, after %.1f s", time.Since(h.begun).Seconds())
	for _, nd := range h.nodes {
		nd.main = nd.startStream("ctl")
	}
	for _, nd := range h.nodes {
		nd.waitFences(firstToken + 1)
		nd.old = nd.startStream("old")
	}
	// Whatever fails, the audit trails are checked in the end.
	defer func() {
		for _, nd := range h.nodes {
			nd.main.stop()
			nd.old.stop()
		}
		h.checkAudits()
		h.logBridges()
	}()

	h.step("1a: one link cut mid-stream, restored", func() { h.cutAndRestore(h.nodes[:1], 3*time.Second) })
	h.step("1b: all three links cut mid-stream, restored", func() { h.cutAndRestore(h.nodes, 3*time.Second) })
	h.step("1c: the site's broker stopped (SIGTERM) and started again", func() { h.siteRestart(syscall.SIGTERM) })
	h.step("1d: the site's broker killed (SIGKILL) and started again", func() { h.siteRestart(syscall.SIGKILL) })
	h.step("1: states after", func() { h.checkStates("after step 1") })
	if t.Failed() {
		t.FailNow()
	}

	// Steps 2 and 3 are on nodes of their own: they run side by side.
	h.step("2 and 3: the retained trap (node 2), a gateway restarted while its link is cut (node 3)", func() {
		trap, restart := h.retainedTrap(h.nodes[1]), h.restartWhileCut(h.nodes[2])
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); trap() }()
		go func() { defer wg.Done(); restart() }()
		wg.Wait()
	})
	// The site's last clean stop (1c) saved gateway 3's first run's claim:
	// a crash brings it back, and the bridge hands it to the second run.
	h.step("3b: the site's broker killed (SIGKILL) again, after gateway 3's restart", func() { h.siteRestart(syscall.SIGKILL) })
	h.step("2, 3: states after", func() { h.checkStates("after steps 2 and 3") })
	if t.Failed() {
		t.FailNow()
	}

	h.step("4: a second process with gateway 1's id behind a fourth bridge", func() { h.secondInstance(h.nodes[0]) })
}

// waitFences waits until the fence of every scope of the node's gateway
// is at least token.
func (nd *node) waitFences(token uint64) {
	t := nd.h.t
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, a := range actuators {
		for {
			s, err := nd.apiState(a.name)
			if err == nil && s.Fence.Token >= token {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d: the fence of %s is not at %d within 20 s (%+v, %v): the stream of commands does not reach the gateway", nd.n, a.name, token, s.Fence, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// tallies are the counts of every controller of one kind.
type tallies struct{ ctl, old tally }

func (h *harness) tallies() tallies {
	var a tallies
	for _, nd := range h.nodes {
		if nd.main != nil {
			a.ctl = a.ctl.plus(nd.main.snapshot())
		}
		if nd.old != nil {
			a.old = a.old.plus(nd.old.snapshot())
		}
	}
	return a
}

// step runs a step and logs how long it took and what the controllers saw
// meanwhile.
func (h *harness) step(name string, fn func()) {
	h.t.Helper()
	before, start := h.tallies(), time.Now()
	fn()
	after := h.tallies()
	h.t.Logf("step %s: %.1f s (at %.1f s); controllers ctl: %s; stale controllers: %s",
		name, time.Since(start).Seconds(), time.Since(h.begun).Seconds(), after.ctl.minus(before.ctl), after.old.minus(before.old))
}

// waitApplied waits until the node's controller ctl has had k more
// commands applied.
func (nd *node) waitApplied(k int64, when string) {
	nd.h.t.Helper()
	if err := nd.awaitApplied(k, when); err != nil {
		nd.h.t.Fatal(err)
	}
}

// awaitApplied is waitApplied for any goroutine: it returns an error if
// the k commands are not applied within linkWait.
func (nd *node) awaitApplied(k int64, when string) error {
	from := nd.main.n.applied.Load()
	for deadline := time.Now().Add(linkWait); nd.main.n.applied.Load() < from+k; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("node %d, %s: fewer than %d commands applied within %v (%s): the stream does not resume", nd.n, when, k, linkWait, nd.main.snapshot())
		}
	}
	return nil
}

// cutAndRestore cuts the links of nodes mid-stream for hold, checks that
// the other nodes' streams go on meanwhile and that those of the cut ones
// time out, restores them, and waits until they carry the topics again
// and the streams resume.
func (h *harness) cutAndRestore(nodes []*node, hold time.Duration) {
	t := h.t
	t.Helper()
	for _, nd := range h.nodes {
		nd.waitApplied(5, "before the cut")
	}
	before := map[*node]tally{}
	for _, nd := range h.nodes {
		before[nd] = nd.main.snapshot()
	}
	cut := time.Now()
	for _, nd := range nodes {
		nd.proxy.Cut()
	}
	for _, nd := range nodes {
		if err := nd.waitLink("0", 5*time.Second); err != nil {
			t.Errorf("node %d, link cut: %v", nd.n, err)
		}
	}
	time.Sleep(hold)
	// A command sent just before the cut may still be waiting (answerWait).
	deadline := time.Now().Add(answerWait + time.Second)
	for _, nd := range nodes {
		for nd.main.n.unanswered.Load() == before[nd].unanswered && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if d := nd.main.snapshot().minus(before[nd]); d.unanswered == 0 {
			t.Errorf("node %d: no command timed out while its link was cut for %v (%s)", nd.n, hold, d)
		}
	}
	for _, nd := range h.nodes {
		if slices.Contains(nodes, nd) {
			continue
		}
		d := nd.main.snapshot().minus(before[nd])
		if d.applied < 10 {
			t.Errorf("node %d, whose link was not cut: %s while the others were cut, want 10 applied or more", nd.n, d)
		}
		t.Logf("node %d, whose link was not cut, meanwhile: %s", nd.n, d)
	}
	restored := time.Now()
	for _, nd := range nodes {
		if err := nd.proxy.Restore(); err != nil {
			t.Fatal(err)
		}
	}
	for _, nd := range nodes {
		if _, err := nd.waitLinked(linkWait); err != nil {
			t.Fatalf("node %d, link restored: %v", nd.n, err)
		}
		t.Logf("node %d: link cut for %.1f s; the bridge carried the gateway's topics again %.1f s after the restore", nd.n, restored.Sub(cut).Seconds(), time.Since(restored).Seconds())
	}
	for _, nd := range nodes {
		nd.waitApplied(5, "after the restore")
	}
}

// waitLink waits until the site holds value on the node's link topic.
func (nd *node) waitLink(value string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		m, err := nd.h.siteRead("watch", nd.linkTopic())
		if err == nil && m[nd.linkTopic()] == value {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the site does not hold %q on %s within %v: %q (%v)", value, nd.linkTopic(), d, m[nd.linkTopic()], err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// siteRestart stops the site's broker with sig mid-stream and starts it
// again, and waits until every bridge carries its gateway's topics again
// and the streams resume. It logs what the site holds just after the start,
// before the bridges are back: the link topics and the states, which a
// SIGKILL rolls back to the last clean stop.
func (h *harness) siteRestart(sig syscall.Signal) {
	t := h.t
	t.Helper()
	for _, nd := range h.nodes {
		nd.waitApplied(5, "before the site's broker stops")
	}
	stopped := time.Now()
	h.restartSite(sig)
	started := time.Now()
	var links, claims, older []string
	for _, nd := range h.nodes {
		m, err := h.siteRead("watch", nd.linkTopic(), nd.topics.Instance())
		links = append(links, fmt.Sprintf("node %d %q (%v)", nd.n, m[nd.linkTopic()], err))
		if p := nd.running(); p != nil {
			if c, err := wire.DecodeClaim([]byte(m[nd.topics.Instance()])); err != nil || c.PID != p.Pid() {
				claims = append(claims, fmt.Sprintf("node %d pid %d's, not pid %d's", nd.n, c.PID, p.Pid()))
			}
		}
		for _, a := range actuators {
			site, err := nd.siteState(a.name)
			own, err2 := nd.apiState(a.name)
			if err == nil && err2 == nil && site.Fence.Less(own.Fence) {
				older = append(older, fmt.Sprintf("node %d %s %s<%s", nd.n, a.name, site.Fence, own.Fence))
			}
		}
	}
	t.Logf("the site's broker restarted (%v) in %.1f s; before the bridges are back it holds on the link topics: %s; claims of an earlier run: %v; states older than the gateways': %d %v",
		sig, started.Sub(stopped).Seconds(), strings.Join(links, ", "), claims, len(older), older)
	for _, nd := range h.nodes {
		if _, err := nd.waitLinked(linkWait); err != nil {
			t.Fatalf("node %d, after the site's broker restarted (%v): %v", nd.n, sig, err)
		}
		t.Logf("node %d: the bridge carried the gateway's topics again %.1f s after the site's broker started again", nd.n, time.Since(started).Seconds())
	}
	for _, nd := range h.nodes {
		nd.waitApplied(5, "after the site's broker restarted")
		if why := nd.linked(); why != "" {
			t.Errorf("node %d, after the site's broker restarted (%v) and commands were applied again: %s", nd.n, sig, why)
		}
	}
}

// checkStates pauses every controller, and checks that the site holds, of
// every actuator, the state the gateway itself has.
func (h *harness) checkStates(when string) {
	t := h.t
	t.Helper()
	for _, nd := range h.nodes {
		nd.main.pause()
		nd.old.pause()
	}
	defer func() {
		for _, nd := range h.nodes {
			nd.main.resume()
			nd.old.resume()
		}
	}()
	for _, nd := range h.nodes {
		for _, a := range actuators {
			deadline := time.Now().Add(convergeWait)
			for {
				w := nd.sameState("watch", a.name)
				if w == "" {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("%s, node %d: the state of %s on the site is not the gateway's within %v: %s", when, nd.n, a.name, convergeWait, w)
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
}

// stateWatch records every state message of one actuator that a
// subscription on the site's broker receives.
type stateWatch struct {
	c  mqtt.Client
	mu sync.Mutex
	// seen are the fences received, in order, with whether each came as
	// retained.
	seen []seenState
}

type seenState struct {
	fence    fence.Fence
	retained bool
	at       time.Time
}

// watchState subscribes on the site's broker to the state of the node's
// actuator a.
func (nd *node) watchState(a string) *stateWatch {
	t := nd.h.t
	t.Helper()
	w := &stateWatch{}
	topic := nd.topics.State(a)
	opts := mqtt.NewClientOptions().AddBroker(nd.h.site.URL).SetClientID(testenv.ID(t, fmt.Sprintf("watch%d", nd.n))).
		SetUsername("watch").SetPassword(nd.h.users["watch"]).SetCleanSession(true).SetAutoReconnect(true).
		SetMaxReconnectInterval(time.Second).SetConnectTimeout(2 * time.Second).
		SetOnConnectHandler(func(c mqtt.Client) {
			c.Subscribe(topic, 0, func(_ mqtt.Client, m mqtt.Message) {
				o, err := wire.DecodeState(m.Payload())
				if err != nil {
					return
				}
				w.mu.Lock()
				w.seen = append(w.seen, seenState{o.Fence, m.Retained(), time.Now()})
				w.mu.Unlock()
			})
		})
	w.c = mqtt.NewClient(opts)
	if tok := w.c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("node %d: watch the site's state of %s: %v", nd.n, a, tok.Error())
	}
	t.Cleanup(func() { w.c.Disconnect(0) })
	return w
}

// since returns the states received since at.
func (w *stateWatch) since(at time.Time) []seenState {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []seenState
	for _, s := range w.seen {
		if !s.at.Before(at) {
			out = append(out, s)
		}
	}
	return out
}

// retainedTrap is step 2 on node nd: while its link is cut, a controller
// on the node's own Mosquitto raises the pump's fence; once the link is
// restored, the site must hold the new state and never again its older
// copy, through a second cut and restore. It returns the step, to run on a
// goroutine of its own (it reports with Errorf).
func (h *harness) retainedTrap(nd *node) func() {
	t := h.t
	t.Helper()
	local := nd.dial(nd.local.URL, "") // a controller on the node's own Mosquitto
	atSite := nd.dial(nd.h.site.URL, "ctl")
	lateID := testenv.ID(t, "late")
	watch := nd.watchState("pump")
	id := testenv.ID(t, "local")
	h.localIDs = append(h.localIDs, id)
	return func() {
		if err := nd.awaitApplied(5, "step 2, before the cut"); err != nil {
			t.Error(err)
			return
		}
		nd.proxy.Cut()
		if err := nd.waitLink("0", 5*time.Second); err != nil {
			t.Errorf("step 2, node %d, link cut: %v", nd.n, err)
		}
		siteOld, err := nd.siteState("pump")
		if err != nil {
			t.Errorf("step 2, node %d: %v", nd.n, err)
			return
		}
		high := fence.Fence{Token: 1_000_000 + siteOld.Fence.Token}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := local.Send(ctx, fence.Command{ID: id, Actuator: "pump", Holder: "local", Fence: high, State: fence.StateOn})
		cancel()
		if res.Outcome != fence.Applied {
			t.Errorf("step 2, node %d: the local controller's command at %s was answered %q (%v), want applied", nd.n, high, res.Outcome, err)
			return
		}
		if s, err := nd.siteState("pump"); err != nil || !s.Fence.Less(high) {
			t.Errorf("step 2, node %d: while the link is cut the site holds the pump at %s (%v): it should still have its older copy", nd.n, s.Fence, err)
		}
		// A command published on the site's broker while the link is
		// cut, with a token above every other: the bridge's session
		// there is clean, so it reaches no one, and it must never act
		// once the link is back (a kept session would deliver it then).
		lctx, lcancel := context.WithTimeout(context.Background(), answerWait)
		res, err = atSite.Send(lctx, fence.Command{ID: lateID, Actuator: "pump", Holder: "late", Fence: fence.Fence{Token: high.Token + 1_000_000}, State: fence.StateOff})
		lcancel()
		if err == nil || res.Outcome != "" {
			t.Errorf("step 2, node %d: a command sent at the site while the link is cut was answered %q (%v)", nd.n, res.Outcome, err)
		}
		restored := time.Now()
		if err := nd.proxy.Restore(); err != nil {
			t.Error(err)
			return
		}
		if err := nd.waitLink("1", linkWait); err != nil {
			t.Errorf("step 2, node %d, link restored: %v", nd.n, err)
			return
		}
		linkBack := time.Since(restored)
		var first time.Time
		for deadline := time.Now().Add(convergeWait); ; time.Sleep(50 * time.Millisecond) {
			s, err := nd.siteState("pump")
			if err == nil && !s.Fence.Less(high) {
				first = time.Now()
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("step 2, node %d: %v after the link came back the site still holds the pump at %s (%v), not the gateway's %s or later: its older copy won",
					nd.n, convergeWait, s.Fence, err, high)
				return
			}
		}
		t.Logf("step 2, node %d: link back %.1f s after the restore (the site's link topic 1); the site held the new state %.2f s after that",
			nd.n, linkBack.Seconds(), first.Sub(restored.Add(linkBack)).Seconds())
		// The second cycle: the site keeps the new state while cut, and
		// after.
		if _, err := nd.waitLinked(linkWait); err != nil {
			t.Errorf("step 2, node %d, link restored: %v", nd.n, err)
			return
		}
		nd.proxy.Cut()
		if err := nd.waitLink("0", 5*time.Second); err != nil {
			t.Errorf("step 2, node %d, second cut: %v", nd.n, err)
		}
		if s, err := nd.siteState("pump"); err != nil || s.Fence.Less(high) {
			t.Errorf("step 2, node %d, second cut: the site holds the pump at %s (%v), older than %s", nd.n, s.Fence, err, high)
		}
		time.Sleep(2 * time.Second)
		restored = time.Now()
		if err := nd.proxy.Restore(); err != nil {
			t.Error(err)
			return
		}
		if err := nd.waitLink("1", linkWait); err != nil {
			t.Errorf("step 2, node %d, second restore: %v", nd.n, err)
			return
		}
		if _, err := nd.waitLinked(linkWait); err != nil {
			t.Errorf("step 2, node %d, second restore: %v", nd.n, err)
		}
		t.Logf("step 2, node %d: second cycle: link back %.1f s after the restore", nd.n, time.Since(restored).Seconds())
		for deadline := time.Now().Add(convergeWait); ; time.Sleep(100 * time.Millisecond) {
			w := nd.sameState("watch", "pump")
			if w == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("step 2, node %d, after the second restore: %s", nd.n, w)
				break
			}
		}
		if err := nd.awaitApplied(5, "step 2, after the second restore"); err != nil {
			t.Error(err)
		}
		// Commands sent after the link came back were applied: one kept
		// for the bridge at the site would have come before them.
		if es, err := nd.applied(); err != nil {
			t.Errorf("step 2, node %d: %v", nd.n, err)
		} else {
			for _, e := range es {
				if e.ID == lateID {
					t.Errorf("step 2, node %d: the command sent at the site while the link was cut was applied at %s, after the link came back: late", nd.n, e.At.Format(time.RFC3339Nano))
				}
			}
		}
		// Never the older copy once the new one was there: every state
		// the site sent its subscriber since, retained or live.
		for _, s := range watch.since(first) {
			if s.fence.Less(high) {
				t.Errorf("step 2, node %d: %.2f s after the site held the new state (%s), it sent its subscriber the pump at %s (retained %v): the older copy came back",
					nd.n, s.at.Sub(first).Seconds(), high, s.fence, s.retained)
			}
		}
	}
}

// restartWhileCut is step 3 on node nd: the gateway is stopped while its
// link is cut, and started again; once the link is restored, the site
// replays the claim of the run before, which must not stop the gateway
// (exit 78), and the site must then hold its new claim and its online
// status. It returns the step, to run on a goroutine of its own (it
// reports with Errorf).
func (h *harness) restartWhileCut(nd *node) func() {
	t := h.t
	return func() {
		if err := nd.awaitApplied(5, "step 3, before the cut"); err != nil {
			t.Error(err)
			return
		}
		nd.proxy.Cut()
		if err := nd.waitLink("0", 5*time.Second); err != nil {
			t.Errorf("step 3, node %d, link cut: %v", nd.n, err)
		}
		first := nd.running()
		before, _, err := nd.localClaim()
		if err != nil {
			t.Errorf("step 3, node %d: %v", nd.n, err)
			return
		}
		if status := first.Stop(syscall.SIGTERM, 10*time.Second); status != 0 {
			t.Errorf("step 3, node %d: the gateway stopped with status %d, want 0 (a clean stop)", nd.n, status)
		}
		second, err := nd.launch(false)
		if err != nil {
			t.Errorf("step 3: %v", err)
			return
		}
		claim, _, err := nd.localClaim()
		if err != nil || claim.Instance == before.Instance {
			t.Errorf("step 3, node %d: the restarted gateway's claim %+v (%v) is the first run's", nd.n, claim, err)
			return
		}
		restored := time.Now()
		if err := nd.proxy.Restore(); err != nil {
			t.Error(err)
			return
		}
		var why string
		for deadline := time.Now().Add(linkWait); ; time.Sleep(100 * time.Millisecond) {
			if status, exited := second.Exited(0); exited {
				t.Errorf("step 3, node %d: the gateway restarted while its link was cut exited with status %d %.1f s after the link was restored, where the site replays the claim of the run before (pid %d, ended); 78 would be the one-process-per-id guard taking that claim for a live process:\n%s",
					nd.n, status, time.Since(restored).Seconds(), before.PID, lines(second.Output(), "gateway id", "claim", "conflict"))
				// The remaining steps need a gateway: start it again.
				if _, err := nd.launch(false); err != nil {
					t.Errorf("step 3, gateway started again after its exit: %v", err)
					return
				}
				if _, err := nd.waitLinked(linkWait); err != nil {
					t.Errorf("step 3, node %d, gateway started again after its exit: %v", nd.n, err)
				}
				return
			}
			if why = nd.linked(); why == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("step 3, node %d, link restored: the site does not hold the new run's claim and status within %v: %s", nd.n, linkWait, why)
				return
			}
		}
		back := time.Since(restored)
		// Claims the site replays come at once; the gateway must still
		// serve a while after, and the site hold its claim.
		time.Sleep(3 * time.Second)
		if status, exited := second.Exited(0); exited {
			t.Errorf("step 3, node %d: the restarted gateway exited with status %d after its link was back:\n%s", nd.n, status, lines(second.Output(), "gateway id", "claim", "conflict"))
			return
		}
		if why := nd.linked(); why != "" {
			t.Errorf("step 3, node %d, 3 s after the link was back: %s", nd.n, why)
		}
		m, _ := h.siteRead("watch", nd.topics.Instance())
		site, _ := wire.DecodeClaim([]byte(m[nd.topics.Instance()]))
		if site.PID != second.Pid() {
			t.Errorf("step 3, node %d: the site holds the claim of pid %d, want the restarted gateway's (pid %d)", nd.n, site.PID, second.Pid())
		}
		if err := nd.awaitApplied(5, "step 3, after the restore"); err != nil {
			t.Error(err)
		}
		t.Logf("step 3, node %d: gateway restarted while cut (pid %d, then %d); the site held the new claim and status %.1f s after the restore, and the gateway still served 3 s later",
			nd.n, before.PID, second.Pid(), back.Seconds())
	}
}

// lines returns the lines of out that contain one of words.
func lines(out string, words ...string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		for _, w := range words {
			if strings.Contains(l, w) {
				keep = append(keep, l)
				break
			}
		}
	}
	return strings.Join(keep, "\n")
}

// secondInstance is step 4: a second process with node nd's gateway id
// and a store of its own, on a fourth Mosquitto bridged to the site (a
// copied card on another Pi: the same bridge user, another host id), while
// the stale controller keeps sending. It must stop with status 78 and
// apply nothing.
func (h *harness) secondInstance(nd *node) {
	t := h.t
	t.Helper()
	dir := t.TempDir()
	port := testenv.Port(t)
	cfg := writeFile(t, dir, "gateway.yaml", gatewayConfig(nd.id, fmt.Sprintf("tcp://127.0.0.1:%d", port), "", ""))
	proxy := testenv.NewProxy(t, strings.TrimPrefix(h.site.URL, "tcp://"))
	local := localMosquitto(t, port, h.bridgeConf(cfg, fmt.Sprintf("bridge-%d", nd.n), "pi4", proxy.Addr))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the fourth Mosquitto logged:\n%s", local.Log())
		}
	})
	for deadline := time.Now().Add(linkWait); !proxy.Up(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("step 4: the fourth Mosquitto's bridge does not connect to the site within %v:\n%s", linkWait, local.Log())
		}
	}
	old := nd.old.snapshot()
	// Besides the stale controller's stream, a spray of its commands that
	// waits for no answer: every 20 ms one may reach the second process.
	ctx, cancel := context.WithCancel(context.Background())
	var sprayed, stale int
	sprayDone := make(chan struct{})
	go func() { defer close(sprayDone); sprayed, stale = nd.old.spray(ctx, 20*time.Millisecond) }()
	defer func() { cancel(); <-sprayDone }()
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	second := testenv.Start(t, "gateway1-second", exec.Command(gatewayBin, "run", "--config", cfg, "--init", "--log-level", "info"))
	status, exited := second.Exited(30 * time.Second)
	took := time.Since(start)
	const says = "another gateway process serves gateway id"
	switch {
	case !exited:
		t.Errorf("step 4: the second process with gateway id %s still runs after 30 s, want it refused (exit 78):\n%s", nd.id, second.Output())
		second.Kill()
	case status != 78 || !strings.Contains(second.Output(), says):
		t.Errorf("step 4: the second process with gateway id %s exited with status %d, want 78 saying %q:\n%s", nd.id, status, says, second.Output())
	}
	// The first one stops too if it saw the second's claim (docs/design.md),
	// or serves on with its own store.
	nd.mu.Lock()
	p := nd.gw
	nd.mu.Unlock()
	first := "serves on"
	if status, exited := p.Exited(6 * time.Second); !exited {
		// It serves on with its own store: the site must say so.
		if _, err := nd.waitLinked(linkWait); err != nil {
			t.Errorf("step 4: the first gateway with id %s serves on, but %v", nd.id, err)
		}
	} else {
		first = "stopped"
		if status != 78 || !strings.Contains(p.Output(), says) {
			t.Errorf("step 4: the first gateway with id %s exited with status %d, want 78 saying %q:\n%s", nd.id, status, says, lines(p.Output(), "gateway id", "claim", "conflict"))
		} else {
			first = "stopped too (exit 78: it saw the second's claim)"
		}
		// Nobody serves the id now: the site must not say online.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			m, err := h.siteRead("watch", nd.topics.Status())
			if err == nil && m[nd.topics.Status()] == wire.StatusOffline {
				first += ", and the site holds its status offline"
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("step 4: both processes with gateway id %s stopped, and the site holds its status %q (%v), want %q", nd.id, m[nd.topics.Status()], err, wire.StatusOffline)
				break
			}
		}
	}
	cancel()
	<-sprayDone
	d := nd.old.snapshot().minus(old)
	if sprayed < 20 {
		t.Errorf("step 4: the stale controller sprayed %d commands while the two met, want 20 or more", sprayed)
	}
	// Nothing applied by the second, and its outputs never on.
	if es, err := storeApplied(filepath.Join(dir, "fence.db")); err != nil {
		t.Errorf("step 4: the second process's audit trail: %v", err)
	} else if len(es) > 0 {
		t.Errorf("step 4: the second process applied %d commands, the first %s (token %d)", len(es), es[0].ID, es[0].Command.Token)
	}
	latch, err := boards.ReadLatch(filepath.Join(dir, "fence.db.pins"))
	if err != nil {
		t.Errorf("step 4: the second process's outputs: %v", err)
	}
	for _, a := range actuators {
		if latch[a.pin] {
			t.Errorf("step 4: the second process's %s is on: a stale command was driven", a.name)
		}
	}
	t.Logf("step 4: the second process exited with status %d %.1f s after its start; the first %s; the stale controller meanwhile: %s, of which %d sprayed every 20 ms (%d answered stale, the rest unanswered)",
		status, took.Seconds(), first, d, sprayed, stale)
}

// checkAudits checks every gateway's audit trail against what the
// controllers sent and saw: no command applied twice, no stale one (each
// applied pair above every pair applied before it in its scope, and
// none of the stale controller's), and the answers true to the trail.
func (h *harness) checkAudits() {
	t := h.t
	t.Helper()
	local := map[string]bool{}
	for _, id := range h.localIDs {
		local[id] = true
	}
	for _, nd := range h.nodes {
		es, err := nd.applied()
		if err != nil {
			t.Errorf("node %d: its audit trail: %v", nd.n, err)
			continue
		}
		if len(es) >= 10000 {
			t.Errorf("node %d: the audit trail has %d applied entries or more: the API's limit; the check would miss the oldest", nd.n, len(es))
		}
		main, old := nd.main.records(), nd.old.records()
		applied := map[string]int{}
		last := map[string]fencelog.Entry{}
		for _, e := range es {
			applied[e.ID]++
			if applied[e.ID] == 2 {
				t.Errorf("node %d: command %s (%s at %s) applied twice", nd.n, e.ID, e.Actuator, e.Command)
			}
			if p, ok := last[e.Scope]; ok && !p.Command.Less(e.Command) {
				t.Errorf("node %d: command %s (%s at %s) applied after %s (%s at %s) in scope %s: a stale command applied", nd.n, e.ID, e.Actuator, e.Command, p.ID, p.Actuator, p.Command, e.Scope)
			}
			last[e.Scope] = e
			if e.Fence != e.Command {
				t.Errorf("node %d: command %s applied at %s left the fence at %s", nd.n, e.ID, e.Command, e.Fence)
			}
			_, ours := main[e.ID]
			switch {
			case old[e.ID].cmd.ID != "":
				t.Errorf("node %d: the stale controller's command %s (%s at %s) was applied", nd.n, e.ID, e.Actuator, e.Command)
			case !ours && !local[e.ID]:
				t.Errorf("node %d: command %s (%s at %s) applied, which no controller sent", nd.n, e.ID, e.Actuator, e.Command)
			}
		}
		var unansweredApplied, answered, unanswered int
		for id, s := range main {
			switch s.outcome {
			case fence.Applied, fence.Duplicate:
				answered++
				if applied[id] != 1 {
					t.Errorf("node %d: command %s was answered %s, and the trail has it applied %d times", nd.n, id, s.outcome, applied[id])
				}
			case fence.Stale:
				answered++
				if applied[id] != 0 {
					t.Errorf("node %d: command %s was answered stale, and the trail has it applied", nd.n, id)
				}
			case "":
				unanswered++
				unansweredApplied += applied[id]
			}
		}
		t.Logf("node %d: the trail has %d commands applied; controller ctl sent %d: %d answered, %d not (%d of them applied all the same); the stale controller sent %d, none applied",
			nd.n, len(es), len(main), answered, unanswered, unansweredApplied, len(old))
	}
}

// logBridges logs how often each bridge tried to connect to the site,
// and how often its connection was lost, as its Mosquitto logged it.
func (h *harness) logBridges() {
	for _, nd := range h.nodes {
		log := nd.local.Log()
		h.t.Logf("node %d's Mosquitto: %d bridge connection attempts, %d connections lost", nd.n,
			strings.Count(log, "Connecting bridge (step 1)"), strings.Count(log, "Client local.fencegate-bridge-"))
	}
}
