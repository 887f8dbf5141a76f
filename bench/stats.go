package bench

import (
	"math"
	"slices"
	"time"
)

// Latency is a distribution of command→answer times, in milliseconds.
type Latency struct {
	P50  float64 `json:"p50_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p99_9_ms"`
	// Samples is the number of answers measured; a p99.9 of fewer than
	// 1,000 is the slowest one.
	Samples int `json:"samples"`
}

// latencyOf summarises d (which it sorts).
func latencyOf(d []time.Duration) Latency {
	slices.Sort(d)
	return Latency{P50: ms(percentile(d, 0.50)), P99: ms(percentile(d, 0.99)), P999: ms(percentile(d, 0.999)), Samples: len(d)}
}

// percentile returns the nearest-rank p-th percentile of sorted d: the
// smallest value at or above which lie no more than 1-p of them.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// median returns the median of d (which it sorts).
func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return percentile(d, 0.5)
}
