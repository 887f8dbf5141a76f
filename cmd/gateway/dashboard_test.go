package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// openBrowser opens url in a headless Chromium (exe) and returns its
// context, which ends with the test or after 90 s.
func openBrowser(t *testing.T, exe, url string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 1000))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	bctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	// The first call starts the browser and must have no deadline.
	if err := chromedp.Do(bctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestGatewayDashboardInBrowser opens the dashboard that `gateway run`
// serves itself, outside the simulator: it shows the gateway's id and
// version, that it takes commands, no simulator parts, an actuator's
// interlock next to its scope, and a command refused by the interlock as
// "rejected: interlock".
func TestGatewayDashboardInBrowser(t *testing.T) {
	exe := chromium(t)
	broker := testenv.EmbeddedBroker(t)
	id := fmt.Sprint("dash-", time.Now().UnixNano())
	httpAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	cfg := writeConfigWith(t, t.TempDir(), id, broker, httpAddr, `actuators:
  - {name: vent-open, pin: GPIO5, scope: vent}
  - {name: vent-close, pin: GPIO6, scope: vent}
interlocks:
  - {name: vent-motor, actuators: [vent-open, vent-close]}
`)
	p := startProc(t, nil, "run", "--config", cfg, "--init", "--log-level", "warn")
	ctl := testctl.Connect(t, broker, wire.Topics{GatewayID: id})
	ctl.WaitStatus(t, "online")
	waitAPI(t, httpAddr, p)
	ctx := openBrowser(t, exe, "http://"+httpAddr)

	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(`#broker-state.ok[data-taking="true"]`),
		chromedp.WaitVisible(`#interlock-vent-open`),
	); err != nil {
		t.Fatalf("the gateway's dashboard did not load: %v", err)
	}
	for sel, want := range map[string]string{"#gateway-id": id, "#interlock-vent-open": "interlock vent-motor", "#interlock-vent-close": "interlock vent-motor"} {
		if got, err := chromedp.Run(ctx, chromedp.Text(sel)); err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", sel, got, err, want)
		}
	}
	// The history shows why the boot rule set each state.
	boot := `#feed li[data-outcome="boot"][data-actuator="vent-open"] .why`
	if err := chromedp.Do(ctx, chromedp.WaitVisible(boot)); err != nil {
		t.Fatalf("no boot entry saying why in the feed: %v", err)
	}
	if why, err := chromedp.Run(ctx, chromedp.Text(boot)); err != nil || why != "never commanded: off" {
		t.Errorf("the boot entry's why in the feed = %q, %v; want the boot rule's", why, err)
	}
	if v, err := chromedp.Run(ctx, chromedp.Text(`#version`)); err != nil || v == "" {
		t.Errorf("version on the dashboard = %q, %v; want the gateway's", v, err)
	}
	if simShown, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!document.querySelector("#sim-gateway").hidden || !document.querySelector("#sim-badge").hidden`)); err != nil || simShown {
		t.Errorf("the gateway's own dashboard shows simulator parts (%v)", err)
	}

	if res := ctl.Send(t, fence.Command{ID: id + "-1", Actuator: "vent-open", Holder: "browser-test", Fence: fence.Fence{Token: 5}, State: fence.StateOn}); res.Outcome != fence.Applied {
		t.Fatalf("vent-open on = %v (%s)", res.Outcome, res.Error)
	}
	if res := ctl.Send(t, fence.Command{ID: id + "-2", Actuator: "vent-close", Holder: "browser-test", Fence: fence.Fence{Token: 6}, State: fence.StateOn}); res.Outcome != fence.Rejected || res.Reason != fence.ReasonInterlock {
		t.Fatalf("vent-close on while vent-open is on = %v %q (%s), want rejected by the interlock", res.Outcome, res.Reason, res.Error)
	}
	sel := `#feed li[data-outcome="rejected"][data-actuator="vent-close"][data-reason="interlock"]`
	if err := chromedp.Do(ctx, chromedp.WaitVisible(sel)); err != nil {
		t.Fatalf("no interlock rejection in the feed: %v", err)
	}
	if what, err := chromedp.Run(ctx, chromedp.Text(sel+` .what`)); err != nil || what != "vent-close on · rejected: interlock · token 6/0 · browser-test" {
		t.Errorf("interlock rejection in the feed = %q, %v", what, err)
	}
	if why, err := chromedp.Run(ctx, chromedp.Text(sel+` .why`)); err != nil || !strings.Contains(why, "vent-open is on") {
		t.Errorf("interlock rejection's error in the feed = %q, %v; want the gateway's error naming vent-open", why, err)
	}
	// Outside the simulator the page only shows: it says so, and has no
	// button.
	if foot, err := chromedp.Run(ctx, chromedp.Text(`footer`)); err != nil || !strings.Contains(foot, "it sends no commands") {
		t.Errorf("footer of the gateway's dashboard = %q, %v; want that the page sends no commands", foot, err)
	}
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`[...document.querySelectorAll("button")].filter((b) => b.getClientRects().length).length`)); err != nil || n != 0 {
		t.Errorf("the gateway's dashboard shows %d buttons (%v); its footer says it sends nothing", n, err)
	}
}

