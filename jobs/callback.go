package jobs

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/riverqueue/river"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/jobs/callback"
)

type callbackWorker struct {
	river.WorkerDefaults[CallbackArgs]
	s *Service
}

// NextRetry backs off 1 s, 2 s, 4 s … up to 30 min, with jitter.
func (w *callbackWorker) NextRetry(job *river.Job[CallbackArgs]) time.Time {
	d := min(time.Second<<min(job.Attempt-1, 20), 30*time.Minute)
	return time.Now().Add(time.Duration(float64(d) * (0.75 + 0.5*rand.Float64())))
}

func (w *callbackWorker) Timeout(*river.Job[CallbackArgs]) time.Duration { return 30 * time.Second }

// Work makes River's try at a job's callback (callback.Sender.Try).
func (w *callbackWorker) Work(ctx context.Context, job *river.Job[CallbackArgs]) error {
	l, err := w.s.Load(ctx, nil, job.Args.JobID)
	if errors.Is(err, domain.ErrNotFound) {
		return river.JobCancel(err)
	}
	if err != nil {
		return err
	}
	if !l.Status.Terminal() || l.CallbackURL == "" || l.CallbackAcked {
		return nil
	}
	err = w.s.callbacks.Try(ctx, l, callback.Try{Attempt: job.Attempt, Max: job.MaxAttempts, Cause: fmt.Sprintf("river:%d", job.ID)})
	if errors.Is(err, callback.ErrHeld) {
		return river.JobSnooze(5 * time.Second) // another run holds the push configs: look again after it
	}
	return err
}
