package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/tests/testenv"
)

func TestPercentile(t *testing.T) {
	ms := func(n ...int) []time.Duration {
		var d []time.Duration
		for _, x := range n {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // unsorted
	}
	tests := []struct {
		name          string
		d             []time.Duration
		p50, p99, top float64
	}{
		{"none", nil, 0, 0, 0},
		{"one", ms(7), 7, 7, 7},
		{"two", ms(9, 1), 1, 9, 9},
		{"1 to 100", ms(hundred...), 50, 99, 100},
	}
	for _, tt := range tests {
		l := latencyOf(tt.d)
		if l.P50 != tt.p50 || l.P99 != tt.p99 || l.P999 != tt.top || l.Samples != len(tt.d) {
			t.Errorf("%s: latencyOf = %+v, want p50 %v p99 %v p99.9 %v samples %d", tt.name, l, tt.p50, tt.p99, tt.top, len(tt.d))
		}
	}
}

func TestSplit(t *testing.T) {
	for _, tt := range []struct{ commands, n int }{{100, 3}, {7, 7}, {1000, 28}, {29, 28}} {
		sum := 0
		for i := range tt.n {
			c := split(tt.commands, tt.n, i)
			if c < 1 {
				t.Errorf("split(%d, %d, %d) = %d, want at least 1", tt.commands, tt.n, i, c)
			}
			sum += c
		}
		if sum != tt.commands {
			t.Errorf("split(%d, %d, ·) sums to %d, want %d", tt.commands, tt.n, sum, tt.commands)
		}
	}
}

// TestProcUsage reads this process's own CPU time and memory, where /proc
// has them.
func TestProcUsage(t *testing.T) {
	if runtime.GOOS != "linux" {
		if _, err := procUsage(os.Getpid()); err == nil {
			t.Fatal("procUsage without /proc: no error")
		}
		return
	}
	before, err := procUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the kernel's own count (getrusage) says this process
	// used 200 ms more CPU: on a busy machine that can take much longer
	// than 200 ms of wall time.
	used := func() time.Duration { return cpuUsed(t) }
	start := used()
	for deadline := time.Now().Add(time.Minute); used()-start < 200*time.Millisecond && time.Now().Before(deadline); {
	}
	after, err := procUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !after.HaveCPU || after.CPU-before.CPU < 150*time.Millisecond {
		t.Errorf("CPU time %v → %v over 200 ms of CPU (getrusage: %v), want at least 150 ms more", before.CPU, after.CPU, used()-start)
	}
	if after.RSS < 1<<20 || after.PeakRSS < after.RSS {
		t.Errorf("RSS %d, peak %d: want 1 MiB or more, and a peak not below it", after.RSS, after.PeakRSS)
	}
	if after.RSSAnon <= 0 || after.RSSAnon >= after.RSS {
		t.Errorf("RSS %d, of it anonymous %d: want some, and less than all (the binary's pages are mapped from a file)", after.RSS, after.RSSAnon)
	}
}

// gatewayBinary builds the gateway with the failpoints tag, once, in
// builtIn, which TestMain removes.
var gatewayBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "bench-test")
	if err != nil {
		return "", err
	}
	builtIn = dir
	bin := filepath.Join(dir, "gateway")
	if out, err := exec.Command("go", "build", "-tags", "failpoints", "-o", bin, "../cmd/gateway").CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the gateway: %v\n%s", err, out)
	}
	return bin, nil
})

var builtIn string

func TestMain(m *testing.M) {
	code := m.Run()
	if builtIn != "" {
		os.RemoveAll(builtIn)
	}
	os.Exit(code)
}

// TestRun runs every profile, tiny, in this process (with the race
// detector under make test), against a gateway process and a broker.
func TestRun(t *testing.T) {
	bin, err := gatewayBinary()
	if err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	o := Options{Gateway: []string{bin}, Broker: testenv.EmbeddedBroker(t), StoreDir: t.TempDir(),
		Actuators: 2, Window: 2, Commands: 40, Warmup: -1, SDCardDelay: time.Millisecond, CommitDelay: true,
		Progress: &syncWriter{w: &progress}}
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range r.Profiles {
		names = append(names, p.Name)
		if p.Applied == 0 || p.Latency.P50 <= 0 {
			t.Errorf("%s: %d applied, p50 %v ms: want some, and a latency", p.Name, p.Applied, p.Latency.P50)
		}
		if p.Profile == Shared && (p.AnswersPerCommand < 0.99 || p.AnswersPerCommand > 1.01 || p.Applied+p.Outcomes["stale"] != p.Commands) {
			t.Errorf("%s: %.2f answers delivered per command, outcomes %v: want 1 (each on its controller's reply topic), applied or stale",
				p.Name, p.AnswersPerCommand, p.Outcomes)
		}
	}
	if got, want := strings.Join(names, " "), "single fleet-2x2 shared-2x16 storm sdcard"; got != want {
		t.Errorf("profiles %s, want %s", got, want)
	}
	if c := r.Floors.RoundTripWithCommit; c == nil || c.Samples == 0 || c.P50 <= 0 {
		t.Errorf("round trip with a commit: %+v, want a measured latency", c)
	} else if r.StoreFS != "tmpfs" && r.StoreFS != "ramfs" && c.P50 <= r.Floors.BrokerRTT.P50 {
		t.Errorf("round trip with a commit p50 %v ms, the round trip alone %v: want the commit to cost something", c.P50, r.Floors.BrokerRTT.P50)
	}
	if entries, err := os.ReadDir(o.StoreDir); err != nil || len(entries) != 0 {
		t.Errorf("the store directory holds %v (%v) after the run, want nothing", entries, err)
	}
	var table bytes.Buffer
	if err := r.WriteTable(&table); err != nil || !strings.Contains(table.String(), "fleet-2x2") ||
		!strings.Contains(table.String(), ", round trip with a commit p50 ") {
		t.Errorf("WriteTable: %v\n%s", err, table.String())
	}
}

