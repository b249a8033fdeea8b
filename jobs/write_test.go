package jobs

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
)

// TestSharedWriteLeavesOutOnlyTheStale: writes of several jobs share one
// transaction; one decided on a fold another writer has moved past, and a
// second write to a job already written in the same transaction, get the
// conflict (their callers reload and decide again), and the others are
// written, each at its own version, with nothing of the refused ones.
func TestSharedWriteLeavesOutOnlyTheStale(t *testing.T) {
	t.Parallel()
	s := newService(t)
	ctx := context.Background()
	mk := func(l *Loaded, evs ...domain.Event) *write {
		w := &write{l: l, evs: evs, after: l.Job}
		for _, e := range evs {
			require.NoError(t, w.after.Apply(e))
		}
		return w
	}
	a, b, stale := submitOne(t, s), submitOne(t, s), submitOne(t, s)
	// stale's stream moves on behind its fold's back.
	_, err := s.store.Append(ctx, domain.JobStream(stale.JobID), stale.Version, routedEvent(stale, "elsewhere"))
	require.NoError(t, err)
	aAgain := *a
	ws := []*write{mk(a, routedEvent(a, "one")), mk(stale, routedEvent(stale, "two")), mk(b, routedEvent(b, "three")),
		mk(&aAgain, routedEvent(&aAgain, "four"))}
	s.commitWrites(ctx, ws, nil)
	require.NoError(t, ws[0].err)
	require.ErrorIs(t, ws[1].err, eventstore.ErrConflict)
	require.NoError(t, ws[2].err)
	require.ErrorIs(t, ws[3].err, eventstore.ErrConflict, "the second write of job a")
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
	s := newService(t)
	ctx := context.Background()
	due := s.now().Add(time.Hour)
	mk := func(l *Loaded, phase domain.TimerPhase) *write {
		w := &write{l: l, evs: []domain.Event{routedEvent(l, "one")}, after: l.Job}
		require.NoError(t, w.after.Apply(w.evs[0]))
		w.fx.Timer = &domain.Timer{Attempt: 1, Phase: phase, Due: due, AgentID: "one"}
		return w
	}
	a, bad, b := submitOne(t, s), submitOne(t, s), submitOne(t, s)
	ws := []*write{mk(a, domain.PhaseRouted), mk(bad, "no-such-phase"), mk(b, domain.PhaseRouted)}
	s.commitWrites(ctx, ws, nil)
	require.NoError(t, ws[0].err)
	require.Error(t, ws[1].err)
	require.NoError(t, ws[2].err)
	for id, version := range map[string]int{a.JobID: 2, b.JobID: 2, bad.JobID: 1} {
		l, err := s.Load(ctx, nil, id)
		require.NoError(t, err)
		require.Equal(t, version, l.Version, id)
	}
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
	s := newService(t)
	ctx := context.Background()
	mk := func(l *Loaded, traceID string) *write {
		ev := routedEvent(l, "one")
		ev.Metadata.TraceID = traceID // metadata is stored as jsonb, which holds no NUL
		w := &write{l: l, evs: []domain.Event{ev}}
		require.NoError(t, w.decide())
		return w
	}
	a, bad, b := submitOne(t, s), submitOne(t, s), submitOne(t, s)
	ws := []*write{mk(a, "a"), mk(bad, "nul\x00"), mk(b, "b")}
	s.commitWrites(ctx, ws, nil)
	require.NoError(t, ws[0].err)
	require.Error(t, ws[1].err)
	require.NoError(t, ws[2].err)
	for id, version := range map[string]int{a.JobID: 2, b.JobID: 2, bad.JobID: 1} {
		l, err := s.Load(ctx, nil, id)
		require.NoError(t, err)
		require.Equal(t, version, l.Version, id)
	}
}

// TestAppendTxIsABatchOfOne: a write in the caller's transaction goes
// through the same statements: events, timer, River's queued attempt
// (the timer names its River job), and the fold moves on.
func TestAppendTxIsABatchOfOne(t *testing.T) {
	t.Parallel()
	s := newService(t)
	ctx := context.Background()
	l := submitOne(t, s)
	require.NoError(t, s.DropDispatchBacklog(ctx))
	routed := routedEvent(l, "gone")
	failed := domain.NewEvent(domain.EventAttemptFailed, domain.AttemptFailed{Attempt: 1, Reason: "no_agent"}, domain.Metadata{})
	require.NoError(t, s.store.InTx(ctx, func(tx pgx.Tx) error {
		return s.appendTx(ctx, tx, l, domain.Effects{Queue: &domain.QueuedAttempt{Attempt: 2}}, routed, failed)
	}))
	require.Equal(t, 3, l.Version, "the fold moved on")
	var phase string
	var riverJob *int64
	require.NoError(t, s.pool.QueryRow(ctx, "SELECT phase, river_job_id FROM job_timers WHERE job_id = $1", l.JobID).Scan(&phase, &riverJob))
	require.Equal(t, string(domain.PhaseQueued), phase)
	require.NotNil(t, riverJob, "the queued timer names its River job")
	var args string
	require.NoError(t, s.pool.QueryRow(ctx, "SELECT args::text FROM river_job WHERE id = $1", *riverJob).Scan(&args))
	require.Contains(t, args, `"attempt": 2`)
	stale := *l
	stale.Version = 1
	err := s.store.InTx(ctx, func(tx pgx.Tx) error { return s.appendTx(ctx, tx, &stale, domain.Effects{}, routed) })
	require.ErrorIs(t, err, eventstore.ErrConflict, "a stale fold")
}

// TestSubmitsShareATransaction: submits committed together each get their
// job, a repeat of one with the same Idempotency-Key gets that job (its
// events not yet written when it is decided), another request with the
// key is a conflict, and a refused one (a parent that is not there) fails
// alone.
func TestSubmitsShareATransaction(t *testing.T) {
	t.Parallel()
	s := newService(t)
	ctx := context.Background()
	sub := func(payload, key, parent string) *batchItem {
		x := domain.Submitted{Capability: "doc:parse", Payload: json.RawMessage(payload), IdempotencyKey: key, ParentJobID: parent}
		require.NoError(t, s.prepare(ctx, &x))
		return newBatchItem(ctx, x, domain.Metadata{Actor: "test", TraceID: "t-" + x.JobID})
	}
	items := []*batchItem{sub(`{"a":1}`, "k", ""), sub(`{"b":1}`, "", ""), sub(`{"a":1}`, "k", ""), sub(`{"a":2}`, "k", ""),
		sub(`{}`, "", "01a23acf-8639-7529-a70c-e02d5e1ff409")}
	s.commitSubmits(ctx, items)
	var got []batchResult
	for _, it := range items {
		got = append(got, <-it.done)
	}
	require.NoError(t, got[0].err)
	require.NoError(t, got[1].err)
	require.NotEqual(t, got[0].res.JobID, got[1].res.JobID)
	require.NoError(t, got[2].err)
	require.Equal(t, got[0].res.JobID, got[2].res.JobID, "the repeat gets the first's job")
	require.True(t, got[2].res.Existing)
	require.ErrorIs(t, got[3].err, ErrConflict, "the key with another request")
	var fe *domain.FieldError
	require.ErrorAs(t, got[4].err, &fe, "no such parent")
	for i, want := range map[int]bool{0: true, 1: true, 2: false, 3: false, 4: false} { // the repeat's own id stays unused
		_, err := s.Load(ctx, nil, items[i].sub.JobID)
		require.Equal(t, want, err == nil, "job of item %d written", i)
	}
}
