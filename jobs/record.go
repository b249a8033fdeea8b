package jobs

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/domain"
)

// sideEffects are the writes that go with a batch of job events, in the
// same transaction: the attempt's timer, the agent's attempt sample, the
// next attempt's dispatch, and the caller's callback.
type sideEffects struct {
	timer      *timer
	clearTimer bool
	sample     *sample
	dispatch   *nextDispatch
	// callback queues the caller's callback if the events end the job.
	callback bool
	// poll starts polling an A2A agent for this attempt's task.
	poll int
}

type timer struct {
	attempt    int
	agentID    string
	phase      domain.TimerPhase
	due        time.Time
	riverJobID int64
}

type sample struct {
	agentID string
	at      time.Time
	ok      bool
}

type nextDispatch struct {
	attempt int
	at      time.Time
}

// appendTx validates evs against the job's state machine by folding them
// onto a copy, appends them at the job's version, and writes their side
// effects, all in tx. On success l holds the new state.
func (s *Service) appendTx(ctx context.Context, tx pgx.Tx, l *Loaded, fx sideEffects, evs ...domain.Event) error {
	j := l.Job
	for _, e := range evs {
		if err := j.Apply(e); err != nil {
			return fmt.Errorf("job %s: %w", l.JobID, err)
		}
	}
	if _, err := s.store.AppendTx(ctx, tx, domain.JobStream(l.JobID), l.Version, evs...); err != nil {
		return err
	}
	if fx.clearTimer {
		if _, err := tx.Exec(ctx, `DELETE FROM job_timers WHERE job_id = $1`, l.JobID); err != nil {
			return fmt.Errorf("clear timer of job %s: %w", l.JobID, err)
		}
	}
	if t := fx.timer; t != nil {
		if err := s.setTimerTx(ctx, tx, l.JobID, *t); err != nil {
			return err
		}
	}
	if smp := fx.sample; smp != nil && smp.agentID != "" {
		if _, err := tx.Exec(ctx, `INSERT INTO agent_attempts (namespace, agent_id, at, ok) VALUES ($1, $2, $3, $4)`,
			l.Namespace, smp.agentID, smp.at, smp.ok); err != nil {
			return fmt.Errorf("record attempt of agent %s: %w", smp.agentID, err)
		}
	}
	if d := fx.dispatch; d != nil {
		// A retry waits on the job's timer rather than as a scheduled River
		// job: River promotes scheduled jobs every 5 s, the deadline sweep
		// every DeadlineSweepInterval (1 s).
		if err := s.setTimerTx(ctx, tx, l.JobID, timer{attempt: d.attempt, phase: domain.PhaseRetry, due: d.at}); err != nil {
			return err
		}
	}
	if fx.poll > 0 {
		if err := s.enqueuePollTx(ctx, tx, l.JobID, fx.poll); err != nil {
			return err
		}
	}
	s.countFinished(ctx, l.Status, j.Status)
	if fx.callback && j.Status.Terminal() && j.CallbackURL != "" {
		if err := s.enqueueCallbackTx(ctx, tx, l.JobID); err != nil {
			return err
		}
	}
	l.Job = j
	return nil
}

func (s *Service) setTimerTx(ctx context.Context, tx pgx.Tx, jobID string, t timer) error {
	var rj *int64
	if t.riverJobID != 0 {
		rj = &t.riverJobID
	}
	_, err := tx.Exec(ctx, `INSERT INTO job_timers (job_id, attempt, agent_id, phase, due_at, river_job_id) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (job_id) DO UPDATE SET attempt = excluded.attempt, agent_id = excluded.agent_id,
			phase = excluded.phase, due_at = excluded.due_at, river_job_id = excluded.river_job_id`,
		jobID, t.attempt, t.agentID, t.phase, t.due, rj)
	if err != nil {
		return fmt.Errorf("set timer of job %s: %w", jobID, err)
	}
	return nil
}

