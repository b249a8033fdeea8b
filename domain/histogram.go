package domain

import "math"

// Latency histograms, as the health figures keep them (agent_stats_minute
// and agent_stats_hour): HistogramBuckets counts, bucket k holding the
// latencies in (1.25^(k-1), 1.25^k] ms, bucket 0 everything up to 1 ms
// and the last everything above. Adjacent bounds differ by 25 %, so a
// percentile read from a histogram is within one bucket of the exact
// value. SQL reads them with reach_hist_quantile (0005_health.sql, where
// reach_latency_bucket is the same function as LatencyBucket).
const HistogramBuckets = 81

// LatencyBucket is the bucket of a latency of ms milliseconds.
func LatencyBucket(ms float64) int {
	if !(ms > 1) { // NaN too
		return 0
	}
	k := math.Ceil(math.Log(ms) / math.Log(1.25))
	if k >= HistogramBuckets-1 {
		return HistogramBuckets - 1
	}
	return int(k)
}

// LatencyHistogram counts latencies into a histogram.
func LatencyHistogram(ms []float64) []int32 {
	h := make([]int32, HistogramBuckets)
	for _, m := range ms {
		h[LatencyBucket(m)]++
	}
	return h
}
