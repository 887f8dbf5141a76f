//go:build linux

package guest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/fence"
)

// sample is what the kernel said about the two vent lines at one moment.
type sample struct {
	at          time.Time
	open, close string // "hi", "lo", or "" (not requested)
}

// sampler reads /sys/kernel/debug/gpio in a loop, both lines from one read,
// until stopped.
type sampler struct {
	mu      sync.Mutex
	samples []sample
	stop    chan struct{}
	done    chan struct{}
}

// startSampler starts sampling and returns once the first sample is in:
// the levels before whatever the test does next. (A sampler whose first
// sample came after a command's drive would date the switch-over's off
// at that sample, too late, and find a dead time shorter than it was.)
func startSampler(t *testing.T) *sampler {
	t.Helper()
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	first := make(chan struct{})
	go func() {
		defer close(s.done)
		for n := 0; ; n++ {
			select {
			case <-s.stop:
				return
			default:
			}
			open, shut := debugfsLevels("GPIO5", "GPIO6")
			s.mu.Lock()
			s.samples = append(s.samples, sample{time.Now(), open, shut})
			s.mu.Unlock()
			if n == 0 {
				close(first)
			}
		}
	}()
	<-first
	return s
}

// end stops sampling and takes one last sample, so that the levels after
// the event (an answer received, a gateway ready) are in, however the
// sampler was scheduled: on a busy emulated core it can miss the last
// milliseconds.
func (s *sampler) end() []sample {
	close(s.stop)
	<-s.done
	open, close := debugfsLevels("GPIO5", "GPIO6")
	return append(s.samples, sample{time.Now(), open, close})
}

// debugfsLevels returns "hi", "lo" or "" for two lines, from one read of
// /sys/kernel/debug/gpio.
func debugfsLevels(a, b string) (string, string) {
	f, err := os.Open("/sys/kernel/debug/gpio")
	if err != nil {
		return "", ""
	}
	defer f.Close()
	var la, lb string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		i := strings.LastIndexByte(l, ')')
		if i < 0 {
			continue
		}
		fs := strings.Fields(l[i+1:])
		if len(fs) < 2 {
			continue
		}
		switch {
		case strings.Contains(l, "("+a+" ") || strings.Contains(l, "("+a+"|"):
			la = fs[1]
		case strings.Contains(l, "("+b+" ") || strings.Contains(l, "("+b+"|"):
			lb = fs[1]
		}
	}
	return la, lb
}

// runVent runs a gateway with the vent motor's two relays, interlocked,
// on the emulated board until the returned stop is called. With activeLow
// both relays are on at a low line.
func runVent(t *testing.T, broker, store string, bbm bool, dead time.Duration, activeLow bool) func() {
	t.Helper()
	cfg, err := config.Parse(fmt.Appendf(nil, `id: pi-vent
mqtt: {broker: %s}
store: %s
board: raspberry-pi
http: ""
actuators:
  - {name: vent-open, pin: GPIO5, scope: vent, active_low: %[5]v}
  - {name: vent-close, pin: GPIO6, scope: vent, active_low: %[5]v}
interlocks:
  - {name: vent, actuators: [vent-open, vent-close], break_before_make: %[3]v, dead_time: %[4]s}
`, broker, store, bbm, dead, activeLow))
	if err != nil {
		t.Fatal(err)
	}
	_, stop := runGateway(t, cfg, true)
	return stop
}