// enqueueDispatchTx inserts the River job of an attempt and the queued
// timer that watches it.
func (s *Service) enqueueDispatchTx(ctx context.Context, tx pgx.Tx, jobID string, attempt int, p domain.Priority) error {
	res, err := s.client.InsertTx(ctx, tx, DispatchArgs{JobID: jobID, Attempt: attempt}, dispatchOpts(p))
	if err != nil {
		return fmt.Errorf("enqueue attempt %d of job %s: %w", attempt, jobID, err)
	}
	return s.setTimerTx(ctx, tx, jobID, timer{attempt: attempt, phase: domain.PhaseQueued, due: s.now().Add(s.cfg.LostAfter), riverJobID: res.Job.ID})
}

// enqueueCallbackTx inserts the caller's callback job and the timer that
// watches it.
func (s *Service) enqueueCallbackTx(ctx context.Context, tx pgx.Tx, jobID string) error {
	res, err := s.client.InsertTx(ctx, tx, CallbackArgs{JobID: jobID}, nil)
	if err != nil {
		return fmt.Errorf("enqueue callback of job %s: %w", jobID, err)
	}
	return s.setTimerTx(ctx, tx, jobID, timer{phase: domain.PhaseCallback, due: s.now().Add(s.cfg.CallbackGrace), riverJobID: res.Job.ID})
}

// failAttempt decides what follows an attempt that produced no usable
// answer: a retry after backoff (preferring another agent), or, with no
// attempts left, the dead letter. failure builds the attempt's own event
// (ATTEMPT_FAILED or TIMEOUT) with the retry time, zero when there is none;
// retryAfter is the agent's Retry-After, if any.
func (s *Service) failAttempt(l *Loaded, failure func(retryAt time.Time) domain.Event, retryAfter time.Duration, now time.Time, md domain.Metadata, reason string) ([]domain.Event, sideEffects) {
	fx := sideEffects{clearTimer: true, callback: true}
	if l.Attempts < l.MaxAttempts {
		wait := domain.RetryAfter(domain.Backoff(l.Attempts+1, l.BackoffBase(), l.BackoffMax(), rand.Float64()), retryAfter)
		at := now.Add(wait)
		fx.dispatch = &nextDispatch{attempt: l.Attempts + 1, at: at}
		return []domain.Event{failure(at)}, fx
	}
	return []domain.Event{failure(time.Time{}),
		domain.NewEvent(domain.EventDeadLetter, domain.DeadLettered{Attempts: l.Attempts, Reason: reason, AgentID: l.AgentID}, md)}, fx
}

// outcomeEvents turns an agent's answer for the current, delivered attempt
// into events: SUCCESS or FAILED, or, for a FAILED that the caller asked to
// retry while attempts are left, ATTEMPT_FAILED and a new attempt.
func (s *Service) outcomeEvents(l *Loaded, status domain.JobStatus, result []byte, bizCode string, now time.Time, md domain.Metadata) ([]domain.Event, sideEffects) {
	out := domain.Outcome{Attempt: l.Attempts, AgentID: l.AgentID, Result: result, BizCode: bizCode,
		LatencyMS: float64(now.Sub(l.RoutedAt).Microseconds()) / 1000}
	smp := &sample{agentID: l.AgentID, at: now, ok: true}
	if status == domain.StatusFailed && l.RetryOnFailed && l.CanRetry() {
		evs, fx := s.failAttempt(l, func(at time.Time) domain.Event {
			return domain.NewEvent(domain.EventAttemptFailed, domain.AttemptFailed{Attempt: l.Attempts, AgentID: l.AgentID,
				Reason: "business_failure", BizCode: bizCode, RetryAt: at}, md)
		}, 0, now, md, "business_failure")
		fx.sample = smp
		return evs, fx
	}
	t := domain.EventSuccess
	if status == domain.StatusFailed {
		t = domain.EventFailed
	}
	return []domain.Event{domain.NewEvent(t, out, md)}, sideEffects{clearTimer: true, sample: smp, callback: true}
}

// lastIsRouted reports whether the job's latest event is the ROUTED of
// attempt: the attempt is under way and nothing has been recorded of it.
func (l *Loaded) lastIsRouted(attempt int) bool {
	last := l.Records[len(l.Records)-1]
	return last.Type == domain.EventRouted && l.Attempts == attempt
}
