//go:build linux

package guest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// What the kernel did to GPIO lines, in order: gpiolib's tracepoints
// gpio_direction and gpio_value (include/trace/events/gpio.h) record every
// direction change and every level gpiolib writes, with the value, as it
// happens. Sampling /sys/kernel/debug/gpio from user space cannot see a
// pulse of a few microseconds; the trace records it.

// tracefs is where initGuest mounts the kernel's trace file system.
const tracefs = "/sys/kernel/tracing"

// gpioEvent is one gpio tracepoint hit.
type gpioEvent struct {
	at   time.Duration // the trace clock (since boot)
	gpio int           // the line's global number (debugfs "gpio-N")
	what string        // "out (0)", "in (0)" (gpio_direction) or "set 1", "get 0" (gpio_value)
}

func (e gpioEvent) String() string { return fmt.Sprintf("%d %s", e.gpio, e.what) }

// gpioTrace records the gpio tracepoints between start and stop.
type gpioTrace struct{ t *testing.T }

// startGPIOTrace clears the trace buffer and enables the gpio events.
func startGPIOTrace(t *testing.T) *gpioTrace {
	t.Helper()
	if _, err := os.Stat(filepath.Join(tracefs, "events/gpio/gpio_value")); err != nil {
		t.Fatalf("the kernel's gpio tracepoints are not available (%v); they need CONFIG_TRACING and tracefs on %s", err, tracefs)
	}
	writeTracefs(t, "tracing_on", "0")
	writeTracefs(t, "trace", "") // opened with O_TRUNC: clears the buffer
	writeTracefs(t, "events/gpio/enable", "1")
	writeTracefs(t, "tracing_on", "1")
	return &gpioTrace{t}
}

// stop disables the events and returns what was recorded, oldest first.
func (g *gpioTrace) stop() []gpioEvent {
	t := g.t
	t.Helper()
	writeTracefs(t, "tracing_on", "0")
	writeTracefs(t, "events/gpio/enable", "0")
	f, err := os.Open(filepath.Join(tracefs, "trace"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []gpioEvent
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "   guest.test-1   [000] .....  12.345678: gpio_value: 480 set 1"
		l := sc.Text()
		if strings.HasPrefix(l, "#") {
			if strings.Contains(l, "entries-in-buffer/entries-written") {
				// "# entries-in-buffer/entries-written: 12/12   #P:4"
				if fs := strings.Fields(strings.TrimPrefix(l, "# entries-in-buffer/entries-written:")); len(fs) > 0 {
					if n := strings.Split(fs[0], "/"); len(n) == 2 && n[0] != n[1] {
						t.Fatalf("trace: the buffer lost events (%s)", fs[0])
					}
				}
			}
			continue
		}
		var head, rest string
		for _, ev := range []string{"gpio_value: ", "gpio_direction: "} {
			if i := strings.Index(l, ev); i >= 0 {
				head, rest = l[:i], l[i+len(ev):]
			}
		}
		if rest == "" {
			continue
		}
		num, what, ok := strings.Cut(rest, " ")
		n, err := strconv.Atoi(num)
		fs := strings.Fields(head)
		var secs float64
		if err == nil && len(fs) > 0 {
			secs, err = strconv.ParseFloat(strings.TrimSuffix(fs[len(fs)-1], ":"), 64)
		}
		if !ok || err != nil || len(fs) == 0 {
			t.Fatalf("trace: cannot parse %q", l)
		}
		out = append(out, gpioEvent{time.Duration(secs * float64(time.Second)), n, strings.TrimSpace(what)})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func writeTracefs(t *testing.T, file, value string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(tracefs, file), []byte(value), 0o644); err != nil {
		t.Fatalf("tracefs %s: %v", file, err)
	}
}

// gpioNumber returns the global number of the named line, as
// /sys/kernel/debug/gpio shows it (" gpio-480 (GPIO22 ...").
func gpioNumber(t *testing.T, name string) int {
	t.Helper()
	b, err := os.ReadFile("/sys/kernel/debug/gpio")
	if err != nil {
		t.Fatalf("debugfs: %v", err)
	}
	for l := range strings.Lines(string(b)) {
		num, rest, ok := strings.Cut(strings.TrimSpace(l), " ")
		if !ok || !strings.HasPrefix(num, "gpio-") {
			continue
		}
		rest = strings.TrimPrefix(strings.TrimSpace(rest), "(")
		if rest == name || strings.HasPrefix(rest, name+" ") || strings.HasPrefix(rest, name+"|") {
			n, err := strconv.Atoi(strings.TrimPrefix(num, "gpio-"))
			if err != nil {
				t.Fatalf("debugfs: cannot parse %q", l)
			}
			return n
		}
	}
	t.Fatalf("debugfs: no line %s in /sys/kernel/debug/gpio", name)
	return 0
}

// lowFor returns how long line n was low in events, from its first write of
// 0 to the next write of 1 (0 if never).
func lowFor(events []gpioEvent, n int) time.Duration {
	from := time.Duration(-1)
	for _, e := range events {
		switch {
		case e.gpio != n:
		case e.what == "set 0" && from < 0:
			from = e.at
		case e.what == "set 1" && from >= 0:
			return e.at - from
		}
	}
	return 0
}

// setsOf returns the levels written to line n ("set" events), in order.
func setsOf(events []gpioEvent, n int) []string {
	var out []string
	for _, e := range events {
		if e.gpio == n && strings.HasPrefix(e.what, "set ") {
			out = append(out, strings.TrimPrefix(e.what, "set "))
		}
	}
	return out
}
