package retention_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/pgtest"
	"github.com/agentreach/agentreach/retention"
)

// What summarises history goes with it: alerts, per-hour agent figures and
// lookups older than their namespace's period are pruned, the rest kept.
func TestSweepPrunesSummariesPastRetention(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Hour)
	svc := retention.New(pool, eventstore.New(pool), slog.New(slog.NewTextHandler(io.Discard, nil)),
		retention.Config{Period: 10 * 24 * time.Hour, Now: func() time.Time { return now }})
	_, err := svc.SetPolicy(ctx, "short", 24*time.Hour, domain.Metadata{Actor: "test"})
	require.NoError(t, err)

	for i, at := range []struct {
		ns  string
		age time.Duration
	}{{"short", 2 * 24 * time.Hour}, {"short", time.Hour}, {"default", 5 * 24 * time.Hour}, {"default", 11 * 24 * time.Hour}} {
		when := now.Add(-at.age)
		_, err := pool.Exec(ctx, `INSERT INTO alerts (position, namespace, kind, subject, stream_id, data, recorded_at)
			VALUES ($1, $2, 'HEALTH_DEGRADED', 'a', 'agent:x', '{}', $3)`, i+1, at.ns, when)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `INSERT INTO agent_stats_hour (namespace, agent_id, capability, bucket, delivery_hist, result_hist)
			VALUES ($1, 'a', 'c', $2, '{}', '{}')`, at.ns, when.Add(-time.Hour))
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `INSERT INTO lookups (key_id, namespace, agent_id, looked_up_at) VALUES ($1, $2, 'a', $3)`,
			string(rune('k'+i)), at.ns, when)
		require.NoError(t, err)
	}
	rep, err := svc.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, []int{2, 2, 2}, []int{rep.Alerts, rep.Hours, rep.Lookups},
		"the short namespace's two-day-old and the default's eleven-day-old go; the rest stay")
	var left []string
	rows, err := pool.Query(ctx, `SELECT namespace || ':' || extract(epoch FROM $1 - recorded_at)::bigint / 3600 FROM alerts ORDER BY 1`, now)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		left = append(left, s)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"default:120", "short:1"}, left)
}
