package sweep

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qTryLeadership     = queries.Must("SweepTryLeadership")
	qReleaseLeadership = queries.Must("SweepReleaseLeadership")
	qStillLeading      = queries.Must("SweepStillLeading")
)

// lockKey is the advisory lock of the sweep leadership: the bytes of
// "agntswp1".
const lockKey int64 = 0x61676e7473777031

// Sweep is one periodic sweep: its name (for the log), how often it runs,
// and what it does. Run must be idempotent: it may be cut short by a crash
// and run again by another process.
type Sweep struct {
	Name  string
	Every time.Duration
	Run   func(ctx context.Context) error
	// Wake, if set, runs the sweep at once, between its intervals.
	Wake <-chan struct{}
	// Timeout bounds one run (a minute when zero): a sweep whose work is
	// long by nature (writing a partition of the log to an archive) says
	// how long it may take.
	Timeout time.Duration
}

// Runner runs sweeps while its process leads.
type Runner struct {
	pool   *pgxpool.Pool
	logger *slog.Logger
	sweeps []Sweep
	// Poll is how often a follower asks for the leadership and a leader
	// checks it still holds it (default 1 s).
	Poll time.Duration

	mu      sync.Mutex
	leading bool
}

// NewRunner returns a Runner of sweeps on pool.
func NewRunner(pool *pgxpool.Pool, logger *slog.Logger, sweeps ...Sweep) *Runner {
	return &Runner{pool: pool, logger: logger, sweeps: sweeps, Poll: time.Second}
}

// Leading reports whether this process sweeps now.
func (r *Runner) Leading() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leading
}

func (r *Runner) setLeading(v bool) {
	r.mu.Lock()
	r.leading = v
	r.mu.Unlock()
}

// Run asks for the leadership every Poll until ctx ends, and while it
// holds it runs every sweep on its interval (the first run at once).
func (r *Runner) Run(ctx context.Context) {
	for {
		led, err := r.lead(ctx)
		if err != nil && ctx.Err() == nil {
			r.logger.Warn("sweep leadership", "err", err)
		}
		if led {
			r.logger.Info("sweep leadership ended")
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.Poll):
		}
	}
}

// lead takes the leadership if it is free and sweeps until it is lost or
// ctx ends; led says whether it led at all.
func (r *Runner) lead(ctx context.Context) (led bool, err error) {
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	var got bool
	if err := conn.QueryRow(ctx, qTryLeadership, lockKey).Scan(&got); err != nil {
		conn.Release()
		return false, err
	}
	if !got {
		conn.Release() // another process leads; this session holds nothing
		return false, nil
	}
	r.logger.Info("sweep leadership taken: this process runs the sweeps")
	r.setLeading(true)
	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, s := range r.sweeps {
		wg.Add(1)
		go func() { defer wg.Done(); r.loop(sctx, s) }()
	}
	// Hold the session, checking it is alive: a broken connection has lost
	// the lock, and another process may lead already.
	for err == nil {
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-time.After(r.Poll):
			// A session that does not answer within a few polls is as
			// good as lost: step down rather than sweep on unchecked.
			cctx, cancel := context.WithTimeout(ctx, 5*r.Poll)
			var ok bool
			qerr := conn.QueryRow(cctx, qStillLeading, lockKey).Scan(&ok)
			cancel()
			if qerr != nil || !ok {
				err = errors.Join(errors.New("the leader's session lost its lock"), qerr)
			}
		}
	}
	stop()
	wg.Wait()
	r.setLeading(false)
	// Give the lock back; a session that cannot say so is closed, which
	// gives it back too.
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if _, uerr := conn.Exec(uctx, qReleaseLeadership, lockKey); uerr != nil {
		_ = conn.Conn().Close(uctx)
	}
	conn.Release()
	if ctx.Err() != nil {
		return true, nil
	}
	return true, err
}

// runTimeout bounds one run of a sweep, as River's job timeout bounded a
// sweep when sweeps were River jobs: a run stuck on a connection that will
// never answer is given up, and the next run starts afresh.
const runTimeout = time.Minute

// loop runs s at once and then every s.Every, and whenever s.Wake
// signals, until ctx ends; a run that fails is logged and the next one
// tries again.
func (r *Runner) loop(ctx context.Context, s Sweep) {
	t := time.NewTicker(s.Every)
	defer t.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, cmp.Or(s.Timeout, runTimeout))
		err := s.Run(rctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			r.logger.Warn("sweep failed, trying again at its next run", "sweep", s.Name, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.Wake: // a nil channel never signals
		}
	}
}
