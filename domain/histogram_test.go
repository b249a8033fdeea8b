package domain_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
)

func TestLatencyBucket(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ms   float64
		want int
	}{
		{0, 0}, {-3, 0}, {math.NaN(), 0}, {0.5, 0}, {1, 0},
		{1.01, 1}, {1.25, 1}, {1.26, 2}, {1.5625, 2}, {1.6, 3},
		{10, 11}, {100, 21}, {1000, 31}, {60_000, 50},
		{math.Pow(1.25, 79), 79}, {math.Pow(1.25, 79) * 1.01, 80}, {1e300, 80}, {math.Inf(1), 80},
	} {
		require.Equal(t, tc.want, domain.LatencyBucket(tc.ms), "%v ms", tc.ms)
	}
}

func TestLatencyHistogram(t *testing.T) {
	t.Parallel()
	h := domain.LatencyHistogram([]float64{0.2, 1, 10, 10.5, 1e9})
	require.Len(t, h, domain.HistogramBuckets)
	want := make([]int32, domain.HistogramBuckets)
	want[0], want[11], want[80] = 2, 2, 1
	require.Equal(t, want, h)
	require.Equal(t, make([]int32, domain.HistogramBuckets), domain.LatencyHistogram(nil), "empty, not nil")
}