func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return testenv.Program(t, "chromium")
}

// TestDashboardInBrowser opens the dashboard in a real headless Chromium:
// it names the gateway and says it takes commands; a command published
// over MQTT lights the lamp; a malformed one is labelled rejected, not
// fence only; the footer says what the page's buttons do; the
// paused-controller scenario started from its button shows the stale
// rejection in the feed, and its button shows it playing, then passed; the
// unfenced twin looks like a comparison, not a selection; an idle dead-man
// is no alarm; at a laptop's width no text runs past its card; and once
// the gateway process has stopped, the page says so in its warning style.
// FENCEGATE_SCREENSHOT=path saves a screenshot there (make screenshot).
func TestDashboardInBrowser(t *testing.T) {
	exe := chromium(t)
	// The gateway id stays "sim": the simulator's broker is its own, on the
	// port it chose and reported, so no other suite's gateway can answer.
	dir := t.TempDir()
	dash, broker, _ := runningSimIn(t, dir, "--step-delay", "150ms")
	ctl := testctl.Connect(t, broker, wire.Topics{GatewayID: "sim"})
	ctx := openBrowser(t, exe, dash)

	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(`#lamp-pump[data-on="false"]`),
		chromedp.WaitVisible(`#live.live`),
		chromedp.WaitVisible(`button[data-scenario="paused-controller"]`),
	); err != nil {
		t.Fatalf("dashboard did not load: %v", err)
	}
	// The gateway's id and its broker state, from GET /api/status.
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(`#broker-state.ok[data-taking="true"]`),
		chromedp.WaitVisible(`#sim-gateway.ok[data-status="online"]`),
	); err != nil {
		t.Fatalf("the dashboard does not say the gateway takes commands: %v", err)
	}
	if id, err := chromedp.Run(ctx, chromedp.Text(`#gateway-id`)); err != nil || id != "sim" {
		t.Errorf("gateway id on the dashboard = %q, %v; want sim", id, err)
	}
	if state, err := chromedp.Run(ctx, chromedp.Text(`#broker-state`)); err != nil ||
		!strings.HasPrefix(state, "connected to "+broker+" since ") || !strings.HasSuffix(state, ", taking commands") {
		t.Errorf("broker state on the dashboard = %q, %v; want connected to %s since …, taking commands", state, err, broker)
	}
	// In the simulator the page acts, and its footer says how: scenario
	// buttons, input switches and the Modbus module's power and button,
	// and no other button.
	if foot, err := chromedp.Run(ctx, chromedp.Text(`footer`)); err != nil || strings.Contains(foot, "read-only") ||
		!strings.Contains(foot, "a scenario button plays") || !strings.Contains(foot, "an input's switch sets") ||
		!strings.Contains(foot, "Modbus module can lose its power or be switched by its own button") {
		t.Errorf("footer = %q, %v; want what the scenario buttons, the input switches and the module's buttons do", foot, err)
	}
	if others, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("button")]
		.filter((b) => b.getClientRects().length && !b.matches("[data-scenario], .flip, .modbus")).map((b) => b.textContent)`)); err != nil || len(others) > 0 {
		t.Errorf("buttons the footer does not tell of: %q, %v", others, err)
	}
	// Before one is pressed, no scenario button stands out: the unfenced
	// one is a scenario like the others, not a selection.
	if l := looks(ctx, t, `#scenario-buttons button`); len(slices.Compact(slices.Clone(l))) != 1 {
		t.Errorf("the scenario buttons differ before one is pressed:\n%s", strings.Join(l, "\n"))
	}
	if res := ctl.Send(t, fence.Command{ID: testenv.ID(t, "ui-1"), Actuator: "pump", Holder: "browser-test", Fence: fence.Fence{Token: 42}, State: fence.StateOn}); res.Outcome != fence.Applied {
		t.Fatalf("command = %v", res.Outcome)
	}
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(`#lamp-pump[data-on="true"]`),
		chromedp.WaitVisible(`#feed li[data-outcome="applied"][data-actuator="pump"]`),
	); err != nil {
		t.Fatalf("the lamp did not light after an applied command: %v", err)
	}
	// The card may be drawn again from the API after the event lit the
	// lamp: the fence is read until it shows, for a few seconds at most.
	if fenceText, err := textSoon(ctx, `#fence-pump`, "42/0", 5*time.Second); err != nil || fenceText != "42/0" {
		t.Errorf("pump fence on the dashboard = %q, %v; want 42/0", fenceText, err)
	}
	// A malformed command has no state, and it is not a fence-only command.
	ctl.Publish(t, "pump", []byte(`{"token":4.2}`), false)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`#feed li[data-outcome="rejected"][data-actuator="pump"]`)); err != nil {
		t.Fatalf("no rejected decision in the feed after a malformed command: %v", err)
	}
	if what, err := chromedp.Run(ctx, chromedp.Text(`#feed li[data-outcome="rejected"] .what`)); err != nil ||
		!strings.Contains(what, "rejected: invalid command") || strings.Contains(what, "fence only") {
		t.Errorf("rejected feed entry = %q, %v; want \"rejected: invalid command\" and not \"fence only\"", what, err)
	}
	if why, err := chromedp.Run(ctx, chromedp.Text(`#feed li[data-outcome="rejected"] .why`)); err != nil || why == "" {
		t.Errorf("rejected feed entry's error = %q, %v; want the gateway's error text", why, err)
	}
	if err := within(ctx, 20*time.Second,
		chromedp.Click(`button[data-scenario="paused-controller"]`),
		chromedp.WaitVisible(`button[data-scenario="paused-controller"][data-state="playing"]`),
	); err != nil {
		t.Errorf("the pressed scenario's button does not show it playing: %v", err)
	}
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(`#verdict.pass[data-scenario="paused-controller"]`),
		chromedp.WaitVisible(`#feed li[data-outcome="stale"][data-actuator="pump"]`),
		chromedp.WaitVisible(`#lamp-pump[data-on="false"]`),
	); err != nil {
		t.Fatalf("paused-controller from the dashboard: %v", err)
	}
	if verdict, err := chromedp.Run(ctx, chromedp.Text(`#verdict`)); err != nil || !strings.HasPrefix(verdict, "PASS") {
		t.Errorf("verdict = %q, %v", verdict, err)
	}
	if why, err := chromedp.Run(ctx, chromedp.Text(`#feed li[data-outcome="stale"] .why`)); err != nil || !strings.Contains(why, "below the fence") {
		t.Errorf("stale feed entry reason = %q, %v", why, err)
	}
	checkPlayed(ctx, t, "paused-controller")
	// The unfenced twin, rendered side by side.
	if err := chromedp.Do(ctx,
		chromedp.Click(`button[data-scenario="unfenced"]`),
		chromedp.WaitVisible(`#verdict.pass[data-scenario="unfenced"]`),
		chromedp.WaitVisible(`#twin-lamp-pump[data-on="true"]`),
		chromedp.WaitVisible(`#lamp-pump[data-on="false"]`),
	); err != nil {
		t.Fatalf("unfenced from the dashboard: %v", err)
	}
	checkPlayed(ctx, t, "unfenced")
	// The twin is there for comparison, and looks it: hatched with a
	// dashed edge, not solid like a selected card.
	if l := looks(ctx, t, `#twin-pump`); !strings.HasPrefix(l[0], "dashed ") {
		t.Errorf("the unfenced twin's card looks like %s; want a dashed edge", l[0])
	}
	if h, err := chromedp.Run(ctx, chromedp.Text(`#twins h3`)); err != nil || !strings.Contains(h, "for comparison") {
		t.Errorf("the twin's heading = %q, %v; want it to say it is for comparison", h, err)
	}
	// An input's switch: the line flips, and the page shows its level.
	if err := chromedp.Do(ctx,
		chromedp.Click(`#flip-window-closed`),
		chromedp.WaitVisible(`#input-lamp-window-closed[data-level="low"]`),
		chromedp.Click(`#flip-window-closed`),
		chromedp.WaitVisible(`#input-lamp-window-closed[data-level="high"]`),
	); err != nil {
		t.Fatalf("the window-closed switch on the dashboard: %v", err)
	}
	// Never commanded, the sprinkler's dead-man fired 5 s after the gateway
	// started, with nothing to switch: the page shows it idle, muted like
	// a label, not as an alarm.
	type deadman struct {
		Text  string
		Muted bool
	}
	var idle deadman
	for deadline := time.Now().Add(10 * time.Second); (idle.Text == "" || strings.Contains(idle.Text, " s left")) && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		idle, _ = chromedp.Run(ctx, chromedp.Evaluate[deadman](`(() => { const d = document.querySelector("#deadman-sprinkler");
		  return d ? { Text: d.textContent, Muted: getComputedStyle(d).color === getComputedStyle(d.previousElementSibling).color } : {}; })()`))
	}
	if !strings.HasPrefix(idle.Text, "idle until a command") || strings.Contains(idle.Text, "fired") || !idle.Muted {
		t.Errorf("the idle dead-man of the sprinkler shows %+v; want \"idle until a command …\", muted", idle)
	}
	// A dead-man's countdown runs down on the page; a pulse killed by a
	// crash shows as interrupted.
	// (One evaluation: the cards are drawn again every refresh, and a node
	// found by one call may be gone by the next.) A heartbeat first: the
	// dead-man has counted since the simulator started, and may have fired.
	if res := ctl.Send(t, fence.Command{ID: testenv.ID(t, "hb"), Actuator: "sprinkler", Holder: "browser-test", Fence: fence.Fence{Token: 1}}); res.Outcome != fence.Applied {
		t.Fatalf("a heartbeat to the sprinkler = %+v", res)
	}
	var dm string
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(dm, " s left of 5 s") && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		dm, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector("#deadman-sprinkler") || {}).textContent || ""`))
	}
	if !strings.Contains(dm, " s left of 5 s") {
		t.Errorf("sprinkler's dead-man on the dashboard = %q; want a countdown of 5 s", dm)
	}
	if err := chromedp.Do(ctx,
		chromedp.Click(`button[data-scenario="pulse-crash"]`),
		chromedp.WaitVisible(`#verdict.pass[data-scenario="pulse-crash"]`),
		chromedp.WaitVisible(`#pulse-door.pulse-interrupted`),
		chromedp.WaitVisible(`#lamp-door[data-on="false"]`),
	); err != nil {
		t.Fatalf("pulse-crash from the dashboard: %v", err)
	}
	// The picture (make screenshot) once the feed is back after the crash,
	// with the interrupted pulse: an outcome of the gateway's own, whose
	// pill must be as legible as a command's.
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`#live.live`), chromedp.WaitVisible(`#feed li[data-outcome="pulse"]`)); err != nil {
		t.Fatalf("the feed did not come back after pulse-crash with the interrupted pulse: %v", err)
	}
	if bare, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...new Set([...document.querySelectorAll("#feed .pill")]
		.filter((p) => { const s = getComputedStyle(p); return s.backgroundColor === "rgba(0, 0, 0, 0)" || s.backgroundColor === s.color; })
		.map((p) => p.textContent))]`)); err != nil || len(bare) > 0 {
		t.Errorf("feed pills with no background of their own, unreadable: %q, %v", bare, err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(t.TempDir(), "dashboard.png")
	if p := os.Getenv("FENCEGATE_SCREENSHOT"); p != "" {
		shot = p
	}
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", shot, len(png))

	// At a laptop's width, no text runs past its card, and no word breaks.
	checkLayout(ctx, t, 1280, 800)
	checkLayout(ctx, t, 1366, 768)

	// A phone-sized view must not scroll sideways.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844)); err != nil {
		t.Fatal(err)
	}
	over, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > document.documentElement.clientWidth + 1`))
	if err != nil || over {
		t.Errorf("on a 390 px wide screen the page scrolls sideways (%v)", err)
	}
	if p := os.Getenv("FENCEGATE_SCREENSHOT_PHONE"); p != "" {
		if phone, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
			os.WriteFile(p, phone, 0o644)
		}
	}

	// The gateway process stops for good: the open page says so, in its
	// warning style, and no longer that it takes commands.
	stopSimGateway(t, dir, dash, ctl)
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(`#sim-gateway.bad`),
		chromedp.WaitVisible(`#broker-state.bad[data-taking="false"]`),
	); err != nil {
		t.Fatalf("the dashboard does not show the stopped gateway process: %v", err)
	}
	if st, err := chromedp.Run(ctx, chromedp.Text(`#sim-gateway`)); err != nil || !strings.Contains(st, "stopped: exit status 78") {
		t.Errorf("simulator's gateway process on the dashboard = %q, %v; want stopped: exit status 78 …", st, err)
	}
	if state, err := chromedp.Run(ctx, chromedp.Text(`#broker-state`)); err != nil || !strings.HasPrefix(state, "not taking commands: the gateway does not answer") {
		t.Errorf("broker state on the dashboard once stopped = %q, %v; want that the gateway does not answer", state, err)
	}
	if p := os.Getenv("FENCEGATE_SCREENSHOT_STOPPED"); p != "" {
		if stopped, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
			os.WriteFile(p, stopped, 0o644)
		}
	}
}

