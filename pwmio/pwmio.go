// Package pwmio drives PWM channels through the kernel's sysfs interface
// (/sys/class/pwm) as set-point outputs: a duty of 0 to 100 % at a
// configured frequency.
//
// A PWM chip is named by its device, not its number: pwmchip0 on one
// kernel is pwmchip2 on the next (the numbers changed between 6.6 and
// 6.12), while its device path (3f20c000.pwm on a Pi 3, fe20c000.pwm on a
// Pi 4, 1f00098000.pwm on a Pi 5) stays. [Open] finds the chip whose
// device path has that component, exports the channel and sets its
// period; [Channel.SetDuty] writes the duty and enables it; [Channel.Duty]
// reads back what the kernel holds.
//
// A duty of 0 is written as an enabled channel with a duty of 0 (the line
// held inactive), never as a disabled channel: a disabled PWM controller
// may leave its line at either level.
//
// Everything goes through [FS]; [Sysfs] is the kernel's, and package
// pwmio/pwmfake holds an in-memory one with the kernel's rules, for
// tests. This package imports no cgo and builds on every platform; only
// Linux has the files.
package pwmio

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fencegate/fencegate/fence"
)

// FS is the part of the kernel's PWM sysfs interface a channel uses.
// Paths are relative to the class directory (/sys/class/pwm):
// "pwmchip0/export", "pwmchip0/pwm1/duty_cycle".
type FS interface {
	// Chips returns the chips ("pwmchip0", ...) and each one's device
	// path (what its class entry links to).
	Chips() (map[string]string, error)
	Read(name string) (string, error)
	Write(name, value string) error
}

// Sysfs is the kernel's PWM sysfs interface under dir (/sys/class/pwm).
type Sysfs string

// DefaultSysfs is where the kernel's PWM class is.
const DefaultSysfs Sysfs = "/sys/class/pwm"

// Chips implements FS.
func (s Sysfs) Chips() (map[string]string, error) {
	entries, err := os.ReadDir(string(s))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "pwmchip") {
			continue
		}
		dev, err := filepath.EvalSymlinks(filepath.Join(string(s), e.Name()))
		if err != nil {
			return nil, err
		}
		out[e.Name()] = dev
	}
	return out, nil
}

// Read implements FS.
func (s Sysfs) Read(name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(string(s), name))
	return strings.TrimSpace(string(b)), err
}

