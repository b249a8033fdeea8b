package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRepairSweepPrunesOldMinutes: the per-minute agent figures older
// than MinuteStatsKept go with the repair sweep; the per-hour ones, and
// recent minutes, stay.
func TestRepairSweepPrunesOldMinutes(t *testing.T) {
	t.Parallel()
	s := newService(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Minute)
	for _, table := range []string{"agent_stats_minute", "agent_stats_hour"} {
		for _, at := range []time.Time{now.Add(-MinuteStatsKept - time.Hour), now.Add(-time.Minute)} {
			_, err := s.pool.Exec(ctx, `INSERT INTO `+table+` (namespace, agent_id, capability, bucket, attempted, delivery_hist, result_hist)
				VALUES ('default', 'a1', 'c', $1, 1, '{}', '{}')`, at)
			require.NoError(t, err)
		}
	}
	_, err := s.SweepRepairs(ctx)
	require.NoError(t, err)
	count := func(table string) (n int) {
		require.NoError(t, s.pool.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n))
		return n
	}
	require.Equal(t, 1, count("agent_stats_minute"), "the old minute went, the recent one stays")
	require.Equal(t, 2, count("agent_stats_hour"), "the hours stay")
}
