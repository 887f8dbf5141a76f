// Package pwmfake is the kernel's PWM sysfs interface in memory, with
// the kernel's rules (drivers/pwm/core.c and sysfs.c of Linux 6.12), for
// tests of package pwmio where no PWM controller is: a channel's files
// exist only once it is exported; export of an exported channel is
// EBUSY; an enabled state needs a period and a duty within it, or the
// write is EINVAL and changes nothing; a disabled state takes anything;
// a period below the controller's minimum is EINVAL. With Strict, a
// disabled state is held to the same rule, as Linux 6.1 did. The emulated Pi's
// test (piemu) holds pwmio to the real kernel.
package pwmfake

import (
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Chip is one PWM controller.
type Chip struct {
	Name   string // "pwmchip0"
	Device string // its device path: "/sys/devices/platform/soc/3f20c000.pwm"
	NPWM   int
	// MinPeriod is the shortest period the controller takes, in ns (the
	// BCM2835's is two cycles of its clock).
	MinPeriod uint64
}

type channel struct {
	period, duty uint64
	enabled      bool
}

// FS is a set of PWM controllers, as pwmio.FS.
type FS struct {
	mu       sync.Mutex
	chips    map[string]Chip
	exported map[string]*channel // "pwmchip0/pwm1"
	writes   []string
	// Busy names channels ("pwmchip0/pwm1") a kernel driver holds.
	Busy map[string]bool
	// Strict applies the older kernels' rule (Linux 6.1, Debian
	// bookworm's) to disabled states too: a period, and a duty within it.
	Strict bool
}

// New returns an FS with chips.
func New(chips ...Chip) *FS {
	f := &FS{chips: map[string]Chip{}, exported: map[string]*channel{}, Busy: map[string]bool{}}
	for _, c := range chips {
		f.chips[c.Name] = c
	}
	return f
}

// Chips implements pwmio.FS.
func (f *FS) Chips() (map[string]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]string{}
	for name, c := range f.chips {
		out[name] = c.Device + "/pwm/" + name
	}
	return out, nil
}

func pathErr(op, name string, err error) error { return &fs.PathError{Op: op, Path: name, Err: err} }

// split parses "pwmchip0/pwm1/duty_cycle" or "pwmchip0/export".
func (f *FS) split(name string) (chip Chip, ch string, file string, err error) {
	parts := strings.Split(name, "/")
	c, ok := f.chips[parts[0]]
	if !ok || len(parts) < 2 || len(parts) > 3 {
		return chip, "", "", pathErr("open", name, fs.ErrNotExist)
	}
	if len(parts) == 2 {
		return c, "", parts[1], nil
	}
	key := parts[0] + "/" + parts[1]
	if f.exported[key] == nil {
		return c, "", "", pathErr("open", name, fs.ErrNotExist)
	}
	return c, key, parts[2], nil
}

// Read implements pwmio.FS.
func (f *FS) Read(name string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, key, file, err := f.split(name)
	if err != nil {
		return "", err
	}
	if key == "" {
		if file == "npwm" {
			return strconv.Itoa(c.NPWM), nil
		}
		return "", pathErr("open", name, fs.ErrNotExist)
	}
	s := f.exported[key]
	switch file {
	case "period":
		return strconv.FormatUint(s.period, 10), nil
	case "duty_cycle":
		return strconv.FormatUint(s.duty, 10), nil
	case "enable":
		if s.enabled {
			return "1", nil
		}
		return "0", nil
	case "polarity":
		return "normal", nil
	}
	return "", pathErr("open", name, fs.ErrNotExist)
}

// Write implements pwmio.FS.
func (f *FS) Write(name, value string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, name+"="+value)
	c, key, file, err := f.split(name)
	if err != nil {
		return err
	}
	v, perr := strconv.ParseUint(strings.TrimSpace(value), 10, 64)
	if perr != nil {
		return pathErr("write", name, syscall.EINVAL)
	}
	if key == "" {
		ch := fmt.Sprintf("%s/pwm%d", c.Name, v)
		switch {
		case file != "export":
			return pathErr("write", name, fs.ErrPermission)
		case v >= uint64(c.NPWM):
			return pathErr("write", name, syscall.ENODEV)
		case f.exported[ch] != nil || f.Busy[ch]:
			return pathErr("write", name, syscall.EBUSY)
		}
		f.exported[ch] = &channel{}
		return nil
	}
	s := f.exported[key]
	next := *s
	switch file {
	case "period":
		next.period = v
	case "duty_cycle":
		next.duty = v
	case "enable":
		if v > 1 {
			return pathErr("write", name, syscall.EINVAL)
		}
		next.enabled = v == 1
	default:
		return pathErr("write", name, fs.ErrPermission)
	}
	if (next.enabled || f.Strict) && (next.period == 0 || next.duty > next.period || next.period < c.MinPeriod) {
		return pathErr("write", name, syscall.EINVAL)
	}
	*s = next
	return nil
}

// Channel returns a channel's state: its period and duty in ns, and
// whether it is enabled; ok is false if it is not exported.
func (f *FS) Channel(key string) (period, duty uint64, enabled, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.exported[key]
	if s == nil {
		return 0, 0, false, false
	}
	return s.period, s.duty, s.enabled, true
}

// Writes returns every write so far, "pwmchip0/pwm0/period=1000000".
func (f *FS) Writes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.writes...)
}