// layoutProblems is a script that lists, in words, what on the page does
// not fit: text that runs sideways past its card, button or panel (the
// nearest that holds it), an element wider than it shows, and, in cards and
// buttons, a word broken across lines.
const layoutProblems = `(() => {
  const bad = [];
  const boxes = "section.panel, .card, .scenario-buttons button";
  const name = (e) => e.id ? "#" + e.id : e.tagName.toLowerCase() + (e.dataset.scenario ? "[" + e.dataset.scenario + "]" : "") +
    [...e.classList].map((c) => "." + c).join("");
  const shown = (e) => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== "hidden";
  for (const box of [...document.querySelectorAll(boxes)].filter(shown)) {
    const b = box.getBoundingClientRect();
    const small = !box.matches("section.panel");
    const walk = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
    for (let n; (n = walk.nextNode());) {
      if (!n.textContent.trim() || !shown(n.parentElement) || n.parentElement.closest(boxes) !== box) continue;
      const all = document.createRange();
      all.selectNodeContents(n);
      for (const r of all.getClientRects()) {
        if (r.width > 0 && (r.left < b.left - 0.5 || r.right > b.right + 0.5)) {
          bad.push(name(box) + ": \"" + n.textContent.trim() + "\" runs past it");
        }
      }
      if (!small) continue;
      for (const m of n.textContent.matchAll(/\S+/g)) {
        const w = document.createRange();
        w.setStart(n, m.index);
        w.setEnd(n, m.index + m[0].length);
        const lines = new Set([...w.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.bottom)));
        if (lines.size > 1) bad.push(name(box) + ": \"" + m[0] + "\" breaks across lines");
      }
    }
    for (const e of box.querySelectorAll("*")) {
      if (shown(e) && e.closest(boxes) === box && e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1) {
        bad.push(name(box) + ": " + name(e) + " is wider than it shows (" + e.scrollWidth + " > " + e.clientWidth + " px)");
      }
    }
  }
  return bad;
})()`

