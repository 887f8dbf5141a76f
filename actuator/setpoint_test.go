package actuator_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
	"github.com/fencegate/fencegate/pwmio"
	"github.com/fencegate/fencegate/pwmio/pwmfake"
)

// A set-point output is a dimmer's holding register (0..1000) on a relay
// module over real Modbus TCP.

func duty(id string, token, seq uint64, d fence.Duty) fence.Command {
	return fence.Command{ID: id, Actuator: "fan", Fence: fence.Fence{Token: token, Seq: seq}, Setpoint: true, Duty: d, State: d.State()}
}

func fanSpec() actuator.Spec {
	return actuator.Spec{Name: "fan", Kind: actuator.KindSetpoint, PinName: "setpoint4", Min: 2000, Max: 9000, MaxRate: 1000}
}

func TestSetpointFenced(t *testing.T) {
	r := newWatchRig(t, []actuator.Spec{fanSpec()}, false)
	reg := func(want uint16) {
		t.Helper()
		if got := r.mod.Register(4); got != want {
			t.Fatalf("the register holds %d, want %d", got, want)
		}
	}
	reg(0)                  // never commanded: off, recorded at start
	r.tick(5 * time.Second) // max_rate: from 0 to 50 % takes 5 s

	res := r.send(t, duty("a-1", 5, 0, 5000), fence.Applied)
	if res.Duty == nil || *res.Duty != 5000 || res.State != fence.StateOn || res.ActualDuty != nil {
		t.Fatalf("answer %+v: want duty 50, on, no actual_duty", res)
	}
	reg(500)
	r.send(t, duty("a-1", 5, 0, 5000), fence.Duplicate)
	if res := r.send(t, duty("a-1", 5, 0, 6000), fence.Stale); !strings.Contains(res.Error, "differs") {
		t.Errorf("the same id and pair with another duty: %q, want it called different", res.Error)
	}
	r.send(t, duty("old", 4, 9, 8000), fence.Stale)
	reg(500)

	// Out of range: refused before admission, the fence stays.
	for _, d := range []fence.Duty{9500, 1000} {
		res := r.send(t, duty("x", 9, 0, d), fence.Rejected)
		if res.Reason != fence.ReasonRange || *res.Duty != 5000 {
			t.Errorf("duty %s: %+v, want reason range and the recorded 50", d, res)
		}
	}
	if res := r.send(t, fence.Command{ID: "hz", Actuator: "fan", Fence: fence.Fence{Token: 9}, Setpoint: true, Duty: 5000, State: fence.StateOn, Frequency: 1000}, fence.Rejected); res.Reason != fence.ReasonInvalid || !strings.Contains(res.Error, "no frequency") {
		t.Errorf("a frequency to a register: %+v, want rejected invalid", res)
	}
	if f := r.recorded(t, "fan").Fence; f != (fence.Fence{Token: 5}) {
		t.Fatalf("fence %v after refused set-points, want 5/0", f)
	}

	// max_rate 10 %/s: 50 → 70 needs 2 s.
	r.tick(time.Second)
	res = r.send(t, duty("b-1", 6, 0, 7000), fence.Rejected)
	if res.Reason != fence.ReasonRate || !strings.Contains(res.Error, "max_rate") {
		t.Fatalf("a step too fast: %+v, want reason rate", res)
	}
	if f := r.recorded(t, "fan").Fence; f != (fence.Fence{Token: 6}) {
		t.Errorf("fence %v after a step refused for its rate, want 6/0: its pair raised it", f)
	}
	reg(500)
	r.tick(time.Second)
	r.send(t, duty("b-2", 6, 1, 7000), fence.Applied)
	reg(700)
	// Two steps in one batch, each within the rate on its own: the second
	// is measured from the first's drive, not from before the batch.
	r.tick(time.Second)
	res2, err := r.bank.HandleBatch(context.Background(), []fence.Command{duty("b-3", 6, 2, 8000), duty("b-4", 6, 3, 9000)})
	if err != nil || res2[0].Outcome != fence.Applied || res2[1].Outcome != fence.Rejected || res2[1].Reason != fence.ReasonRate {
		t.Fatalf("a batch of two 10-point steps 1 s after the last: %+v, %v; want applied, then rejected (rate)", res2, err)
	}
	reg(800)
	r.tick(10 * time.Second)
	r.send(t, duty("b-5", 6, 4, 7000), fence.Applied)
	reg(700)

	// Behind the gateway's back: found at the next poll, driven back (boot: last).
	r.mod.SetRegister(4, 300)
	r.tick(watchPoll)
	reg(700)
	if h := r.health(t, "fan"); h.OutOfBand != 1 {
		t.Errorf("health %+v, want one out-of-band change", h)
	}
	// The module loses power and its register: reconciled when it is back.
	r.mod.PowerCut()
	r.tick(watchPoll)
	if h := r.health(t, "fan"); h.Down == "" {
		t.Fatalf("health %+v, want down", h)
	}
	if err := r.mod.PowerOn(); err != nil {
		t.Fatal(err)
	}
	reg(0)
	for i := 0; i < 20 && r.mod.Register(4) != 700; i++ {
		r.tick(10 * time.Second) // the backoff's longest wait
	}
	reg(700)

	// Off is always reachable, at any rate; state off is a set-point of 0.
	r.send(t, duty("c-1", 7, 0, 0), fence.Applied)
	reg(0)
	res = r.send(t, fence.Command{ID: "c-2", Actuator: "fan", Fence: fence.Fence{Token: 7, Seq: 1}, State: fence.StateOff}, fence.Applied)
	if *res.Duty != 0 || res.State != fence.StateOff {
		t.Errorf("state off: %+v", res)
	}
	if res := r.send(t, fence.Command{ID: "c-3", Actuator: "fan", Fence: fence.Fence{Token: 7, Seq: 2}, State: fence.StateOn}, fence.Rejected); res.Reason != fence.ReasonInvalid {
		t.Errorf("state on to a set-point output: %+v, want rejected invalid", res)
	}
	if res := r.send(t, fence.Command{ID: "c-4", Actuator: "fan", Fence: fence.Fence{Token: 7, Seq: 3}, Pulse: time.Second, State: fence.StateOn}, fence.Rejected); res.Reason != fence.ReasonInvalid {
		t.Errorf("a pulse to a set-point output: %+v, want rejected invalid", res)
	}
}

