package conformance_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testenv"
)

// Exit codes of the drivers (README.md, "The drivers").
const (
	exitOK      = 0
	exitStale   = 3
	exitTimeout = 6
	exitLost    = 8
)

// TestBehaviour: what a controller does where it matters most, the same
// in every language, through each client's driver against a real
// gateway, Mosquitto and etcd. A watcher on the broker sees what each
// driver published, whatever the driver reports.
func TestBehaviour(t *testing.T) {
	var names []string
	for _, l := range languages {
		names = append(names, "lost-"+l.name, "ahead-"+l.name, "offline-"+l.name)
	}
	g := startGateway(t, names...)
	w := watch(t, g)
	go1 := languages[0]
	t.Run("parallel", func(t *testing.T) {
		for _, l := range languages {
			t.Run(l.name+"/lease-lost", func(t *testing.T) {
				t.Parallel()
				leaseLost(t, g, w, l, go1)
			})
			t.Run(l.name+"/fence-above-every-revision", func(t *testing.T) {
				t.Parallel()
				fenceAhead(t, g, w, l)
			})
		}
	})
	// One at a time: each stops the gateway.
	for _, l := range languages {
		t.Run(l.name+"/gateway-offline", func(t *testing.T) { gatewayOffline(t, g, w, l) })
	}
}

// Lease lost: A is granted the lease, decides, and pauses past its
// lease; B takes over and switches the output off; A continues. Its
// library checks the lease before it publishes: A publishes nothing,
// neither under its old token nor under a new lease it might take by
// itself, says so (event lost, exit 8), and the output shows B's effect.
func leaseLost(t *testing.T, g *gateway, w *watcher, a, b language) {
	actuator := "lost-" + a.name
	holderA := testenv.ID(t, "A")
	A := startDriver(t, a, g, actuator, holderA, testenv.ID(t, "a"), "on", "--stop-under-lease")
	tokA := A.granted(t, 60*time.Second)
	A.stopped(t, 10*time.Second)
	B := startDriver(t, b, g, actuator, testenv.ID(t, "B"), testenv.ID(t, "b"), "off")
	if code, ev := B.wait(t, 90*time.Second); code != exitOK || ev["answer"].Outcome != "applied" {
		t.Fatalf("B: exit %d, answer %+v; want 0 and applied\n%s", code, ev["answer"], B.output())
	}
	resumed := time.Now()
	testenv.Resume(A.cmd.Process)
	code, ev := A.wait(t, 60*time.Second)
	if code != exitLost || ev["lost"].Event != "lost" || ev["lost"].Token != tokA.Token {
		t.Fatalf("A (%s): exit %d, events %v; want exit 8 and a lost event with its token %s\n%s", a.name, code, ev, tokA.Token, A.output())
	}
	time.Sleep(500 * time.Millisecond) // anything A published is delivered by now
	if p := w.by(holderA, actuator, resumed); len(p) != 0 {
		t.Fatalf("A (%s) published %d command(s) after its lease was lost: %+v; want none", a.name, len(p), p)
	}
	if high := pin(t, g, actuator); high {
		t.Fatalf("%s's output is on after A resumed; want B's off", actuator)
	}
}

// A fence above every revision etcd has issued (tokens typed by hand, or
// an etcd restored from an older backup): no token of this etcd passes
// it until its revision does, and acquiring again only spends revisions.
// The controller is answered stale, says why (the error names it), and
// stops: exit 3, one command published, the output untouched.
func fenceAhead(t *testing.T, g *gateway, w *watcher, l language) {
	actuator := "ahead-" + l.name
	ctx, c, done := g.dial(t)
	defer done()
	const typed = 1 << 40
	if _, err := c.Send(ctx, fence.Command{Actuator: actuator, Holder: "by-hand", Fence: fence.Fence{Token: typed}}); err != nil {
		t.Fatalf("raising the fence by hand: %v", err)
	}
	holder := testenv.ID(t, "ahead")
	started := time.Now()
	d := startDriver(t, l, g, actuator, holder, testenv.ID(t, "c"), "on")
	code, ev := d.wait(t, 60*time.Second)
	if code != exitStale || ev["answer"].Outcome != "stale" || ev["answer"].Fence["token"] != strconv.FormatUint(typed, 10) ||
		!strings.Contains(d.stderr.String(), "above every revision") {
		t.Fatalf("%s: exit %d, answer %+v; want exit 3, stale with the fence %d, and the error that it is above every revision\n%s",
			l.name, code, ev["answer"], uint64(typed), d.output())
	}
	time.Sleep(500 * time.Millisecond)
	ids := map[string]bool{}
	for _, p := range w.by(holder, actuator, started) {
		ids[p.ID] = true
	}
	if len(ids) != 1 {
		t.Fatalf("%s published %d commands (ids %v); want one, not retried under a new lease", l.name, len(ids), ids)
	}
	if pin(t, g, actuator) {
		t.Fatalf("%s's output is on; want it untouched", actuator)
	}
}

// Gateway offline (stopped cleanly: the broker keeps nothing for it): a
// controller resends its command while its lease is held and at once
// when the gateway is back online, and is answered; one whose wait ends
// first says the gateway is offline (exit 6), and nothing it published
// moves the output when the gateway comes back.
func gatewayOffline(t *testing.T, g *gateway, w *watcher, l language) {
	actuator := "offline-" + l.name
	g.stop(t)
	// Back within the wait: answered.
	d := startDriver(t, l, g, actuator, testenv.ID(t, "back"), testenv.ID(t, "c"), "on", "--timeout", "30")
	d.granted(t, 30*time.Second)
	time.Sleep(1500 * time.Millisecond) // the command went out, unanswered
	g.start(t)
	if code, ev := d.wait(t, 40*time.Second); code != exitOK || ev["answer"].Outcome != "applied" {
		t.Fatalf("%s, gateway back within the wait: exit %d, answer %+v; want 0 and applied\n%s", l.name, code, ev["answer"], d.output())
	}
	if !pin(t, g, actuator) {
		t.Fatalf("%s's output is off after the applied answer", actuator)
	}

	// Not back within the wait: the controller says so and gives up.
	g.stop(t)
	holder := testenv.ID(t, "gone")
	d = startDriver(t, l, g, actuator, holder, testenv.ID(t, "d"), "off", "--timeout", "4")
	code, _ := d.wait(t, 40*time.Second)
	if code != exitTimeout || !strings.Contains(d.stderr.String(), "offline") {
		t.Fatalf("%s, gateway offline for longer than the wait: exit %d; want 6 and an error that says the gateway is offline\n%s", l.name, code, d.output())
	}
	gaveUp := time.Now()
	g.start(t)
	time.Sleep(time.Second)
	if !pin(t, g, actuator) {
		t.Fatalf("%s: the command of a controller that gave up moved the output after the gateway came back", l.name)
	}
	if p := w.by(holder, actuator, gaveUp); len(p) != 0 {
		t.Fatalf("%s published %d command(s) after it gave up: %+v", l.name, len(p), p)
	}
}

// pin reads actuator's output level from the sim board's latch.
func pin(t *testing.T, g *gateway, actuator string) bool {
	t.Helper()
	pins, err := boards.ReadLatch(g.Latch)
	if err != nil {
		t.Fatal(err)
	}
	return pins[g.Pins[actuator]]
}
