package pwmio_test

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/pwmio"
	"github.com/fencegate/fencegate/pwmio/pwmfake"
)

// The Pi 4's controller as the kernel shows it: its number is not its name.
func pi4(strict bool) *pwmfake.FS {
	f := pwmfake.New(
		pwmfake.Chip{Name: "pwmchip0", Device: "/sys/devices/platform/soc/fe804000.i2c/i2c-1/1-0040", NPWM: 16, MinPeriod: 1000},
		pwmfake.Chip{Name: "pwmchip2", Device: "/sys/devices/platform/soc/fe20c000.pwm", NPWM: 2, MinPeriod: 200},
	)
	f.Strict = strict
	return f
}

func TestOpenSetRead(t *testing.T) {
	for _, strict := range []bool{false, true} {
		f := pi4(strict)
		ch, err := pwmio.Open(f, pwmio.Conf{Chip: "fe20c000.pwm", Channel: 1, Frequency: 25000})
		if err != nil {
			t.Fatalf("strict %v: Open: %v", strict, err)
		}
		if period, _, enabled, ok := f.Channel("pwmchip2/pwm1"); !ok || period != 40000 || enabled {
			t.Fatalf("after Open: period %d enabled %v exported %v; want 40000 ns, not enabled yet", period, enabled, ok)
		}
		for _, d := range []fence.Duty{4250, 10000, 0, 1} {
			if err := ch.SetDuty(d); err != nil {
				t.Fatalf("SetDuty(%s): %v", d, err)
			}
			_, duty, enabled, _ := f.Channel("pwmchip2/pwm1")
			if want := uint64(d) * 4; duty != want || !enabled {
				t.Errorf("SetDuty(%s): duty_cycle %d enabled %v; want %d, enabled (0 %% is held low, not disabled)", d, duty, enabled, want)
			}
			if got, err := ch.Duty(); err != nil || got != ch.Nearest(d) || got != d {
				t.Errorf("Duty after SetDuty(%s) = %s, %v", d, got, err)
			}
		}
	}
}

// A period that is no multiple of 10000 ns reads back at the nearest step.
func TestNearest(t *testing.T) {
	f := pi4(false)
	ch, err := pwmio.Open(f, pwmio.Conf{Chip: "/sys/devices/platform/soc/fe20c000.pwm", Channel: 0, Frequency: 3000}) // 333333 ns
	if err != nil {
		t.Fatal(err)
	}
	for d := fence.Duty(0); d <= fence.FullDuty; d += 7 {
		if err := ch.SetDuty(d); err != nil {
			t.Fatal(err)
		}
		if got, err := ch.Duty(); err != nil || got != ch.Nearest(d) {
			t.Fatalf("Duty after SetDuty(%s) = %s, %v; Nearest says %s", d, got, err, ch.Nearest(d))
		}
	}
}

// A gateway that restarts with another frequency keeps the running
// output's share of the period: the kernel refuses a duty above the
// period, so the order of the writes matters both ways.
func TestPeriodChangeKeepsShare(t *testing.T) {
	for _, c := range []struct{ from, to int }{{1000, 25000}, {25000, 1000}} {
		f := pi4(true)
		ch, err := pwmio.Open(f, pwmio.Conf{Chip: "fe20c000.pwm", Frequency: c.from})
		if err != nil {
			t.Fatal(err)
		}
		if err := ch.SetDuty(7500); err != nil {
			t.Fatal(err)
		}
		ch, err = pwmio.Open(f, pwmio.Conf{Chip: "fe20c000.pwm", Frequency: c.to})
		if err != nil {
			t.Fatalf("%d Hz → %d Hz: %v (writes %q)", c.from, c.to, err, f.Writes())
		}
		if got, err := ch.Duty(); err != nil || got != 7500 {
			t.Errorf("%d Hz → %d Hz: Duty = %s, %v; want 75 kept", c.from, c.to, got, err)
		}
	}
}

// Behind the gateway's back: another period is neither level.
func TestPeriodChangedBehindBack(t *testing.T) {
	f := pi4(false)
	ch, err := pwmio.Open(f, pwmio.Conf{Chip: "fe20c000.pwm", Frequency: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.SetDuty(5000); err != nil {
		t.Fatal(err)
	}
	if err := f.Write("pwmchip2/pwm0/period", "2000000"); err != nil {
		t.Fatal(err)
	}
	_, err = ch.Duty()
	var n interface{ NeitherLevel() bool }
	if err == nil || !errors.As(err, &n) || !n.NeitherLevel() || !strings.Contains(err.Error(), "behind the gateway's back") {
		t.Errorf("Duty with another period = %v; want a neither-level error", err)
	}
}

func TestOpenErrors(t *testing.T) {
	f := pi4(false)
	f.Busy["pwmchip2/pwm1"] = true
	for _, c := range []struct {
		conf pwmio.Conf
		says string
	}{
		{pwmio.Conf{Chip: "3f20c000.pwm", Frequency: 1000}, "fe20c000.pwm"}, // a Pi 3's name on a Pi 4: lists what there is
		{pwmio.Conf{Chip: "fe20c000.pwm", Channel: 2, Frequency: 1000}, "2 channels"},
		{pwmio.Conf{Chip: "fe20c000.pwm", Channel: 1, Frequency: 1000}, "kernel driver"},
		{pwmio.Conf{Chip: "fe20c000.pwm", Frequency: 0}, "frequency"},
		{pwmio.Conf{Chip: "fe20c000.pwm", Frequency: 2000000}, "frequency"},
		{pwmio.Conf{Frequency: 1000}, "chip is required"},
	} {
		if _, err := pwmio.Open(f, c.conf); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("Open(%+v) = %v; want an error saying %q", c.conf, err, c.says)
		}
	}
	if _, err := pwmio.Open(pwmfake.New(), pwmio.Conf{Chip: "fe20c000.pwm", Frequency: 1000}); err == nil || !strings.Contains(err.Error(), "dtoverlay=pwm") {
		t.Errorf("Open without PWM chips = %v; want the overlay named", err)
	}
	// The controller's minimum period is the kernel's to enforce.
	g := pwmfake.New(pwmfake.Chip{Name: "pwmchip0", Device: "/sys/devices/platform/soc/3f20c000.pwm", NPWM: 2, MinPeriod: 2000})
	ch, err := pwmio.Open(g, pwmio.Conf{Chip: "3f20c000.pwm", Frequency: 1000000})
	if err == nil {
		err = ch.SetDuty(5000)
	}
	if !errors.Is(err, syscall.EINVAL) {
		t.Errorf("a period below the controller's minimum: %v; want EINVAL passed on", err)
	}
}
