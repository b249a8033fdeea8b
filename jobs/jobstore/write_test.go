package jobstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/pgtest"
)

// queued is a Queue that keeps what it was asked for and numbers it.
type queued struct {
	mu   sync.Mutex
	jobs []Enqueued
}

func (q *queued) InsertTx(_ context.Context, _ pgx.Tx, jobs []Enqueued) ([]int64, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		q.jobs = append(q.jobs, j)
		ids[i] = int64(len(q.jobs))
	}
	return ids, nil
}

func newStore(t *testing.T) (*Store, *queued) {
	t.Helper()
	pool := pgtest.NewPool(t)
	q := &queued{}
	return New(pool, eventstore.New(pool), q, Config{LostAfter: 10 * time.Second, CallbackGrace: 45 * time.Second}), q
}

// newJob writes a submitted job, as a write that creates its stream.
func newJob(t *testing.T, s *Store) *Loaded {
	t.Helper()
	return newJobOf(t, s, "doc:parse", domain.PriorityNormal)
}

func routedEvent(l *Loaded, agentID string) domain.Event {
	return domain.NewEvent(domain.EventRouted, domain.Routed{Attempt: l.Attempts + 1, AgentID: agentID}, domain.Metadata{Actor: "test"})
}

// requireVersions checks each job's stream version.
func requireVersions(t *testing.T, s *Store, want map[string]int) {
	t.Helper()
	for id, version := range want {
		l, err := s.Load(context.Background(), nil, id)
		require.NoError(t, err)
		require.Equal(t, version, l.Version, id)
	}
}

func decided(t *testing.T, w *Write) *Write {
	t.Helper()
	require.NoError(t, w.Decide())
	return w
}

// TestSharedWriteLeavesOutOnlyTheStale: writes of several jobs share one
// transaction; one decided on a fold another writer has moved past, and a
// second write to a job already written in the same transaction, get the
// conflict (their callers reload and decide again), and the others are
// written, each at its own version, with nothing of the refused ones.
func TestSharedWriteLeavesOutOnlyTheStale(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	mk := func(l *Loaded, evs ...domain.Event) *Write { return decided(t, &Write{L: l, Events: evs}) }
	a, b, stale := newJob(t, s), newJob(t, s), newJob(t, s)
	// stale's stream moves on behind its fold's back.
	_, err := s.events.Append(ctx, domain.JobStream(stale.JobID), stale.Version, routedEvent(stale, "elsewhere"))
	require.NoError(t, err)
	aAgain := *a
	ws := []*Write{mk(a, routedEvent(a, "one")), mk(stale, routedEvent(stale, "two")), mk(b, routedEvent(b, "three")),
		mk(&aAgain, routedEvent(&aAgain, "four"))}
	require.True(t, appendsAtBegin(ws, nil, false), "the appends go with BEGIN")
	s.Commit(ctx, ws, nil)
	require.NoError(t, ws[0].Err)
	require.ErrorIs(t, ws[1].Err, eventstore.ErrConflict)
	require.NoError(t, ws[2].Err)
	require.ErrorIs(t, ws[3].Err, eventstore.ErrConflict, "the second write of job a")
	for id, agent := range map[string]string{a.JobID: "one", b.JobID: "three", stale.JobID: "elsewhere"} {
		l, err := s.Load(ctx, nil, id)
		require.NoError(t, err)
		require.Equal(t, 2, l.Version, id)
		require.Equal(t, agent, l.AgentID, id)
	}
}

// TestSharedWriteLeavesOutTheWriteWhoseEffectFails: the writes' effects go
// out as one statement of each kind; when one write's row makes such a
// statement fail, the writes run again each with statements of its own,
// and only that write fails: the others are written with their effects.
func TestSharedWriteLeavesOutTheWriteWhoseEffectFails(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	due := s.now().Add(time.Hour)
	mk := func(l *Loaded, phase domain.TimerPhase) *Write {
		return decided(t, &Write{L: l, Events: []domain.Event{routedEvent(l, "one")},
			Effects: domain.Effects{Timer: &domain.Timer{Attempt: 1, Phase: phase, Due: due, AgentID: "one"}}})
	}
	a, bad, b := newJob(t, s), newJob(t, s), newJob(t, s)
	ws := []*Write{mk(a, domain.PhaseRouted), mk(bad, "no-such-phase"), mk(b, domain.PhaseRouted)}
	require.True(t, appendsAtBegin(ws, nil, false), "the appends go with BEGIN")
	s.Commit(ctx, ws, nil)
	require.NoError(t, ws[0].Err)
	require.Error(t, ws[1].Err)
	require.NoError(t, ws[2].Err)
	requireVersions(t, s, map[string]int{a.JobID: 2, b.JobID: 2, bad.JobID: 1})
	for _, id := range []string{a.JobID, b.JobID} {
		var phase string
		require.NoError(t, s.pool.QueryRow(ctx, "SELECT phase FROM job_timers WHERE job_id = $1", id).Scan(&phase))
		require.Equal(t, string(domain.PhaseRouted), phase, id)
	}
}

