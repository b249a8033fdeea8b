package jobs

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/internal/harness"
)

// TestDirectDispatch: a group-committed submit with a direct dispatcher
// free is dispatched by this process with no River job (here it waits for
// an agent: its timer turns from queued to retry); with every dispatcher
// busy, or once direct dispatch stopped, a submit goes to River; an
// attempt handed to River is enqueued only if it has not started.
func TestDirectDispatch(t *testing.T) {
	t.Parallel()
	s := newService(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.StartGroupCommit(ctx, time.Millisecond, 1)
	s.dispatcher.StartDirect(ctx, 1)
	submit := func() string {
		res, err := s.Submit(ctx, domain.Submitted{Capability: "none.yet", Payload: json.RawMessage(`{"n":1}`)}, domain.Metadata{Actor: "test", TraceID: "t"})
		require.NoError(t, err)
		return res.JobID
	}
	riverJobs := func(id string) (n int) {
		require.NoError(t, s.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = $1 AND args->>'job_id' = $2`,
			DispatchArgs{}.Kind(), id).Scan(&n))
		return n
	}
	phase := func(id string) (p string) {
		require.NoError(t, s.pool.QueryRow(ctx, `SELECT phase FROM job_timers WHERE job_id = $1`, id).Scan(&p))
		return p
	}

	direct := submit()
	ok, err := harness.Until(ctx, 10*time.Second, 5*time.Millisecond, func() (bool, error) { return phase(direct) == "retry", nil })
	require.NoError(t, err)
	require.True(t, ok, "the direct dispatcher found no agent and waits for one")
	require.Zero(t, riverJobs(direct), "a direct dispatch has no River job")

	ok, err = harness.Until(ctx, 10*time.Second, time.Millisecond, func() (bool, error) { return s.dispatcher.Reserve(), nil })
	require.NoError(t, err)
	require.True(t, ok, "the one dispatcher is free again")
	busy := submit()
	s.dispatcher.Release()
	require.Equal(t, 1, riverJobs(busy), "with every dispatcher busy, River dispatches")
	require.Equal(t, "queued", phase(busy))

	s.dispatcher.StopDirect(ctx)
	require.False(t, s.dispatcher.Reserve())
	stopped := submit()
	require.Equal(t, 1, riverJobs(stopped), "once stopped, River dispatches")
	low, err := s.Submit(ctx, domain.Submitted{Capability: "none.yet", Payload: json.RawMessage(`{}`), Priority: domain.PriorityLow}, domain.Metadata{Actor: "test"})
	require.NoError(t, err)
	require.Equal(t, 1, riverJobs(low.JobID), "low work waits in its lane")

	s.dispatcher.HandOver(ctx, direct, domain.QueuedAttempt{Attempt: 1})
	require.Equal(t, 1, riverJobs(direct), "an attempt not started is handed to River")
	l, err := s.Load(ctx, nil, direct)
	require.NoError(t, err)
	routed := domain.NewEvent(domain.EventRouted, domain.Routed{Attempt: 1, AgentID: "a"}, domain.Metadata{Actor: "test"})
	require.NoError(t, s.store.InTx(ctx, func(tx pgx.Tx) error { return s.jobs.AppendTx(ctx, tx, l, domain.Effects{}, routed) }))
	s.dispatcher.HandOver(ctx, direct, domain.QueuedAttempt{Attempt: 1})
	require.Equal(t, 1, riverJobs(direct), "an attempt that started is not")
}

// TestSubmittedFold: the fold a direct dispatcher starts from is the one
// Load reads once the submit committed.
func TestSubmittedFold(t *testing.T) {
	t.Parallel()
	s := newService(t)
	ctx := context.Background()
	res, err := s.Submit(ctx, domain.Submitted{Capability: "doc.parse", Payload: json.RawMessage(`{"a": [1, 2]}`), Priority: domain.PriorityHigh,
		CallbackURL: "http://127.0.0.1:9/cb"}, domain.Metadata{Actor: "test", TraceID: "0123456789abcdef0123456789abcdef"})
	require.NoError(t, err)
	loaded, err := s.Load(ctx, nil, res.JobID)
	require.NoError(t, err)
	var evs []domain.Event
	for _, r := range loaded.Records {
		evs = append(evs, r.Event())
	}
	fold, err := submittedFold(res.JobID, evs, loaded.SubmittedAt)
	require.NoError(t, err)
	require.Equal(t, loaded.Job, fold.Job)
	require.Equal(t, loaded.TraceID, fold.TraceID)
	require.Equal(t, loaded.SubmittedAt, fold.SubmittedAt)
	require.Equal(t, loaded.UpdatedAt, fold.UpdatedAt)
	require.Equal(t, len(loaded.Records), len(fold.Records))
	require.Equal(t, loaded.Records[0].Type, fold.Records[0].Type)
}

// TestKeyedSubmitTakesTheDirectRoad: a submit with an Idempotency-Key is
// dispatched directly like any other (no River job), and its repeat
// answers the same job without writing one.
func TestKeyedSubmitTakesTheDirectRoad(t *testing.T) {
	t.Parallel()
	s := newService(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.StartGroupCommit(ctx, time.Millisecond, 1)
	s.dispatcher.StartDirect(ctx, 4)
	submit := func() domain.SubmitResult {
		res, err := s.Submit(ctx, domain.Submitted{Capability: "none.yet", Payload: json.RawMessage(`{"n":1}`), IdempotencyKey: "k1"},
			domain.Metadata{Actor: "test", TraceID: "t"})
		require.NoError(t, err)
		return res
	}
	first := submit()
	require.False(t, first.Existing)
	var river, keys int
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = $1`, DispatchArgs{}.Kind()).Scan(&river))
	require.Zero(t, river, "no River job: a direct dispatcher took it")
	again := submit()
	require.True(t, again.Existing)
	require.Equal(t, first.JobID, again.JobID)
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys WHERE job_id = $1`, first.JobID).Scan(&keys))
	require.Equal(t, 1, keys)
}
