package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/tests/testenv"
)

// benchJSON runs gateway bench with args and --json, and returns its
// report as generic JSON, so that a missing field is seen as missing.
func benchJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	args = append([]string{"bench", "--json", "--store-dir", t.TempDir()}, args...)
	out, code := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("gateway %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("gateway %s: the report is not JSON: %v\n%s", strings.Join(args, " "), err, out)
	}
	return r
}

// report reads fields of a JSON report by path ("floors.commit.p50_ms"),
// failing the test for a missing one.
type report struct {
	t    *testing.T
	name string
	obj  map[string]any
}

func (r report) get(path string) any {
	r.t.Helper()
	var v any = r.obj
	for key := range strings.SplitSeq(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			r.t.Fatalf("%s: %s: %v is not an object", r.name, path, v)
		}
		if v, ok = m[key]; !ok {
			r.t.Fatalf("%s: field %s is missing", r.name, path)
		}
	}
	return v
}

// num returns a number field; null is an error unless nullable.
func (r report) num(path string) float64 {
	r.t.Helper()
	x, ok := r.get(path).(float64)
	if !ok {
		r.t.Fatalf("%s: %s = %v, want a number", r.name, path, r.get(path))
	}
	return x
}

func (r report) null(path string) bool { r.t.Helper(); return r.get(path) == nil }

func (r report) str(path string) string {
	r.t.Helper()
	s, ok := r.get(path).(string)
	if !ok {
		r.t.Fatalf("%s: %s = %v, want a string", r.name, path, r.get(path))
	}
	return s
}

// same checks that got, a printed ratio or rate, is what the printed
// figures give.
func (r report) same(what string, got, want float64) {
	r.t.Helper()
	if math.IsNaN(want) || math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
		r.t.Errorf("%s: %s = %v, want %v from the printed figures", r.name, what, got, want)
	}
}

func (r report) positive(paths ...string) {
	r.t.Helper()
	for _, p := range paths {
		if x := r.num(p); !(x > 0) {
			r.t.Errorf("%s: %s = %v, want > 0", r.name, p, x)
		}
	}
}

// profiles returns the report's profiles by name.
func profiles(t *testing.T, r map[string]any) map[string]report {
	t.Helper()
	list, ok := r["profiles"].([]any)
	if !ok {
		t.Fatalf("profiles = %v, want a list", r["profiles"])
	}
	out := map[string]report{}
	for _, p := range list {
		m, _ := p.(map[string]any)
		name, _ := m["name"].(string)
		out[name] = report{t, "profile " + name, m}
	}
	return out
}

// checkFloors checks the report's header and floors, and returns them.
func checkFloors(t *testing.T, r map[string]any) report {
	t.Helper()
	top := report{t, "report", r}
	top.positive("cpus", "floors.broker_rtt.p50_ms", "floors.broker_rtt.samples", "floors.commit.p50_ms", "floors.commit.samples")
	for _, f := range []string{"broker_rtt", "commit"} {
		if p50, p99, p999 := top.num("floors."+f+".p50_ms"), top.num("floors."+f+".p99_ms"), top.num("floors."+f+".p99_9_ms"); p99 < p50 || p999 < p99 {
			t.Errorf("floors.%s: p50 %v, p99 %v, p99.9 %v: want them in order", f, p50, p99, p999)
		}
	}
	if got := top.str("os") + "/" + top.str("arch"); got != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("os/arch = %s, want %s/%s", got, runtime.GOOS, runtime.GOARCH)
	}
	top.str("store_dir")
	return top
}

