package domain_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
)

func TestFlapDamping(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	require.Equal(t, 1, domain.ProbesNeeded(2))
	require.Equal(t, 3, domain.ProbesNeeded(3))
	for _, tc := range []struct {
		restarts int
		age      time.Duration
		want     float64
	}{
		{2, 0, 0},                 // two restarts are not flapping
		{3, 0, 20},                // just restarted: the whole penalty
		{5, 10 * time.Minute, 10}, // one half-life later, half of it
		{3, 20 * time.Minute, 5},  // two
		{3, time.Hour, 0},         // out of the window
		{3, -time.Second, 20},     // a clock a little behind
	} {
		require.InDelta(t, tc.want, domain.FlapPenalty(tc.restarts, at, at.Add(tc.age)), 1e-9, "%d restarts, %s", tc.restarts, tc.age)
	}
}
