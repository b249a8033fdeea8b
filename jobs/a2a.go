package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/agentreach/agentreach/a2a/adapter"
	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/jobs/jobstore"
)

// The A2A side of the jobs lives in a2a/adapter; this file holds its River
// poll worker and the service's doors to it.

// Adapter returns the A2A side of the jobs: the job service as the A2A
// server uses it, and the pushes of A2A agents.
func (s *Service) Adapter() *adapter.Adapter { return s.a2a }

// SubmitA2A submits a job that came as an A2A message (adapter.Core): it
// is checked and committed as any submit, in a batch of one, with its
// callback_url the A2A marker (ours: not for the SSRF guard, never posted
// to) and with run in its SUBMITTED transaction.
func (s *Service) SubmitA2A(ctx context.Context, sub domain.Submitted, md domain.Metadata, callbackURL func(ns string) string,
	with func(ctx context.Context, tx pgx.Tx, jobID string) error) (string, error) {
	if err := s.prepare(ctx, &sub); err != nil {
		return "", err
	}
	sub.CallbackURL = callbackURL(sub.Namespace)
	it := newBatchItem(ctx, sub, md)
	it.with = with
	s.commitSubmits(ctx, []*batchItem{it})
	r := <-it.done
	return r.res.JobID, r.err
}

// ProvideInput sends the caller's input to the A2A agent whose task awaits
// it (adapter.Adapter.ProvideInput).
func (s *Service) ProvideInput(ctx context.Context, id string, payload json.RawMessage, md domain.Metadata) (*jobstore.Loaded, error) {
	return s.a2a.ProvideInput(ctx, id, payload, md)
}

// A2APollArgs is the River job that looks after the task of a job's
// attempt at an A2A agent with GetTask (or at an MCP server agent with
// tasks/get: pollMCP): it reads the task of an agent that
// offers no push notifications, and watches that of one that does, which
// pushes its result, for the agent losing it (a restart).
type A2APollArgs struct {
	JobID   string `json:"job_id" river:"unique"`
	Attempt int    `json:"attempt" river:"unique"`
}

// Kind implements river.JobArgs.
func (A2APollArgs) Kind() string { return "a2a_poll" }

// InsertOpts implements river.JobArgsWithInsertOpts: one poller per
// attempt, on its own queue so pollers never hold up deliveries or
// callbacks.
func (A2APollArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueA2APoll, MaxAttempts: 25, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// pollRun bounds one run of the poller; then it snoozes and comes back.
const pollRun = 30 * time.Second

type a2aPollWorker struct {
	river.WorkerDefaults[A2APollArgs]
	s *Service
}

func (w *a2aPollWorker) Timeout(*river.Job[A2APollArgs]) time.Duration {
	return pollRun + 15*time.Second
}

// Work polls GetTask (adapter.Adapter.Poll) with a backoff (250 ms
// doubling to 5 s) for up to pollRun, and ends when the attempt is
// decided or no longer the job's; otherwise it snoozes and polls again
// (after 30 s when the agent waits for input). The task of an agent that
// pushes is only watched, once a run, less often the longer it runs
// (watchEvery).
//
// An attempt at an MCP server agent whose call answered a task is polled
// by pollMCP instead.
func (w *a2aPollWorker) Work(ctx context.Context, job *river.Job[A2APollArgs]) error {
	if w.s.atMCPServer(ctx, job.Args.JobID) {
		return w.s.pollMCP(ctx, job)
	}
	run := adapter.PollRun{JobID: job.Args.JobID, Attempt: job.Args.Attempt, Cause: fmt.Sprintf("river:%d", job.ID),
		Complete: func(ctx context.Context, tx pgx.Tx) error {
			_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
			return err
		}}
	stop := time.Now().Add(pollRun)
	wait := 250 * time.Millisecond
	for {
		lk, err := w.s.a2a.Poll(ctx, run)
		switch {
		case lk.Over && errors.Is(err, domain.ErrNotFound):
			return river.JobCancel(err)
		case lk.Over:
			return err
		case lk.State.Interrupted():
			return river.JobSnooze(30 * time.Second) // waiting on the caller, not the agent: look now and then
		case lk.Watch:
			return river.JobSnooze(watchEvery(time.Since(job.CreatedAt)))
		case time.Now().Add(wait).After(stop):
			return river.JobSnooze(5 * time.Second)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// watchEvery is how long the watch of a pushing agent's task, age old,
// waits before it looks again: a quarter of its age, from 2 s to 30 s.
func watchEvery(age time.Duration) time.Duration {
	return min(max(age/4, 2*time.Second), 30*time.Second)
}

// cancelAtAgent tells the agent that holds a cancelled job's attempt: an
// A2A agent is asked to cancel its task (adapter.Adapter.CancelAt), an MCP
// server its task (tasks/cancel), an HTTP agent that takes them gets a
// cancel notice.
func (s *Service) cancelAtAgent(ctx context.Context, l *jobstore.Loaded) {
	a := s.registry.Snapshot().Agent(domain.AgentKey{Namespace: l.Namespace, ID: l.AgentID})
	if a == nil {
		return
	}
	switch a.Protocol {
	case domain.ProtocolMCP:
		s.cancelMCPTask(ctx, a, l)
		return
	case domain.ProtocolA2A:
	default:
		s.cancelNotice(ctx, a, l)
		return
	}
	s.a2a.CancelAt(ctx, a, l)
}