// checkProfile checks the figures every profile has: present, sane, and
// each rate and ratio what the printed figures give. commands is the
// number asked for per measured phase.
func checkProfile(t *testing.T, top, p report, commands int) {
	t.Helper()
	applied, answered := p.num("applied"), p.num("commands")
	p.positive("applied", "seconds", "applied_per_s", "latency.p50_ms", "commits", "online_ms", "one_commit_per_s")
	if p50, p99, p999 := p.num("latency.p50_ms"), p.num("latency.p99_ms"), p.num("latency.p99_9_ms"); p99 < p50 || p999 < p99 {
		t.Errorf("%s: latency p50 %v, p99 %v, p99.9 %v: want them in order", p.name, p50, p99, p999)
	}
	if p.str("profile") != "storm" {
		if answered != float64(commands) || applied != answered {
			t.Errorf("%s: %v commands answered, %v applied (outcomes %v); want all %d applied", p.name, answered, applied, p.get("outcomes"), commands)
		}
		if s := p.num("latency.samples"); s != answered {
			t.Errorf("%s: %v latency samples, want one per command (%v)", p.name, s, answered)
		}
		echo := p.num("echo_per_s")
		if !(echo > 0) {
			t.Errorf("%s: echo_per_s = %v, want > 0", p.name, echo)
		}
		p.same("ratios.applied_vs_echo", p.num("ratios.applied_vs_echo"), p.num("applied_per_s")/echo)
	}
	p.same("applied_per_s", p.num("applied_per_s"), applied/p.num("seconds"))
	p.same("syncs_per_applied", p.num("syncs_per_applied"), 2*p.num("commits")/applied)
	if c, w := p.num("commits"), p.num("writes"); w < c || w > applied+c {
		// An actuator's queued commands are one write; a few commits of
		// the phase may be audit flushes, of one write each.
		t.Errorf("%s: %v writes in %v commits for %v applied commands: want a write or more per commit, and at most a write per applied command (or flush)", p.name, w, c, applied)
	}
	p.same("one_commit_per_s", p.num("one_commit_per_s"), 1000/(top.num("floors.commit.p50_ms")+p.num("commit_delay_ms")))
	p.same("ratios.applied_vs_one_commit", p.num("ratios.applied_vs_one_commit"), p.num("applied_per_s")/p.num("one_commit_per_s"))
	if p.num("window") == 1 {
		p.same("ratios.p50_vs_floor", p.num("ratios.p50_vs_floor"), p.num("latency.p50_ms")/(top.num("floors.broker_rtt.p50_ms")+top.num("floors.commit.p50_ms")))
	} else if !p.null("ratios.p50_vs_floor") {
		t.Errorf("%s: ratios.p50_vs_floor = %v with window %v, want null (it compares one command at a time)", p.name, p.get("ratios.p50_vs_floor"), p.num("window"))
	}
	if p.null("cpu_s_per_1000") || p.null("peak_rss_mb") {
		if runtime.GOOS == "linux" {
			t.Errorf("%s: cpu_s_per_1000 %v, peak_rss_mb %v: want both on Linux", p.name, p.get("cpu_s_per_1000"), p.get("peak_rss_mb"))
		}
	} else if cpu, peak := p.num("cpu_s_per_1000"), p.num("peak_rss_mb"); cpu < 0 || peak < 1 {
		t.Errorf("%s: cpu_s_per_1000 %v, peak_rss_mb %v: want ≥ 0 and ≥ 1", p.name, cpu, peak)
	}
	if runtime.GOOS == "linux" {
		if over := p.str("cpu_over"); over != "measured phase" {
			t.Errorf("%s: cpu_over = %q, want the measured phase on Linux", p.name, over)
		}
		if idle := p.num("idle_rss_mb"); idle < 1 || idle > p.num("peak_rss_mb") {
			t.Errorf("%s: idle_rss_mb %v, peak %v: want 1 MB or more, and not above the peak", p.name, idle, p.num("peak_rss_mb"))
		}
	}
}