// Write implements FS: one write(2) of value, as sysfs wants it.
func (s Sysfs) Write(name, value string) error {
	f, err := os.OpenFile(filepath.Join(string(s), name), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Conf names a channel and its frequency.
type Conf struct {
	// Chip is the PWM controller's device: a component of its device
	// path ("3f20c000.pwm") or the path itself ("/sys/devices/platform/soc/3f20c000.pwm").
	Chip    string
	Channel int
	// Frequency is the PWM frequency in hertz, 1 to MaxFrequency.
	Frequency int
}

// MaxFrequency is the highest frequency a channel may be given: at 1 MHz
// the period is 1000 ns, and a duty step of 0.01 % a tenth of a
// nanosecond, which no controller resolves.
const MaxFrequency = 1000000

// DefaultFrequency is the frequency of a channel whose configuration gives
// none: above what an eye sees flicker in a dimmed light, within what a
// relay board's opto-coupler passes.
const DefaultFrequency = 1000

// Check checks c without touching the kernel.
func (c Conf) Check() error {
	switch {
	case c.Chip == "":
		return errors.New("chip is required: the PWM controller's device, e.g. 3f20c000.pwm (Pi 3), fe20c000.pwm (Pi 4) or 1f00098000.pwm (Pi 5)")
	case c.Channel < 0 || c.Channel > 255:
		return fmt.Errorf("channel %d: want 0 to 255 (0 or 1 on a Raspberry Pi)", c.Channel)
	case c.Frequency < 1 || c.Frequency > MaxFrequency:
		return fmt.Errorf("frequency %d: want 1 to %d (hertz)", c.Frequency, MaxFrequency)
	}
	return nil
}

// Name is the channel's canonical name: "pwm/3f20c000.pwm/0".
func (c Conf) Name() string { return fmt.Sprintf("pwm/%s/%d", c.Chip, c.Channel) }

// Period is c's period in nanoseconds.
func (c Conf) Period() uint64 { return (1e9 + uint64(c.Frequency)/2) / uint64(c.Frequency) }

// Channel is one exported PWM channel.
type Channel struct {
	fs     FS
	dir    string // "pwmchip0/pwm1"
	name   string
	conf   Conf
	period uint64 // the period it runs at: its configured frequency's, or a command's
}

// ExportWait is how long Open waits for an exported channel's files to
// become writable (udev gives them to group gpio after the kernel made them).
const ExportWait = 2 * time.Second

// Open finds c's chip on fsys, exports the channel if it is not yet, and
// sets its period, keeping the share of the period its duty holds (an
// output left running by a gateway that stopped keeps its set-point until
// the boot rule drives it).
func Open(fsys FS, c Conf) (*Channel, error) {
	chip, err := locate(fsys, c)
	if err != nil {
		return nil, fmt.Errorf("pwmio: %s: %w", c.Name(), err)
	}
	ch := &Channel{fs: fsys, dir: fmt.Sprintf("%s/pwm%d", chip, c.Channel), name: c.Name(), conf: c, period: c.Period()}
	if _, err := fsys.Read(ch.dir + "/period"); err != nil {
		if err := fsys.Write(chip+"/export", strconv.Itoa(c.Channel)); err != nil {
			if errors.Is(err, syscall.EBUSY) {
				return nil, ch.errorf("export: %w (a kernel driver, such as pwm-fan or a backlight, holds this channel: remove it from the device tree, or use another channel)", err)
			}
			return nil, ch.errorf("export: %w", err)
		}
	}
	if err := ch.waitWritable(); err != nil {
		return nil, err
	}
	if err := ch.setPeriod(ch.period); err != nil {
		return nil, err
	}
	return ch, nil
}

// Find checks that fsys has c's chip, with c's channel, without
// exporting anything: for configuration checks.
func Find(fsys FS, c Conf) error {
	_, err := locate(fsys, c)
	return err
}

// locate checks c and returns the chip ("pwmchip2") that has its channel.
func locate(fsys FS, c Conf) (string, error) {
	if err := c.Check(); err != nil {
		return "", err
	}
	chip, err := findChip(fsys, c.Chip)
	if err != nil {
		return "", err
	}
	if n, err := readUint(fsys, chip+"/npwm"); err != nil {
		return "", fmt.Errorf("%s: read npwm: %w", chip, err)
	} else if uint64(c.Channel) >= n {
		return "", fmt.Errorf("%s (%s) has %d channels (0 to %d)", c.Chip, chip, n, n-1)
	}
	return chip, nil
}

// findChip returns the chip whose device path has the component dev, or
// is dev.
func findChip(fsys FS, dev string) (string, error) {
	chips, err := fsys.Chips()
	if err != nil {
		return "", fmt.Errorf("list PWM chips: %w (does this kernel have PWM support?)", err)
	}
	var names []string
	for name := range chips {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		path := chips[name]
		if path == dev || strings.HasPrefix(path, strings.TrimSuffix(dev, "/")+"/") || slices.Contains(strings.Split(path, "/"), dev) {
			return name, nil
		}
	}
	if len(names) == 0 {
		return "", fmt.Errorf("the kernel has no PWM chip: on a Raspberry Pi, add dtoverlay=pwm (one channel, GPIO 18) or dtoverlay=pwm-2chan (GPIO 18 and 19) to config.txt and reboot")
	}
	var have []string
	for _, name := range names {
		have = append(have, fmt.Sprintf("%s at %s", name, chips[name]))
	}
	return "", fmt.Errorf("no PWM chip at device %s; the kernel has %s: name one of those devices (the part ending in .pwm)", dev, strings.Join(have, ", "))
}

// waitWritable waits until the channel's period can be written: udev
// changes the new files' group a moment after the kernel made them.
func (ch *Channel) waitWritable() error {
	deadline := time.Now().Add(ExportWait)
	for {
		p, err := ch.fs.Read(ch.dir + "/period")
		if err == nil {
			err = ch.fs.Write(ch.dir+"/period", p)
			if err == nil || p == "0" && errors.Is(err, syscall.EINVAL) {
				return nil
			}
		}
		if time.Now().After(deadline) || !(errors.Is(err, fs.ErrPermission) || errors.Is(err, fs.ErrNotExist)) {
			return ch.errorf("open: %w (is the gateway's user in group gpio, which the udev rule gives the PWM files to?)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// SetFrequency runs the channel at hz (0: its configured frequency),
// keeping the share of the period its duty holds.
func (ch *Channel) SetFrequency(hz uint32) error {
	c := ch.conf
	if hz != 0 {
		c.Frequency = int(hz)
	}
	if err := c.Check(); err != nil {
		return ch.errorf("%w", err)
	}
	return ch.setPeriod(c.Period())
}

// setPeriod writes the channel's period, and scales its duty so that
// its share stays: the duty first when the period shrinks (the kernel
// refuses a duty above the period), the period first when it grows.
func (ch *Channel) setPeriod(period uint64) error {
	old, err := readUint(ch.fs, ch.dir+"/period")
	if err != nil {
		return ch.errorf("read period: %w", err)
	}
	ch.period = period
	if old == ch.period {
		return nil
	}
	duty, err := readUint(ch.fs, ch.dir+"/duty_cycle")
	if err != nil {
		return ch.errorf("read duty_cycle: %w", err)
	}
	scaled := uint64(0)
	if old > 0 {
		scaled = min(duty*ch.period/old, ch.period)
	}
	steps := []struct{ file, v string }{{"period", u(ch.period)}, {"duty_cycle", u(scaled)}}
	if ch.period < old {
		steps[0], steps[1] = steps[1], steps[0]
	}
	for _, s := range steps {
		if err := ch.fs.Write(ch.dir+"/"+s.file, s.v); err != nil {
			return ch.errorf("write %s %s: %w", s.file, s.v, err)
		}
	}
	return nil
}

func u(v uint64) string { return strconv.FormatUint(v, 10) }

// String names the channel for people: "pwm/3f20c000.pwm/0".
func (ch *Channel) String() string { return ch.name }

func (ch *Channel) errorf(format string, a ...any) error {
	return fmt.Errorf("pwmio: %s: %w", ch.name, fmt.Errorf(format, a...))
}

// ns is d's duty_cycle in nanoseconds of the channel's period.
func (ch *Channel) ns(d fence.Duty) uint64 {
	return (uint64(d)*ch.period + uint64(fence.FullDuty)/2) / uint64(fence.FullDuty)
}

// SetDuty writes d's share of the period to duty_cycle, then enables the
// channel (a duty of 0 included: see the package comment).
func (ch *Channel) SetDuty(d fence.Duty) error {
	if !d.Valid() {
		return ch.errorf("duty %d hundredths of a percent is above 100 %%", uint16(d))
	}
	if err := ch.fs.Write(ch.dir+"/duty_cycle", u(ch.ns(d))); err != nil {
		return ch.errorf("write duty_cycle: %w", err)
	}
	if err := ch.fs.Write(ch.dir+"/enable", "1"); err != nil {
		return ch.errorf("write enable: %w", err)
	}
	return nil
}

// Duty reads back the set-point the kernel holds: 0 for a disabled
// channel. A period other than the channel's (changed behind the
// gateway's back) is an error that says neither level.
func (ch *Channel) Duty() (fence.Duty, error) {
	en, err := ch.fs.Read(ch.dir + "/enable")
	if err != nil {
		return 0, ch.errorf("read enable: %w", err)
	}
	if en == "0" {
		return 0, nil
	}
	period, err := readUint(ch.fs, ch.dir+"/period")
	if err != nil {
		return 0, ch.errorf("read period: %w", err)
	}
	duty, err := readUint(ch.fs, ch.dir+"/duty_cycle")
	if err != nil {
		return 0, ch.errorf("read duty_cycle: %w", err)
	}
	if period != ch.period {
		return 0, ch.errorf("%w", periodError{period, ch.period})
	}
	return ch.duty(duty), nil
}

func (ch *Channel) duty(ns uint64) fence.Duty {
	return fence.Duty(min((ns*uint64(fence.FullDuty)+ch.period/2)/ch.period, uint64(fence.FullDuty)))
}

// Nearest is the set-point Duty reads back after SetDuty(d): d, to the
// nanosecond the period is counted in.
func (ch *Channel) Nearest(d fence.Duty) fence.Duty { return ch.duty(ch.ns(d)) }

// periodError is a channel found at another period than its own.
type periodError struct{ found, want uint64 }

func (e periodError) Error() string {
	return fmt.Sprintf("its period is %d ns, not the configured %d ns: changed behind the gateway's back", e.found, e.want)
}

func (periodError) NeitherLevel() bool { return true }

func readUint(fsys FS, name string) (uint64, error) {
	s, err := fsys.Read(name)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s holds %q, not a number", name, s)
	}
	return v, nil
}
