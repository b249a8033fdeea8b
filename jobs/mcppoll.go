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
	"github.com/agentreach/agentreach/jobs/jobstore"
	mcpclient "github.com/agentreach/agentreach/mcp/client"
	"github.com/agentreach/agentreach/registry"
)

// ReasonMCPTaskLost is the failure of an attempt whose MCP server no
// longer knows its task (tasks/get answered -32602): the job is routed
// again at once.
const ReasonMCPTaskLost = "mcp_task_lost"

// mcpPollDefault is the wait between two tasks/get of a server that asks
// for none; a server's own is kept within [mcpPollMin, mcpPollMax].
const (
	mcpPollDefault = 500 * time.Millisecond
	mcpPollMin     = 100 * time.Millisecond
	mcpPollMax     = 30 * time.Second
	mcpPollRun     = 5 * time.Second
)

// pollMCP is the poller of an attempt whose MCP server answered with a
// task (River's a2a_poll job): it reads the task (tasks/get) at the
// server's poll interval, a short one within a run of up to mcpPollRun,
// a second or more as a River snooze (no worker held while it waits),
// and comes back, until the task ends (its result recorded, the
// River job completed in the same transaction), the server loses it (the
// job routed again), or the attempt is decided otherwise (its deadline).
func (s *Service) pollMCP(ctx context.Context, job *river.Job[A2APollArgs]) error {
	stop := time.Now().Add(mcpPollRun)
	for {
		l, err := s.Load(ctx, nil, job.Args.JobID)
		if errors.Is(err, domain.ErrNotFound) {
			return river.JobCancel(err)
		}
		if err != nil {
			return err
		}
		if l.Attempts != job.Args.Attempt || l.Status != domain.StatusDelivered || l.RemoteTaskID == "" {
			return nil // decided, or the job moved on
		}
		ep, err := s.registry.MCPEndpoint(ctx, domain.AgentKey{Namespace: l.Namespace, ID: l.AgentID})
		if err != nil {
			return nil // the server is gone: the deadline decides
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		t, err := s.mcpClient.GetTask(rctx, ep, l.RemoteTaskID)
		cancel()
		wait := mcpPollDefault
		switch {
		case errors.Is(err, mcpclient.ErrTaskUnknown):
			return s.recordMCPTask(ctx, job, nil, err)
		case err != nil:
			// Passing, or the server's trouble: looked at again; the
			// attempt's deadline bounds the wait.
			s.logger.DebugContext(ctx, "mcp task poll", "job_id", l.JobID, "agent_id", l.AgentID, "err", err)
		case t.Ended():
			return s.recordMCPTask(ctx, job, &t, nil)
		case t.PollInterval > 0:
			wait = min(max(t.PollInterval, mcpPollMin), mcpPollMax)
		}
		if wait >= time.Second || time.Now().Add(wait).After(stop) {
			return river.JobSnooze(wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// atMCPServer reports whether job id's attempt went to an MCP server
// agent.
func (s *Service) atMCPServer(ctx context.Context, id string) bool {
	l, err := s.Load(ctx, nil, id)
	if err != nil {
		return false
	}
	a := s.registry.Snapshot().Agent(domain.AgentKey{Namespace: l.Namespace, ID: l.AgentID})
	return a != nil && a.Protocol == domain.ProtocolMCP
}

// recordMCPTask records the end of the attempt's task t (its result), or,
// when the server no longer knows it (lost), fails the attempt and routes
// the job again at once; it completes the River job in the same
// transaction.
func (s *Service) recordMCPTask(ctx context.Context, job *river.Job[A2APollArgs], t *mcpclient.Task, lost error) error {
	return s.jobs.RetryTx(ctx, func(tx pgx.Tx) error {
		l, err := s.Load(ctx, tx, job.Args.JobID)
		if err != nil {
			return err
		}
		attempt := job.Args.Attempt
		if l.Attempts == attempt && l.Status == domain.StatusDelivered {
			md := domain.Metadata{TraceID: l.TraceID, Actor: "mcp:poll", CausationID: fmt.Sprintf("river:%d", job.ID)}
			now, agentID := s.now().UTC(), l.AgentID
			var evs []domain.Event
			var fx domain.Effects
			if t != nil {
				obs := dispatch.TaskObservation(*t)
				evs, fx = domain.Answer(&l.Job, l.RoutedAt, obs.Status, obs.Result, obs.BizCode, obs.ErrText, now, s.jitter(), md)
			} else {
				evs, fx = domain.Reroute(&l.Job, func(at time.Time) domain.Event {
					return domain.NewEvent(domain.EventAttemptFailed, domain.AttemptFailed{Attempt: attempt, AgentID: agentID,
						Reason: ReasonMCPTaskLost, Error: dispatch.Truncate(fmt.Sprintf("the MCP server no longer knows its task %s (%v)", l.RemoteTaskID, lost), 256),
						RetryAt: at}, md)
				}, now, md, ReasonMCPTaskLost)
				fx.Sample = &domain.Sample{AgentID: agentID, At: now, OK: false}
			}
			if err := s.jobs.AppendTx(ctx, tx, l, fx, evs...); err != nil {
				return err
			}
		}
		_, err = river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
}

// cancelMCPTask asks the MCP server that holds a cancelled job's task to
// cancel it (tasks/cancel): a courtesy, in the background, as the job is
// CANCELLED already; a server that ignores it changes nothing here.
func (s *Service) cancelMCPTask(ctx context.Context, a *registry.Agent, l *jobstore.Loaded) {
	if l.RemoteTaskID == "" {
		return // a plain tools/call: nothing to cancel
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	go func() {
		defer cancel()
		ep, err := s.registry.MCPEndpoint(ctx, domain.AgentKey{Namespace: a.Namespace, ID: a.AgentID})
		if err == nil {
			err = s.mcpClient.CancelTask(ctx, ep, l.RemoteTaskID)
		}
		if err != nil {
			s.logger.InfoContext(ctx, "tasks/cancel at the MCP server", "job_id", l.JobID, "agent_id", a.AgentID, "err", err)
		}
	}()
}