// TestBench runs gateway bench as people run it, with few commands: every
// field of the --json report is there and sane, and each rate and ratio is
// what the printed figures give.
func TestBench(t *testing.T) {
	t.Run("single", func(t *testing.T) {
		r := benchJSON(t, "--profile", "single", "--commands", "100", "--warmup", "0")
		top := checkFloors(t, r)
		ps := profiles(t, r)
		p, ok := ps["single"]
		if !ok || len(ps) != 1 {
			t.Fatalf("profiles %v, want single", r["profiles"])
		}
		checkProfile(t, top, p, 100)
		if a, c, w := p.num("actuators"), p.num("controllers"), p.num("window"); a != 1 || c != 1 || w != 1 {
			t.Errorf("single: %v×%v×%v, want 1×1×1", a, c, w)
		}
		if top.str("broker") != "embedded" {
			t.Errorf("broker = %q, want embedded", top.str("broker"))
		}
		// One command at a time: each applied command is a commit of its own.
		if s := p.num("syncs_per_applied"); s < 2 {
			t.Errorf("single: %v syncs per applied command, want 2 or more (one commit each)", s)
		}
	})

	t.Run("fleet-storm-sdcard", func(t *testing.T) {
		const delay = 20 // ms: far more than a commit here, so that the test sees it
		r := benchJSON(t, "--profile", "fleet,storm,sdcard", "--actuators", "4", "--window", "4", "--commands", "200",
			"--warmup", "0", "--sdcard-delay", fmt.Sprintf("%dms", delay))
		top := checkFloors(t, r)
		ps := profiles(t, r)
		for _, name := range []string{"fleet-4x4", "storm", "sdcard"} {
			p, ok := ps[name]
			if !ok {
				t.Fatalf("no profile %s in %v", name, r["profiles"])
			}
			checkProfile(t, top, p, 200)
			if a, c, w := p.num("actuators"), p.num("controllers"), p.num("window"); a != 4 || c != 4 || w != 4 {
				t.Errorf("%s: %v×%v×%v, want 4×4×4", name, a, c, w)
			}
		}

		sd := ps["sdcard"]
		if d := sd.num("commit_delay_ms"); d != delay {
			t.Errorf("sdcard: commit_delay_ms = %v, want %d", d, delay)
		}
		// Every applied command waits for its commit, slowed by the delay,
		// and commits follow one another: the failpoints build passed the
		// delay to the store. (A background audit flush may add a commit
		// before or after the phase.)
		if p50 := sd.num("latency.p50_ms"); p50 < delay {
			t.Errorf("sdcard: p50 %v ms, want at least the commit delay %d ms", p50, delay)
		}
		if ms, commits := 1000*sd.num("seconds"), sd.num("commits"); ms < (commits-2)*delay {
			t.Errorf("sdcard: %v commits in %.0f ms, want each to take at least the commit delay %d ms", commits, ms, delay)
		}

		st := ps["storm"]
		st.positive("storm.flapping", "storm.calm", "storm.calm_p99_ms", "storm.storm_p99_ms", "storm.stale_sent", "storm.stale_only", "storm.stale_only_seconds")
		if f, c := st.num("storm.flapping"), st.num("storm.calm"); f != 1 || c != 3 {
			t.Errorf("storm: %v flapping and %v calm controllers, want 1 and 3", f, c)
		}
		if sent, stale := st.num("storm.stale_sent"), st.num("storm.stale_answered"); stale != sent {
			t.Errorf("storm: %v of %v stale commands answered stale", stale, sent)
		}
		if n, stale := st.num("storm.stale_only"), st.num("storm.stale_only_stale"); stale != n {
			t.Errorf("storm: alone, %v of %v stale commands answered stale", stale, n)
		}
		// Stale commands are decided without a write: the only syncs are
		// the audit trail's background flush, a commit a second at most.
		if syncs, most := st.num("storm.stale_only_syncs"), 2*(math.Ceil(st.num("storm.stale_only_seconds"))+1); syncs > most {
			t.Errorf("storm: %v syncs while %v stale commands were sent alone in %v s, want at most %v", syncs, st.num("storm.stale_only"), st.num("storm.stale_only_seconds"), most)
		}
		st.same("ratios.fresh_p99_vs_calm", st.num("ratios.fresh_p99_vs_calm"), st.num("storm.storm_p99_ms")/st.num("storm.calm_p99_ms"))
		if !st.null("echo_per_s") {
			t.Errorf("storm: echo_per_s = %v, want null", st.get("echo_per_s"))
		}
		if a, s, n := st.num("outcomes.applied"), st.num("outcomes.stale"), st.num("commands"); a+s != n {
			t.Errorf("storm: %v applied + %v stale, want all %v commands", a, s, n)
		}
	})
}

