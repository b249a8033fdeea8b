package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/jobs/dispatch"
	"github.com/agentreach/agentreach/jobs/jobstore"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qDueJobTimers         = queries.Must("DueJobTimers")
	qLockDueJobTimer      = queries.Must("LockDueJobTimer")
	qPostponeJobTimer     = queries.Must("PostponeJobTimer")
	qJobsNeedingRepair    = queries.Must("JobsNeedingRepair")
	qPruneIdempotencyKeys = queries.Must("PruneIdempotencyKeys")
	qGoneAgentsClaims     = queries.Must("GoneAgentsClaims")
)

// SweepReport says what a sweep repaired.
type SweepReport domain.SweepReported

func (r SweepReport) empty() bool {
	return len(r.TimedOut)+len(r.Lost)+len(r.Redispatched)+len(r.CallbacksRequeued)+len(r.NotClaimed)+len(r.AgentGone) == 0
}

func (s *Service) recordSweep(ctx context.Context, rep SweepReport) error {
	if rep.empty() {
		return nil
	}
	s.logger.InfoContext(ctx, "sweep repaired jobs", "sweep", rep.Sweep, "timed_out", len(rep.TimedOut), "lost", len(rep.Lost),
		"redispatched", len(rep.Redispatched), "callbacks_requeued", len(rep.CallbacksRequeued), "not_claimed", len(rep.NotClaimed),
		"agent_gone", len(rep.AgentGone))
	_, err := s.store.Append(ctx, "sweep:"+rep.Sweep, eventstore.Any,
		domain.NewEvent(domain.EventSweepReport, domain.SweepReported(rep), domain.Metadata{Actor: "sweep:" + rep.Sweep}))
	return err
}

type deadlineSweepWorker struct {
	river.WorkerDefaults[DeadlineSweepArgs]
	s *Service
}

func (w *deadlineSweepWorker) Work(ctx context.Context, _ *river.Job[DeadlineSweepArgs]) error {
	_, err := w.s.SweepDeadlines(ctx)
	return err
}

// SweepDeadlines acts on every due timer: a retry whose wait is over gets
// its dispatch; a delivered attempt with no result by its deadline gets
// TIMEOUT; a routed attempt whose dispatcher never recorded an outcome (it
// died) is lost; a queued dispatch or a callback whose River job is stuck
// with a dead process, or gone, is enqueued again. Timed-out and lost
// attempts are retried or dead-lettered. Each job is decided in its own
// transaction with its timer, so the sweep is idempotent and safe to run
// anywhere.
func (s *Service) SweepDeadlines(ctx context.Context) (SweepReport, error) {
	rep := SweepReport{Sweep: "deadline"}
	for again := true; again; {
		var err error
		if again, err = s.sweepDue(ctx, &rep); err != nil {
			return rep, err
		}
	}
	gone, err := s.releaseGoneAgentsClaims(ctx)
	rep.AgentGone = gone
	if err != nil {
		return rep, err
	}
	return rep, s.recordSweep(ctx, rep)
}

