//go:build linux

package guest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// What the kernel says about GPIO lines, read without periph: the v2
// character-device uAPI (linux/gpio.h) and /sys/kernel/debug/gpio.

// chipInfo is struct gpiochip_info.
type chipInfo struct {
	Name  [32]byte
	Label [32]byte
	Lines uint32
}

// lineInfo is struct gpio_v2_line_info.
type lineInfo struct {
	Name     [32]byte
	Consumer [32]byte
	Offset   uint32
	NumAttrs uint32
	Flags    uint64
	Attrs    [10]struct {
		ID      uint32
		Padding uint32
		Value   uint64
	}
	Padding [4]uint32
}

// GPIO_V2_LINE_FLAG_*.
const (
	flagUsed      = 1 << 0
	flagActiveLow = 1 << 1
	flagInput     = 1 << 2
	flagOutput    = 1 << 3
	flagPullUp    = 1 << 8
	flagPullDown  = 1 << 9
)

func ioc(dir, nr, size uintptr) uintptr { return dir<<30 | size<<16 | 0xB4<<8 | nr }

var (
	getChipInfo = ioc(2, 0x01, unsafe.Sizeof(chipInfo{})) // GPIO_GET_CHIPINFO_IOCTL
	getLineInfo = ioc(3, 0x05, unsafe.Sizeof(lineInfo{})) // GPIO_V2_GET_LINEINFO_IOCTL
)

func cstr(b []byte) string { return string(bytes.TrimRight(b, "\x00")) }

func ioctl(f *os.File, req uintptr, arg unsafe.Pointer) error {
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), req, uintptr(arg)); e != 0 {
		return e
	}
	return nil
}

// kchip is a GPIO chip as the kernel reports it.
type kchip struct {
	Path  string
	Label string
	Lines uint32
}

// chips lists /dev/gpiochip*.
func chips(t *testing.T) []kchip {
	t.Helper()
	paths, _ := filepath.Glob("/dev/gpiochip*")
	var out []kchip
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatalf("open %s: %v", p, err)
		}
		var ci chipInfo
		err = ioctl(f, getChipInfo, unsafe.Pointer(&ci))
		f.Close()
		if err != nil {
			t.Fatalf("GPIO_GET_CHIPINFO %s: %v", p, err)
		}
		out = append(out, kchip{p, cstr(ci.Label[:]), ci.Lines})
	}
	return out
}

// bcmChip returns the BCM2837's GPIO chip (selected by label: its number
// is not fixed).
func bcmChip(t *testing.T) kchip {
	t.Helper()
	all := chips(t)
	for _, c := range all {
		if c.Label == "pinctrl-bcm2835" {
			return c
		}
	}
	t.Fatalf("no GPIO chip labelled pinctrl-bcm2835: %+v", all)
	return kchip{}
}

// info returns the kernel's GPIO_V2_GET_LINEINFO for a line offset.
func (c kchip) info(t *testing.T, offset uint32) lineInfo {
	t.Helper()
	f, err := os.Open(c.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	li := lineInfo{Offset: offset}
	if err := ioctl(f, getLineInfo, unsafe.Pointer(&li)); err != nil {
		t.Fatalf("GPIO_V2_GET_LINEINFO %s offset %d: %v", c.Path, offset, err)
	}
	return li
}

// offset returns the offset of the line with the given name.
func (c kchip) offset(t *testing.T, name string) (uint32, bool) {
	t.Helper()
	for i := uint32(0); i < c.Lines; i++ {
		if li := c.info(t, i); cstr(li.Name[:]) == name {
			return i, true
		}
	}
	return 0, false
}

func flagWords(f uint64) string {
	var w []string
	for _, x := range []struct {
		bit  uint64
		name string
	}{{flagUsed, "USED"}, {flagActiveLow, "ACTIVE_LOW"}, {flagInput, "INPUT"}, {flagOutput, "OUTPUT"},
		{flagPullUp, "PULL_UP"}, {flagPullDown, "PULL_DOWN"}} {
		if f&x.bit != 0 {
			w = append(w, x.name)
		}
	}
	return fmt.Sprintf("%#x[%s]", f, strings.Join(w, "|"))
}

// consumer is the label boards (like periph's gpioioctl) gives this process's requests.
func consumer() string { return fmt.Sprintf("%s@%d", filepath.Base(os.Args[0]), os.Getpid()) }

// debugfsLine returns what /sys/kernel/debug/gpio says about a requested
// line: "out hi", "out lo", "in hi", ...; "" if the line is not listed
// (not requested).
func debugfsLine(t *testing.T, name string) string {
	t.Helper()
	f, err := os.Open("/sys/kernel/debug/gpio")
	if err != nil {
		t.Fatalf("debugfs: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// " gpio-475 (GPIO17              |init@1              ) out hi"
		l := sc.Text()
		if !strings.Contains(l, "("+name+" ") && !strings.Contains(l, "("+name+"|") {
			continue
		}
		if i := strings.LastIndexByte(l, ')'); i >= 0 {
			fs := strings.Fields(l[i+1:])
			if len(fs) >= 2 {
				return fs[0] + " " + fs[1]
			}
		}
		t.Fatalf("debugfs: cannot parse %q", l)
	}
	return ""
}

// expectOutput checks, through the kernel, that the named line is held by
// this process as an output (no input, no pull) at the given level.
func expectOutput(t *testing.T, c kchip, name string, high bool) {
	t.Helper()
	want := "out lo"
	if high {
		want = "out hi"
	}
	off, ok := c.offset(t, name)
	if !ok {
		t.Fatalf("chip %s has no line %s", c.Label, name)
	}
	li := c.info(t, off)
	f := li.Flags
	if f&flagUsed == 0 || f&flagOutput == 0 || f&(flagInput|flagPullUp|flagPullDown) != 0 || cstr(li.Consumer[:]) != consumer() {
		t.Fatalf("%s: LINEINFO flags %s consumer %q; want USED|OUTPUT, no INPUT, no pull, consumer %q",
			name, flagWords(f), cstr(li.Consumer[:]), consumer())
	}
	if got := debugfsLine(t, name); got != want {
		t.Fatalf("%s: /sys/kernel/debug/gpio says %q, want %q", name, got, want)
	}
}