// TestSharedWriteLeavesOutTheWriteWhoseEventsFail: every write's events go
// out as one statement; when one write's event cannot be stored, the
// writes run again each alone, and only that write fails.
func TestSharedWriteLeavesOutTheWriteWhoseEventsFail(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	mk := func(l *Loaded, traceID string) *Write {
		ev := routedEvent(l, "one")
		ev.Metadata.TraceID = traceID // metadata is stored as jsonb, which holds no NUL
		return decided(t, &Write{L: l, Events: []domain.Event{ev}})
	}
	a, bad, b := newJob(t, s), newJob(t, s), newJob(t, s)
	ws := []*Write{mk(a, "a"), mk(bad, "nul\x00"), mk(b, "b")}
	s.Commit(ctx, ws, nil)
	require.NoError(t, ws[0].Err)
	require.Error(t, ws[1].Err)
	require.NoError(t, ws[2].Err)
	requireVersions(t, s, map[string]int{a.JobID: 2, b.JobID: 2, bad.JobID: 1})
}

// TestAppendTxIsABatchOfOne: a write in the caller's transaction goes
// through the same statements: events, then the timer that watches the
// River job queued with them (naming it), and the fold moves on; a stale
// fold is a conflict.
func TestAppendTxIsABatchOfOne(t *testing.T) {
	t.Parallel()
	s, q := newStore(t)
	ctx := context.Background()
	l := newJob(t, s)
	routed := routedEvent(l, "gone")
	failed := domain.NewEvent(domain.EventAttemptFailed, domain.AttemptFailed{Attempt: 1, Reason: "no_agent"}, domain.Metadata{})
	require.NoError(t, s.events.InTx(ctx, func(tx pgx.Tx) error {
		return s.AppendTx(ctx, tx, l, domain.Effects{Queue: &domain.QueuedAttempt{Attempt: 2}}, routed, failed)
	}))
	require.Equal(t, 3, l.Version, "the fold moved on")
	require.Equal(t, []Enqueued{{Kind: EnqueueDispatch, JobID: l.JobID, Attempt: 2, Priority: l.Priority}}, q.jobs)
	var phase string
	var riverJob *int64
	require.NoError(t, s.pool.QueryRow(ctx, "SELECT phase, river_job_id FROM job_timers WHERE job_id = $1", l.JobID).Scan(&phase, &riverJob))
	require.Equal(t, string(domain.PhaseQueued), phase)
	require.NotNil(t, riverJob)
	require.Equal(t, int64(1), *riverJob, "the queued timer names its River job")
	stale := *l
	stale.Version = 1
	err := s.events.InTx(ctx, func(tx pgx.Tx) error { return s.AppendTx(ctx, tx, &stale, domain.Effects{}, routed) })
	require.ErrorIs(t, err, eventstore.ErrConflict, "a stale fold")
}

// TestTimerPrecedence: of the timers a write's effects set, the job keeps
// the last: its own, then its retry's, then its callback's, then its
// queued attempt's; a cleared timer that another replaces is not deleted.
func TestTimerPrecedence(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	at := s.now().Add(time.Minute)
	for name, c := range map[string]struct {
		fx   domain.Effects
		want domain.TimerPhase
	}{
		"own":            {domain.Effects{Timer: &domain.Timer{Phase: domain.PhaseRouted, Due: at}}, domain.PhaseRouted},
		"retry over own": {domain.Effects{Timer: &domain.Timer{Phase: domain.PhaseRouted, Due: at}, Dispatch: &domain.NextDispatch{Attempt: 2, At: at}}, domain.PhaseRetry},
		"callback over retry, not cleared": {domain.Effects{Dispatch: &domain.NextDispatch{Attempt: 2, At: at}, RequeueCallback: true, ClearTimer: true},
			domain.PhaseCallback},
		"queued over callback": {domain.Effects{RequeueCallback: true, Queue: &domain.QueuedAttempt{Attempt: 1}}, domain.PhaseQueued},
		"cleared":              {domain.Effects{ClearTimer: true}, ""},
	} {
		l := newJob(t, s)
		require.NoError(t, s.events.InTx(ctx, func(tx pgx.Tx) error {
			if err := s.AppendTx(ctx, tx, l, domain.Effects{Timer: &domain.Timer{Phase: domain.PhaseApproval, Due: at}}); err != nil {
				return err
			}
			return s.AppendTx(ctx, tx, l, c.fx)
		}), name)
		var phase string
		err := s.pool.QueryRow(ctx, "SELECT phase FROM job_timers WHERE job_id = $1", l.JobID).Scan(&phase)
		if c.want == "" {
			require.ErrorIs(t, err, pgx.ErrNoRows, name)
			continue
		}
		require.NoError(t, err, name)
		require.Equal(t, string(c.want), phase, name)
	}
}

