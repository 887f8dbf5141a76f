package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/testctl"
	"github.com/fencegate/fencegate/internal/testenv"
	"github.com/fencegate/fencegate/scenario"
	"github.com/fencegate/fencegate/wire"
)

// runningSim starts `gateway sim` on free ports and returns its dashboard
// and broker URLs, read from its ready message.
func runningSim(t *testing.T, extra ...string) (dashboard, broker string) {
	t.Helper()
	args := append([]string{"sim", "--mqtt", "127.0.0.1:0", "--http", "127.0.0.1:0", "--dir", t.TempDir()}, extra...)
	cmd := exec.Command(binary, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Errorf("gateway sim did not stop on SIGINT within 10s")
		}
	})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	dashRE := regexp.MustCompile(`dashboard: (http://\S+)`)
	brokerRE := regexp.MustCompile(`broker: +(tcp://\S+)`)
	deadline := time.After(40 * time.Second)
	for dashboard == "" || broker == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("gateway sim exited before it was ready:\n%s", stderr.String())
			}
			if m := dashRE.FindStringSubmatch(l); m != nil {
				dashboard = m[1]
			}
			if m := brokerRE.FindStringSubmatch(l); m != nil {
				broker = m[1]
			}
		case <-deadline:
			t.Fatalf("gateway sim not ready within 40s:\n%s", stderr.String())
		}
	}
	go func() {
		for range lines {
		}
	}()
	return dashboard, broker
}

// Every scenario passes on its own: with no simulator reachable, the
// command starts one on free ports, plays, and exits 0 with a PASS line.
func TestScenariosStandalone(t *testing.T) {
	for _, name := range scenario.Names() {
		t.Run(name, func(t *testing.T) {
			out, code := runCLI(t, "sim", "scenario", name, "--sim", "http://127.0.0.1:1", "--delay", "0")
			if code != 0 || !strings.Contains(out, "PASS "+name) {
				t.Errorf("gateway sim scenario %s: exit %d\n%s", name, code, out)
			}
		})
	}
	out, code := runCLI(t, "sim", "scenario", "no-such-thing")
	if code != exitUsage || !strings.Contains(out, "paused-controller") {
		t.Errorf("unknown scenario: exit %d, want 2 and the list of scenarios\n%s", code, out)
	}
}

// Scenarios also play against a simulator that is already running, over its
// broker, and the gateway keeps its fences across them.
func TestScenariosAgainstRunningSim(t *testing.T) {
	dash, _ := runningSim(t)
	for _, name := range scenario.Names() {
		out, code := runCLI(t, "sim", "scenario", name, "--sim", dash, "--delay", "0")
		if code != 0 || !strings.Contains(out, "playing against the simulator") || !strings.Contains(out, "PASS "+name) {
			t.Errorf("gateway sim scenario %s --sim %s: exit %d\n%s", name, dash, code, out)
		}
	}
}

func TestSimPortTaken(t *testing.T) {
	_, broker := runningSim(t)
	taken := strings.TrimPrefix(broker, "tcp://")
	out, code := runCLI(t, "sim", "--mqtt", taken, "--http", "127.0.0.1:0", "--dir", t.TempDir())
	if code == 0 || !strings.Contains(out, "already in use") || !strings.Contains(out, "--broker tcp://"+taken) {
		t.Errorf("sim on a taken MQTT port: exit %d\n%s", code, out)
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
// a command published over MQTT lights the lamp, and the paused-controller
// scenario started from its button shows the stale rejection in the feed.
// FENCEGATE_SCREENSHOT=path saves a screenshot there (make screenshot).
func TestDashboardInBrowser(t *testing.T) {
	exe := chromium(t)
	// The gateway id stays "sim": the simulator's broker is its own, on the
	// port it chose and reported, so no other suite's gateway can answer.
	dash, broker := runningSim(t, "--step-delay", "150ms")
	ctl := testctl.Connect(t, broker, wire.Topics{Prefix: "fencegate", GatewayID: "sim"})

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 1000))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	// The first call starts the browser and must have no deadline.
	if err := chromedp.Do(bctx, chromedp.Navigate(dash)); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}
	ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	defer cancel()

	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(`#lamp-pump[data-on="false"]`),
		chromedp.WaitVisible(`#live.live`),
		chromedp.WaitVisible(`button[data-scenario="paused-controller"]`),
	); err != nil {
		t.Fatalf("dashboard did not load: %v", err)
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
	if fenceText, err := chromedp.Run(ctx, chromedp.Text(`#fence-pump`)); err != nil || fenceText != "42/0" {
		t.Errorf("pump fence on the dashboard = %q, %v; want 42/0", fenceText, err)
	}
	if err := chromedp.Do(ctx,
		chromedp.Click(`button[data-scenario="paused-controller"]`),
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
	// The unfenced twin, rendered side by side.
	if err := chromedp.Do(ctx,
		chromedp.Click(`button[data-scenario="unfenced"]`),
		chromedp.WaitVisible(`#verdict.pass[data-scenario="unfenced"]`),
		chromedp.WaitVisible(`#twin-lamp-pump[data-on="true"]`),
		chromedp.WaitVisible(`#lamp-pump[data-on="false"]`),
	); err != nil {
		t.Fatalf("unfenced from the dashboard: %v", err)
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
}