// The shared profile counts the answers delivered per command: 1 when
// each goes to the reply topic of the controller that asked, one per
// controller when they all listen on the shared result topics.
func TestSharedAnswersCounted(t *testing.T) {
	bin, err := gatewayBinary()
	if err != nil {
		t.Fatal(err)
	}
	broker := testenv.EmbeddedBroker(t)
	for _, shared := range []bool{false, true} {
		o := Options{Gateway: []string{bin}, Broker: broker, StoreDir: t.TempDir(), Profiles: []string{Shared},
			Actuators: 2, Controllers: 4, Window: 2, Commands: 40, Warmup: -1, SharedAnswers: shared}
		r, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		want := 1.0
		if shared {
			want = 4
		}
		p := r.Profiles[0]
		if p.AnswersPerCommand < want-0.01 || p.AnswersPerCommand > want+0.01 || p.SharedAnswers != shared {
			t.Errorf("shared answers %v: %.2f answers delivered per command, want %.0f", shared, p.AnswersPerCommand, want)
		}
		if e := p.EchoAnswersPerCommand; e == nil || *e < want-0.01 || *e > want+0.01 {
			t.Errorf("shared answers %v: the echo's answers per command = %v, want %.0f", shared, opt(e), want)
		}
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// The single profile's p50 is set against the sum of the floors (the
// target) and against the round trip with a commit (the floors composed,
// with no gateway), so that a reader sees how much of the gap the
// composition alone makes.
func TestSingleAgainstTheComposedFloor(t *testing.T) {
	r := &Report{Floors: &Floors{BrokerRTT: Latency{P50: 0.1}, Commit: Latency{P50: 0.3}, RoundTripWithCommit: &Latency{P50: 0.5}}}
	res := Result{Name: Single, Profile: Single, Actuators: 1, Controllers: 1, Window: 1, Latency: Latency{P50: 1}}
	res.ratios(r, 0)
	if x := res.Ratios.P50VsFloor; x == nil || *x != 2.5 {
		t.Errorf("p50 vs the floors' sum = %v, want 2.5", x)
	}
	if x := res.Ratios.P50VsComposed; x == nil || *x != 2 {
		t.Errorf("p50 vs the round trip with a commit = %v, want 2", x)
	}
	got := strings.Join(res.verdicts(r), "\n")
	for _, want := range []string{"= 2.50 × (broker round trip + commit = 0.400 ms)   target ≤ 1.25",
		"= 2.00 × the round trip with a commit (0.500 ms = 1.25 × the sum: the floors composed, no gateway)"} {
		if !strings.Contains(got, want) {
			t.Errorf("verdicts:\n%s\nwant a line with %q", got, want)
		}
	}
}

// A composed floor whose commits fail is an error, not a floor: a failing
// commit returns at once, and would make the floor look fast.
func TestComposedFloorFailsWithItsCommit(t *testing.T) {
	o := Options{Broker: testenv.EmbeddedBroker(t), Commands: 5, Warmup: -1}
	o.prog = newProgress(nil, 1)
	defer o.prog.done()
	failing := func() error { return errors.New("disk full (injected)") }
	if _, err := o.echoFloor(context.Background(), topology{1, 1, 0}, "floor: round trip with a commit", failing); err == nil ||
		!strings.Contains(err.Error(), "disk full (injected)") {
		t.Errorf("echoFloor with failing commits: %v, want the commit's error", err)
	}
	if _, err := o.echoFloor(context.Background(), topology{1, 1, 0}, "floor: round trip with a commit", func() error { return nil }); err != nil {
		t.Errorf("echoFloor with commits that work: %v", err)
	}
}
