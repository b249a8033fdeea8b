package domain_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
)

func TestBackoff(t *testing.T) {
	t.Parallel()
	s := time.Second
	for _, tc := range []struct {
		next      int
		base, max time.Duration
		jitter    float64
		want      time.Duration
	}{
		{1, 10 * s, 300 * s, 0.5, 0},
		{2, 10 * s, 300 * s, 0.5, 10 * s},
		{3, 10 * s, 300 * s, 0.5, 20 * s},
		{4, 10 * s, 300 * s, 0.5, 40 * s},
		{7, 10 * s, 300 * s, 0.5, 300 * s}, // 320 s capped
		{50, 10 * s, 300 * s, 0.5, 300 * s},
		{2, 10 * s, 300 * s, 0, 7500 * time.Millisecond},
		{2, 10 * s, 300 * s, 0.999999, 12499990 * time.Microsecond},
		{7, 10 * s, 300 * s, 0.99, 300 * s}, // jitter never exceeds the cap
		{3, 100 * time.Millisecond, 150 * time.Millisecond, 0.5, 150 * time.Millisecond},
	} {
		got := domain.Backoff(tc.next, tc.base, tc.max, tc.jitter)
		require.InDelta(t, float64(tc.want), float64(got), float64(time.Millisecond), "%+v", tc)
	}
	require.Equal(t, 30*s, domain.RetryAfter(10*s, 30*s))
	require.Equal(t, 10*s, domain.RetryAfter(10*s, 0))
}
