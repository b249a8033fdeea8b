package jobs

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qClearJobTimer      = queries.Must("ClearJobTimer")
	qRecordAgentAttempt = queries.Must("RecordAgentAttempt")
	qSetJobTimer        = queries.Must("SetJobTimer")
	qLockAgentSlots     = queries.Must("LockAgentSlots")
	qReleaseAgentSlot   = queries.Must("ReleaseAgentSlot")
)

// appendTx validates evs against the job's state machine by folding them
// onto a copy, appends them at the job's version, and writes their side
// effects, all in tx. On success l holds the new state.
func (s *Service) appendTx(ctx context.Context, tx pgx.Tx, l *Loaded, fx domain.Effects, evs ...domain.Event) error {
	j := l.Job
	for _, e := range evs {
		if err := j.Apply(e); err != nil {
			return fmt.Errorf("job %s: %w", l.JobID, err)
		}
	}
	// The job's timer row first, then the append: the order of the shared
	// writes and the deadline sweep, so none of them waits on another in a
	// circle (the append's version is what the others' inserts wait on).
	if _, err := tx.Exec(ctx, qLockJobTimers, eventstore.UUIDs([]string{l.JobID})); err != nil {
		return fmt.Errorf("lock timer of job %s: %w", l.JobID, err)
	}
	if _, err := s.store.AppendTx(ctx, tx, domain.JobStream(l.JobID), l.Version, evs...); err != nil {
		return err
	}
	if l.SlotHolder != "" && j.SlotHolder == "" {
		if _, err := tx.Exec(ctx, qReleaseAgentSlot, l.JobID); err != nil {
			return fmt.Errorf("release slot of job %s: %w", l.JobID, err)
		}
	}
	if fx.ClearTimer {
		if _, err := tx.Exec(ctx, qClearJobTimer, l.JobID); err != nil {
			return fmt.Errorf("clear timer of job %s: %w", l.JobID, err)
		}
	}
	if t := fx.Timer; t != nil {
		if err := s.setTimerTx(ctx, tx, l.JobID, *t); err != nil {
			return err
		}
	}
	if smp := fx.Sample; smp != nil && smp.AgentID != "" {
		if _, err := tx.Exec(ctx, qRecordAgentAttempt, l.Namespace, smp.AgentID, smp.At, smp.OK); err != nil {
			return fmt.Errorf("record attempt of agent %s: %w", smp.AgentID, err)
		}
	}
	if d := fx.Dispatch; d != nil {
		// A retry waits on the job's timer rather than as a scheduled River
		// job: River promotes scheduled jobs every 5 s, the deadline sweep
		// every DeadlineSweepInterval (1 s).
		if err := s.setTimerTx(ctx, tx, l.JobID, domain.Timer{Attempt: d.Attempt, Phase: domain.PhaseRetry, Due: d.At}); err != nil {
			return err
		}
	}
	if fx.Poll > 0 {
		if err := s.enqueuePollTx(ctx, tx, l.JobID, fx.Poll); err != nil {
			return err
		}
	}
	s.countFinished(ctx, l.Status, j.Status)
	if fx.Callback && j.Status.Terminal() && j.CallbackURL != "" {
		if err := s.enqueueCallbackTx(ctx, tx, l.JobID); err != nil {
			return err
		}
	}
	l.Job = j
	return nil
}

func (s *Service) setTimerTx(ctx context.Context, tx pgx.Tx, jobID string, t domain.Timer) error {
	_, err := tx.Exec(ctx, qSetJobTimer, timerArgs(jobID, t)...)
	if err != nil {
		return fmt.Errorf("set timer of job %s: %w", jobID, err)
	}
	return nil
}

// timerArgs are SetJobTimer's arguments for a job's timer t.
func timerArgs(jobID string, t domain.Timer) []any {
	rj, since := timerNulls(t)
	return []any{jobID, t.Attempt, t.AgentID, t.Phase, t.Due, rj, since, t.Namespace}
}

// timerNulls are t's River job id and waiting time as the timer row's
// nullable columns (nil: none).
func timerNulls(t domain.Timer) (riverJobID *int64, waitingSince *time.Time) {
	if t.RiverJobID != 0 {
		riverJobID = &t.RiverJobID
	}
	if !t.WaitingSince.IsZero() {
		waitingSince = &t.WaitingSince
	}
	return riverJobID, waitingSince
}

// enqueueDispatchTx inserts the River job of an attempt and the queued
// timer that watches it.
// waitingSince, when not zero, is when the attempt began waiting for a
// routable agent.
func (s *Service) enqueueDispatchTx(ctx context.Context, tx pgx.Tx, jobID string, attempt int, p domain.Priority, waitingSince time.Time) error {
	res, err := s.client.InsertTx(ctx, tx, DispatchArgs{JobID: jobID, Attempt: attempt, WaitingSince: waitingSince}, dispatchOpts(p))
	if err != nil {
		return fmt.Errorf("enqueue attempt %d of job %s: %w", attempt, jobID, err)
	}
	return s.setTimerTx(ctx, tx, jobID, domain.Timer{Attempt: attempt, Phase: domain.PhaseQueued, Due: s.now().Add(s.cfg.LostAfter),
		RiverJobID: res.Job.ID, WaitingSince: waitingSince})
}

// enqueueCallbackTx inserts the caller's callback job and the timer that
// watches it.
func (s *Service) enqueueCallbackTx(ctx context.Context, tx pgx.Tx, jobID string) error {
	res, err := s.client.InsertTx(ctx, tx, CallbackArgs{JobID: jobID}, nil)
	if err != nil {
		return fmt.Errorf("enqueue callback of job %s: %w", jobID, err)
	}
	return s.setTimerTx(ctx, tx, jobID, s.callbackTimer(res.Job.ID))
}

// errNoSlot says every one of an agent's max_concurrent slots is taken.
var errNoSlot = errors.New("every slot of the agent is taken")

// jitter is the service's source of backoff jitter, in [0, 1).
func (s *Service) jitter() float64 { return rand.Float64() }

// attemptPolicy is what the attempt decisions need of the configuration.
func (s *Service) attemptPolicy() domain.AttemptPolicy {
	return domain.AttemptPolicy{InputTimeout: s.cfg.InputTimeout}
}
