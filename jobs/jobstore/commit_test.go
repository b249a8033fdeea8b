package jobstore

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/pgtest"
)

// TestCommitWhoseConnectionDies: when the connection dies during COMMIT,
// the unit of work asks PostgreSQL what became of the transaction rather
// than failing: one that committed is a success (its job written once),
// one that did not is run again on a new connection (written once too).
func TestCommitWhoseConnectionDies(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	proxy := pgtest.NewCutProxy(t, u.Host)
	u.Host = proxy.Addr()
	q := u.Query()
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, u.String())
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s := New(pool, eventstore.New(pool), &queued{}, Config{LostAfter: 10e9, CallbackGrace: 45e9})

	for _, when := range []int32{2, 1} { // after the commit, then before it
		proxy.Arm(when)
		cutsBefore := proxy.Cuts()
		l := newJobOf(t, s, "doc:parse", domain.PriorityNormal) // a write that creates a job's stream
		require.Equal(t, cutsBefore+1, proxy.Cuts(), "the connection was cut during COMMIT (armed %d)", when)
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE stream_id = $1`, domain.JobStream(l.JobID)).Scan(&n))
		require.Equal(t, 1, n, "written once (armed %d)", when)

		// A write to a job that exists sends its appends with its BEGIN
		// (appendsAtBegin): its COMMIT is cut the same way.
		proxy.Arm(when)
		w := &Write{L: l, Events: []domain.Event{routedEvent(l, "one")}}
		require.NoError(t, w.Decide())
		require.True(t, appendsAtBegin([]*Write{w}, nil, false))
		s.Commit(ctx, []*Write{w}, nil)
		require.NoError(t, w.Err, "armed %d", when)
		require.Equal(t, cutsBefore+2, proxy.Cuts(), "the connection was cut during COMMIT (armed %d)", when)
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE stream_id = $1`, domain.JobStream(l.JobID)).Scan(&n))
		require.Equal(t, 2, n, "ROUTED written once (armed %d)", when)
	}
}

// TestWriteOfAJobSendsItsAppendsWithBegin: a shared write to a job that
// exists, needing no answer before its appends (appendsAtBegin), commits
// in two round trips, BEGIN with its appends and COMMIT; one that counts
// a limited agent's slot first takes three.
func TestWriteOfAJobSendsItsAppendsWithBegin(t *testing.T) {
	t.Parallel()
	pool, proxy := pgtest.NewCountingPool(t) // one connection, its statements prepared by the first writes
	ctx := context.Background()
	s := New(pool, eventstore.New(pool), &queued{}, Config{LostAfter: 10e9, CallbackGrace: 45e9})

	roundTrips := func(w *Write) int64 {
		t.Helper()
		require.NoError(t, w.Decide())
		before := proxy.RoundTrips()
		s.Commit(ctx, []*Write{w}, nil)
		require.NoError(t, w.Err)
		return proxy.RoundTrips() - before
	}
	limited := func(l *Loaded) *Write {
		return &Write{L: l, Events: []domain.Event{routedEvent(l, "one")},
			Slot: &Slot{Agent: domain.AgentKey{Namespace: l.Namespace, ID: "one"}, MaxConcurrent: 4, Attempt: 1}}
	}
	for range 2 { // the first of each prepares its statements
		l := newJobOf(t, s, "doc:parse", domain.PriorityNormal)
		roundTrips(&Write{L: l, Events: []domain.Event{routedEvent(l, "one")}})
		roundTrips(limited(newJobOf(t, s, "doc:parse", domain.PriorityNormal)))
	}
	l := newJobOf(t, s, "doc:parse", domain.PriorityNormal)
	w := &Write{L: l, Events: []domain.Event{routedEvent(l, "one")}}
	require.True(t, appendsAtBegin([]*Write{w}, nil, false))
	require.EqualValues(t, 2, roundTrips(w), "BEGIN with the appends, then COMMIT")
	w = limited(newJobOf(t, s, "doc:parse", domain.PriorityNormal))
	require.False(t, appendsAtBegin([]*Write{w}, nil, false))
	require.EqualValues(t, 3, roundTrips(w), "BEGIN with the slot count, the appends, COMMIT")
}