// TestBenchTable: without --json, the report is a table for people, with
// the floors, a line per profile and what the ratios say.
func TestBenchTable(t *testing.T) {
	out, code := runCLI(t, "bench", "--profile", "single", "--commands", "20", "--warmup", "0", "--store-dir", t.TempDir())
	if code != 0 {
		t.Fatalf("gateway bench: exit %d\n%s", code, out)
	}
	for _, want := range []string{"floors: broker round trip p50 ", "profile  act×ctl×win  applied/s  answered/s  p50 ms", "single         1×1×1  ", "× (broker round trip + commit = "} {
		if !strings.Contains(out, want) {
			t.Errorf("gateway bench prints no %q:\n%s", want, out)
		}
	}
}

// TestBenchUsage: bad flags are usage errors (exit 64) that say what to
// change, before anything starts or is created.
func TestBenchUsage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "stores")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--profile", "ssd"}, `--profile "ssd": want single, fleet, shared, storm, sdcard, soak or all`},
		{[]string{"--profile", "soak,all"}, "--profile soak,all: the soak runs alone"},
		{[]string{"--profile", "single,soak"}, "--profile single,soak: the soak runs alone"},
		{[]string{"--profile", "soak", "--commands", "1000"}, "--commands: the soak runs for a --duration (default 10m"},
		{[]string{"--profile", "soak", "--duration", "25h"}, "--duration 25h0m0s: want more than 0 and at most 24h0m0s for the soak"},
		{[]string{"--profile", "soak", "--duration", "50s"}, "--duration 50s with --sample-interval 10s: 6 samples, and the soak needs at least 7"},
		{[]string{"--profile", "soak", "--sample-interval", "1ms"}, "--sample-interval 1ms: want 100ms or more"},
		{[]string{"--profile", "soak", "--window", "17"}, "--window 17: the soak's duplicates must stay among the gateway's 32 recent commands of their scope: give at most 16"},
		{[]string{"--profile", "single", "--sample-interval", "1s"}, "--sample-interval: only the soak takes it (--profile soak)"},
		{[]string{"--actuators", "101"}, "--actuators 101: want 1 to 100 (the sim board's outputs"},
		{[]string{"--profile", "fleet", "--actuators", "4", "--controllers", "5"}, "5 controllers for 4 actuators"},
		{[]string{"--commands", "100", "--duration", "1s"}, "give --commands or --duration, not both"},
		{[]string{"--profile", "fleet", "--commands", "20"}, "--commands 20: at least one per controller (64)"},
		{[]string{"--window", "-3"}, "--window -3: want 1 to 1000"},
		{[]string{"--profile", "storm", "--actuators", "1"}, "storm needs at least 2 controllers"},
		{[]string{"--warmup", "-1s"}, "--warmup -1s: want 0 or more"},
		{[]string{"single"}, `unexpected argument "single"`},
	}
	for _, tt := range tests {
		args := append([]string{"bench", "--store-dir", dir}, tt.args...)
		out, code := runCLI(t, args...)
		if code != exitUsage || !strings.Contains(out, tt.want) {
			t.Errorf("gateway %s: exit %d, want %d with %q:\n%s", strings.Join(args, " "), code, exitUsage, tt.want, out)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Fatalf("gateway %s created %s", strings.Join(args, " "), dir)
		}
	}
}

