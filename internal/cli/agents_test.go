package cli_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/internal/cli"
)

func TestUntilIsNeverNegative(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	require.Equal(t, "in 4.2s", cli.Until(now.Add(4200*time.Millisecond), now))
	require.Equal(t, "3s ago", cli.Until(now.Add(-3*time.Second), now))
	require.Equal(t, "in 0s", cli.Until(now, now))
}

func TestNextLeaseChange(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ttl := 20 * time.Second
	for _, tc := range []struct {
		state string
		last  time.Time
		want  string
	}{
		{"HEALTHY", now.Add(-4 * time.Second), "SUSPECT in 6s without a heartbeat"},
		{"HEALTHY", now.Add(-11 * time.Second), "SUSPECT at the next sweep (a heartbeat is overdue)"},
		{"SUSPECT", now.Add(-12 * time.Second), "DOWN in 8s without a heartbeat"},
		{"SUSPECT", now.Add(-25 * time.Second), "DOWN at the next sweep (a heartbeat is overdue)"},
		{"PROBING", now.Add(-5 * time.Second), "DOWN in 15s without a heartbeat"},
		{"DOWN", now.Add(-time.Hour), ""},
		{"DRAINING", now, ""},
		{"OFFLINE", now, ""},
	} {
		require.Equal(t, tc.want, cli.NextLeaseChange(tc.state, tc.last, ttl, now), "%s, last heartbeat %s ago", tc.state, now.Sub(tc.last))
	}
}
