package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	a2aclient "github.com/agentreach/agentreach/a2a/client"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/a2a"
	"github.com/agentreach/agentreach/a2a/server"
	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/internal/telemetry"
	"github.com/agentreach/agentreach/jobs/jobstore"
	"github.com/agentreach/agentreach/registry"
)

// a2aEvents decides what an update of attempt's A2A task (pushed, or read
// by polling) does to the job l (domain.TaskUpdate).
// An update that records the attempt's delivery (it beat the dispatcher's
// record of it) starts the attempt's poller too, as the dispatcher would
// have: it watches the task of an agent that pushes.
func (ad *Adapter) a2aEvents(l *jobstore.Loaded, attempt int, t a2a.Task, now time.Time, md domain.Metadata) ([]domain.Event, domain.Effects, domain.Recorded) {
	evs, fx, rec := domain.TaskUpdate(&l.Job, attempt, l.AttemptAgents[attempt], l.RoutedAt, t.ID,
		a2aOutcome(t, false), now, ad.cfg.Jitter(), ad.cfg.Policy, md)
	if len(evs) > 0 && evs[0].Type == domain.EventDelivered && t.ID != "" {
		if last := evs[len(evs)-1].Type; last == domain.EventDelivered || last == domain.EventAwaitingInput {
			fx.Poll = attempt // still open after this update
		}
	}
	return evs, fx, rec
}

// A2A errors.
var (
	// ErrAgentUnavailable: the agent holding a job did not take a message
	// about it (the caller's input).
	ErrAgentUnavailable = domain.NewError(domain.ErrUnavailable, "the agent did not take the message")
)

// ProvideInput sends the caller's input to the A2A agent whose task awaits
// it (the job is AWAITING_INPUT), as a message that continues that task,
// and records it as INPUT_PROVIDED together with what the agent answered
// (RESUMED, or the outcome). The agent is sent the input before anything
// is recorded, so the log never claims input the agent did not get. A job
// that does not await input is jobstore.ErrConflict; a payload that is not JSON a
// *domain.FieldError; an agent that does not take it ErrAgentUnavailable.
func (ad *Adapter) ProvideInput(ctx context.Context, id string, payload json.RawMessage, md domain.Metadata) (*jobstore.Loaded, error) {
	if len(payload) == 0 || !json.Valid(payload) {
		return nil, &domain.FieldError{Field: "payload", Message: "must be valid JSON"}
	}
	if len(payload) > ad.cfg.MaxPayloadBytes {
		return nil, &domain.FieldError{Field: "payload", Message: fmt.Sprintf("must be at most %d bytes", ad.cfg.MaxPayloadBytes), TooLarge: true}
	}
	l, err := ad.jobs.Load(ctx, nil, id)
	if err != nil {
		return nil, err
	}
	if l.Status != domain.StatusAwaitingInput || l.RemoteTaskID == "" {
		return nil, fmt.Errorf("job %s is %s, not awaiting input: %w", id, l.Status, jobstore.ErrConflict)
	}
	a, err := ad.agent(ctx, l.Namespace, l.AgentID)
	if err != nil {
		// The cause is told, not wrapped: the kind is ErrAgentUnavailable.
		return nil, fmt.Errorf("agent %s of job %s: %v: %w", l.AgentID, id, err, ErrAgentUnavailable) //nolint:errorlint
	}
	attempt := l.Attempts
	ctx = telemetry.JobContext(ctx, l.TraceID)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	send := a2aclient.Send{Endpoint: a.Endpoint, JobID: l.JobID, Attempt: attempt,
		Capability: l.Capability, Payload: payload, TaskID: l.RemoteTaskID, MessageID: uuid.Must(uuid.NewV7()).String(),
		Header: ad.a2aHeader(rctx, l, attempt)}
	t, err := ad.client.SendMessage(rctx, send)
	// An agent that answers an internal error did not take the message: one
	// still closing the turn that asked for input (an SDK's "execution
	// already in progress") takes it a moment later. The same message id
	// goes again, a few times, within the bound.
	for wait := 25 * time.Millisecond; isInternalRPCError(err) && wait <= 400*time.Millisecond; wait *= 2 {
		select {
		case <-rctx.Done():
		case <-time.After(wait):
			t, err = ad.client.SendMessage(rctx, send)
		}
	}
	cancel()
	if err != nil {
		return nil, fmt.Errorf("input for job %s to agent %s: %v: %w", id, a.AgentID, err, ErrAgentUnavailable) //nolint:errorlint // as above
	}
	md.TraceID = l.TraceID
	err = ad.jobs.RetryTx(ctx, func(tx pgx.Tx) error {
		l, err := ad.jobs.Load(ctx, tx, id)
		if err != nil {
			return err
		}
		in := domain.NewEvent(domain.EventInputProvided, domain.InputProvided{Attempt: attempt, AgentID: a.AgentID, Payload: payload}, md)
		cur := *l
		if l.Attempts != attempt || cur.Apply(in) != nil {
			return nil // the job moved on meanwhile (cancelled, say): the agent has the input all the same
		}
		evs, fx, _ := ad.a2aEvents(&cur, attempt, t, ad.cfg.Now().UTC(), md)
		return ad.jobs.AppendTx(ctx, tx, l, fx, append([]domain.Event{in}, evs...)...)
	})
	if err != nil {
		return nil, err
	}
	return ad.jobs.Load(ctx, nil, id)
}

