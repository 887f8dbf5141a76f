package bench

import (
	"bufio"
	"context"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/tests/testenv"
)

// series makes n samples of a gateway: goroutines, live heap and RSS from
// the functions of the sample's index.
func series(n int, goroutines func(int) int, live, rss func(int) float64) []Sample {
	s := make([]Sample, n)
	for i := range s {
		s[i] = Sample{AtS: float64(i) * 10, Goroutines: goroutines(i), HeapLiveBytes: uint64(live(i)),
			HeapBytes: uint64(1.5 * live(i)), RSSBytes: int64(rss(i))}
	}
	return s
}

func flat[T int | float64](v T) func(int) T { return func(int) T { return v } }

// TestJudge: the growth test passes a flat series, noisy or not, and fails
// a steady rise of goroutines or memory, naming what grew.
func TestJudge(t *testing.T) {
	const mb = 1 << 20
	noise := rand.New(rand.NewPCG(1, 2))
	noisyG := make([]int, 61)
	noisyLive, noisyRSS := make([]float64, 61), make([]float64, 61)
	for i := range noisyG {
		noisyG[i] = 30 + noise.IntN(5)
		if i%6 == 0 {
			noisyG[i] += 15 // a burst (clients connected while sampled), the last sample too
		}
		noisyLive[i] = 6*mb + noise.Float64()*1.5*mb
		noisyRSS[i] = 25*mb + noise.NormFloat64()*mb
	}
	tests := []struct {
		name    string
		samples []Sample
		failed  []string // measures that fail
	}{
		{"flat", series(61, flat(30), flat(6.0*mb), flat(25.0*mb)), nil},
		{"noisy flat", series(61, func(i int) int { return noisyG[i] }, func(i int) float64 { return noisyLive[i] },
			func(i int) float64 { return noisyRSS[i] }), nil},
		{"goroutines rise one a sample", series(61, func(i int) int { return 30 + i }, flat(6.0*mb), flat(25.0*mb)), []string{"goroutines"}},
		{"goroutines rise by 9 in all", series(61, func(i int) int { return 30 + 9*i/60 }, flat(6.0*mb), flat(25.0*mb)), nil},
		{"live heap rises 0.2 MB a sample", series(61, flat(30), func(i int) float64 { return 6*mb + float64(i)*0.2*mb }, flat(25.0*mb)),
			[]string{"heap_live_bytes"}},
		{"RSS rises 0.3 MB a sample", series(61, flat(30), flat(6.0*mb), func(i int) float64 { return 25*mb + float64(i)*0.3*mb }),
			[]string{"rss_bytes"}},
		// Tripled, but by less than 4 MB: a small heap's noise.
		{"small heap triples", series(61, flat(30), func(i int) float64 { return 1*mb + float64(i)/60*mb*2 }, flat(25.0*mb)), nil},
		// More than 4 MB, but less than a quarter of a large RSS.
		{"large RSS rises 12 MB", series(61, flat(30), flat(6.0*mb), func(i int) float64 { return 100*mb + float64(i)/60*12*mb }), nil},
		// The start is left out: the first sixth of the samples.
		{"warm-up", series(61, func(i int) int { return min(10+10*i, 40) }, func(i int) float64 { return min(1+float64(i), 6) * mb },
			flat(25.0*mb)), nil},
		{"fewest samples", series(minSoakSamples, func(i int) int { return 30 + 20*i }, flat(6.0*mb), flat(25.0*mb)), []string{"goroutines"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			growth, err := judge(tt.samples)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			measured := map[string]bool{}
			for _, g := range growth {
				measured[g.Measure] = true
				if g.Failed {
					got = append(got, g.Measure)
				}
				if g.Grew != g.Last-g.First {
					t.Errorf("%s: grew %v, want %v - %v", g.Measure, g.Grew, g.Last, g.First)
				}
			}
			if strings.Join(got, " ") != strings.Join(tt.failed, " ") {
				t.Errorf("failed measures %v, want %v\n%+v", got, tt.failed, growth)
			}
			for _, m := range []string{"goroutines", "heap_live_bytes", "rss_bytes", "heap_bytes"} {
				if !measured[m] {
					t.Errorf("no growth of %s in %+v", m, growth)
				}
			}
			r := &Report{Profiles: []Result{{Name: Soak, Profile: Soak, Soak: &SoakResult{Samples: tt.samples, Growth: growth}}}}
			err = r.Err()
			if (err != nil) != (len(tt.failed) > 0) {
				t.Fatalf("Report.Err() = %v, want an error exactly when a measure failed (%v)", err, tt.failed)
			}
			for _, m := range tt.failed {
				name := strings.TrimSuffix(m, "_bytes") + " "
				if !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "FAILED: limit +") {
					t.Errorf("Report.Err() = %v, want it to name %q and its limit", err, name)
				}
			}
		})
	}

	t.Run("first and last", func(t *testing.T) {
		// 13 samples: 2 of warm-up, then thirds of 3 (11 judged).
		s := series(13, func(i int) int { return []int{5, 7, 20, 21, 19, 30, 30, 30, 30, 31, 44, 40, 42}[i] }, flat(6.0*mb), flat(25.0*mb))
		growth, err := judge(s)
		if err != nil {
			t.Fatal(err)
		}
		g := growth[0]
		if g.Measure != "goroutines" || g.Start != 5 || g.End != 42 || g.First != 20 || g.Last != 42 || g.Grew != 22 || !g.Failed {
			t.Errorf("goroutines: %+v, want start 5, end 42, first third's median 20, last's 42, grew 22, failed", g)
		}
	})

	t.Run("no RSS", func(t *testing.T) {
		growth, err := judge(series(20, flat(30), flat(6.0*mb), flat(0.0)))
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range growth {
			if g.Measure == "rss_bytes" {
				t.Errorf("growth of an RSS never sampled (no /proc): %+v", g)
			}
		}
	})

	t.Run("too few samples", func(t *testing.T) {
		if _, err := judge(series(minSoakSamples-1, flat(30), flat(6.0*mb), flat(25.0*mb))); err == nil {
			t.Errorf("judge(%d samples): no error", minSoakSamples-1)
		}
	})
}

