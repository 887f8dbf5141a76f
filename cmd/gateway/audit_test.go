package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
	"github.com/fencegate/fencegate/tests/testenv"
)

// TestAuditCLI: gateway audit prints a known sequence of decisions, one a
// line, filtered by actuator, outcome, holder and time, from a running
// gateway's API and, once it stopped, from its store; --json prints JSON
// lines; --follow prints decisions as they are made; bad flags are usage
// errors that change nothing.
func TestAuditCLI(t *testing.T) {
	g := startGateway(t, testenv.EmbeddedBroker(t), "actuators:\n  - {name: pump, pin: GPIO17}\n  - {name: fan, pin: GPIO22}\n", true)
	dir, p, ctl := g.dir, g.p, g.ctl
	api := "http://" + g.http

	before := time.Now()
	send := func(c fence.Command, want fence.Outcome) {
		t.Helper()
		if res := ctl.Send(t, c); res.Outcome != want {
			t.Fatalf("%s: %v (%s), want %v", c.ID, res.Outcome, res.Error, want)
		}
	}
	send(fence.Command{ID: "a-1", Actuator: "pump", Holder: "ctl-a", Fence: fence.Fence{Token: 41}, State: fence.StateOn}, fence.Applied)
	send(fence.Command{ID: "b-1", Actuator: "pump", Holder: "ctl-b", Fence: fence.Fence{Token: 42}, State: fence.StateOff}, fence.Applied)
	send(fence.Command{ID: "a-2", Actuator: "pump", Holder: "ctl-a", Fence: fence.Fence{Token: 41, Seq: 1}, State: fence.StateOn}, fence.Stale)
	send(fence.Command{ID: "b-2", Actuator: "fan", Holder: "ctl-b", Fence: fence.Fence{Token: 42}, State: fence.StateOn}, fence.Applied)

	lines := func(args ...string) []string {
		t.Helper()
		out, code := runCLI(t, append([]string{"audit"}, args...)...)
		if code != 0 {
			t.Fatalf("gateway audit %v: exit %d\n%s", args, code, out)
		}
		return strings.Split(strings.TrimSpace(out), "\n")
	}
	ids := func(ls []string) string {
		var out []string
		for _, l := range ls {
			for _, f := range strings.Fields(l) {
				if v, ok := strings.CutPrefix(f, "id="); ok {
					out = append(out, v)
				}
			}
		}
		return strings.Join(out, " ")
	}
	for _, tt := range []struct {
		args []string
		want string // the ids, in order
	}{
		{[]string{"--actuator", "pump", "--since", "1h"}, "a-1 b-1 a-2"},
		{[]string{"--actuator", "pump", "--outcome", "stale"}, "a-2"},
		{[]string{"--holder", "ctl-b"}, "b-1 b-2"},
		{[]string{"--outcome", "applied", "-n", "2"}, "b-1 b-2"},
		{[]string{"--holder", "ctl-b", "--until", before.UTC().Format(time.RFC3339Nano)}, ""},
	} {
		got := lines(append([]string{"--api", api}, tt.args...)...)
		if ids(got) != tt.want {
			t.Errorf("gateway audit %v: ids %q, want %q:\n%s", tt.args, ids(got), tt.want, strings.Join(got, "\n"))
		}
	}
	stale := lines("--api", api, "--outcome", "stale")
	if len(stale) != 1 || !strings.Contains(stale[0], " pump stale token=41 seq=1 state=on holder=ctl-a id=a-2 scope=pump fence=42/0") {
		t.Errorf("the stale command's line: %q", stale)
	}
	for _, l := range lines("--api", api, "--holder", "ctl-b", "--json") {
		var e fencelog.Entry
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.Holder != "ctl-b" || e.Outcome != fence.Applied {
			t.Errorf("--json line %q: %+v, %v; want an applied entry of ctl-b", l, e, err)
		}
	}

	// A misspelt actuator is no actuator without decisions.
	if out, code := runCLI(t, "audit", "--api", api, "--actuator", "pmup"); code != exitUsage ||
		!strings.Contains(out, `--actuator "pmup": this gateway has no such actuator; its actuators are pump, fan`) {
		t.Errorf("gateway audit --api --actuator pmup: exit %d, %q; want exit %d naming pump and fan", code, out, exitUsage)
	}

	follow := startProc(t, nil, "audit", "--api", api, "--follow", "--actuator", "fan", "-n", "1")
	waitOutput(t, follow, "id=b-2") // the trail's newest fan entry, first
	send(fence.Command{ID: "b-3", Actuator: "fan", Holder: "ctl-b", Fence: fence.Fence{Token: 42, Seq: 1}, State: fence.StateOff}, fence.Applied)
	send(fence.Command{ID: "b-4", Actuator: "pump", Holder: "ctl-b", Fence: fence.Fence{Token: 42, Seq: 1}, State: fence.StateOn}, fence.Applied)
	waitOutput(t, follow, "fan applied token=42 seq=1 state=off holder=ctl-b id=b-3")
	if strings.Contains(follow.output(), "id=b-4") {
		t.Errorf("--follow --actuator fan printed a pump decision:\n%s", follow.output())
	}
	follow.kill()

	p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done
	store := filepath.Join(dir, "fence.db")
	if got := ids(lines("--store", store, "--outcome", "applied")); got != "a-1 b-1 b-2 b-3 b-4" {
		t.Errorf("gateway audit --store --outcome applied: %q, want a-1 b-1 b-2 b-3 b-4", got)
	}
	// The boot rule's reasons are not errors: each says why, and no entry
	// of the boot rule has an error, for people, as JSON and in inspect.
	boots := lines("--store", store, "--outcome", "boot")
	for _, l := range boots {
		if !strings.Contains(l, ` why="never commanded: off"`) || strings.Contains(l, "error=") {
			t.Errorf("boot line %q: want why=\"never commanded: off\" and no error", l)
		}
	}
	boots = append(boots, lines("--store", store, "--outcome", "boot", "--json")...)
	out, code := runCLI(t, "inspect", "--store", store, "--audit", "100")
	var inspected struct{ Audit []json.RawMessage }
	if err := json.Unmarshal([]byte(out), &inspected); code != 0 || err != nil {
		t.Fatalf("gateway inspect: exit %d, %v\n%s", code, err, out)
	}
	for _, e := range inspected.Audit {
		var b bytes.Buffer
		json.Compact(&b, e)
		if strings.Contains(b.String(), `"outcome":"boot"`) {
			boots = append(boots, b.String())
		}
	}
	if len(boots) != 6 {
		t.Errorf("%d boot entries in audit, audit --json and inspect, want 2 each (pump and fan):\n%s", len(boots), strings.Join(boots, "\n"))
	}
	for _, l := range boots[2:] {
		if !strings.Contains(l, `"why":"never commanded: off"`) || strings.Contains(l, `"error"`) {
			t.Errorf("boot entry %s: want \"why\":\"never commanded: off\" and no \"error\"", l)
		}
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--store", store, "--api", api}, "not both"},
		{[]string{}, "which gateway? give --store FILE (a stopped gateway's) or --api URL"},
		{[]string{"--store", store, "--follow"}, "--follow needs a running gateway"},
		{[]string{"--store", store, "--outcome", "nope"}, `--outcome "nope": want one of applied, duplicate, stale`},
		{[]string{"--store", store, "--since", "yesterday"}, `--since "yesterday": want an RFC 3339 time`},
		{[]string{"--store", store, "-n", "0"}, "-n 0: want a number from 1 to 10000"},
		{[]string{"--api", "127.0.0.1:8080"}, "want the gateway's HTTP API, e.g. http://"},
		{[]string{"--store", store, "--actuator", "pmup"}, `--actuator "pmup": this gateway has no such actuator; its actuators are fan, pump`},
	} {
		out, code := runCLI(t, append([]string{"audit"}, tt.args...)...)
		if code != exitUsage || !strings.Contains(out, tt.want) {
			t.Errorf("gateway audit %v: exit %d, %q; want exit %d saying %q", tt.args, code, out, exitUsage, tt.want)
		}
	}
}

// waitOutput waits until p's output contains text.
func waitOutput(t *testing.T, p *proc, text string) {
	t.Helper()
	waitOutputWithin(t, p, text, 20*time.Second)
}

// waitOutputWithin is waitOutput for text that must follow within d.
func waitOutputWithin(t *testing.T, p *proc, text string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(p.output(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q within %v:\n%s", text, d, p.output())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAuditWithoutSource: audit with neither --store nor --api says that
// one of them is needed, not that both were given.
func TestAuditWithoutSource(t *testing.T) {
	out, code := runCLI(t, "audit")
	if code != exitUsage || !strings.Contains(out, "which gateway? give --store FILE") || strings.Contains(out, "not both") {
		t.Errorf("gateway audit: exit %d, %q; want exit %d asking for --store or --api", code, out, exitUsage)
	}
}
