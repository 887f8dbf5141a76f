package main

import (
	"context"
	"fmt"
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
}
