package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
)

// EventSweepReport records, on the sweep's own stream (sweep:NAME), what
// one run of a compensation sweep repaired. Runs that repair nothing leave
// no trace.
const EventSweepReport domain.EventType = "SWEEP_REPORT"

// SweepReport says what a sweep repaired.
type SweepReport struct {
	Sweep             string   `json:"sweep"`
	TimedOut          []string `json:"timed_out,omitempty"`
	Lost              []string `json:"lost,omitempty"`
	Redispatched      []string `json:"redispatched,omitempty"`
	CallbacksRequeued []string `json:"callbacks_requeued,omitempty"`
}

func (r SweepReport) empty() bool {
	return len(r.TimedOut)+len(r.Lost)+len(r.Redispatched)+len(r.CallbacksRequeued) == 0
}

func (s *Service) recordSweep(ctx context.Context, rep SweepReport) error {
	if rep.empty() {
		return nil
	}
	s.logger.InfoContext(ctx, "sweep repaired jobs", "sweep", rep.Sweep, "timed_out", len(rep.TimedOut), "lost", len(rep.Lost),
		"redispatched", len(rep.Redispatched), "callbacks_requeued", len(rep.CallbacksRequeued))
	_, err := s.store.Append(ctx, "sweep:"+rep.Sweep, eventstore.Any,
		domain.NewEvent(EventSweepReport, rep, domain.Metadata{Actor: "sweep:" + rep.Sweep}))
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
// died) is lost. Timed-out and lost attempts are retried or dead-lettered.
// Each job is decided in its own transaction with its timer, so the sweep
// is idempotent and safe to run anywhere.
func (s *Service) SweepDeadlines(ctx context.Context) (SweepReport, error) {
	rep := SweepReport{Sweep: "deadline"}
	rows, err := s.pool.Query(ctx, `SELECT job_id::text FROM job_timers WHERE due_at <= $1 ORDER BY due_at LIMIT 500`, s.now().UTC())
	if err != nil {
		return rep, fmt.Errorf("deadline sweep: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return rep, fmt.Errorf("deadline sweep: %w", err)
	}
	for _, id := range ids {
		var what string
		err := s.retryConflict(ctx, func(tx pgx.Tx) error {
			var err error
			what, err = s.expireTx(ctx, tx, id)
			return err
		})
		if err != nil {
			return rep, fmt.Errorf("deadline sweep of job %s: %w", id, err)
		}
		switch what {
		case "timeout":
			rep.TimedOut = append(rep.TimedOut, id)
		case "lost":
			rep.Lost = append(rep.Lost, id)
		}
	}
	return rep, s.recordSweep(ctx, rep)
}

func (s *Service) expireTx(ctx context.Context, tx pgx.Tx, id string) (string, error) {
	var attempt int
	var phase string
	var due time.Time
	err := tx.QueryRow(ctx, `SELECT attempt, phase, due_at FROM job_timers WHERE job_id = $1 FOR UPDATE SKIP LOCKED`, id).Scan(&attempt, &phase, &due)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil // handled meanwhile, or locked by another sweeper
	}
	if err != nil {
		return "", err
	}
	now := s.now().UTC()
	if due.After(now) {
		return "", nil // moved meanwhile
	}
	l, err := s.Load(ctx, tx, id)
	if err != nil {
		return "", err
	}
	md := domain.Metadata{TraceID: l.TraceID, Actor: "sweep:deadline"}
	switch {
	case phase == "retry" && !l.Status.Terminal() && l.Attempts == attempt-1:
		if _, err := tx.Exec(ctx, `DELETE FROM job_timers WHERE job_id = $1`, id); err != nil {
			return "", err
		}
		if _, err := s.client.InsertTx(ctx, tx, DispatchArgs{JobID: id, Attempt: attempt}, dispatchOpts(l.Priority)); err != nil {
			return "", fmt.Errorf("enqueue attempt %d: %w", attempt, err)
		}
		return "retry", nil
	case phase == "delivered" && l.Status == domain.StatusDelivered && l.Attempts == attempt:
		evs, fx := s.failAttempt(l, func(at time.Time) domain.Event {
			return domain.NewEvent(domain.EventTimeout, domain.TimedOut{Attempt: attempt, AgentID: l.AgentID, Deadline: due, RetryAt: at}, md)
		}, 0, now, md, "timeout")
		fx.sample = &sample{agentID: l.AgentID, at: now, ok: false}
		return "timeout", s.appendTx(ctx, tx, l, fx, evs...)
	case phase == "routed" && l.Status == domain.StatusSubmitted && l.lastIsRouted(attempt):
		evs, fx := s.failAttempt(l, func(at time.Time) domain.Event {
			return domain.NewEvent(domain.EventAttemptFailed, domain.AttemptFailed{Attempt: attempt, AgentID: l.AgentID,
				Reason: "dispatcher_lost", Error: "the dispatcher recorded no outcome by the deadline", RetryAt: at}, md)
		}, 0, now, md, "dispatcher_lost")
		return "lost", s.appendTx(ctx, tx, l, fx, evs...)
	}
	_, err = tx.Exec(ctx, `DELETE FROM job_timers WHERE job_id = $1`, id) // a stale timer
	return "", err
}

type repairSweepWorker struct {
	river.WorkerDefaults[RepairSweepArgs]
	s *Service
}

func (w *repairSweepWorker) Work(ctx context.Context, _ *river.Job[RepairSweepArgs]) error {
	_, err := w.s.SweepRepairs(ctx)
	return err
}

// SweepRepairs re-enqueues what went missing: the next dispatch of an open
// job that has no attempt under way and no River job (deleted, discarded
// after repeated infrastructure errors, cancelled by hand), and the
// callback of a finished job that was never acknowledged nor given up.
// Inserts are unique, so a job that still has its River job is untouched.
func (s *Service) SweepRepairs(ctx context.Context) (SweepReport, error) {
	rep := SweepReport{Sweep: "repair"}
	quiet := s.now().UTC().Add(-s.cfg.RepairAfter)
	err := s.store.InTx(ctx, func(tx pgx.Tx) error {
		rep.Redispatched, rep.CallbacksRequeued = nil, nil
		rows, err := tx.Query(ctx, `SELECT job_id::text, attempts, priority FROM jobs j
			WHERE status IN ('SUBMITTED', 'TIMEOUT') AND updated_at < $1
			  AND NOT EXISTS (SELECT 1 FROM job_timers t WHERE t.job_id = j.job_id)
			ORDER BY updated_at LIMIT 1000`, quiet)
		if err != nil {
			return err
		}
		var params []river.InsertManyParams
		var ids []string
		var id, prio string
		var attempts int
		if _, err := pgx.ForEachRow(rows, []any{&id, &attempts, &prio}, func() error {
			params = append(params, river.InsertManyParams{Args: DispatchArgs{JobID: id, Attempt: attempts + 1},
				InsertOpts: dispatchOpts(domain.Priority(prio))})
			ids = append(ids, id)
			return nil
		}); err != nil {
			return err
		}
		if rep.Redispatched, err = s.insertMissing(ctx, tx, params, ids); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT job_id::text FROM jobs
			WHERE finished_at IS NOT NULL AND callback_url IS NOT NULL AND NOT callback_done AND finished_at < $1
			ORDER BY finished_at LIMIT 1000`, quiet)
		if err != nil {
			return err
		}
		params, ids = nil, nil
		if _, err := pgx.ForEachRow(rows, []any{&id}, func() error {
			params = append(params, river.InsertManyParams{Args: CallbackArgs{JobID: id}})
			ids = append(ids, id)
			return nil
		}); err != nil {
			return err
		}
		rep.CallbacksRequeued, err = s.insertMissing(ctx, tx, params, ids)
		return err
	})
	if err != nil {
		return rep, fmt.Errorf("repair sweep: %w", err)
	}
	return rep, s.recordSweep(ctx, rep)
}

// insertMissing inserts unique River jobs and returns the ids of those that
// were really missing (not skipped as duplicates).
func (s *Service) insertMissing(ctx context.Context, tx pgx.Tx, params []river.InsertManyParams, ids []string) ([]string, error) {
	if len(params) == 0 {
		return nil, nil
	}
	res, err := s.client.InsertManyTx(ctx, tx, params)
	if err != nil {
		return nil, err
	}
	var out []string
	for i, r := range res {
		if !r.UniqueSkippedAsDuplicate {
			out = append(out, ids[i])
		}
	}
	return out, nil
}
