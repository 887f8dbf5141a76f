package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/fencegate/fencegate/fence"
)

// The soak: one gateway under a steady, fleet-like load for minutes, its
// goroutines, heap and resident memory sampled at intervals, and judged for
// growth.

// Soak defaults and limits.
const (
	DefaultSoakDuration   = 10 * time.Minute
	DefaultSampleInterval = 10 * time.Second
	soakActuators         = 16
	soakWindow            = 4
	// maxSoakWindow keeps a duplicate's original among the gateway's 32
	// recent commands of its scope, with the window's commands sent
	// since.
	maxSoakWindow   = fence.Window / 2
	maxSoakDuration = 24 * time.Hour
	minSampleEvery  = 100 * time.Millisecond
	// minSoakSamples: a warm-up sample and two in each third.
	minSoakSamples = 7
	// What growth fails the soak: goroutines, more than this many; memory,
	// more than both this share and this many bytes.
	maxGoroutineGrowth = 10
	maxMemoryGrowth    = 0.25
	maxMemoryBytes     = 4 << 20
)

// SoakResult is the soak profile's own figures.
type SoakResult struct {
	// IntervalS is the time between samples; the first sample is taken
	// after the warm-up phase, the others each after a round of load,
	// once the round's commands are answered.
	IntervalS float64 `json:"interval_s"`
	// WarmupSamples are the first samples, which the growth test leaves
	// out: the process settles (its heap, the store's file while the
	// audit trail fills up).
	WarmupSamples int `json:"warmup_samples"`
	// Reconnects counts controllers that disconnected and connected
	// again (one after each round); EventStreams the clients of GET
	// /api/events that read a decision and left (one each round, as a
	// dashboard opened and closed).
	Reconnects   int `json:"reconnects"`
	EventStreams int `json:"event_streams"`
	// Unexpected counts answers other than what their command called
	// for: applied for a fresh command, stale for a stale one, duplicate
	// for a duplicate.
	Unexpected int      `json:"unexpected"`
	Samples    []Sample `json:"samples"`
	// Growth judges each measure; Passed is false if one grew too much.
	Growth []Growth `json:"growth"`
	Passed bool     `json:"passed"`
}

// Sample is the gateway process at a moment of the soak.
type Sample struct {
	// AtS is the time since the soak's first sample; Answered the
	// commands answered since then.
	AtS      float64 `json:"at_s"`
	Answered int     `json:"answered"`
	// Goroutines, HeapBytes and HeapLiveBytes are the gateway's own
	// counts (runtime in GET /api/status).
	Goroutines    int    `json:"goroutines"`
	HeapBytes     uint64 `json:"heap_bytes"`
	HeapLiveBytes uint64 `json:"heap_live_bytes"`
	// RSSBytes is its resident memory (Linux; 0 elsewhere).
	RSSBytes int64 `json:"rss_bytes"`
}

// Growth is one measure over the soak: its first and last sample, and the
// medians of the first and last thirds of the samples after the warm-up,
// which decide.
type Growth struct {
	Measure string  `json:"measure"`
	Start   float64 `json:"start"`
	End     float64 `json:"end"`
	First   float64 `json:"first_third_median"`
	Last    float64 `json:"last_third_median"`
	// Grew is Last - First.
	Grew float64 `json:"grew"`
	// Limit is the growth that fails the soak ("" for a measure shown but
	// not judged); Failed says it was exceeded.
	Limit  string `json:"limit,omitempty"`
	Failed bool   `json:"failed"`
}

// measures of a sample, in the report's order; bytes says a measure is
// memory; judged, that its growth can fail the soak. heap_bytes is shown
// only: it rises between collections and falls at each one.
var measures = []struct {
	name          string
	bytes, judged bool
	of            func(Sample) float64
}{
	{"goroutines", false, true, func(s Sample) float64 { return float64(s.Goroutines) }},
	{"heap_live_bytes", true, true, func(s Sample) float64 { return float64(s.HeapLiveBytes) }},
	{"rss_bytes", true, true, func(s Sample) float64 { return float64(s.RSSBytes) }},
	{"heap_bytes", true, false, func(s Sample) float64 { return float64(s.HeapBytes) }},
}

// soakWarmup is the number of samples of n that the growth test leaves
// out: a sixth, at least one.
func soakWarmup(n int) int { return max(1, n/6) }