// scrollbar is the width of a classic scrollbar (Linux, Windows), which a
// laptop's browser takes from a page taller than its window, and which
// headless Chromium hides.
const scrollbar = 15

// checkLayout shows the page as a w×h screen does, less a scrollbar, and
// reports each of its layoutProblems.
func checkLayout(ctx context.Context, t *testing.T, w, h int64) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(w-scrollbar, h)); err != nil {
		t.Fatal(err)
	}
	bad, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](layoutProblems))
	if err != nil {
		t.Fatalf("layout at %d×%d: %v", w, h, err)
	}
	for _, b := range bad {
		t.Errorf("at %d×%d: %s", w, h, b)
	}
}

// lookOf is a script function that says how an element stands out: its
// edge, shadow and background, all that sets a selected card apart.
const lookOf = `((e) => { const s = getComputedStyle(e);
  return [s.borderStyle, s.borderColor, s.boxShadow, s.backgroundColor, s.backgroundImage].join(" | "); })`

// looks returns how each element that sel selects looks (lookOf).
func looks(ctx context.Context, t *testing.T, sel string) []string {
	t.Helper()
	l, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](fmt.Sprintf(`[...document.querySelectorAll(%q)].map(%s)`, sel, lookOf)))
	if err != nil || len(l) == 0 {
		t.Fatalf("the look of %s: %d elements, %v", sel, len(l), err)
	}
	return l
}

