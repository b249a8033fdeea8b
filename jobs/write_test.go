package jobs

import (
	"context"
	"testing"
	"time"

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
	s.commitWrites(ctx, ws)
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
	s.commitWrites(ctx, ws)
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
