package loadgen

import (
	"math"
	"slices"
	"time"
)

// Summary is the latency distribution of a run.
type Summary struct {
	Count              int
	P50, P95, P99, Max time.Duration
	Mean               time.Duration
}

// Summarize computes the distribution of latencies (which it sorts in
// place). Percentiles are nearest-rank: the smallest latency that at least
// p% of the requests did not exceed, always one that was measured.
func Summarize(latencies []time.Duration) Summary {
	if len(latencies) == 0 {
		return Summary{}
	}
	slices.Sort(latencies)
	var sum time.Duration
	for _, l := range latencies {
		sum += l
	}
	return Summary{
		Count: len(latencies),
		P50:   Percentile(latencies, 50),
		P95:   Percentile(latencies, 95),
		P99:   Percentile(latencies, 99),
		Max:   latencies[len(latencies)-1],
		Mean:  sum / time.Duration(len(latencies)),
	}
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted latencies: the value at rank ceil(p/100 * n). It returns 0 for no
// latencies.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	// p*n first keeps whole ranks exact (0.99*100 is not 99 in floats).
	rank := int(math.Ceil(p * float64(n) / 100))
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}
