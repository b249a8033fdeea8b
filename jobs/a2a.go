package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/agentreach/agentreach/a2a"
	a2aclient "github.com/agentreach/agentreach/a2a/client"
	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/internal/telemetry"
	"github.com/agentreach/agentreach/registry"
)

// Attempt-failure reasons of A2A agents: both re-route the job at once to
// another agent rather than retry the same one after a backoff.
const (
	ReasonRejected     = domain.ReasonRejected
	ReasonIncompatible = domain.ReasonIncompatible
)

// PushPath is where A2A agents push task updates of a job's attempt:
// PushPath + job_id + "/" + attempt, under the service's public URL.
const PushPath = "/a2a-push/"

// deliverA2A sends the attempt to an A2A agent as SendMessage and reads
// what the agent answered into an outcome.
func (s *Service) deliverA2A(ctx context.Context, a *registry.Agent, l *Loaded, attempt int, deadline time.Time) domain.Observation {
	ctx, wait, wrote, end := s.deliveryCtx(ctx, "deliver a2a", a, l, attempt, deadline)
	defer end()
	send := a2aclient.Send{Endpoint: a.Endpoint, JobID: l.JobID, Attempt: attempt, Capability: l.Capability,
		Payload: l.Payload, Header: s.a2aHeader(ctx, l, attempt)}
	ci, byCard := a.A2AInfo()
	push := !byCard || ci.Push
	if push {
		send.Push = s.pushTarget(a, l.JobID, attempt)
	}
	task, err := s.a2a.SendMessage(ctx, send)
	var rpc *a2aclient.RPCError
	if errors.As(err, &rpc) && rpc.Code == a2aclient.CodePushNotSupported && send.Push != nil {
		// The card promised push, or said nothing: ask again without, and poll.
		push, send.Push = false, nil
		task, err = s.a2a.SendMessage(ctx, send)
	}
	var httpErr *a2aclient.HTTPError
	switch {
	case errors.As(err, &rpc) && rpc.Incompatible():
		return domain.Observation{Kind: domain.ObservedRejected, Reason: ReasonIncompatible, ErrText: rpc.Error()}
	case errors.As(err, &rpc):
		return domain.Observation{Kind: domain.ObservedFailed, Reason: "a2a_error_" + strconv.Itoa(-rpc.Code), ErrText: truncate(rpc.Error(), 256)}
	case errors.As(err, &httpErr) && httpErr.Status == http.StatusTooManyRequests:
		return domain.Observation{Kind: domain.ObservedFailed, Reason: "http_429", ErrText: "agent is rate limiting",
			RetryAfter: parseRetryAfter(httpErr.RetryAfter, s.now())}
	case errors.As(err, &httpErr):
		return domain.Observation{Kind: domain.ObservedFailed, Reason: "http_" + strconv.Itoa(httpErr.Status), ErrText: httpErr.Body}
	case errors.Is(err, a2a.ErrBadTask):
		return domain.Observation{Kind: domain.ObservedFailed, Reason: "bad_response", ErrText: truncate(err.Error(), 256)}
	case err != nil && ctx.Err() != nil && wrote() && wait.Before(deadline):
		return domain.Observation{Kind: domain.ObservedAccepted, Poll: !push}
	case err != nil && ctx.Err() != nil && wrote():
		return domain.Observation{Kind: domain.ObservedHung, Reason: "timeout", ErrText: "no answer by the deadline"}
	case err != nil:
		return domain.Observation{Kind: domain.ObservedFailed, Reason: classifyNetErr(ctx, err), ErrText: err.Error()}
	}
	return a2aOutcome(task, !push)
}

// a2aOutcome reads an agent's task into an outcome of the attempt.
func a2aOutcome(t a2a.Task, poll bool) domain.Observation {
	out := domain.Observation{RemoteTaskID: t.ID, Poll: poll}
	switch t.State {
	case a2a.StateCompleted:
		out.Kind, out.Status, out.Result = domain.ObservedResult, domain.StatusSuccess, t.Result
	case a2a.StateFailed:
		out.Kind, out.Status, out.Result, out.BizCode = domain.ObservedResult, domain.StatusFailed, t.Result, "a2a_failed"
	case a2a.StateRejected:
		out.Kind, out.Reason, out.ErrText, out.Result = domain.ObservedRejected, ReasonRejected, "the agent rejected the task", t.Result
	case a2a.StateCanceled:
		out.Kind, out.Result = domain.ObservedCancelled, t.Result
	case a2a.StateInputRequired, a2a.StateAuthRequired:
		out.Kind, out.A2AState, out.Result = domain.ObservedAwaiting, string(t.State), t.Message
	default: // submitted, working, unknown: the result comes by push or poll
		out.Kind = domain.ObservedAccepted
	}
	return out
}

