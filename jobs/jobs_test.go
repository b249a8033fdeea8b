package jobs

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/pgtest"
	"github.com/agentreach/agentreach/registry"
	"github.com/agentreach/agentreach/registry/riverwork"
)

// newService is the jobs service over a fresh database, with a River
// client that inserts but runs nothing: the steps are called by the test.
func newService(t *testing.T) *Service {
	t.Helper()
	return newServiceWith(t, Config{})
}

// newServiceWith is newService with cfg (its PublicURL set).
func newServiceWith(t *testing.T, cfg Config) *Service {
	t.Helper()
	pool := pgtest.NewPool(t)
	store := eventstore.New(pool)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := registry.New(pool, store, logger, registry.Config{})
	cfg.PublicURL = "http://127.0.0.1:1"
	s := NewService(pool, store, reg, logger, cfg)
	workers := river.NewWorkers()
	riverwork.AddWorkers(workers, reg)
	s.AddWorkers(workers)
	client, err := NewClient(pool, logger, workers, ClientConfig{TestOnly: true})
	require.NoError(t, err)
	reg.SetProbes(riverwork.Probes(client))
	s.SetClient(client)
	return s
}

// TestSubmitQueuesAndDrops: a submit appends SUBMITTED with its River
// dispatch and a queued timer in one transaction; the queue depth counts
// it; dropping the backlog removes dispatches and timers, and a River job
// that is gone is not alive.
func TestSubmitQueuesAndDrops(t *testing.T) {
	t.Parallel()
	s := newService(t)
	ctx := context.Background()
	var ids []string
	for range 3 {
		res, err := s.Submit(ctx, domain.Submitted{Capability: "doc:parse", Payload: json.RawMessage(`{}`)}, domain.Metadata{Actor: "test"})
		require.NoError(t, err)
		require.Equal(t, domain.StatusSubmitted, res.Status)
		ids = append(ids, res.JobID)
	}
	l, err := s.Load(ctx, nil, ids[0])
	require.NoError(t, err)
	require.Equal(t, domain.StatusSubmitted, l.Status)
	require.Len(t, l.Records, 1)

	depth, err := s.QueueDepths(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(3), depth[QueueDispatchNormal])
	var timers int
	var riverID int64
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT count(*), coalesce(max(river_job_id), 0) FROM job_timers WHERE phase = 'queued'`).Scan(&timers, &riverID))
	require.Equal(t, 3, timers)

	tx, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	alive, err := s.riverJobAlive(ctx, tx, riverID, s.cfg.LostAfter)
	require.NoError(t, err)
	require.True(t, alive, "a dispatch waiting in River is alive")
	require.NoError(t, tx.Rollback(ctx))

	require.NoError(t, s.DropDispatchBacklog(ctx))
	depth, err = s.QueueDepths(ctx)
	require.NoError(t, err)
	require.Zero(t, depth[QueueDispatchNormal])
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT count(*) FROM job_timers`).Scan(&timers))
	require.Zero(t, timers)
	var lanes int
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT coalesce(sum(depth), 0) + (SELECT count(*) FROM lane_entries) FROM lane_depths`).Scan(&lanes))
	require.Zero(t, lanes, "the lanes' depths are zero: the next submits are not refused for the dropped jobs")

	tx, err = s.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	alive, err = s.riverJobAlive(ctx, tx, riverID, s.cfg.LostAfter)
	require.NoError(t, err)
	require.False(t, alive, "a River job that is gone is not alive")
}
