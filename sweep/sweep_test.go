package sweep_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/internal/pgtest"
	"github.com/agentreach/agentreach/sweep"
)

// process is one runner with its own pool, as one agentreach process has.
type process struct {
	runner *sweep.Runner
	runs   atomic.Int64
	stop   context.CancelFunc
	done   chan struct{}
}

// overlap watches that sweeps never run in two processes at once: the
// promise of the leadership, whatever the timing of a hand-over.
type overlap struct {
	active atomic.Int64
	seen   atomic.Bool
}

func (o *overlap) run(p *process) func(context.Context) error {
	return func(context.Context) error {
		if o.active.Add(1) > 1 {
			o.seen.Store(true)
		}
		p.runs.Add(1)
		time.Sleep(time.Millisecond) // a sweep takes some time, so an overlap can show
		o.active.Add(-1)
		return nil
	}
}

func start(t *testing.T, dsn string) *process {
	t.Helper()
	return startWatched(t, dsn, nil)
}

func startWatched(t *testing.T, dsn string, o *overlap) *process {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn+"&pool_max_conns=3")
	require.NoError(t, err)
	p := &process{done: make(chan struct{})}
	run := func(context.Context) error { p.runs.Add(1); return nil }
	if o != nil {
		run = o.run(p)
	}
	p.runner = sweep.NewRunner(pool, slog.New(slog.DiscardHandler), sweep.Sweep{Name: "count", Every: 20 * time.Millisecond, Run: run})
	p.runner.Poll = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	p.stop = cancel
	go func() { p.runner.Run(ctx); close(p.done) }()
	t.Cleanup(func() { p.halt(); pool.Close() })
	return p
}

func (p *process) halt() {
	p.stop()
	<-p.done
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		require.True(t, time.Now().Before(deadline), "waiting for %s", what)
		time.Sleep(10 * time.Millisecond) // poll interval while waiting on the condition
	}
}

// TestOneLeaderSweeps: of two processes on one database, one leads and
// sweeps, never both at once; when the leader stops, the other takes over.
// A leader may step down on its own (a liveness check that a busy machine
// answers late), so the test follows whoever leads rather than assuming
// the first leader keeps it.
func TestOneLeaderSweeps(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	var o overlap
	a, b := startWatched(t, dsn, &o), startWatched(t, dsn, &o)
	waitFor(t, "sweeps by a leader", func() bool {
		return (a.runner.Leading() && a.runs.Load() >= 3) || (b.runner.Leading() && b.runs.Load() >= 3)
	})
	require.False(t, o.seen.Load(), "sweeps ran in two processes at once")

	var leader, follower *process
	waitFor(t, "a leader to stop", func() bool {
		switch {
		case a.runner.Leading():
			leader, follower = a, b
		case b.runner.Leading():
			leader, follower = b, a
		default:
			return false
		}
		return true
	})
	leader.halt()
	require.False(t, leader.runner.Leading())
	before := follower.runs.Load()
	waitFor(t, "the follower to lead", follower.runner.Leading)
	waitFor(t, "sweeps by the new leader", func() bool { return follower.runs.Load() >= before+3 })
	require.False(t, o.seen.Load(), "sweeps ran in two processes at once")
}

// TestLeaderThatLosesItsSessionStops: a leader whose database session is
// killed (as when PostgreSQL restarts or the network drops it) stops
// sweeping, and the leadership goes to a session that holds the lock.
func TestLeaderThatLosesItsSessionStops(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	a := start(t, dsn)
	waitFor(t, "a to lead", a.runner.Leading)
	admin, err := pgxpool.New(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	b := start(t, dsn)
	// Kill the session that holds the sweep lock.
	var killed bool
	require.NoError(t, admin.QueryRow(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND classid = x'61676e74'::bigint::oid AND objid = x'73777031'::bigint::oid`).Scan(&killed))
	require.True(t, killed)
	holders := func() int {
		var n int
		require.NoError(t, admin.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND granted AND classid = x'61676e74'::bigint::oid AND objid = x'73777031'::bigint::oid`).Scan(&n))
		return n
	}
	waitFor(t, "the killed leader to notice", func() bool { return !a.runner.Leading() })
	waitFor(t, "one leader again, holding the lock", func() bool { return holders() == 1 && a.runner.Leading() != b.runner.Leading() })
	leader := a
	if b.runner.Leading() {
		leader = b
	}
	before := leader.runs.Load()
	waitFor(t, "the leader to sweep", func() bool { return leader.runs.Load() >= before+3 })
}
