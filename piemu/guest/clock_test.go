//go:build linux

package guest

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
)

// jumpClock moves the guest's wall clock (CLOCK_REALTIME, settimeofday) by
// d. The emulated Pi's kernel is the gateway's alone: no host clock moves.
func jumpClock(t *testing.T, d time.Duration) {
	t.Helper()
	var tv syscall.Timeval
	if err := syscall.Gettimeofday(&tv); err != nil {
		t.Fatal(err)
	}
	tv = syscall.NsecToTimeval(tv.Nano() + int64(d))
	if err := syscall.Settimeofday(&tv); err != nil {
		t.Fatalf("settimeofday: %v", err)
	}
}

// TestDecisionsIgnoreClockJumps: decisions do not change when
// the wall clock jumps. The same commands (applied, a duplicate, a stale
// one, a fence-only raise, a break-before-make switch-over with its dead
// time, a restart that takes a member recorded on over after the dead
// time, a stale and an applied off) go to a gateway on a fresh store twice:
// once with a steady clock, once with the guest's wall clock jumped a day
// forward or back before every command, during the switch-over's dead time
// and across the restart. The answers (outcome, reason, fence, state) must
// be the same, the lines must end where the answers put them, and the
// dead time must last as configured: not skipped by a jump forward, not
// stretched to a day by a jump back.
//
// Why in the guest: libfaketime (Debian's faketime) cannot move a Go
// program's clock (Go reads the time from the vDSO, not through libc), and
// a time namespace offsets the monotonic clocks, never CLOCK_REALTIME; the
// emulated Pi's kernel has a wall clock of its own to jump.
func TestDecisionsIgnoreClockJumps(t *testing.T) {
	guestOnly(t)
	// The guest boots at 1970 (no RTC), and the kernel refuses a wall
	// clock before its boot: start from a date a day's jump back cannot
	// cross.
	if time.Now().Year() < 2000 {
		jumpClock(t, time.Until(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)))
	}
	c := bcmChip(t)
	broker, send := ventBroker(t)
	const dead = 2 * time.Second
	steady := clockScript(t, c, broker, send, dead, func(time.Duration) {})
	var net time.Duration
	n := 0
	jumped := clockScript(t, c, broker, send, dead, func(d time.Duration) { jumpClock(t, d); net += d; n++ })
	jumpClock(t, -net) // leave the clock where it was
	if len(steady) != len(jumped) {
		t.Fatalf("%d answers with a steady clock, %d with jumps", len(steady), len(jumped))
	}
	for i := range steady {
		if steady[i] != jumped[i] {
			t.Errorf("step %d: with clock jumps %q, with a steady clock %q", i+1, jumped[i], steady[i])
		}
	}
	t.Logf("%d answers alike with %d jumps of a day forward or back", len(steady), n)
}

// clockScript runs the vent's script on a fresh store and returns its
// answers. jump(d) moves the clock by d (or does nothing): a day forward or
// back before each command, and within each switch-over's dead time,
// between the one relay's off and the other's on.
func clockScript(t *testing.T, c kchip, broker string, send func(id, act string, tok, seq uint64, s fence.State) fence.Result, dead time.Duration, jump func(time.Duration)) []string {
	t.Helper()
	const day = 24 * time.Hour
	store := filepath.Join(t.TempDir(), "fence.db")
	stop := runVent(t, broker, store, true, dead, false)
	var answers []string
	step := func(id, act string, tok, seq uint64, s fence.State) fence.Result {
		if len(answers)%2 == 0 {
			jump(day)
		} else {
			jump(-day)
		}
		r := send(id, act, tok, seq, s)
		answers = append(answers, fmt.Sprintf("%s %s %s reason=%s fence=%s state=%s", id, act, r.Outcome, r.Reason, r.Fence, r.State))
		return r
	}
	step("a-1", "vent-close", 41, 0, fence.StateOn)
	expectOutput(t, c, "GPIO6", true)
	step("a-1", "vent-close", 41, 0, fence.StateOn) // a redelivery: duplicate
	step("b-1", "vent-open", 40, 0, fence.StateOn)  // stale
	step("b-2", "vent-open", 42, 0, 0)              // fence only

	// Two switch-overs, each with a jump inside its dead time: the clock
	// goes a day forward after vent-close goes off (a dead time counted on
	// the wall clock would be over at once), then a day back after
	// vent-open goes off (it would last a day).
	for _, sw := range []struct {
		off, on   string
		from      string
		d         time.Duration
		seq       uint64
		nowOnGPIO string
	}{
		{"vent-close", "vent-open", "close", day, 1, "GPIO5"},
		{"vent-open", "vent-close", "open", -day, 3, "GPIO6"},
	} {
		smp := startSampler(t)
		step(fmt.Sprint("sw-", sw.seq), sw.off, 42, sw.seq, fence.StateOff)
		jump(sw.d)
		began := time.Now()
		step(fmt.Sprint("sw-", sw.seq+1), sw.on, 42, sw.seq+1, fence.StateOn)
		took := time.Since(began)
		checkSwitchOver(t, smp.end(), sw.from, dead)
		if took > dead+10*time.Second {
			t.Errorf("%s on took %v after %s off, with a dead time of %v", sw.on, took, sw.off, dead)
		}
		expectOutput(t, c, sw.nowOnGPIO, true)
	}

	// A restart: vent-close is recorded on, taken over off and raised
	// after the dead time, with the clock a day off.
	stop()
	jump(day)
	began := time.Now()
	stop = runVent(t, broker, store, true, dead, false)
	deadline := time.Now().Add(dead + 10*time.Second)
	for debugfsLine(t, "GPIO6") != "out hi" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	expectOutput(t, c, "GPIO5", false)
	expectOutput(t, c, "GPIO6", true)
	if up := time.Since(began); up < dead || up > dead+10*time.Second {
		t.Errorf("vent-close came back on %v after the restart began (dead time %v)", up, dead)
	}
	jump(-day)

	step("c-1", "vent-close", 41, 5, fence.StateOff) // stale
	step("c-2", "vent-close", 43, 0, fence.StateOff) // applied
	expectOutput(t, c, "GPIO5", false)
	expectOutput(t, c, "GPIO6", false)
	stop()
	return answers
}