// ventBroker starts an embedded broker and a client for gateway pi-vent,
// both stopped when the test ends. send sends one command and returns its
// result.
func ventBroker(t *testing.T) (url string, send func(id, act string, tok, seq uint64, s fence.State) fence.Result) {
	t.Helper()
	broker := guestBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	cl, err := client.Dial(ctx, client.Options{Broker: broker, GatewayID: "pi-vent"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return broker, func(id, act string, tok, seq uint64, s fence.State) fence.Result {
		t.Helper()
		sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
		defer scancel()
		r, _ := cl.Send(sctx, fence.Command{ID: id, Holder: "piemu", Actuator: act, Fence: fence.Fence{Token: tok, Seq: seq}, State: s})
		return r
	}
}

// TestInterlockOnThePi: the vent motor's two direction
// relays on real kernel GPIO lines. Rejected: a second on moves neither
// line. Break-before-make: the kernel never shows both lines high, and the
// one comes on only after the dead time. A restart with a member recorded
// on takes its line over low and raises it after the dead time.
func TestInterlockOnThePi(t *testing.T) {
	guestOnly(t)
	c := bcmChip(t)
	broker, send := ventBroker(t)
	const dead = 300 * time.Millisecond

	// Reject mode.
	store := filepath.Join(t.TempDir(), "fence.db")
	stop := runVent(t, broker, store, false, dead, false)
	if r := send("a-1", "vent-close", 41, 0, fence.StateOn); r.Outcome != fence.Applied {
		t.Fatalf("vent-close on: %s %s", r.Outcome, r.Error)
	}
	expectOutput(t, c, "GPIO6", true)
	r := send("b-1", "vent-open", 42, 0, fence.StateOn)
	if r.Outcome != fence.Rejected || r.Reason != fence.ReasonInterlock || r.Blocking == nil || r.Blocking.Actuator != "vent-close" {
		t.Fatalf("vent-open on while vent-close is on = %+v, want rejected: interlock", r)
	}
	expectOutput(t, c, "GPIO5", false)
	expectOutput(t, c, "GPIO6", true)
	stop()

	// Break-before-make.
	store = filepath.Join(t.TempDir(), "fence.db")
	stop = runVent(t, broker, store, true, dead, false)
	if r := send("a-2", "vent-close", 41, 0, fence.StateOn); r.Outcome != fence.Applied {
		t.Fatalf("vent-close on: %s %s", r.Outcome, r.Error)
	}
	expectOutput(t, c, "GPIO6", true)
	smp := startSampler(t)
	r = send("b-2", "vent-open", 42, 0, fence.StateOn)
	samples := smp.end()
	if r.Outcome != fence.Applied {
		t.Fatalf("break-before-make: %+v", r)
	}
	expectOutput(t, c, "GPIO5", true)
	expectOutput(t, c, "GPIO6", false)
	checkSwitchOver(t, samples, "close", dead)
	stop()

	// A restart with vent-open recorded on: taken over low, high after the
	// dead time, and never high together with vent-close.
	smp = startSampler(t)
	stop = runVent(t, broker, store, true, dead, false)
	samples = smp.end()
	expectOutput(t, c, "GPIO5", true)
	expectOutput(t, c, "GPIO6", false)
	var sawLow, both bool
	for _, s := range samples {
		sawLow = sawLow || s.open == "lo"
		both = both || s.open == "hi" && s.close == "hi"
	}
	if !sawLow || both {
		t.Errorf("restart: vent-open seen low %v, both high %v in %d samples; want taken over low, never both high", sawLow, both, len(samples))
	}
	stop()
}

// checkSwitchOver checks samples of a switch-over from the member that was
// on (from: "open" or "close") to the other: never both high, and the other
// came on no sooner than the dead time after the first went off, as far as
// the samples can tell. A sample's time is taken after its read, which
// happened after the sample before it: the level it shows held at some
// moment between the two times. So the first went off after the time of
// the sample two before the first to show it off, and the other came on
// before the time of the first sample to show it on; the switch-over is
// too quick only if even that widest gap is shorter than the dead time.
func checkSwitchOver(t *testing.T, samples []sample, from string, dead time.Duration) {
	t.Helper()
	var offAt, onAt, offAfter time.Time
	var gaps []time.Duration
	for i, s := range samples {
		if s.open == "hi" && s.close == "hi" {
			t.Fatalf("sample %d: the kernel shows both vent lines high", i)
		}
		old, new := s.close, s.open
		if from == "open" {
			old, new = s.open, s.close
		}
		if offAt.IsZero() && old == "lo" {
			offAt = s.at
			offAfter = samples[max(i-2, 0)].at
		}
		if onAt.IsZero() && new == "hi" {
			onAt = s.at
		}
		if i > 0 {
			gaps = append(gaps, s.at.Sub(samples[i-1].at))
		}
	}
	var worst time.Duration
	for _, g := range gaps {
		worst = max(worst, g)
	}
	if offAt.IsZero() || onAt.IsZero() {
		t.Fatalf("%d samples did not see the switch-over (off %v, on %v)", len(samples), offAt, onAt)
	}
	if widest := onAt.Sub(offAfter); widest < dead {
		t.Errorf("the other relay came on %v after the first went off (%v at most, as the samples tell); the dead time is %v (sampling every %v at worst)",
			onAt.Sub(offAt), widest, dead, worst)
	}
	t.Logf("switch-over: off, then on %v later (dead time %v); %d samples, %v apart at worst", onAt.Sub(offAt).Round(time.Millisecond), dead, len(samples), worst.Round(time.Microsecond))
}

// TestInterlockActiveLowStart: a vent motor's two
// direction relays, both active low (a low line is on), interlocked. From
// the gateway's start the kernel's gpio trace, every level gpiolib wrote in
// order, must never have both lines low: not at a first start (both off,
// so both only ever high), and not at a restart with vent-open recorded on
// (taken over off, on after the dead time, vent-close never low). Before
// the line request carried the initial levels, the request itself drove
// both lines low, both directions on, at every start.
func TestInterlockActiveLowStart(t *testing.T) {
	guestOnly(t)
	c := bcmChip(t)
	open, close := gpioNumber(t, "GPIO5"), gpioNumber(t, "GPIO6")
	broker, send := ventBroker(t)
	const dead = 300 * time.Millisecond
	store := filepath.Join(t.TempDir(), "fence.db")

	// neverBothLow replays the trace's writes to the two lines in order.
	neverBothLow := func(when string, events []gpioEvent) {
		t.Helper()
		level := map[int]string{}
		for i, e := range events {
			if e.gpio != open && e.gpio != close || !strings.HasPrefix(e.what, "set ") {
				continue
			}
			level[e.gpio] = strings.TrimPrefix(e.what, "set ")
			if level[open] == "0" && level[close] == "0" {
				t.Fatalf("%s: after event %d both vent lines are low, both directions on; the kernel wrote %v to vent-open (gpio %d) and %v to vent-close (gpio %d); all events: %v",
					when, i+1, setsOf(events, open), open, setsOf(events, close), close, events)
			}
		}
		t.Logf("%s: the kernel wrote %v to vent-open, %v to vent-close", when, setsOf(events, open), setsOf(events, close))
	}

	// First start: both off, so both lines high from the request on.
	tr := startGPIOTrace(t)
	stop := runVent(t, broker, store, true, dead, true)
	events := tr.stop()
	neverBothLow("first start", events)
	for _, n := range []int{open, close} {
		if sets := setsOf(events, n); len(sets) == 0 || slices.Contains(sets, "0") {
			t.Errorf("first start: gpio %d written %v; want high (off) only, and at least once", n, sets)
		}
	}
	expectOutput(t, c, "GPIO5", true)
	expectOutput(t, c, "GPIO6", true)
	if r := send("o-1", "vent-open", 7, 0, fence.StateOn); r.Outcome != fence.Applied {
		t.Fatalf("vent-open on: %s %s", r.Outcome, r.Error)
	}
	expectOutput(t, c, "GPIO5", false)
	expectOutput(t, c, "GPIO6", true)
	stop()

	// Restart with vent-open recorded on.
	tr = startGPIOTrace(t)
	stop = runVent(t, broker, store, true, dead, true)
	// vent-open comes on after the dead time, by ready at the latest (as
	// in TestInterlockOnThePi's restart).
	expectOutput(t, c, "GPIO5", false)
	events = tr.stop()
	defer stop()
	neverBothLow("restart with vent-open on", events)
	if sets := setsOf(events, close); len(sets) == 0 || slices.Contains(sets, "0") {
		t.Errorf("restart: vent-close (gpio %d) written %v; want high (off) only, and at least once", close, sets)
	}
	if sets := setsOf(events, open); len(sets) < 2 || sets[0] != "1" || sets[len(sets)-1] != "0" {
		t.Errorf("restart: vent-open (gpio %d) written %v; want taken over high (off), then low (on)", open, sets)
	}
	expectOutput(t, c, "GPIO6", true)
}