// sweepDue decides the timers due now, the most urgent waiters first,
// each in a transaction of its own, into rep. A slot given back meanwhile
// (a waiter woken: s.waiters) stops it early, reporting again: the woken
// waiter is the most urgent, and must not wait behind the rest of this
// run (waiters looking again by themselves, each a dispatch).
func (s *Service) sweepDue(ctx context.Context, rep *SweepReport) (again bool, err error) {
	rows, err := s.pool.Query(ctx, qDueJobTimers, s.now().UTC())
	if err != nil {
		return false, fmt.Errorf("deadline sweep: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return false, fmt.Errorf("deadline sweep: %w", err)
	}
	for i, id := range ids {
		if i > 0 {
			select {
			case <-s.waiters:
				return true, nil
			default:
			}
		}
		what, err := s.expireOne(ctx, id)
		if err != nil {
			// One job's trouble must not hold up every other timer.
			s.logger.ErrorContext(ctx, "deadline sweep: job left for the next sweep", "job_id", id, "err", err)
			continue
		}
		switch what {
		case "timeout":
			rep.TimedOut = append(rep.TimedOut, id)
		case "lost":
			rep.Lost = append(rep.Lost, id)
		case "redispatched":
			rep.Redispatched = append(rep.Redispatched, id)
		case "callback_requeued":
			rep.CallbacksRequeued = append(rep.CallbacksRequeued, id)
		case domain.ReasonNotClaimed:
			rep.NotClaimed = append(rep.NotClaimed, id)
		}
	}
	return false, nil
}

// releaseGoneAgentsClaims routes again the attempts claimed by pull agents
// that went DOWN (their lease lapsed: no heartbeat and no claim for
// ttl_seconds) or OFFLINE while holding them (domain.AgentGone), each in
// its own transaction with its timer, and answers their jobs.
func (s *Service) releaseGoneAgentsClaims(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, qGoneAgentsClaims)
	if err != nil {
		return nil, fmt.Errorf("claims of gone pull agents: %w", err)
	}
	type claim struct {
		id    string
		state domain.AgentState
	}
	claims, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (claim, error) {
		var c claim
		return c, r.Scan(&c.id, &c.state)
	})
	if err != nil {
		return nil, fmt.Errorf("claims of gone pull agents: %w", err)
	}
	var out []string
	for _, c := range claims {
		released := false
		err := s.jobs.RetryTx(ctx, func(tx pgx.Tx) error {
			released = false
			t, err := lockDueTimer(ctx, tx, c.id)
			if t == nil || err != nil {
				return err // another sweeper holds it, or it is gone
			}
			l, err := s.Load(ctx, tx, c.id)
			if err != nil {
				return err
			}
			if t.Phase != domain.PhaseDelivered || l.Status != domain.StatusDelivered || l.Attempts != t.Attempt || l.SlotHolder == "" {
				return nil // answered or moved on meanwhile
			}
			evs, fx := domain.AgentGone(&l.Job, c.state, s.now().UTC(), domain.Metadata{TraceID: l.TraceID, Actor: "sweep:deadline"})
			released = true
			return s.jobs.AppendTx(ctx, tx, l, fx, evs...)
		})
		if err != nil {
			s.logger.ErrorContext(ctx, "deadline sweep: a gone agent's claim left for the next sweep", "job_id", c.id, "err", err)
			continue
		}
		if released {
			out = append(out, c.id)
		}
	}
	return out, nil
}

// expireOne decides job id's due timer in a transaction of its own (a
// waiter whose turn came is dispatched by this process once committed),
// and says what it did for the sweep's report.
func (s *Service) expireOne(ctx context.Context, id string) (string, error) {
	var what string
	var direct *dispatch.Start
	err := s.jobs.RetryTx(ctx, func(tx pgx.Tx) error {
		if direct != nil { // a try before, rolled back
			s.dispatcher.Release()
		}
		var err error
		what, direct, err = s.expireTx(ctx, tx, id)
		return err
	})
	if direct != nil {
		if err == nil {
			s.dispatcher.Direct(*direct)
		} else {
			s.dispatcher.Release()
		}
	}
	return what, err
}

// handOver dispatches at once the waiters a commit of this process woke
// (jobstore.Config.Woken): no NOTIFY, no sweep and no other transaction
// between a slot given back and its next job's route. Their timers are
// queued: should this process die first, the deadline sweep enqueues them.
func (s *Service) handOver(woken []jobstore.Woken) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, w := range woken {
			l, err := s.Load(ctx, nil, w.JobID)
			if err != nil {
				s.logger.DebugContext(ctx, "hand-over of a woken waiter left to the deadline sweep", "job_id", w.JobID, "err", err)
				continue
			}
			if !l.CanStart(w.Attempt) {
				continue // it moved on meanwhile: its timer says what is left
			}
			if !s.dispatcher.Reserve() {
				s.dispatcher.HandOver(ctx, w.JobID, domain.QueuedAttempt{Attempt: w.Attempt, WaitingSince: w.WaitingSince,
					Capability: l.Capability, Rank: domain.WaitRank(l.Priority, w.WaitingSince), Agent: w.Agent})
				continue
			}
			s.dispatcher.Direct(dispatch.Start{L: l, Attempt: w.Attempt, WaitingSince: w.WaitingSince, Prefer: w.Agent})
		}
	}()
}