// judge decides whether samples show growth. After the warm-up, the median
// of the last third of the samples is compared with that of the first
// third: medians, so that a sample taken in a burst (a collection about to
// run, a client connected) moves neither; thirds, so that a steady rise
// shows as a difference of two thirds of it. Goroutines fail above
// maxGoroutineGrowth more; memory above both maxMemoryGrowth and
// maxMemoryBytes more. A measure never sampled (RSS without /proc) is left
// out.
func judge(samples []Sample) ([]Growth, error) {
	if len(samples) < minSoakSamples {
		return nil, fmt.Errorf("bench: soak: %d samples, want at least %d to judge growth", len(samples), minSoakSamples)
	}
	judged := samples[soakWarmup(len(samples)):]
	third := len(judged) / 3
	var out []Growth
	for _, m := range measures {
		all := make([]float64, len(samples))
		for i, s := range samples {
			all[i] = m.of(s)
		}
		if slices.Max(all) == 0 {
			continue
		}
		j := all[len(all)-len(judged):]
		g := Growth{Measure: m.name, Start: all[0], End: all[len(all)-1],
			First: medianOf(j[:third]), Last: medianOf(j[len(j)-third:])}
		g.Grew = g.Last - g.First
		switch {
		case !m.judged:
		case m.bytes:
			g.Limit = fmt.Sprintf("+%.0f%% and +%s", maxMemoryGrowth*100, mbString(maxMemoryBytes))
			g.Failed = g.Grew > maxMemoryBytes && g.Grew > maxMemoryGrowth*g.First
		default:
			g.Limit = fmt.Sprintf("+%d", maxGoroutineGrowth)
			g.Failed = g.Grew > maxGoroutineGrowth
		}
		out = append(out, g)
	}
	return out, nil
}