func (s *Service) a2aHeader(ctx context.Context, l *Loaded, attempt int) http.Header {
	h := http.Header{}
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(h))
	h.Set("X-Reach-Job-Id", l.JobID)
	h.Set("X-Reach-Attempt", strconv.Itoa(attempt))
	return h
}

func (s *Service) pushTarget(a *registry.Agent, jobID string, attempt int) *a2aclient.Push {
	return &a2aclient.Push{URL: s.cfg.PublicURL + PushPath + jobID + "/" + strconv.Itoa(attempt),
		Token: a2a.PushToken(a.SigningKeys(s.now())[0], jobID, attempt)}
}

// a2aEvents decides what an update of attempt's A2A task (pushed, or read
// by polling) does to the job l (domain.TaskUpdate).
func (s *Service) a2aEvents(l *Loaded, attempt int, t a2a.Task, now time.Time, md domain.Metadata) ([]domain.Event, domain.Effects, Recorded) {
	return domain.TaskUpdate(&l.Job, attempt, l.AttemptAgents[attempt], l.lastIsRouted(attempt), l.RoutedAt, t.ID,
		a2aOutcome(t, false), now, s.jitter(), s.attemptPolicy(), md)
}

// A2A errors.
var (
	// ErrPushToken: the push carries no token, or not the attempt's.
	ErrPushToken = domain.NewError(domain.ErrUnauthenticated, "push token missing or invalid")
	// ErrAgentUnavailable: the agent holding a job did not take a message
	// about it (the caller's input).
	ErrAgentUnavailable = domain.NewError(domain.ErrUnavailable, "the agent did not take the message")
)

// ProvideInput sends the caller's input to the A2A agent whose task awaits
// it (the job is AWAITING_INPUT), as a message that continues that task,
// and records it as INPUT_PROVIDED together with what the agent answered
// (RESUMED, or the outcome). The agent is sent the input before anything
// is recorded, so the log never claims input the agent did not get. A job
// that does not await input is ErrConflict; a payload that is not JSON a
// *domain.FieldError; an agent that does not take it ErrAgentUnavailable.
func (s *Service) ProvideInput(ctx context.Context, id string, payload json.RawMessage, md domain.Metadata) (*Loaded, error) {
	if len(payload) == 0 || !json.Valid(payload) {
		return nil, &domain.FieldError{Field: "payload", Message: "must be valid JSON"}
	}
	if len(payload) > s.cfg.MaxPayloadBytes {
		return nil, &domain.FieldError{Field: "payload", Message: fmt.Sprintf("must be at most %d bytes", s.cfg.MaxPayloadBytes)}
	}
	l, err := s.Load(ctx, nil, id)
	if err != nil {
		return nil, err
	}
	if l.Status != domain.StatusAwaitingInput || l.RemoteTaskID == "" {
		return nil, fmt.Errorf("job %s is %s, not awaiting input: %w", id, l.Status, ErrConflict)
	}
	a, err := s.agent(ctx, l.Namespace, l.AgentID)
	if err != nil {
		// The cause is told, not wrapped: the kind is ErrAgentUnavailable.
		return nil, fmt.Errorf("agent %s of job %s: %v: %w", l.AgentID, id, err, ErrAgentUnavailable) //nolint:errorlint
	}
	attempt := l.Attempts
	ctx = telemetry.JobContext(ctx, l.TraceID)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	t, err := s.a2a.SendMessage(rctx, a2aclient.Send{Endpoint: a.Endpoint, JobID: l.JobID, Attempt: attempt,
		Capability: l.Capability, Payload: payload, TaskID: l.RemoteTaskID, MessageID: uuid.Must(uuid.NewV7()).String(),
		Header: s.a2aHeader(rctx, l, attempt)})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("input for job %s to agent %s: %v: %w", id, a.AgentID, err, ErrAgentUnavailable) //nolint:errorlint // as above
	}
	md.TraceID = l.TraceID
	err = s.retryConflict(ctx, func(tx pgx.Tx) error {
		l, err := s.Load(ctx, tx, id)
		if err != nil {
			return err
		}
		in := domain.NewEvent(domain.EventInputProvided, domain.InputProvided{Attempt: attempt, AgentID: a.AgentID, Payload: payload}, md)
		cur := *l
		if l.Attempts != attempt || cur.Apply(in) != nil {
			return nil // the job moved on meanwhile (cancelled, say): the agent has the input all the same
		}
		evs, fx, _ := s.a2aEvents(&cur, attempt, t, s.now().UTC(), md)
		return s.appendTx(ctx, tx, l, fx, append([]domain.Event{in}, evs...)...)
	})
	if err != nil {
		return nil, err
	}
	return s.Load(ctx, nil, id)
}

