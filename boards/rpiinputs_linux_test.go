package boards

import (
	"encoding/binary"
	"errors"
	"os"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fencegate/fencegate/boards/pinmap"
)

// The input request's line config: every line an input with both edges,
// the first line's pull in the request's flags, an attribute for each
// other pull and each debounce period (in whole microseconds, rounded up),
// each with the mask of its lines.
func TestInputConfig(t *testing.T) {
	const (
		in   = gpioV2FlagInput | gpioV2FlagEdgeRising | gpioV2FlagEdgeFalling // 0x34
		up   = in | gpioV2FlagBiasPullUp                                      // 0x134
		down = in | gpioV2FlagBiasPullDown                                    // 0x234
		none = in | gpioV2FlagBiasDisabled                                    // 0x434
	)
	type attr struct {
		id    uint32
		value uint64
		mask  uint64
	}
	for _, c := range []struct {
		name  string
		lines []InputLine
		flags uint64
		attrs []attr
	}{
		{"one input, pulled up", []InputLine{{Pull: PullUp}}, up, nil},
		{"one input, no pull", []InputLine{{Pull: PullNone}}, none, nil},
		{"pulls and debounce periods", []InputLine{
			{Pull: PullUp},
			{Pull: PullDown, Debounce: 10 * time.Millisecond},
			{Pull: PullNone},
			{Pull: PullUp, Debounce: 10 * time.Millisecond},
			{Pull: PullDown, Debounce: 1500 * time.Nanosecond},
		}, up, []attr{
			{gpioV2AttrFlags, down, 0b10010},
			{gpioV2AttrFlags, none, 0b00100},
			{gpioV2AttrDebounce, 10000, 0b01010},
			{gpioV2AttrDebounce, 2, 0b10000},
		}},
		{"line 63", append(make([]InputLine, 63), InputLine{Pull: PullUp, Debounce: time.Second}), none, []attr{
			{gpioV2AttrFlags, up, 1 << 63},
			{gpioV2AttrDebounce, 1000000, 1 << 63},
		}},
	} {
		for i := range c.lines {
			if c.lines[i].Pull == "" {
				c.lines[i].Pull = PullNone
			}
		}
		cfg, err := inputConfig(c.lines)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		var got []attr
		for _, a := range cfg.attrs[:cfg.numAttrs] {
			got = append(got, attr{a.attr.id, a.attr.value, a.mask})
		}
		if cfg.flags != c.flags || !reflect.DeepEqual(got, c.attrs) {
			t.Errorf("%s: flags %#x, attributes %+v; want %#x, %+v", c.name, cfg.flags, got, c.flags, c.attrs)
		}
		for i, a := range cfg.attrs[cfg.numAttrs:] {
			if a != (gpioV2LineConfigAttribute{}) {
				t.Errorf("%s: attribute %d beyond num_attrs is %+v, want zero", c.name, int(cfg.numAttrs)+i, a)
			}
		}
	}

	// Ten attributes fit in one request, eleven do not.
	lines := []InputLine{{Pull: PullUp}, {Pull: PullDown}, {Pull: PullNone}}
	for i := range 8 {
		lines = append(lines, InputLine{Pull: PullUp, Debounce: time.Duration(i+1) * time.Millisecond})
	}
	if _, err := inputConfig(lines); err != nil {
		t.Errorf("10 attributes: %v", err)
	}
	lines = append(lines, InputLine{Pull: PullUp, Debounce: time.Minute})
	if _, err := inputConfig(lines); err == nil || !strings.Contains(err.Error(), "need 11 line attributes") {
		t.Errorf("11 attributes: %v, want refused", err)
	}
	_, err := requestInputs("/nonexistent/gpiochip", make([]uint32, len(lines)), lines)
	if err == nil || !strings.Contains(err.Error(), "need 11 line attributes") {
		t.Errorf("requestInputs with 11 attributes: %v, want refused before the chip is opened", err)
	}
	for _, n := range []int{0, gpioV2LinesMax + 1} {
		if _, err := requestInputs("/nonexistent/gpiochip", make([]uint32, n), make([]InputLine, n)); err == nil || !strings.Contains(err.Error(), "the kernel takes 1 to 64") {
			t.Errorf("requestInputs(%d lines) = %v, want the count refused", n, err)
		}
	}
	if _, err := requestInputs("/nonexistent/gpiochip", []uint32{5}, []InputLine{{Pull: PullUp}}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("requestInputs on a missing chip = %v, want os.ErrNotExist", err)
	}
}

// lineEvent encodes struct gpio_v2_line_event as the kernel writes it.
func lineEvent(ts uint64, id, offset, seqno uint32) []byte {
	b := make([]byte, gpioV2LineEventSize)
	binary.NativeEndian.PutUint64(b[0:], ts)
	binary.NativeEndian.PutUint32(b[8:], id)
	binary.NativeEndian.PutUint32(b[12:], offset)
	binary.NativeEndian.PutUint32(b[16:], seqno)
	binary.NativeEndian.PutUint32(b[20:], seqno)
	return b
}

func TestDecodeEvents(t *testing.T) {
	b := append(lineEvent(123456789, gpioV2EventRisingEdge, 17, 1), lineEvent(987654321, gpioV2EventFallingEdge, 27, 2)...)
	got, err := decodeEvents(b)
	want := []gpioV2LineEvent{
		{timestampNs: 123456789, id: gpioV2EventRisingEdge, offset: 17, seqno: 1, lineSeqno: 1},
		{timestampNs: 987654321, id: gpioV2EventFallingEdge, offset: 27, seqno: 2, lineSeqno: 2},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("decodeEvents = %+v, %v; want %+v", got, err, want)
	}
	if _, err := decodeEvents(b[:50]); err == nil || !strings.Contains(err.Error(), "not a whole number of 48-byte events") {
		t.Errorf("decodeEvents(50 bytes) = %v, want refused", err)
	}

	now := time.Now()
	for _, c := range []struct {
		ts   uint64
		mono int64
		want time.Time
	}{
		{1000, 5000, now.Add(-4000)}, {5000, 5000, now}, {6000, 5000, now},
	} {
		if got := eventTimeAt(c.ts, c.mono, now); !got.Equal(c.want) {
			t.Errorf("eventTimeAt(%d, %d) = %v, want %v", c.ts, c.mono, got, c.want)
		}
	}
}