// expireTx decides job id's due timer in tx. A waiter whose turn at a slot
// came is answered as a direct dispatch to start once tx commits (it holds
// a direct dispatcher), when one is free: no River job to insert and
// fetch.
func (s *Service) expireTx(ctx context.Context, tx pgx.Tx, id string) (string, *dispatch.Start, error) {
	t, err := lockDueTimer(ctx, tx, id)
	if t == nil || err != nil {
		return "", nil, err // handled meanwhile, or locked by another sweeper
	}
	attempt, riverJobID := t.Attempt, t.RiverJobID
	now := s.now().UTC()
	if t.Due.After(now) {
		return "", nil, nil // moved meanwhile
	}
	l, err := s.Load(ctx, tx, id)
	if err != nil {
		return "", nil, err
	}
	md := domain.Metadata{TraceID: l.TraceID, Actor: "sweep:deadline"}
	d := domain.DueTimer(&l.Job, domain.Timer{Attempt: attempt, Phase: t.Phase, Due: t.Due}, CallbackMaxAttempts,
		now, s.jitter(), s.attemptPolicy(), md)
	queued := &domain.QueuedAttempt{Attempt: attempt, WaitingSince: t.WaitingSince, Capability: t.Capability, Rank: t.Rank, Agent: t.AgentID}
	switch d.Do {
	case domain.TimerDispatch:
		if queued.Capability != "" && t.AgentID == "" { // a waiter looking again by itself, not woken
			if next, busy := s.dispatcher.StillBusy(l, attempt, queued.WaitingSince); busy {
				return "", nil, s.postpone(ctx, tx, id, next, nil)
			}
		}
		if queued.Capability != "" && s.dispatcher.Reserve() {
			// The durable promise is the queued timer, naming no River
			// job: should this process die first, the sweep finds it due
			// after LostAfter and enqueues the attempt in River.
			t := domain.Timer{Attempt: attempt, Phase: domain.PhaseQueued, Due: now.Add(s.cfg.LostAfter), WaitingSince: queued.WaitingSince,
				Namespace: l.Namespace, Capability: queued.Capability, Rank: queued.Rank, AgentID: queued.Agent}
			st := &dispatch.Start{L: l, Attempt: attempt, WaitingSince: queued.WaitingSince, Prefer: t.AgentID}
			return "", st, s.jobs.AppendTx(ctx, tx, l, domain.Effects{Timer: &t})
		}
		return "", nil, s.jobs.AppendTx(ctx, tx, l, domain.Effects{Queue: queued})
	case domain.TimerOrdered:
		ahead, err := s.orderAhead(ctx, tx, l)
		if err != nil || ahead > 0 {
			return "", nil, s.postpone(ctx, tx, id, now.Add(domain.OrderedRecheck), err)
		}
		return "", nil, s.jobs.AppendTx(ctx, tx, l, domain.Effects{Queue: queued}) // its turn came
	case domain.TimerRedispatch:
		alive, err := s.riverJobAlive(ctx, tx, riverJobID, s.cfg.LostAfter)
		if err != nil || alive {
			return "", nil, s.postpone(ctx, tx, id, now.Add(s.cfg.LostAfter), err)
		}
		return "redispatched", nil, s.jobs.AppendTx(ctx, tx, l, domain.Effects{Queue: queued})
	case domain.TimerRequeueCallback:
		alive, err := s.riverJobAlive(ctx, tx, riverJobID, s.cfg.CallbackGrace)
		if err != nil || alive {
			return "", nil, s.postpone(ctx, tx, id, now.Add(s.cfg.CallbackGrace), err)
		}
		return "callback_requeued", nil, s.jobs.AppendTx(ctx, tx, l, domain.Effects{RequeueCallback: true})
	case domain.TimerAppend:
		held := *l
		err := s.jobs.AppendTx(ctx, tx, l, d.Effects, d.Events...)
		if err == nil && d.CancelAtAgent {
			s.cancelAtAgent(ctx, &held) // a courtesy, in the background
		}
		return d.Report, nil, err
	}
	return "", nil, s.jobs.AppendTx(ctx, tx, l, domain.Effects{ClearTimer: true}) // its work is done
}

