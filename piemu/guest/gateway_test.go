//go:build linux

package guest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/httpapi"
)

// TestGatewayEndToEnd runs the whole gateway on the emulated board: an
// embedded broker, service.Run with board raspberry-pi, and fenced commands
// from the client package. After every command the kernel must show each
// line exactly where the applied commands put it, still held as an output
// by the gateway, and the gateway's own read-back (GET /api/actuators, i.e.
// GET_VALUES) must agree without reconfiguring the line. relay2 is named
// by its chip and line offset (chip: pinctrl-bcm2835, line: 27), relay1 by
// its header pin.
func TestGatewayEndToEnd(t *testing.T) {
	guestOnly(t)
	c := bcmChip(t)
	broker := guestBroker(t)

	dir := t.TempDir() // on the guest's /tmp tmpfs
	cfg, err := config.Parse(fmt.Appendf(nil, `id: pi-emu
mqtt:
  broker: %s
store: %s
board: raspberry-pi
http: "127.0.0.1:0"
actuators:
  - name: relay1
    pin: PIN11
    active_low: false
    boot: "off"
  - name: relay2          # the same kind of line, named by chip and line
    chip: pinctrl-bcm2835
    line: 27
    active_low: true
    boot: "off"
  - name: strike          # a door strike: a pulse output
    pin: GPIO13
    kind: pulse
    max_pulse: 2s
`, broker, filepath.Join(dir, "fence.db")))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	info, stop := runGateway(t, cfg, true)
	t.Logf("gateway ready in %v, API on %s", time.Since(start).Round(time.Millisecond), info.HTTP)
	ctx := context.Background()

	lineOf := map[string]string{"relay1": "GPIO17", "relay2": "GPIO27", "strike": "GPIO13"}
	// level holds each line's expected raw level; boot: off reconciles
	// relay1 to low and the active-low relay2 to high.
	level := map[string]bool{"GPIO17": false, "GPIO27": true, "GPIO13": false}
	check := func(when string) {
		t.Helper()
		for _, line := range []string{"GPIO17", "GPIO27"} {
			expectOutput(t, c, line, level[line])
		}
		// The gateway's read-back: Statuses → Pin.Level → GET_VALUES.
		for range 3 {
			for _, a := range apiActuators(t, info.HTTP) {
				want := "low"
				if level[lineOf[a.Name]] {
					want = "high"
				}
				if a.Level != want || a.LevelError != "" {
					t.Fatalf("%s: API says %s level %q (error %q), want %q", when, a.Name, a.Level, a.LevelError, want)
				}
			}
		}
		for _, line := range []string{"GPIO17", "GPIO27"} {
			expectOutput(t, c, line, level[line]) // the reads moved nothing
		}
		t.Logf("%-44s GPIO17 %-6s GPIO27 %s", when+":", debugfsLine(t, "GPIO17"), debugfsLine(t, "GPIO27"))
	}
	check("after start (boot off)")

	cl, err := client.Dial(ctx, client.Options{Broker: broker, GatewayID: "pi-emu"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	on, off, fenceOnly := fence.StateOn, fence.StateOff, fence.StateNone
	steps := []struct {
		what  string
		act   string
		id    string
		tok   uint64
		seq   uint64
		state fence.State
		want  fence.Outcome
		line  *bool // the new level of the actuator's line, if applied
	}{
		{"relay1 on 10/1", "relay1", "r1-on", 10, 1, on, fence.Applied, ptr(true)},
		{"relay1 on 10/1 redelivered", "relay1", "r1-on", 10, 1, on, fence.Duplicate, nil},
		{"relay1 off 9/99 (older token)", "relay1", "r1-old", 9, 99, off, fence.Stale, nil},
		{"relay1 fence-only 11/0", "relay1", "r1-fence", 11, 0, fenceOnly, fence.Applied, nil},
		{"relay1 off 10/2 (below the fence)", "relay1", "r1-below", 10, 2, off, fence.Stale, nil},
		{"relay1 off 11/1", "relay1", "r1-off", 11, 1, off, fence.Applied, ptr(false)},
		{"relay1 on 10/1 redelivered late", "relay1", "r1-on", 10, 1, on, fence.Duplicate, nil},
		{"relay2 on 5/1 (active low)", "relay2", "r2-on", 5, 1, on, fence.Applied, ptr(false)},
		{"relay2 off 5/2", "relay2", "r2-off", 5, 2, off, fence.Applied, ptr(true)},
		{"relay2 on 4/9 (older token)", "relay2", "r2-old", 4, 9, on, fence.Stale, nil},
	}
	for _, s := range steps {
		sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
		r, err := cl.Send(sctx, fence.Command{ID: s.id, Holder: "piemu", Actuator: s.act,
			Fence: fence.Fence{Token: s.tok, Seq: s.seq}, State: s.state})
		scancel()
		var stale *client.StaleError
		var changed *client.OutputError
		switch {
		case r.Outcome != s.want:
			t.Fatalf("%s: outcome %q (%v), want %q", s.what, r.Outcome, err, s.want)
		case s.want == fence.Stale && !errors.As(err, &stale):
			t.Fatalf("%s: error %v, want a *client.StaleError", s.what, err)
		case s.want == fence.Duplicate && strings.HasSuffix(s.what, "late"):
			// relay1 was switched off since: the answer says so, and Send
			// does not report success.
			if r.State != off || !errors.As(err, &changed) {
				t.Fatalf("%s: state %q, error %v; want off now and a *client.OutputError", s.what, r.State, err)
			}
		case s.want != fence.Stale && err != nil:
			t.Fatalf("%s: error %v, want nil", s.what, err)
		}
		if s.line != nil {
			level[lineOf[s.act]] = *s.line
		}
		check(fmt.Sprintf("%s → %s", s.what, r.Outcome))
	}

	// A pulse through the kernel's line: high from the answer on for its
	// width, then low; its redelivery moves nothing.
	pulse := fence.Command{ID: "strike-1", Holder: "piemu", Actuator: "strike", Fence: fence.Fence{Token: 3, Seq: 1}, State: on, Pulse: 400 * time.Millisecond}
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	r, err := cl.Send(sctx, pulse)
	scancel()
	answered := time.Now()
	if err != nil || r.Outcome != fence.Applied || r.Pulse == nil || r.Pulse.Status != fence.PulseRunning {
		t.Fatalf("pulse: %+v, %v; want applied, running", r, err)
	}
	var highFor time.Duration
	var samples []string
	for time.Since(answered) < 1200*time.Millisecond {
		lv := debugfsLine(t, "GPIO13")
		samples = append(samples, lv)
		if lv == "out hi" {
			highFor = time.Since(answered)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if samples[0] != "out hi" || samples[len(samples)-1] != "out lo" || highFor < 100*time.Millisecond || highFor > 900*time.Millisecond {
		t.Errorf("GPIO13 during the 400ms pulse, every 20 ms: %v; high until %v after the answer, want up to 400ms (the pulse began before its answer), then low", samples, highFor)
	}
	t.Logf("pulse of 400ms: GPIO13 high until %v after the answer (%d samples), then %s", highFor.Round(time.Millisecond), len(samples), samples[len(samples)-1])
	sctx, scancel = context.WithTimeout(ctx, 30*time.Second)
	r, _ = cl.Send(sctx, pulse)
	scancel()
	if r.Outcome != fence.Duplicate || r.Pulse == nil || r.Pulse.Status != fence.PulseDone {
		t.Errorf("the pulse redelivered: %+v, want duplicate, done", r)
	}
	for i := 0; i < 10; i++ {
		if lv := debugfsLine(t, "GPIO13"); lv != "out lo" {
			t.Fatalf("GPIO13 after the redelivered pulse: %s, want out lo", lv)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Stopping the gateway releases the lines.
	stop()
	for _, line := range []string{"GPIO17", "GPIO27"} {
		off, _ := c.offset(t, line)
		if li := c.info(t, off); li.Flags&flagUsed != 0 {
			t.Errorf("%s after the gateway stopped: flags %s, want released", line, flagWords(li.Flags))
		}
	}
}

func ptr[T any](v T) *T { return &v }

func apiActuators(t *testing.T, addr string) []httpapi.Actuator {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/api/actuators")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/actuators: %s", resp.Status)
	}
	var out []httpapi.Actuator
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 {
		t.Fatalf("GET /api/actuators: %d actuators, want 3", len(out))
	}
	return out
}
