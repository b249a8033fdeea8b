package jobstore

import (
	"context"
	"net/url"
	"testing"

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