// TestSoakCatchesALeak runs the soak on a gateway that a client of its
// event stream makes grow: two more streams held open after each sample,
// each a handler and its goroutines. The soak fails and names the
// goroutines; the rest of its report is there.
func TestSoakCatchesALeak(t *testing.T) {
	bin, err := gatewayBinary()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []func() error
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c()
		}
	})
	client := &http.Client{Transport: &http.Transport{}}
	o := Options{Gateway: []string{bin}, Broker: testenv.EmbeddedBroker(t), StoreDir: t.TempDir(), Profiles: []string{Soak},
		Actuators: 4, Duration: 3 * time.Second, SampleInterval: 200 * time.Millisecond, Warmup: -1,
		onSample: func(gw *gateway) {
			for range 2 {
				resp, err := client.Get("http://" + gw.http + "/api/events")
				if err != nil {
					t.Errorf("GET /api/events: %v", err)
					return
				}
				mu.Lock()
				held = append(held, resp.Body.Close)
				mu.Unlock()
				if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
					t.Errorf("GET /api/events: %v", err)
				}
			}
		}}
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Profiles) != 1 || r.Profiles[0].Soak == nil || r.Floors != nil {
		t.Fatalf("profiles %+v, floors %+v: want the soak alone, and no floors", r.Profiles, r.Floors)
	}
	p := r.Profiles[0]
	s := p.Soak
	if len(s.Samples) < 14 || s.Passed {
		t.Errorf("%d samples, passed %v: want 16 (3s every 200ms) or about, and a failure", len(s.Samples), s.Passed)
	}
	err = r.Err()
	t.Logf("Report.Err() = %v", err)
	if err == nil || !strings.Contains(err.Error(), "goroutines ") || !strings.Contains(err.Error(), "FAILED: limit +10") {
		t.Errorf("Report.Err() = %v, want the goroutines' growth named", err)
	}
	if s.Reconnects < len(s.Samples)-3 || s.EventStreams < len(s.Samples)-3 || s.Unexpected != 0 {
		t.Errorf("%d reconnects, %d event streams, %d unexpected answers: want one reconnect and event stream per round (%d samples), none unexpected",
			s.Reconnects, s.EventStreams, s.Unexpected, len(s.Samples))
	}
	for _, out := range []string{"applied", "stale", "duplicate"} {
		if p.Outcomes[out] == 0 {
			t.Errorf("outcomes %v: want some %s", p.Outcomes, out)
		}
	}
}