// The boot rule covers set-points: boot: 30 sets 30 % at start, recorded.
func TestSetpointBoot(t *testing.T) {
	s := fanSpec()
	s.Boot, s.BootDuty = actuator.BootDuty, 3000
	r := newWatchRig(t, []actuator.Spec{s}, false)
	if got := r.mod.Register(4); got != 300 {
		t.Fatalf("register %d at start, want 300 (boot: 30)", got)
	}
	if o := r.recorded(t, "fan"); o.Duty != 3000 || o.State != fence.StateOn {
		t.Fatalf("record %+v, want duty 30 on", o)
	}
}

func TestSetpointSpecErrors(t *testing.T) {
	for _, c := range []struct {
		change func(*actuator.Spec)
		says   string
	}{
		{func(s *actuator.Spec) { s.Min, s.Max = 5000, 4000 }, "min <= max"},
		{func(s *actuator.Spec) { s.Max = 10001 }, "max <= 100"},
		{func(s *actuator.Spec) { s.Boot = actuator.BootOn }, "boot: on"},
		{func(s *actuator.Spec) { s.Boot, s.BootDuty = actuator.BootDuty, 9500 }, "outside its range"},
		{func(s *actuator.Spec) { s.SafeDuty = 1000 }, "safe_duty"},
		{func(s *actuator.Spec) { s.Kind = actuator.KindSwitch }, "kind: setpoint"},
	} {
		s := fanSpec()
		s.Scope = s.Name
		c.change(&s)
		if err := actuator.CheckKind(s); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("CheckKind(%+v) = %v, want an error saying %q", s, err, c.says)
		}
	}
}