// medianOf returns the median of x (the mean of the middle two of an even
// number), without changing x.
func medianOf(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := slices.Clone(x)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

func mbString(b float64) string { return fmt.Sprintf("%.1f MB", b/mib) }

// String says what a measure did, for people.
func (g Growth) String() string {
	f := func(x float64) string { return fmt.Sprintf("%.0f", x) }
	if g.Measure != "goroutines" {
		f = mbString
	}
	sign := "+"
	if g.Grew < 0 {
		sign = "-"
	}
	s := fmt.Sprintf("%s %s → %s; median of the first third %s, of the last %s: %s%s",
		strings.TrimSuffix(g.Measure, "_bytes"), f(g.Start), f(g.End), f(g.First), f(g.Last), sign, f(max(g.Grew, -g.Grew)))
	if g.Measure != "goroutines" && g.First > 0 {
		s += fmt.Sprintf(" (%s%.0f%%)", sign, 100*max(g.Grew, -g.Grew)/g.First)
	}
	switch {
	case g.Limit == "":
		return s + "   shown, not judged (rises and falls with each collection)"
	case g.Failed:
		return s + "   FAILED: limit " + g.Limit
	}
	return s + "   limit " + g.Limit
}

// Err says what grew too much in the soak, if anything did; nil
// otherwise, or for a report without a soak.
func (r *Report) Err() error {
	var grew []string
	for _, p := range r.Profiles {
		if p.Soak == nil {
			continue
		}
		for _, g := range p.Soak.Growth {
			if g.Failed {
				grew = append(grew, g.String())
			}
		}
		if n := p.Soak.Unexpected; n > 0 {
			grew = append(grew, fmt.Sprintf("%d answers were not what their commands called for (outcomes %v)", n, p.Outcomes))
		}
	}
	if len(grew) == 0 {
		return nil
	}
	return fmt.Errorf("bench: the soak failed (growth: the median of the last third of the samples after the warm-up against that of the first third):\n  %s",
		strings.Join(grew, "\n  "))
}

// verdicts says what the soak p saw, and whether it passed.
func (s *SoakResult) verdicts(p Result) []string {
	v := []string{fmt.Sprintf("%.0f s, %d samples every %s (the first %d a warm-up); %d reconnects, %d event streams; %d commands: %d applied, %d stale, %d duplicate",
		p.Seconds, len(s.Samples), time.Duration(s.IntervalS*float64(time.Second)), s.WarmupSamples, s.Reconnects, s.EventStreams,
		p.Commands, p.Outcomes[string(fence.Applied)], p.Outcomes[string(fence.Stale)], p.Outcomes[string(fence.Duplicate)])}
	for _, g := range s.Growth {
		v = append(v, g.String())
	}
	if s.Unexpected > 0 {
		v = append(v, fmt.Sprintf("FAILED: %d answers were not what their commands called for: %v", s.Unexpected, p.Outcomes))
	}
	if s.Passed && s.Unexpected == 0 {
		v = append(v, "passed: no growth")
	}
	return v
}

// soakMix: eight fresh commands in ten, a stale one and a duplicate.
func soakMix(n int) kind {
	switch n % 10 {
	case 8:
		return stale
	case 9:
		return dup
	}
	return fresh
}

// soak runs the soak profile on one gateway: rounds of load, each
// o.SampleInterval long, and after each a sample of the gateway, and one
// controller reconnecting; during each, a client of the event stream.
func (o *Options) soak(ctx context.Context) (Result, error) {
	n, m, w := o.shape(Soak, 0)
	res := Result{Name: Soak, Profile: Soak, Actuators: n, Controllers: m, Window: w}
	s := &SoakResult{IntervalS: o.SampleInterval.Seconds(), Samples: []Sample{}}
	res.Soak = s
	gw, g, err := o.begin(ctx, &res, Soak, 0)
	if err != nil {
		return res, err
	}
	defer gw.kill()
	defer g.close()
	answered := o.prog.count()
	fail := func(err error) (Result, error) { return res, fmt.Errorf("bench: soak: %w\n%s", err, gw.stderr) }
	if err := o.warmup(ctx, g, w, Soak); err != nil {
		return fail(err)
	}
	before, err := gw.measure(ctx)
	if err != nil {
		return res, err
	}
	mixes := make([]mix, m)
	for i := range mixes {
		mixes[i] = soakMix
	}
	start := time.Now()
	end := start.Add(o.Duration)
	o.prog.next("soak", limit{deadline: end})
	total := newTally()
	for round := 1; ; round++ {
		sm, err := gw.sample(ctx)
		if err != nil {
			return fail(err)
		}
		sm.AtS = time.Since(start).Seconds()
		sm.Answered = total.answered(fresh) + total.answered(stale) + total.answered(dup)
		s.Samples = append(s.Samples, sm)
		o.prog.relabel(fmt.Sprintf("soak: %d goroutines, live heap %s, RSS %s", sm.Goroutines,
			mbString(float64(sm.HeapLiveBytes)), mbString(float64(sm.RSSBytes))))
		if o.onSample != nil {
			o.onSample(gw)
		}
		if !time.Now().Before(end) {
			break
		}
		if round > 1 {
			if err := g[round%m].reconnect(ctx); err != nil {
				return fail(err)
			}
			s.Reconnects++
		}
		roundEnd := start.Add(time.Duration(round) * o.SampleInterval)
		if roundEnd.After(end) {
			roundEnd = end
		}
		streamed := make(chan bool, 1)
		go func() { streamed <- gw.readEvent(ctx, roundEnd) }()
		t, err := g.run(ctx, w, mixes, func(int) limit { return limit{deadline: roundEnd} }, o.prog.answer)
		if <-streamed {
			s.EventStreams++
		}
		if err != nil {
			return fail(err)
		}
		total.merge(t)
		if d := time.Until(roundEnd); d > 0 {
			select { // the round's last answers came early
			case <-time.After(d):
			case <-ctx.Done():
				return res, ctx.Err()
			}
		}
	}
	after, err := gw.measure(ctx)
	if err != nil {
		return res, err
	}
	res.phase(total, before, after)
	res.Latency = latencyOf(total.latency[fresh])
	want := [nKinds]fence.Outcome{fresh: fence.Applied, stale: fence.Stale, dup: fence.Duplicate}
	for k, outs := range total.outcomes {
		for out, c := range outs {
			if out != want[k] {
				s.Unexpected += c
			}
		}
	}
	ps, err := gw.stop()
	if err != nil {
		return res, err
	}
	res.usage(before, after, ps, o.prog.count()-answered)
	s.WarmupSamples = soakWarmup(len(s.Samples))
	if s.Growth, err = judge(s.Samples); err != nil {
		return res, err
	}
	s.Passed = !slices.ContainsFunc(s.Growth, func(g Growth) bool { return g.Failed })
	return res, nil
}

// sample reads the gateway's goroutines and heap from GET /api/status and
// its resident memory from /proc.
func (g *gateway) sample(ctx context.Context) (Sample, error) {
	var st struct {
		Runtime *struct {
			Goroutines    int    `json:"goroutines"`
			HeapBytes     uint64 `json:"heap_bytes"`
			HeapLiveBytes uint64 `json:"heap_live_bytes"`
		} `json:"runtime"`
	}
	if err := g.status(ctx, &st); err != nil {
		return Sample{}, err
	}
	if st.Runtime == nil {
		return Sample{}, fmt.Errorf("bench: GET http://%s/api/status has no runtime: the gateway is older than the bench", g.http)
	}
	s := Sample{Goroutines: st.Runtime.Goroutines, HeapBytes: st.Runtime.HeapBytes, HeapLiveBytes: st.Runtime.HeapLiveBytes}
	if u, err := g.usage(); err == nil {
		s.RSSBytes = u.RSS
	}
	return s, nil
}

// readEvent connects to the gateway's event stream, as a dashboard does,
// reads one decision and leaves; it reports whether it read one before
// the deadline.
func (g *gateway) readEvent(ctx context.Context, deadline time.Time) bool {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+g.http+"/api/events", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if sc.Text() == "event: decision" {
			return true
		}
	}
	return false
}
