//go:build linux

package guest

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/boards/pinmap"
)

// More of linux/gpio.h than kernel_test.go needs.
const (
	flagEdgeRising   = 1 << 4
	flagEdgeFalling  = 1 << 5
	flagBiasDisabled = 1 << 10
	attrDebounce     = 3 // GPIO_V2_LINE_ATTR_ID_DEBOUNCE
)

// debounceOf returns the debounce period (µs) GPIO_V2_GET_LINEINFO
// reports for a line, 0 if none.
func debounceOf(li lineInfo) uint64 {
	for _, a := range li.Attrs[:li.NumAttrs] {
		if a.ID == attrDebounce {
			return a.Value
		}
	}
	return 0
}

// leaveAt leaves a line at a level in the emulated GPIO block: requested
// as an output at that level, and released. QEMU's bcm2835_gpio keeps the
// level register (GPLEV, set by GPSET and GPCLR) when the line becomes an
// input, and nothing else moves it: it has no pull resistors and no
// inputs of its own.
func leaveAt(t *testing.T, m pinmap.Model, pin string, high bool) {
	t.Helper()
	pi, err := boards.OpenRaspberryPi(m, []boards.Line{{Pin: pin, InitialHigh: high}})
	if err != nil {
		t.Fatal(err)
	}
	if err := pi.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestInputs: inputs opened through boards.Open are
// what the kernel holds: USED, INPUT with both edges, the requested bias
// (none disables it) and debounce period, our consumer, next to an output
// of the same chip. Level reads the level the GPIO block has, the one a
// previous output left (both ways). Close ends the input goroutine's read
// of the request and releases the lines. An input that is also an output
// is refused before any line is requested.
//
// The emulated block detects no edges (QEMU does not implement GPEDS,
// GPREN, GPFEN, and wires no GPIO interrupt), so no change is ever
// reported here, and the kernel's software debounce, which runs on edge
// interrupts, cannot be seen to work: only that it is configured.
func TestInputs(t *testing.T) {
	guestOnly(t)
	c := bcmChip(t)
	m, err := pinmap.ResolveModel(pinmap.RaspberryPi)
	if err != nil {
		t.Fatal(err)
	}
	ins := []boards.InputLine{
		{Pin: "GPIO20", Pull: boards.PullUp, Debounce: 4500 * time.Microsecond},
		{Pin: "PIN40", Pull: boards.PullDown},                // GPIO21
		{Pin: "pinctrl-bcm2835:16", Edge: boards.EdgeRising}, // no pull
	}
	lines := []struct {
		name     string
		bias     uint64
		debounce uint64
	}{{"GPIO20", flagPullUp, 4500}, {"GPIO21", flagPullDown, 0}, {"GPIO16", flagBiasDisabled, 0}}
	r, err := boards.Check(boards.Options{Board: pinmap.RaspberryPi, Lines: []boards.Line{{Pin: "GPIO26"}}, Inputs: ins})
	if err != nil || !strings.Contains(r.Board, "1 lines and 3 inputs") {
		t.Errorf("Check = %+v, %v; want 1 line and 3 inputs", r, err)
	}

	// Each level both ways, against the pulls: GPIO20 (pulled up) low,
	// GPIO21 (pulled down) high.
	for round, levels := range [][]bool{{true, false, true}, {false, true, false}} {
		for i, l := range lines {
			leaveAt(t, m, l.name, levels[i])
		}
		var mu sync.Mutex
		var events []boards.InputEvent
		b, err := boards.Open(boards.Options{Board: pinmap.RaspberryPi, Lines: []boards.Line{{Pin: "GPIO26"}}, Inputs: ins,
			OnInput: func(ev boards.InputEvent) { mu.Lock(); events = append(events, ev); mu.Unlock() }})
		if err != nil {
			t.Fatal(err)
		}
		expectOutput(t, c, "GPIO26", false)
		for i, l := range lines {
			off, _ := c.offset(t, l.name)
			li := c.info(t, off)
			want := uint64(flagUsed | flagInput | flagEdgeRising | flagEdgeFalling | l.bias)
			if li.Flags != want || debounceOf(li) != l.debounce || cstr(li.Consumer[:]) != consumer() {
				t.Errorf("%s: LINEINFO flags %s, debounce %d µs, consumer %q; want %s, %d µs, %q",
					l.name, flagWords(li.Flags), debounceOf(li), cstr(li.Consumer[:]), flagWords(want), l.debounce, consumer())
			}
			wantFS := map[bool]string{true: "in hi", false: "in lo"}[levels[i]]
			if got := debugfsLine(t, l.name); got != wantFS {
				t.Errorf("%s: debugfs %q, want %q", l.name, got, wantFS)
			}
			in, err := b.Input(ins[i].Pin)
			if err != nil {
				t.Fatal(err)
			}
			if high, err := in.Level(); err != nil || high != levels[i] {
				t.Errorf("round %d: %s Level = %v, %v; want %v, the level the output left", round, ins[i].Pin, high, err, levels[i])
			}
			if round == 0 {
				t.Logf("%s: flags %s, debounce %d µs, debugfs %q", l.name, flagWords(li.Flags), debounceOf(li), debugfsLine(t, l.name))
			}
		}
		closed := make(chan error, 1)
		go func() { closed <- b.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Close did not end the input goroutine's read of the line request within 10 s")
		}
		for _, name := range []string{"GPIO20", "GPIO21", "GPIO16", "GPIO26"} {
			off, _ := c.offset(t, name)
			if li := c.info(t, off); li.Flags&flagUsed != 0 {
				t.Errorf("%s after Close: flags %s, want not USED", name, flagWords(li.Flags))
			}
		}
		mu.Lock()
		t.Logf("round %d: levels %v read; changes reported: %d (the emulated block detects no edges)", round, levels, len(events))
		mu.Unlock()
	}

	for _, bad := range []struct {
		lines []boards.Line
		ins   []boards.InputLine
		frag  string
	}{
		{[]boards.Line{{Pin: "GPIO20"}}, []boards.InputLine{{Pin: "PIN38"}}, "input PIN38 and output GPIO20 are the same line, offset 20 of gpiochip0"},
		{[]boards.Line{{Pin: "pinctrl-bcm2835:20"}}, []boards.InputLine{{Pin: "GPIO21"}, {Pin: "gpiochip0:GPIO20"}}, "input gpiochip0:GPIO20 and output pinctrl-bcm2835:20 are the same line"},
		{nil, []boards.InputLine{{Pin: "GPIO20"}, {Pin: "BCM20"}}, "are the same line (offset 20 of gpiochip0)"},
		{nil, []boards.InputLine{{Pin: "gpiochip0:54"}}, "has no line 54"},
	} {
		o := boards.Options{Board: pinmap.RaspberryPi, Lines: bad.lines, Inputs: bad.ins}
		if b, err := boards.Open(o); err == nil || !strings.Contains(err.Error(), bad.frag) {
			t.Errorf("Open(%+v) = %v, want an error saying %q", o, err, bad.frag)
			if err == nil {
				b.Close()
			}
		}
		if _, err := boards.Check(o); err == nil || !strings.Contains(err.Error(), bad.frag) {
			t.Errorf("Check(%+v) = %v, want an error saying %q", o, err, bad.frag)
		}
		for _, name := range []string{"GPIO20", "GPIO21"} {
			off, _ := c.offset(t, name)
			if li := c.info(t, off); li.Flags&flagUsed != 0 {
				t.Errorf("%s after a refused Open: flags %s, want not USED", name, flagWords(li.Flags))
			}
		}
	}
}
