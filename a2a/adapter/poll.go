package adapter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/a2a"
	a2aclient "github.com/agentreach/agentreach/a2a/client"
	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/jobs/dispatch"
)

// ReasonTaskLost is the failure of an attempt whose A2A agent no longer
// knows its task (it answered GetTask with TaskNotFound: it restarted):
// the job is routed again at once, to the same agent if no other can.
const ReasonTaskLost = "a2a_task_lost"

// Look is what one look at an attempt's task found.
type Look struct {
	State a2a.State // none when it could not be read
	Over  bool      // the attempt is decided or no longer the job's
	Watch bool      // the agent pushes: nothing was recorded
}

// PollRun is one run of the poller of an attempt's task (River's
// a2a_poll job): its cause for the events, and Complete, which completes
// the run's River job in the transaction that records the task's end.
type PollRun struct {
	JobID    string
	Attempt  int
	Cause    string
	Complete func(ctx context.Context, tx pgx.Tx) error
}

// Poll looks at the attempt's task once and records what changed: it
// reads the task of an agent that offers no push notifications, and
// watches that of one that does for the agent losing it. An agent that
// answers TaskNotFound lost its task: the attempt fails at once and the
// job is routed again (ReasonTaskLost). An error that wraps
// domain.ErrNotFound means the job has no stream.
func (ad *Adapter) Poll(ctx context.Context, run PollRun) (Look, error) {
	l, err := ad.jobs.Load(ctx, nil, run.JobID)
	if err != nil {
		return Look{Over: true}, err
	}
	if l.Attempts != run.Attempt || (l.Status != domain.StatusDelivered && l.Status != domain.StatusAwaitingInput) {
		return Look{Over: true}, nil // decided, or the job moved on
	}
	if l.RemoteTaskID == "" {
		return Look{Over: true}, nil // nothing to poll: the deadline decides
	}
	a, err := ad.agent(ctx, l.Namespace, l.AgentID)
	if err != nil {
		return Look{Over: true}, nil // gone: the deadline decides
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	t, err := ad.client.GetTask(rctx, a.Endpoint, l.RemoteTaskID, ad.a2aHeader(rctx, l, l.Attempts))
	cancel()
	var rpc *a2aclient.RPCError
	switch {
	case errors.As(err, &rpc) && rpc.Code == a2aclient.CodeTaskNotFound:
		return Look{Over: true}, ad.lost(ctx, run, l.RemoteTaskID, rpc)
	case err != nil:
		ad.logger.DebugContext(ctx, "a2a poll", "job_id", l.JobID, "agent_id", l.AgentID, "err", err)
		return Look{Watch: ad.takesPush(a)}, nil
	case ad.takesPush(a):
		return Look{State: t.State, Watch: true}, nil // its pushes say what happens
	}
	done, err := ad.record(ctx, run, t)
	return Look{State: t.State, Over: done || err != nil}, err
}

// lost fails the attempt whose agent no longer knows its task (it
// restarted, say) and routes the job again at once, completing the River
// job in the same transaction.
func (ad *Adapter) lost(ctx context.Context, run PollRun, taskID string, cause error) error {
	return ad.jobs.RetryTx(ctx, func(tx pgx.Tx) error {
		l, err := ad.jobs.Load(ctx, tx, run.JobID)
		if err != nil {
			return err
		}
		if l.Attempts == run.Attempt && (l.Status == domain.StatusDelivered || l.Status == domain.StatusAwaitingInput) {
			md := domain.Metadata{TraceID: l.TraceID, Actor: "a2a:poll", CausationID: run.Cause}
			now, agentID := ad.cfg.Now().UTC(), l.AgentID
			evs, fx := domain.Reroute(&l.Job, func(at time.Time) domain.Event {
				return domain.NewEvent(domain.EventAttemptFailed, domain.AttemptFailed{Attempt: run.Attempt, AgentID: agentID,
					Reason: ReasonTaskLost, Error: dispatch.Truncate(fmt.Sprintf("the agent no longer knows its task %s (%v)", taskID, cause), 256),
					RetryAt: at}, md)
			}, now, md, ReasonTaskLost)
			fx.Sample = &domain.Sample{AgentID: agentID, At: now, OK: false}
			if err := ad.jobs.AppendTx(ctx, tx, l, fx, evs...); err != nil {
				return err
			}
		}
		return run.Complete(ctx, tx)
	})
}

// record appends what the polled task t changes, and completes the River
// job in the same transaction once the task has ended.
func (ad *Adapter) record(ctx context.Context, run PollRun, t a2a.Task) (bool, error) {
	done := false
	err := ad.jobs.RetryTx(ctx, func(tx pgx.Tx) error {
		l, err := ad.jobs.Load(ctx, tx, run.JobID)
		if err != nil {
			return err
		}
		md := domain.Metadata{TraceID: l.TraceID, Actor: "a2a:poll", CausationID: run.Cause}
		evs, fx, _ := ad.a2aEvents(l, run.Attempt, t, ad.cfg.Now().UTC(), md)
		if len(evs) > 0 {
			if err := ad.jobs.AppendTx(ctx, tx, l, fx, evs...); err != nil {
				return err
			}
		}
		if done = t.State.Terminal(); done {
			err = run.Complete(ctx, tx)
		}
		return err
	})
	return done, err
}