// ReportA2APush records a push notification an A2A agent sent about
// attempt of job id: body is the task (v0.3) or a StreamResponse (v1.0),
// token the bearer token Agent-Reach gave the agent for the attempt. An
// update that changes nothing (a repeat, WORKING while working) is
// accepted and writes nothing; a terminal one for an attempt already
// decided is recorded as RESULT_DUPLICATE. Errors: ErrNotFound for an
// unknown job or attempt, ErrPushToken, and a *domain.FieldError for a
// body that is no task.
func (s *Service) ReportA2APush(ctx context.Context, id string, attempt int, token string, body []byte) (Recorded, error) {
	if token == "" {
		return "", fmt.Errorf("push for attempt %d of job %s: %w", attempt, id, ErrPushToken)
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
	denied := fmt.Errorf("push for attempt %d of job %s: %w", attempt, id, ErrPushToken)
	l, err := s.Load(ctx, nil, id)
	if errors.Is(err, ErrNotFound) {
		return "", denied
	}
	if err != nil {
		return "", err
	}
	agentID := l.AttemptAgents[attempt]
	if agentID == "" {
		return "", denied
	}
	a, err := s.agent(ctx, l.Namespace, agentID)
	if err != nil || !a2a.PushTokenValid(a.SigningKeys(s.now()), id, attempt, token) {
		return "", denied
	}
	md := domain.Metadata{TraceID: l.TraceID, Actor: "a2a:push:" + agentID}
	ctx = telemetry.JobContext(ctx, l.TraceID)
	if t.Partial && t.State.Terminal() && t.ID != "" {
		// A status update names the end but not the output: read the task.
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if full, err := s.a2a.GetTask(rctx, a.Endpoint, t.ID, s.a2aHeader(rctx, l, attempt)); err == nil && full.State == t.State {
			t = full
		}
		cancel()
	}
	var recorded Recorded
	err = s.retryConflict(ctx, func(tx pgx.Tx) error {
		l, err := s.Load(ctx, tx, id)
		if err != nil {
			return err
		}
		evs, fx, rec := s.a2aEvents(l, attempt, t, s.now().UTC(), md)
		recorded = rec
		if len(evs) == 0 {
			return nil
		}
		return s.appendTx(ctx, tx, l, fx, evs...)
	})
	return recorded, err
}

// A2APollArgs is the River job that polls an A2A agent that offers no push
// notifications for the task of a job's attempt, with GetTask.
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

// Work polls GetTask with a backoff (250 ms doubling to 5 s) for up to
// pollRun, records what changed, and ends when the attempt is decided or
// no longer the job's; otherwise it snoozes and polls again (after 30 s
// when the agent waits for input).
func (w *a2aPollWorker) Work(ctx context.Context, job *river.Job[A2APollArgs]) error {
	stop := time.Now().Add(pollRun)
	wait := 250 * time.Millisecond
	for {
		state, over, err := w.poll(ctx, job)
		if over {
			return err
		}
		if state.Interrupted() {
			return river.JobSnooze(30 * time.Second) // waiting on the caller, not the agent: look now and then
		}
		if time.Now().Add(wait).After(stop) {
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

// poll reads the attempt's task once and records what changed. It answers
// the task's state (none when it could not be read) and whether polling is
// over, with the error to end the River job with.
func (w *a2aPollWorker) poll(ctx context.Context, job *river.Job[A2APollArgs]) (a2a.State, bool, error) {
	s := w.s
	l, err := s.Load(ctx, nil, job.Args.JobID)
	if errors.Is(err, ErrNotFound) {
		return "", true, river.JobCancel(err)
	}
	if err != nil {
		return "", true, err
	}
	if l.Attempts != job.Args.Attempt || (l.Status != domain.StatusDelivered && l.Status != domain.StatusAwaitingInput) {
		return "", true, nil // decided, or the job moved on
	}
	if l.RemoteTaskID == "" {
		return "", true, nil // nothing to poll: the deadline decides
	}
	a, err := s.agent(ctx, l.Namespace, l.AgentID)
	if err != nil {
		return "", true, nil // gone: the deadline decides
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	t, err := s.a2a.GetTask(rctx, a.Endpoint, l.RemoteTaskID, s.a2aHeader(rctx, l, l.Attempts))
	cancel()
	if err != nil {
		s.logger.DebugContext(ctx, "a2a poll", "job_id", l.JobID, "agent_id", l.AgentID, "err", err)
		return "", false, nil
	}
	done, err := w.record(ctx, job, t)
	return t.State, done || err != nil, err
}

// record appends what the polled task t changes, and completes the River
// job in the same transaction once the task has ended.
func (w *a2aPollWorker) record(ctx context.Context, job *river.Job[A2APollArgs], t a2a.Task) (bool, error) {
	s := w.s
	done := false
	err := s.retryConflict(ctx, func(tx pgx.Tx) error {
		l, err := s.Load(ctx, tx, job.Args.JobID)
		if err != nil {
			return err
		}
		md := domain.Metadata{TraceID: l.TraceID, Actor: "a2a:poll", CausationID: fmt.Sprintf("river:%d", job.ID)}
		evs, fx, _ := s.a2aEvents(l, job.Args.Attempt, t, s.now().UTC(), md)
		if len(evs) > 0 {
			if err := s.appendTx(ctx, tx, l, fx, evs...); err != nil {
				return err
			}
		}
		if done = t.State.Terminal(); done {
			_, err = river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		}
		return err
	})
	return done, err
}

// agent returns an agent from the router's snapshot, which every push and
// poll can read without a query, or from the registry if the snapshot does
// not have it yet. A job names its agent by id; the job's namespace says
// whose.
func (s *Service) agent(ctx context.Context, namespace, id string) (*registry.Agent, error) {
	k := domain.AgentKey{Namespace: namespace, ID: id}
	if a := s.registry.Snapshot().Agent(k); a != nil {
		return a, nil
	}
	return s.registry.Get(ctx, k)
}

// cancelAtAgent asks the A2A agent that holds a cancelled job's task to
// cancel it too. It is a courtesy, in the background: the job is already
// CANCELLED, and whatever the agent pushes later is recorded and changes
// nothing.
func (s *Service) cancelAtAgent(ctx context.Context, l *Loaded) {
	a := s.registry.Snapshot().Agent(domain.AgentKey{Namespace: l.Namespace, ID: l.AgentID})
	if a == nil {
		return
	}
	if a.Protocol != domain.ProtocolA2A {
		s.cancelNotice(ctx, a, l)
		return
	}
	if l.RemoteTaskID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	go func() {
		defer cancel()
		if err := s.a2a.CancelTask(ctx, a.Endpoint, l.RemoteTaskID, s.a2aHeader(ctx, l, l.Attempts)); err != nil {
			s.logger.InfoContext(ctx, "a2a cancel at the agent", "job_id", l.JobID, "agent_id", a.AgentID, "err", err)
		}
	}()
}

// enqueuePollTx starts polling attempt of job in tx.
func (s *Service) enqueuePollTx(ctx context.Context, tx pgx.Tx, jobID string, attempt int) error {
	if _, err := s.client.InsertTx(ctx, tx, A2APollArgs{JobID: jobID, Attempt: attempt}, nil); err != nil {
		return fmt.Errorf("enqueue poll of attempt %d of job %s: %w", attempt, jobID, err)
	}
	return nil
}

// excluded are the agents the next attempt must avoid: the last one that
// failed, and every one that refused the job.
func excluded(l *Loaded) []string {
	out := append([]string(nil), l.RefusedBy...)
	if l.LastFailedAgent != "" {
		out = append(out, l.LastFailedAgent)
	}
	return out
}