// TestBenchExternalBroker: with --broker, the bench uses that broker (a
// Mosquitto) for the gateway and its floors, and leaves no retained
// message behind there: not the gateways' states, status or instance.
func TestBenchExternalBroker(t *testing.T) {
	broker := testenv.Mosquitto(t)
	r := benchJSON(t, "--profile", "single", "--commands", "50", "--warmup", "0", "--broker", broker)
	top := checkFloors(t, r)
	checkProfile(t, top, profiles(t, r)["single"], 50)
	if got := top.str("broker"); got != broker {
		t.Errorf("broker = %q, want %q", got, broker)
	}

	// Mosquitto sends a new subscription every retained message before it
	// reads the subscriber's next packet: a message published after the
	// subscription comes after all of them.
	got := make(chan string, 100)
	c := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(broker).SetClientID(testenv.ID(t, "retained")).SetOrderMatters(true))
	if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer c.Disconnect(0)
	if tok := c.Subscribe("#", 1, func(_ mqtt.Client, m mqtt.Message) { got <- m.Topic() }); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	marker := testenv.ID(t, "marker")
	c.Publish(marker, 1, false, "end")
	for {
		select {
		case topic := <-got:
			if topic == marker {
				return
			}
			t.Errorf("gateway bench left a retained message on %s", topic)
		case <-time.After(10 * time.Second):
			t.Fatal("the marker did not come back within 10s")
		}
	}
}

// TestBenchSoak runs the soak for a few seconds: its samples, its judgement
// of each measure, and the exit status that goes with it (1 if something
// grew, with what grew on stderr); the load had stale and duplicate
// commands, reconnects and event streams.
func TestBenchSoak(t *testing.T) {
	args := []string{"bench", "--json", "--store-dir", t.TempDir(), "--profile", "soak", "--duration", "6s", "--sample-interval", "500ms", "--warmup", "0"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("gateway %s: exit %d, the report is not JSON: %v\n%s\n%s", strings.Join(args, " "), code, err, stdout.String(), stderr.String())
	}
	if _, ok := r["floors"]; ok {
		t.Errorf("floors = %v, want none: the soak measures none", r["floors"])
	}
	ps := profiles(t, r)
	p, ok := ps["soak"]
	if !ok || len(ps) != 1 {
		t.Fatalf("profiles %v, want soak alone", r["profiles"])
	}
	if a, c, w := p.num("actuators"), p.num("controllers"), p.num("window"); a != 16 || c != 16 || w != 4 {
		t.Errorf("soak: %v×%v×%v, want 16×16×4", a, c, w)
	}
	p.positive("outcomes.applied", "outcomes.stale", "outcomes.duplicate", "applied_per_s", "latency.p50_ms", "commits", "online_ms")
	if a, st, d, n := p.num("outcomes.applied"), p.num("outcomes.stale"), p.num("outcomes.duplicate"), p.num("commands"); a+st+d != n {
		t.Errorf("soak: %v applied + %v stale + %v duplicate, want all %v commands", a, st, d, n)
	}
	if u := p.num("soak.unexpected"); u != 0 {
		t.Errorf("soak: %v unexpected answers, want none", u)
	}
	if i := p.num("soak.interval_s"); i != 0.5 {
		t.Errorf("soak.interval_s = %v, want 0.5", i)
	}
	samples, _ := p.get("soak.samples").([]any)
	if len(samples) < 12 || len(samples) > 14 {
		t.Fatalf("%d samples, want 13 (6s, one every 500ms, and one at the start)", len(samples))
	}
	soakWarmup := int(p.num("soak.warmup_samples"))
	if soakWarmup != len(samples)/6 {
		t.Errorf("soak.warmup_samples = %v, want a sixth of %d", soakWarmup, len(samples))
	}
	if rc, es := p.num("soak.reconnects"), p.num("soak.event_streams"); rc < float64(len(samples)-3) || es < float64(len(samples)-3) {
		t.Errorf("%v reconnects, %v event streams: want one a round (%d samples)", rc, es, len(samples))
	}
	var at, answered float64 = -1, -1
	for i, x := range samples {
		sm := report{t, fmt.Sprintf("sample %d", i), x.(map[string]any)}
		if sm.num("at_s") <= at || sm.num("answered") < answered {
			t.Errorf("sample %d: at %v s, %v answered, after %v s, %v: want both to grow", i, sm.num("at_s"), sm.num("answered"), at, answered)
		}
		at, answered = sm.num("at_s"), sm.num("answered")
		sm.positive("goroutines", "heap_bytes")
		if i >= soakWarmup { // heap_live_bytes is 0 until the gateway's first collection, which may come after the first sample
			sm.positive("heap_live_bytes")
		}
		if runtime.GOOS == "linux" {
			sm.positive("rss_bytes")
		}
	}
	growth, _ := p.get("soak.growth").([]any)
	failed := map[string]bool{}
	var names []string
	for _, x := range growth {
		g := report{t, "growth", x.(map[string]any)}
		name := g.str("measure")
		names = append(names, name)
		first, last := samples[0].(map[string]any), samples[len(samples)-1].(map[string]any)
		if g.num("start") != first[name].(float64) || g.num("end") != last[name].(float64) {
			t.Errorf("%s: start %v, end %v, want the first and last samples' %v, %v", name, g.num("start"), g.num("end"), first[name], last[name])
		}
		g.same(name+": grew", g.num("grew"), g.num("last_third_median")-g.num("first_third_median"))
		if g.get("failed") == true {
			failed[name] = true
		}
	}
	want := "goroutines heap_live_bytes heap_bytes"
	if runtime.GOOS == "linux" {
		want = "goroutines heap_live_bytes rss_bytes heap_bytes"
	}
	if got := strings.Join(names, " "); got != want {
		t.Errorf("growth of %s, want %s", got, want)
	}
	passed := p.get("soak.passed") == true
	if passed != (len(failed) == 0) || (code == 0) != passed {
		t.Fatalf("passed %v, failed measures %v, exit %d: want exit 0 exactly when nothing grew\n%s", passed, failed, code, stderr.String())
	}
	for name := range failed {
		if !strings.Contains(stderr.String(), strings.TrimSuffix(name, "_bytes")+" ") {
			t.Errorf("%s grew, and stderr does not say so:\n%s", name, stderr.String())
		}
	}
	t.Logf("exit %d; growth: %v", code, growth)
}