// A PWM set-point (a channel of the kernel's sysfs interface, in memory
// with the kernel's rules) whose commands may choose its frequency within
// its range: the period follows the recorded frequency, through a restart
// too (boot: last), and a frequency outside the range, or to a register,
// is refused before admission.
func TestSetpointFrequency(t *testing.T) {
	fsys := pwmfake.New(pwmfake.Chip{Name: "pwmchip0", Device: "/sys/devices/platform/soc/fe20c000.pwm", NPWM: 2, MinPeriod: 200})
	path := filepath.Join(t.TempDir(), "fence.db")
	spec := actuator.Spec{Name: "fan", Scope: "fan", Kind: actuator.KindSetpoint, PinName: "pwm", MinFrequency: 100, MaxFrequency: 50000}
	open := func(create bool) (*actuator.Bank, *fencelog.Store) {
		t.Helper()
		o := &fencelog.Options{AuditFlush: -1}
		if create {
			o.Create = fencelog.Fresh()
		}
		l, err := fencelog.Open(path, o)
		if err != nil {
			t.Fatal(err)
		}
		b, err := actuator.New(l, []actuator.Spec{spec}, &actuator.Options{Clock: newManualClock()})
		if err != nil {
			t.Fatal(err)
		}
		ch, err := pwmio.Open(fsys, pwmio.Conf{Chip: "fe20c000.pwm", Frequency: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.AttachSetpoints(func(string) (actuator.Setpoint, error) { return ch, nil }); err != nil {
			t.Fatal(err)
		}
		if err := b.Start(func(string) (actuator.Pin, error) { return nil, fmt.Errorf("no pins") }); err != nil {
			t.Fatal(err)
		}
		return b, l
	}
	kernel := func(wantPeriod, wantDuty uint64) {
		t.Helper()
		if period, d, en, _ := fsys.Channel("pwmchip0/pwm0"); period != wantPeriod || d != wantDuty || !en {
			t.Fatalf("the kernel holds period %d, duty %d, enabled %v; want %d, %d, enabled", period, d, en, wantPeriod, wantDuty)
		}
	}
	send := func(b *actuator.Bank, id string, token uint64, d fence.Duty, hz uint32, want fence.Outcome) fence.Result {
		t.Helper()
		res := must(b.Handle(context.Background(), fence.Command{ID: id, Actuator: "fan", Fence: fence.Fence{Token: token}, Setpoint: true, Duty: d, State: d.State(), Frequency: hz}))
		if res.Outcome != want {
			t.Fatalf("duty %s at %d Hz, token %d: %s %s (%s); want %s", d, hz, token, res.Outcome, res.Reason, res.Error, want)
		}
		return res
	}
	b, l := open(true)
	kernel(1000000, 0)
	send(b, "a", 1, 5000, 0, fence.Applied)
	kernel(1000000, 500000)
	if res := send(b, "b", 2, 5000, 25000, fence.Applied); res.Frequency != 25000 {
		t.Errorf("answer %+v, want frequency 25000", res)
	}
	kernel(40000, 20000)
	send(b, "b", 2, 5000, 20000, fence.Stale) // the same pair and id, another frequency
	if res := send(b, "c", 3, 5000, 60000, fence.Rejected); res.Reason != fence.ReasonRange {
		t.Errorf("60 kHz, above max_frequency: %+v", res)
	}
	kernel(40000, 20000)
	b.Stop()
	l.Close()
	b, l = open(false) // boot: last, at its recorded frequency
	defer l.Close()
	defer b.Stop()
	kernel(40000, 20000)
	send(b, "d", 4, 2500, 0, fence.Applied) // 0: back to the configured frequency
	kernel(1000000, 250000)
}

// TestSetpointBelowTheDeviceStep: a set-point above 0 that the device
// would hold at 0 (0.04 % of a 0..1000 register is 0.4 of a step) is
// refused, reason range, naming the device's smallest step, before the
// fence is read: the answer never says on while the output is off. The
// smallest set-point the message names is taken, and reads back on.
func TestSetpointBelowTheDeviceStep(t *testing.T) {
	r := newWatchRig(t, []actuator.Spec{{Name: "fan", Kind: actuator.KindSetpoint, PinName: "setpoint4"}}, false)
	res := r.send(t, duty("a-1", 81, 4, 4), fence.Rejected)
	if res.Reason != fence.ReasonRange || !strings.Contains(res.Error, "smallest step") || !strings.Contains(res.Error, "0.1 %") {
		t.Fatalf("duty 0.04 %%: %+v; want rejected, reason range, naming the step 0.1 %%", res)
	}
	if res.State != fence.StateOff || res.Duty == nil || *res.Duty != 0 {
		t.Errorf("the refusal says state %s duty %v; want the recorded off, 0", res.State, res.Duty)
	}
	if f := r.recorded(t, "fan").Fence; f != (fence.Fence{}) {
		t.Errorf("fence %v after the refusal; want it unmoved", f)
	}
	if got := r.mod.Register(4); got != 0 {
		t.Errorf("the register holds %d, want 0", got)
	}
	_, least, ok := strings.Cut(res.Error, "at least ")
	if !ok {
		t.Fatalf("the refusal does not say what to send: %q", res.Error)
	}
	d, err := fence.ParseDuty(strings.TrimSuffix(least, " %"))
	if err != nil {
		t.Fatalf("the smallest set-point %q: %v", least, err)
	}
	res = r.send(t, duty("a-2", 81, 5, d), fence.Applied)
	if res.State != fence.StateOn || res.ActualDuty != nil && *res.ActualDuty == 0 || r.mod.Register(4) == 0 {
		t.Errorf("duty %s: %+v, register %d; want on, the register above 0", d, res, r.mod.Register(4))
	}
	r.send(t, duty("a-3", 81, 6, d-1), fence.Rejected)
}