// isInternalRPCError reports whether err is an agent's JSON-RPC internal
// error answer.
func isInternalRPCError(err error) bool {
	var rpc *a2aclient.RPCError
	return errors.As(err, &rpc) && rpc.Code == a2aclient.CodeInternal
}

// ReportA2APush records a push notification an A2A agent sent about
// attempt of job id: body is the task (v0.3) or a StreamResponse (v1.0),
// token the bearer token Agent-Reach gave the agent for the attempt. An
// update that changes nothing (a repeat, WORKING while working) is
// accepted and writes nothing; a terminal one for an attempt already
// decided is recorded as RESULT_DUPLICATE. Errors: domain.ErrNotFound for an
// unknown job or attempt, server.ErrPushToken, and a *domain.FieldError for a
// body that is no task.
func (ad *Adapter) ReportA2APush(ctx context.Context, id string, attempt int, token string, body []byte) (domain.Recorded, error) {
	if token == "" {
		return "", fmt.Errorf("push for attempt %d of job %s: %w", attempt, id, server.ErrPushToken)
	}
	t, err := a2a.ParseTask(body)
	if err != nil {
		return "", &domain.FieldError{Field: "body", Message: err.Error()}
	}
	if at, bad := domain.UnstorableJSON(body); bad {
		return "", &domain.FieldError{Field: "body", Message: "holds text that cannot be stored at " + at}
	}
	// An unknown job or attempt answers as a bad token does: a push says
	// nothing of which jobs exist to whoever lacks the attempt's token.
	denied := fmt.Errorf("push for attempt %d of job %s: %w", attempt, id, server.ErrPushToken)
	l, err := ad.jobs.Load(ctx, nil, id)
	if errors.Is(err, domain.ErrNotFound) {
		return "", denied
	}
	if err != nil {
		return "", err
	}
	agentID := l.AttemptAgents[attempt]
	if agentID == "" {
		return "", denied
	}
	a, err := ad.agent(ctx, l.Namespace, agentID)
	if err != nil || !a2a.PushTokenValid(a.SigningKeys(ad.cfg.Now()), id, attempt, token) {
		return "", denied
	}
	md := domain.Metadata{TraceID: l.TraceID, Actor: "a2a:push:" + agentID}
	ctx = telemetry.JobContext(ctx, l.TraceID)
	if t.Partial && t.State.Terminal() && t.ID != "" {
		// A status update names the end but not the output: read the task.
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if full, err := ad.client.GetTask(rctx, a.Endpoint, t.ID, ad.a2aHeader(rctx, l, attempt)); err == nil && full.State == t.State {
			t = full
		}
		cancel()
	}
	var recorded domain.Recorded
	err = ad.jobs.RetryTx(ctx, func(tx pgx.Tx) error {
		l, err := ad.jobs.Load(ctx, tx, id)
		if err != nil {
			return err
		}
		evs, fx, rec := ad.a2aEvents(l, attempt, t, ad.cfg.Now().UTC(), md)
		recorded = rec
		if len(evs) == 0 {
			return nil
		}
		return ad.jobs.AppendTx(ctx, tx, l, fx, evs...)
	})
	return recorded, err
}

// agent returns an agent from the router's snapshot, which every push and
// poll can read without a query, or from the registry if the snapshot does
// not have it yet. A job names its agent by id; the job's namespace says
// whose.
func (ad *Adapter) agent(ctx context.Context, namespace, id string) (*registry.Agent, error) {
	k := domain.AgentKey{Namespace: namespace, ID: id}
	if a := ad.registry.Snapshot().Agent(k); a != nil {
		return a, nil
	}
	return ad.registry.Get(ctx, k)
}

// CancelAt asks the A2A agent a that holds a cancelled job's task to
// cancel it too. It is a courtesy, in the background: the job is already
// CANCELLED, and whatever the agent pushes later is recorded and changes
// nothing.
func (ad *Adapter) CancelAt(ctx context.Context, a *registry.Agent, l *jobstore.Loaded) {
	if l.RemoteTaskID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	go func() {
		defer cancel()
		if err := ad.client.CancelTask(ctx, a.Endpoint, l.RemoteTaskID, ad.a2aHeader(ctx, l, l.Attempts)); err != nil {
			ad.logger.InfoContext(ctx, "a2a cancel at the agent", "job_id", l.JobID, "agent_id", a.AgentID, "err", err)
		}
	}()
}