// TestHandOffRoundTrips: the write that ends an attempt on a limited
// agent's slot and routes the waiter the slot woke (Config.Route) takes
// five round trips: BEGIN with its appends (the slot given back, the
// waiter woken), the savepoint with the read of the waiter's job, the
// slot count, the route's appends, COMMIT. One whose route writes nothing
// takes three: no savepoint of its own, no rollback to it. A route that
// fails in the database (the transaction aborted) is rolled back to the
// savepoint: the attempt's end commits, the waiter goes to Woken.
func TestHandOffRoundTrips(t *testing.T) {
	t.Parallel()
	pool, proxy := pgtest.NewCountingPool(t)
	var woken []Woken
	s := New(pool, eventstore.New(pool), &queued{}, Config{LostAfter: 10e9, CallbackGrace: 45e9,
		Woken: func(w []Woken) { woken = append(woken, w...) }})
	agentRow(t, s, "one-slot", "doc:parse")
	route := "write" // or "none", or "fail": a timer phase the table's check refuses
	s.cfg.Route = func(_ context.Context, ws []Woken, loaded map[string]*Loaded) []Routed {
		var out []Routed
		for _, w := range ws {
			if l := loaded[w.JobID]; l != nil && route != "none" {
				phase := domain.PhaseRouted
				if route == "fail" {
					phase = "unheard-of"
				}
				out = append(out, Routed{JobID: w.JobID, Done: func(bool) {},
					Write: &Write{L: l, Events: []domain.Event{routedEvent(l, w.Agent)},
						Effects: domain.Effects{Timer: &domain.Timer{Attempt: w.Attempt, AgentID: w.Agent, Phase: phase, Due: time.Now().Add(time.Hour)}},
						Slot:    &Slot{Agent: domain.AgentKey{Namespace: l.Namespace, ID: w.Agent}, MaxConcurrent: 1, Attempt: w.Attempt}}})
			}
		}
		return out
	}
	holder := newJobOf(t, s, "doc:parse", domain.PriorityNormal)
	require.NoError(t, takeSlot(s, holder, "one-slot", time.Time{}))
	// handOff ends the holder's attempt with a waiter behind it, and
	// answers the round trips that took and the waiter, the next holder.
	handOff := func() (int64, string) {
		t.Helper()
		waiter := waitingWrite(t, domain.PriorityNormal, time.Time{})
		commitAll(t, s, []*Write{waiter})
		l := mustLoad(t, s, holder.JobID)
		woken = nil
		before := proxy.RoundTrips()
		endAttempt(t, s, l)
		n := proxy.RoundTrips() - before
		holder = mustLoad(t, s, waiter.jobID())
		return n, waiter.jobID()
	}
	for range 2 { // the first prepare their statements
		handOff()
	}
	n, _ := handOff()
	require.EqualValues(t, 5, n, "BEGIN with the appends, the savepoint with the read, the slot count, the route's appends, COMMIT")
	require.Empty(t, woken, "routed in the giving transaction")
	require.Equal(t, "one-slot", holder.AgentID, "the waiter, routed")

	route = "none"
	n, waiter := handOff()
	require.EqualValues(t, 3, n, "BEGIN with the appends, the savepoint with the read, COMMIT")
	require.Len(t, woken, 1, "left to Woken")
	require.Equal(t, waiter, woken[0].JobID)

	require.NoError(t, takeSlot(s, holder, "one-slot", time.Time{}))
	ended := holder.JobID
	route = "fail"
	_, waiter = handOff()
	require.Len(t, woken, 1, "left to Woken")
	require.Equal(t, waiter, woken[0].JobID)
	l := mustLoad(t, s, ended)
	require.Equal(t, domain.EventAttemptFailed, l.Records[len(l.Records)-1].Type, "the attempt's end committed")
	require.Empty(t, holder.AgentID, "the waiter's route rolled back")
	var slots int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM agent_slots`).Scan(&slots))
	require.Zero(t, slots, "the slot given back, none taken")
}
