package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/jobs/dispatch"
)

type dispatchWorker struct {
	river.WorkerDefaults[DispatchArgs]
	s *Service
}

// Timeout bounds one dispatch: the longest inline wait and some slack for
// the database. The delivery itself carries the attempt's deadline.
func (w *dispatchWorker) Timeout(*river.Job[DispatchArgs]) time.Duration {
	return w.s.cfg.InlineWait + 30*time.Second
}

// Work makes one attempt of a job from River's dispatch job (a retry, a
// redispatch, a submit that did not start directly): it loads the job's
// stream and hands it to the dispatch room, which completes the River job
// in the transaction that ends the run when it waits.
func (w *dispatchWorker) Work(ctx context.Context, job *river.Job[DispatchArgs]) error {
	l, err := w.s.Load(ctx, nil, job.Args.JobID)
	if errors.Is(err, domain.ErrNotFound) {
		return river.JobCancel(err)
	}
	if err != nil {
		return err
	}
	return w.s.dispatcher.Dispatch(ctx, l, dispatch.Run{Attempt: job.Args.Attempt, WaitingSince: job.Args.WaitingSince,
		Prefer: job.Args.Prefer, Cause: fmt.Sprintf("river:%d", job.ID),
		Complete: func(ctx context.Context, tx pgx.Tx) error {
			_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
			return err
		}})
}