// TestBenchSoakTable: the soak's table says what each measure did and
// whether the soak passed.
func TestBenchSoakTable(t *testing.T) {
	out, code := runCLI(t, "bench", "--profile", "soak", "--duration", "2s", "--sample-interval", "250ms", "--warmup", "0", "--store-dir", t.TempDir())
	verdict := "soak:        passed: no growth"
	if code != 0 {
		verdict = "bench: the soak failed"
	}
	for _, want := range []string{"profile  act×ctl×win  applied/s", "soak         16×16×4  ", " samples every 250ms (the first 1 a warm-up); ",
		"soak:        goroutines ", "   limit +10", "soak:        heap_live ", "   limit +25% and +4.0 MB", verdict} {
		if !strings.Contains(out, want) {
			t.Errorf("gateway bench --profile soak (exit %d) prints no %q:\n%s", code, want, out)
		}
	}
	if strings.Contains(out, "floors:") {
		t.Errorf("gateway bench --profile soak prints floors:\n%s", out)
	}
}

// The gateway's soft memory limit, unless GOMEMLIMIT sets one.
func TestSoftMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(old)
	debug.SetMemoryLimit(math.MaxInt64)
	t.Setenv("GOMEMLIMIT", "")
	softMemoryLimit()
	if got := debug.SetMemoryLimit(-1); got != memoryLimit {
		t.Errorf("memory limit without GOMEMLIMIT = %d, want %d", got, memoryLimit)
	}
	debug.SetMemoryLimit(math.MaxInt64)
	t.Setenv("GOMEMLIMIT", "1GiB") // the runtime read it at start; the gateway leaves it alone
	softMemoryLimit()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("memory limit with GOMEMLIMIT set = %d, want it left alone", got)
	}
}