// textSoon reads the text of sel until it is want, for at most d, and
// returns the last text read.
func textSoon(ctx context.Context, sel, want string, d time.Duration) (string, error) {
	deadline := time.Now().Add(d)
	for {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ""`, sel)))
		if (err == nil && got == want) || time.Now().After(deadline) {
			return got, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// within runs actions, for at most d.
func within(ctx context.Context, d time.Duration, actions ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return chromedp.Do(ctx, actions...)
}

// checkPlayed checks that the scenario buttons show name, and it alone, as
// played last and passed, and that its button stands out from the others.
func checkPlayed(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	// Away from the buttons: a hovered button stands out too.
	if err := chromedp.Do(ctx, chromedp.MouseEvent("mouseMoved", 1, 1)); err != nil {
		t.Fatal(err)
	}
	marked, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#scenario-buttons button[data-state]")]
		.map((b) => b.dataset.scenario + ": " + b.dataset.state + ": " + b.querySelector(".result").textContent)`))
	if want := name + ": pass: last played: PASS"; err != nil || len(marked) != 1 || marked[0] != want {
		t.Errorf("scenario buttons marked %q, %v; want only %q", marked, err, want)
		return
	}
	mine := looks(ctx, t, fmt.Sprintf(`button[data-scenario=%q]`, name))[0]
	if slices.Contains(looks(ctx, t, `#scenario-buttons button:not([data-state])`), mine) {
		t.Errorf("the button of %s, played last, looks like the others: %s", name, mine)
	}
}

// TestDashboardSnapshot takes the picture docs/simulator.md shows how to
// take without a script: headless Chromium with --virtual-time-budget on
// the page's ?snapshot address must end, with the simulator's data drawn.
// (Its clock runs only while no request is pending, so that an open event
// stream would keep it from ever ending.)
func TestDashboardSnapshot(t *testing.T) {
	exe := chromium(t)
	dash, _ := runningSim(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stderr strings.Builder
	cmd := exec.CommandContext(ctx, exe, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir="+t.TempDir(),
		"--virtual-time-budget=5000", "--dump-dom", dash+"/?snapshot")
	cmd.Stderr = &stderr
	page, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium --virtual-time-budget --dump-dom %s/?snapshot: %v\n%s", dash, err, stderr.String())
	}
	for _, want := range []string{`id="lamp-pump"`, `<p id="broker-state"[^>]* data-taking="true"`,
		`feed: off \(snapshot\)`, `data-scenario="unfenced"`, `id="input-lamp-window-closed"`} {
		if !regexp.MustCompile(want).Match(page) {
			t.Errorf("the snapshot has no %s:\n%s", want, page)
		}
	}
}
