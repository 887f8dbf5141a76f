//go:build linux

package guest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/pwmio"
)

// The BCM2837's PWM controller (3f20c000.pwm, enabled in the Pi 3B's
// device tree) through Debian's pwm-bcm2835 driver and the kernel's sysfs
// interface: the real kernel's rules for export, period, duty_cycle and
// enable, which package pwmfake copies. QEMU's raspi3b has no PWM block
// behind the driver (its registers take the writes and nothing comes
// out), so what a line would show is not measured here; what the kernel
// holds, and refuses, is.
const piPWM = "3f20c000.pwm"

// pwmChip loads the driver and returns the chip's class entry.
func pwmChip(t *testing.T) string {
	t.Helper()
	if err := loadModule("/lib/modules/pwm-bcm2835.ko"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		chips, err := pwmio.DefaultSysfs.Chips()
		for name, dev := range chips {
			if strings.Contains(dev, "/"+piPWM+"/") {
				t.Logf("%s is %s", name, dev)
				return name
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no PWM chip at %s after loading pwm-bcm2835: %v %v", piPWM, chips, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func sysfsRead(t *testing.T, name string) string {
	t.Helper()
	s, err := pwmio.DefaultSysfs.Read(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPWMSysfs holds pwmio to the kernel: the channel exported and found
// by its device, the period of its frequency, each duty written as the
// kernel's duty_cycle and read back, 0 % held enabled, a frequency change
// that keeps the share, and the kernel's refusals (a duty above the
// period, an exported channel exported again) as pwmfake says them.
func TestPWMSysfs(t *testing.T) {
	guestOnly(t)
	chip := pwmChip(t)
	ch, err := pwmio.Open(pwmio.DefaultSysfs, pwmio.Conf{Chip: piPWM, Channel: 1, Frequency: 1000})
	if err != nil {
		t.Fatal(err)
	}
	dir := chip + "/pwm1/"
	if p := sysfsRead(t, dir+"period"); p != "1000000" {
		t.Fatalf("period %s ns, want 1000000 (1 kHz)", p)
	}
	for _, d := range []fence.Duty{4250, 10000, 0, 1, 3333} {
		if err := ch.SetDuty(d); err != nil {
			t.Fatalf("SetDuty(%s): %v", d, err)
		}
		want := fmt.Sprint(uint64(d) * 100)
		if got, en := sysfsRead(t, dir+"duty_cycle"), sysfsRead(t, dir+"enable"); got != want || en != "1" {
			t.Fatalf("SetDuty(%s): the kernel holds duty_cycle %s, enable %s; want %s, 1", d, got, en, want)
		}
		if got, err := ch.Duty(); err != nil || got != d {
			t.Fatalf("Duty after SetDuty(%s) = %s, %v", d, got, err)
		}
	}
	// The kernel refuses a duty above the period, and changes nothing.
	err = pwmio.DefaultSysfs.Write(dir+"duty_cycle", "2000000")
	if !errors.Is(err, syscall.EINVAL) {
		t.Errorf("duty_cycle above the period: %v, want EINVAL", err)
	}
	if got := sysfsRead(t, dir+"duty_cycle"); got != "333300" {
		t.Errorf("after the refused write the kernel holds %s, want 333300", got)
	}
	// An exported channel exported again is EBUSY; Open takes it as it is.
	if err := pwmio.DefaultSysfs.Write(chip+"/export", "1"); !errors.Is(err, syscall.EBUSY) {
		t.Errorf("export of an exported channel: %v, want EBUSY", err)
	}
	// A restart with another frequency keeps the running share, both ways.
	for _, hz := range []int{25000, 500} {
		ch, err = pwmio.Open(pwmio.DefaultSysfs, pwmio.Conf{Chip: piPWM, Channel: 1, Frequency: hz})
		if err != nil {
			t.Fatalf("Open at %d Hz after 1 kHz: %v", hz, err)
		}
		if got, err := ch.Duty(); err != nil || got != 3333 {
			t.Errorf("Duty at %d Hz = %s, %v; want 33.33 kept", hz, got, err)
		}
	}
	// A period changed behind the gateway's back is neither level.
	if err := pwmio.DefaultSysfs.Write(dir+"period", "1500000"); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Duty(); err == nil || !strings.Contains(err.Error(), "behind the gateway's back") {
		t.Errorf("Duty with another period: %v", err)
	}
}

// TestPWMGateway: the gateway fences a set-point on the Pi's PWM channel
// 0: boot: 20 at start, applied and stale set-points, a duty out of range
// refused, the kernel's duty_cycle where the applied commands put it, and
// after a restart the recorded set-point (boot: last would; boot: 20 does
// as it says).
func TestPWMGateway(t *testing.T) {
	guestOnly(t)
	chip := pwmChip(t)
	broker := guestBroker(t)
	store := filepath.Join(t.TempDir(), "fence.db")
	cfg, err := config.Parse(fmt.Appendf(nil, `id: pi-emu-pwm
mqtt:
  broker: %s
store: %s
board: raspberry-pi
http: "127.0.0.1:0"
actuators:
  - name: fan
    pwm: {chip: %s, channel: 0, frequency: 25000, min_frequency: 100, max_frequency: 50000}
    min: 20
    boot: 20
`, broker, store, piPWM))
	if err != nil {
		t.Fatal(err)
	}
	duty := func() string { return sysfsRead(t, chip+"/pwm0/duty_cycle") }
	_, stop := runGateway(t, cfg, true)
	if got := duty(); got != "8000" { // 20 % of 40000 ns
		t.Fatalf("at start duty_cycle %s, want 8000 (boot: 20)", got)
	}
	ctx := context.Background()
	cl, err := client.Dial(ctx, client.Options{Broker: broker, GatewayID: "pi-emu-pwm"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	sendAt := func(id string, token uint64, d fence.Duty, hz uint32, want fence.Outcome) fence.Result {
		t.Helper()
		res, _ := cl.Send(ctx, fence.Command{ID: id, Actuator: "fan", Fence: fence.Fence{Token: token}, Setpoint: true, Duty: d, State: d.State(), Frequency: hz})
		if res.Outcome != want {
			t.Fatalf("duty %s at %d Hz, token %d: %s %s (%s), want %s", d, hz, token, res.Outcome, res.Reason, res.Error, want)
		}
		return res
	}
	send := func(id string, token uint64, d fence.Duty, want fence.Outcome) fence.Result {
		t.Helper()
		return sendAt(id, token, d, 0, want)
	}
	if res := send("f-1", 10, 4250, fence.Applied); res.Duty == nil || *res.Duty != 4250 || res.ActualDuty != nil {
		t.Fatalf("answer %+v", res)
	}
	if got := duty(); got != "17000" {
		t.Fatalf("duty_cycle %s after 42.5 %%, want 17000", got)
	}
	send("f-old", 9, 9000, fence.Stale)
	if res := send("f-low", 11, 1000, fence.Rejected); res.Reason != fence.ReasonRange {
		t.Errorf("10 %% below min 20: %+v", res)
	}
	if got := duty(); got != "17000" {
		t.Fatalf("duty_cycle %s after a stale and a refused set-point, want 17000 still", got)
	}
	send("f-2", 11, 0, fence.Applied)
	if got, en := duty(), sysfsRead(t, chip+"/pwm0/enable"); got != "0" || en != "1" {
		t.Fatalf("off: duty_cycle %s, enable %s; want 0, held enabled", got, en)
	}
	// A command's frequency, within the output's range: 75 % of 1 ms.
	sendAt("f-3", 12, 7500, 1000, fence.Applied)
	if p, d := sysfsRead(t, chip+"/pwm0/period"), duty(); p != "1000000" || d != "750000" {
		t.Fatalf("75 %% at 1 kHz: period %s, duty_cycle %s; want 1000000, 750000", p, d)
	}
	if res := sendAt("f-fast", 13, 7500, 60000, fence.Rejected); res.Reason != fence.ReasonRange {
		t.Errorf("60 kHz above max_frequency: %+v", res)
	}
	stop()
	if got := duty(); got != "750000" {
		t.Fatalf("after the gateway stopped duty_cycle %s, want 750000: a stop leaves the set-point", got)
	}
	runGateway(t, cfg, false)
	if p, got := sysfsRead(t, chip+"/pwm0/period"), duty(); p != "40000" || got != "8000" {
		t.Fatalf("after a restart period %s, duty_cycle %s; want 40000, 8000 (boot: 20, at the configured 25 kHz)", p, got)
	}
	send("f-late", 11, 5000, fence.Stale) // the fence of 12 survived the restart
}
