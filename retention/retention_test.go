package retention_test

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/pgtest"
	"github.com/agentreach/agentreach/projection"
	"github.com/agentreach/agentreach/retention"
	arsql "github.com/agentreach/agentreach/sql"
)

// What records history goes with it: alerts and lookups older than their
// namespace's period are pruned, the rest kept; the agents' per-hour
// figures are summaries and stay (they roll up into days after a month).
func newService(pool *pgxpool.Pool, cfg retention.Config) *retention.Service {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	store := eventstore.New(pool)
	return retention.New(pool, store, eventstore.NewProjector(store, logger, projection.All()...), logger, cfg)
}

func TestSweepPrunesSummariesPastRetention(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Hour)
	svc := newService(pool, retention.Config{Period: 10 * 24 * time.Hour, Now: func() time.Time { return now }})
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
	require.Equal(t, []int{2, 0, 2}, []int{rep.Alerts, rep.Hours, rep.Lookups},
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

// The agents' figures stay bounded: per-minute ones go after
// MinuteFigures, per-hour ones are summed into days after HourFigures,
// in the read model and in its snapshot alike, and the sums are kept.
func TestSweepRollsUpAgentFigures(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	svc := newService(pool, retention.Config{Now: func() time.Time { return now },
		MinuteFigures: 2 * time.Hour, HourFigures: 48 * time.Hour})
	insert := func(table string, at time.Time, n int, hist string) {
		for _, tb := range []string{table, "snapshot_" + table} {
			_, err := pool.Exec(ctx, `INSERT INTO `+tb+` (namespace, agent_id, capability, bucket, attempted, succeeded, delivery_hist, result_hist)
				VALUES ('default', 'a', 'c', $1, $2, $2, $3::int[], $3::int[])`, at, n, hist)
			require.NoError(t, err)
		}
	}
	insert("agent_stats_minute", now.Add(-3*time.Hour), 1, "{1}")
	insert("agent_stats_minute", now.Add(-time.Minute), 1, "{1}")
	// Three hours of one day past the keep, one of the next, one recent.
	day := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	insert("agent_stats_hour", day.Add(1*time.Hour), 2, "{1,0}")
	insert("agent_stats_hour", day.Add(2*time.Hour), 3, "{0,2}")
	insert("agent_stats_hour", day.Add(23*time.Hour), 4, "{1,1}")
	insert("agent_stats_hour", day.Add(24*time.Hour), 5, "{1,1}")
	insert("agent_stats_hour", now.Add(-time.Hour), 6, "{1,1}")
	_, err := pool.Exec(ctx, `INSERT INTO agent_stats_day (namespace, agent_id, capability, bucket, attempted, succeeded, delivery_hist, result_hist)
		VALUES ('default', 'a', 'c', $1, 10, 10, '{5,5}', '{5,5}')`, day)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO snapshot_agent_stats_day SELECT * FROM agent_stats_day`)
	require.NoError(t, err)

	rep, err := svc.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, []int{1, 4}, []int{rep.Minutes, rep.Hours})
	for _, prefix := range []string{"", "snapshot_"} {
		count := func(table string) (n int) {
			require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+prefix+table).Scan(&n))
			return n
		}
		require.Equal(t, 1, count("agent_stats_minute"), prefix)
		require.Equal(t, 1, count("agent_stats_hour"), prefix)
		rows, err := pool.Query(ctx, `SELECT bucket, attempted, succeeded, result_hist FROM `+prefix+`agent_stats_day ORDER BY bucket`)
		require.NoError(t, err)
		type dayRow struct {
			At                   time.Time
			Attempted, Succeeded int
			Hist                 []int32
		}
		days, err := pgx.CollectRows(rows, pgx.RowToStructByPos[dayRow])
		require.NoError(t, err)
		require.Len(t, days, 2, prefix)
		require.True(t, days[0].At.Equal(day) && days[1].At.Equal(day.Add(24*time.Hour)), prefix)
		require.Equal(t, []int{19, 19}, []int{days[0].Attempted, days[0].Succeeded}, "%s: 10 already there, and 2+3+4", prefix)
		require.Equal(t, []int32{7, 8}, days[0].Hist, prefix)
		require.Equal(t, 5, days[1].Attempted, prefix)
	}
	var daily int
	require.NoError(t, pool.QueryRow(ctx, `SELECT sum(attempted) FROM reach_health_daily WHERE agent_id = 'a'`).Scan(&daily))
	require.Equal(t, 19+5+6, daily, "the daily view reads the days and the hours still kept")
	require.ElementsMatch(t, []string{"jobs", "agent_stats", "alerts"}, rep.Snapshots, "the first sweep snapshots every read model")
	rep, err = svc.Sweep(ctx)
	require.NoError(t, err)
	require.Empty(t, rep.Snapshots, "a snapshot is not due again for SnapshotEvery")
}

// A partition that holds direct calls' reports is kept the deployment's
// period past its end, though no job in it holds it, then goes whole.
func TestDirectReportsKeepTheirPartition(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(day.Add(26 * time.Hour).UnixNano())
	svc := newService(pool, retention.Config{Period: 48 * time.Hour, PartitionWidth: 24 * time.Hour, SnapshotEvery: -1,
		Now: func() time.Time { return time.Unix(0, clock.Load()).UTC() }})
	_, err := arsql.EnsureEventPartitionsFor(ctx, pool, domain.TimeRange{Low: day, High: day.Add(24 * time.Hour)})
	require.NoError(t, err)
	batch := uuidAt(day.Add(12 * time.Hour))
	store := eventstore.New(pool)
	_, err = store.Append(ctx, domain.DirectStream(domain.AgentKey{Namespace: "default", ID: "a"}, batch.String()), eventstore.NoStream,
		domain.NewEvent(domain.EventDirectReported, domain.DirectReported{KeyID: "k", Reports: []domain.DirectReport{
			{AgentID: "a", Capability: "c", Reached: true, OK: true, LatencyMS: 5, At: day.Add(12 * time.Hour)}}}, domain.Metadata{Actor: "test"}))
	require.NoError(t, err)
	require.NoError(t, eventstore.NewProjector(store, slog.New(slog.DiscardHandler), projection.All()...).Settle(ctx))
	name := "events_p20261101_000000"

	rep, err := svc.Sweep(ctx)
	require.NoError(t, err)
	require.NotContains(t, rep.Dropped, name, "its reports are within the period")
	clock.Store(day.Add(24*time.Hour + 48*time.Hour + 2*time.Minute).UnixNano())
	rep, err = svc.Sweep(ctx)
	require.NoError(t, err)
	require.Contains(t, rep.Dropped, name, "past its end and the period")
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE starts_with(stream_id, 'direct:')`).Scan(&n))
	require.Zero(t, n)
}