// hookedQueue runs before at each insert, in the inserting transaction's
// lifetime.
type hookedQueue struct {
	queued
	before func()
}

func (q *hookedQueue) InsertTx(ctx context.Context, tx pgx.Tx, jobs []Enqueued) ([]int64, error) {
	q.before()
	return q.queued.InsertTx(ctx, tx, jobs)
}

// TestTimerLockedBeforeRiverJobs: a write that inserts River jobs holds
// its job's timer row before it inserts them (as it does before its
// append), the deadline sweep's order: another transaction cannot take
// the row meanwhile.
func TestTimerLockedBeforeRiverJobs(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	q := &hookedQueue{}
	s := New(pool, eventstore.New(pool), q, Config{LostAfter: 10 * time.Second, CallbackGrace: 45 * time.Second})
	l := newJob(t, s)
	require.NoError(t, s.events.InTx(ctx, func(tx pgx.Tx) error {
		return s.AppendTx(ctx, tx, l, domain.Effects{Timer: &domain.Timer{Phase: domain.PhaseRouted, Due: time.Now().Add(time.Hour)}})
	}))
	var tried bool
	q.before = func() {
		tried = true
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "SELECT 1 FROM job_timers WHERE job_id = $1 FOR UPDATE NOWAIT", l.JobID)
			return err
		})
		require.Error(t, err, "the timer row is held by the writing transaction")
	}
	require.NoError(t, s.events.InTx(ctx, func(tx pgx.Tx) error {
		return s.AppendTx(ctx, tx, l, domain.Effects{Queue: &domain.QueuedAttempt{Attempt: 2}})
	}))
	require.True(t, tried)
}

// TestAppendAllTxLeavesOutOnlyTheStale: writes in the caller's
// transaction, one round trip for all: a write whose fold another writer
// moved past gets the conflict and nothing of it is written, the others
// are written and their folds move on, and the caller's own statement
// before them stands. LoadAll reads them all back at once.
func TestAppendAllTxLeavesOutOnlyTheStale(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	a, stale, b := newJob(t, s), newJob(t, s), newJob(t, s)
	_, err := s.events.Append(ctx, domain.JobStream(stale.JobID), stale.Version, routedEvent(stale, "elsewhere"))
	require.NoError(t, err)
	ws := []*Write{{L: a, Events: []domain.Event{routedEvent(a, "one")}}, {L: stale, Events: []domain.Event{routedEvent(stale, "two")}},
		{L: b, Events: []domain.Event{routedEvent(b, "three")}}}
	tx, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "CREATE TEMP TABLE mark (x int) ON COMMIT DROP")
	require.NoError(t, err)
	require.NoError(t, s.AppendAllTx(ctx, tx, ws))
	_, err = tx.Exec(ctx, "INSERT INTO mark VALUES (1)") // the transaction lives on
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, ws[0].Err)
	require.ErrorIs(t, ws[1].Err, eventstore.ErrConflict)
	require.NoError(t, ws[2].Err)
	require.Equal(t, "one", a.AgentID, "a written write's fold moves on")
	require.Equal(t, domain.StatusSubmitted, stale.Status, "a refused write's fold stays")

	loaded, err := s.LoadAll(ctx, nil, []string{a.JobID, stale.JobID, b.JobID, "0190c3a0-0000-7000-8000-000000000000"})
	require.NoError(t, err)
	require.Len(t, loaded, 3, "a job with no stream is absent")
	for id, agent := range map[string]string{a.JobID: "one", b.JobID: "three", stale.JobID: "elsewhere"} {
		require.Equal(t, 2, loaded[id].Version, id)
		require.Equal(t, agent, loaded[id].AgentID, id)
		require.Len(t, loaded[id].Records, 2, id)
		one, err := s.Load(ctx, nil, id)
		require.NoError(t, err)
		require.Equal(t, one, loaded[id], "the fold a read of the job alone makes")
	}
}

// TestOnRunIsCalledForEveryRun: a shared transaction that runs again
// (here without a stale write) calls each write's OnRun at the start of
// every run, so what its Then or TakeRouted gathered in a run rolled back
// is dropped.
func TestOnRunIsCalledForEveryRun(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	a, stale := newJob(t, s), newJob(t, s)
	_, err := s.events.Append(ctx, domain.JobStream(stale.JobID), stale.Version, routedEvent(stale, "elsewhere"))
	require.NoError(t, err)
	runs := 0
	wa := decided(t, &Write{L: a, Events: []domain.Event{routedEvent(a, "one")}, OnRun: func() { runs++ }})
	ws := []*Write{wa, decided(t, &Write{L: stale, Events: []domain.Event{routedEvent(stale, "two")}})}
	s.Commit(ctx, ws, nil)
	require.NoError(t, ws[0].Err)
	require.ErrorIs(t, ws[1].Err, eventstore.ErrConflict)
	require.Equal(t, 2, runs, "the run with the stale write, and the one without it")
}