// pipeBoard is a RaspberryPi whose one input request is a pipe (this
// host has no GPIO chip), GPIO17 at offset 17 (input 3, both edges) and
// GPIO27 at 27 (input 5, falling edges), its goroutine started with
// GPIO27 high; w writes its events.
func pipeBoard(t *testing.T, onInput func(InputEvent)) (p *RaspberryPi, w *os.File) {
	t.Helper()
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil { // blocking, as the kernel's request
		t.Fatal(err)
	}
	r, err := pollable(fds[0], "pipe")
	if err != nil {
		t.Fatal(err)
	}
	w = os.NewFile(uintptr(fds[1]), "pipe")
	t.Cleanup(func() { w.Close() })
	g := &chipLines{names: []string{"GPIO17", "GPIO27"}, offsets: []uint32{17, 27}, inputs: []inputLine{
		{InputLine: InputLine{Pin: "PIN11", Edge: EdgeBoth}, name: "GPIO17", index: 3},
		{InputLine: InputLine{Pin: "GPIO27", Edge: EdgeFalling}, name: "GPIO27", index: 5},
	}}
	p = &RaspberryPi{Model: pinmap.Model{Name: "Raspberry Pi 3 Model B"}, Chip: "pinctrl-bcm2835",
		ins:     []*heldRequest{{chip: "pinctrl-bcm2835", req: &lineRequest{f: r}}},
		inIndex: map[string]lineRef{"GPIO17": {req: 0, bit: 1}, "GPIO27": {req: 0, bit: 2}},
		onInput: onInput}
	p.watchers.Add(1)
	go p.watch(p.ins[0].req, newInputWatch(g, 0b10))
	return p, w
}

// The input goroutine: the events it reads become changes, in order, only
// for the edges each input reports and only where the level changes, at
// the kernel's time; Close ends its read, which waits in Go's poller, and
// no change follows.
func TestRaspberryPiInputWatch(t *testing.T) {
	got := make(chan InputEvent, 10)
	p, w := pipeBoard(t, func(ev InputEvent) { got <- ev })

	t0 := time.Now()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	mono := uint64(ts.Nano()) - uint64(time.Second) // the kernel saw them a second ago
	var b []byte
	for i, e := range []struct {
		id     uint32
		offset uint32
	}{
		{gpioV2EventRisingEdge, 17},  // GPIO17 high
		{gpioV2EventRisingEdge, 27},  // GPIO27 already high: no change
		{gpioV2EventFallingEdge, 27}, // GPIO27 low
		{gpioV2EventRisingEdge, 27},  // GPIO27 high, not reported (falling only)
		{gpioV2EventRisingEdge, 4},   // not an input of the request
		{gpioV2EventRisingEdge, 17},  // already high
		{gpioV2EventFallingEdge, 17}, // GPIO17 low
		{gpioV2EventFallingEdge, 27}, // GPIO27 low
	} {
		b = append(b, lineEvent(mono, e.id, e.offset, uint32(i+1))...)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	want := []InputEvent{{Input: 3, High: true}, {Input: 5, High: false}, {Input: 3, High: false}, {Input: 5, High: false}}
	for i, wnt := range want {
		select {
		case ev := <-got:
			at := ev.At
			ev.At = time.Time{}
			if ev != wnt {
				t.Errorf("change %d: %+v, want %+v", i, ev, wnt)
			}
			if lo, hi := t0.Add(-time.Second), t1.Add(-time.Second/2); at.Before(lo) || at.After(hi) {
				t.Errorf("change %d at %v, want a second before the timestamp was taken (%v to %v)", i, at, lo, hi)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("change %d (%+v): none within 5 s", i, wnt)
		}
	}

	closed := make(chan error)
	go func() { closed <- p.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the goroutine's read of the request within 5 s")
	}
	select {
	case ev := <-got:
		t.Errorf("a change after Close: %+v", ev)
	default:
	}
	in, err := p.Input("PIN11")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Level(); !errors.Is(err, errClosed) || !strings.Contains(err.Error(), "boards: read input GPIO17") {
		t.Errorf("Level after Close = %v, want the board is closed", err)
	}
	if _, err := p.Input("GPIO22"); err == nil || !strings.Contains(err.Error(), "GPIO22 (header pin 15) was not opened as an input") {
		t.Errorf("Input(GPIO22) = %v", err)
	}
}

// Close waits for a call of OnInput that is under way, and none follows:
// two changes read at once, Close while the first is reported.
func TestRaspberryPiInputCloseStopsReports(t *testing.T) {
	entered := make(chan InputEvent, 2)
	release := make(chan struct{})
	p, w := pipeBoard(t, func(ev InputEvent) {
		entered <- ev
		<-release
	})
	b := append(lineEvent(1, gpioV2EventRisingEdge, 17, 1), lineEvent(2, gpioV2EventFallingEdge, 27, 2)...)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if first := <-entered; first.Input != 3 {
		t.Fatalf("first change %+v, want input 3", first)
	}
	in, _ := p.Input("GPIO17")
	closeWhileReporting(t, p, in, entered, release)
}