// uuidAt is a UUIDv7 of the millisecond of at.
func uuidAt(at time.Time) uuid.UUID {
	u := uuid.Must(uuid.NewV7())
	ms := uint64(at.UnixMilli())
	for i := range 6 {
		u[i] = byte(ms >> (8 * (5 - i)))
	}
	return u
}

// Snapshots, rebuilds from them and the sweep's roll-ups and prunes touch
// the same tables in one order: run together they take turns, and none
// fails on a deadlock.
func TestSnapshotsRebuildsAndSweepsTakeTurns(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	store := eventstore.New(pool)
	projector := eventstore.NewProjector(store, logger, projection.All()...)
	svc := retention.New(pool, store, projector, logger, retention.Config{SnapshotEvery: -1,
		MinuteFigures: time.Hour, HourFigures: 24 * time.Hour})
	for i := range 3 {
		for _, table := range []string{"agent_stats_minute", "agent_stats_hour"} {
			_, err := pool.Exec(ctx, `INSERT INTO `+table+` (namespace, agent_id, capability, bucket, attempted, delivery_hist, result_hist)
				VALUES ('default', 'a', 'c', now() - $1 * interval '1 hour', 1, '{1}', '{1}')`, i*20)
			require.NoError(t, err)
		}
	}
	var g errgroup.Group
	g.Go(func() error {
		for range 25 {
			for _, p := range projector.Projections() {
				if _, err := projector.TakeSnapshot(ctx, p); err != nil {
					return err
				}
			}
		}
		return nil
	})
	g.Go(func() error {
		for range 25 {
			for _, p := range projector.Projections() {
				if _, err := projector.Rebuild(ctx, p, eventstore.FromSnapshot, nil); err != nil {
					return err
				}
			}
		}
		return nil
	})
	g.Go(func() error {
		for range 25 {
			if _, err := svc.Sweep(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, g.Wait())
}