// riverJobAlive reports whether River job id (0: none) is waiting to run or running
// for less than grace (so its process is presumably alive). A missing,
// finished or long-running job is not.
func (s *Service) riverJobAlive(ctx context.Context, tx pgx.Tx, id int64, grace time.Duration) (bool, error) {
	if id == 0 {
		return false, nil
	}
	job, err := s.client.JobGetTx(ctx, tx, id)
	if errors.Is(err, rivertype.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	switch job.State {
	case rivertype.JobStateAvailable, rivertype.JobStateScheduled, rivertype.JobStateRetryable, rivertype.JobStatePending:
		return true, nil
	case rivertype.JobStateRunning:
		return job.AttemptedAt != nil && s.now().Sub(*job.AttemptedAt) < grace, nil
	}
	return false, nil
}

func (s *Service) postpone(ctx context.Context, tx pgx.Tx, id string, due time.Time, err error) error {
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, qPostponeJobTimer, id, due)
	return err
}

type repairSweepWorker struct {
	river.WorkerDefaults[RepairSweepArgs]
	s *Service
}

func (w *repairSweepWorker) Work(ctx context.Context, _ *river.Job[RepairSweepArgs]) error {
	_, err := w.s.SweepRepairs(ctx)
	return err
}

// SweepRepairs is the safety net under the timers: an open job with no
// timer at all (nothing is working on it) gets its next dispatch, and a
// finished job whose callback was neither acknowledged nor given up, and
// has no timer, gets its callback. Every enqueue sets the job's timer in the
// same transaction, so a job is repaired once.
func (s *Service) SweepRepairs(ctx context.Context) (SweepReport, error) {
	rep := SweepReport{Sweep: "repair"}
	quiet := s.now().UTC().Add(-s.cfg.RepairAfter)
	err := s.store.InTx(ctx, func(tx pgx.Tx) error {
		rep.Redispatched, rep.CallbacksRequeued = nil, nil
		rows, err := tx.Query(ctx, qJobsNeedingRepair, quiet)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, id := range ids {
			l, err := s.Load(ctx, tx, id)
			if err != nil {
				return err
			}
			switch {
			case (l.Status == domain.StatusSubmitted || l.Status == domain.StatusTimeout) && (l.Attempts == 0 || !l.JustRouted(l.Attempts)):
				if err := s.jobs.AppendTx(ctx, tx, l, domain.Effects{Queue: &domain.QueuedAttempt{Attempt: l.Attempts + 1}}); err != nil {
					return err
				}
				rep.Redispatched = append(rep.Redispatched, id)
			case l.Status.Terminal() && l.CallbackURL != "" && !l.CallbackAcked && !l.CallbackGaveUp:
				if err := s.jobs.AppendTx(ctx, tx, l, domain.Effects{RequeueCallback: true}); err != nil {
					return err
				}
				rep.CallbacksRequeued = append(rep.CallbacksRequeued, id)
			}
		}
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("repair sweep: %w", err)
	}
	if err := s.pruneIdempotencyKeys(ctx); err != nil {
		return rep, err
	}
	return rep, s.recordSweep(ctx, rep)
}

// IdempotencyKeyTTL is how long an Idempotency-Key keeps returning the job
// it created (Svix keeps its keys 12 h).
const IdempotencyKeyTTL = 24 * time.Hour

func (s *Service) pruneIdempotencyKeys(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, qPruneIdempotencyKeys, s.now().Add(-IdempotencyKeyTTL)); err != nil {
		return fmt.Errorf("prune idempotency keys: %w", err)
	}
	return nil
}

// lockDueTimer takes job id's timer for this sweeper; nil when it is gone
// or another sweeper holds it.
func lockDueTimer(ctx context.Context, tx pgx.Tx, id string) (*domain.Timer, error) {
	var t domain.Timer
	var riverJobID *int64
	var since, rank *time.Time
	err := tx.QueryRow(ctx, qLockDueJobTimer, id).Scan(&t.Attempt, &t.Phase, &t.Due, &riverJobID, &since, &t.Capability, &rank, &t.AgentID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if riverJobID != nil {
		t.RiverJobID = *riverJobID
	}
	if since != nil {
		t.WaitingSince = *since
	}
	if rank != nil {
		t.Rank = *rank
	}
	return &t, nil
}
