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
	"github.com/agentreach/agentreach/a2a/server"
	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/internal/telemetry"
	"github.com/agentreach/agentreach/jobs/dispatch"
	"github.com/agentreach/agentreach/jobs/jobstore"
	"github.com/agentreach/agentreach/registry"
)

// Attempt-failure reasons of A2A agents: each re-routes the job at once
// rather than retry after a backoff. An agent that rejected the job or
// cannot take it never gets it again; one that lost its task (it answered
// GetTask with TaskNotFound: it restarted) may, if no other agent can.
const (
	ReasonRejected     = domain.ReasonRejected
	ReasonIncompatible = domain.ReasonIncompatible
	ReasonTaskLost     = "a2a_task_lost"
)

// a2aCarrier is the A2A carrier (dispatch.Carrier): it sends the attempt
// to an A2A agent as SendMessage and reads what the agent answered into
// an outcome.
type a2aCarrier struct{ s *Service }

// Span implements dispatch.Carrier.
func (a2aCarrier) Span() string { return "deliver a2a" }

// Carry implements dispatch.Carrier.
func (c a2aCarrier) Carry(ctx context.Context, a *registry.Agent, at dispatch.Attempt) domain.Observation {
	s, l := c.s, at.L
	send := a2aclient.Send{Endpoint: a.Endpoint, JobID: l.JobID, Attempt: at.N, Capability: l.Capability,
		Payload: l.Payload, Header: s.a2aHeader(ctx, l, at.N)}
	if s.takesPush(a) {
		send.Push = s.pushTarget(a, l.JobID, at.N)
	}
	task, err := s.a2a.SendMessage(ctx, send)
	var rpc *a2aclient.RPCError
	if errors.As(err, &rpc) && rpc.Code == a2aclient.CodePushNotSupported && send.Push != nil {
		// The card promised push, or said nothing: ask again without, and poll.
		s.a2a.RefusedPush(a.Endpoint)
		send.Push = nil
		task, err = s.a2a.SendMessage(ctx, send)
	}
	var httpErr *a2aclient.HTTPError
	switch {
	case errors.As(err, &rpc) && rpc.Incompatible():
		return domain.Observation{Kind: domain.ObservedRejected, Reason: ReasonIncompatible, ErrText: rpc.Error()}
	case errors.As(err, &rpc):
		return domain.Observation{Kind: domain.ObservedFailed, Reason: "a2a_error_" + strconv.Itoa(-rpc.Code), ErrText: dispatch.Truncate(rpc.Error(), 256)}
	case errors.As(err, &httpErr) && httpErr.Status == http.StatusTooManyRequests:
		return dispatch.RateLimited(httpErr.RetryAfter, s.now())
	case errors.As(err, &httpErr):
		return domain.Observation{Kind: domain.ObservedFailed, Reason: "http_" + strconv.Itoa(httpErr.Status), ErrText: httpErr.Body}
	case errors.Is(err, a2a.ErrBadTask):
		return domain.Observation{Kind: domain.ObservedFailed, Reason: "bad_response", ErrText: dispatch.Truncate(err.Error(), 256)}
	case err != nil:
		out := dispatch.Unanswered(ctx, at, err)
		out.Poll = out.Kind == domain.ObservedAccepted // the poller reads what the agent makes of it
		return out
	}
	// Every attempt an agent holds is looked after by the poller: it reads
	// the task of an agent that does not push, and watches that of one
	// that does for the agent losing it (a2aPollWorker).
	return a2aOutcome(task, true)
}

// takesPush reports whether A2A agent a is sent push configs: its card
// offers push notifications (or it was registered without a card), and
// it has not refused them since this process started.
func (s *Service) takesPush(a *registry.Agent) bool {
	ci, byCard := a.A2AInfo()
	return (!byCard || ci.Push) && s.a2a.TakesPush(a.Endpoint)
}

// a2aOutcome reads an agent's task into an outcome of the attempt.
func a2aOutcome(t a2a.Task, poll bool) domain.Observation {
	out := domain.Observation{RemoteTaskID: t.ID, Poll: poll}
	switch t.State {
	case a2a.StateCompleted:
		out.Kind, out.Status, out.Result = domain.ObservedResult, domain.StatusSuccess, t.Result
	case a2a.StateFailed:
		// The agent's words are the job's error; its artifacts, if any, the result.
		out.Kind, out.Status, out.Result, out.BizCode = domain.ObservedResult, domain.StatusFailed, t.Result, "a2a_failed"
		if out.ErrText = dispatch.Truncate(t.StatusText(), 1024); out.ErrText != "" && t.FromMessage {
			out.Result = nil
		}
	case a2a.StateRejected:
		out.Kind, out.Reason, out.ErrText, out.Result = domain.ObservedRejected, ReasonRejected, "the agent rejected the task", t.Result
		if text := t.StatusText(); text != "" {
			out.ErrText = dispatch.Truncate(out.ErrText+": "+text, 256)
		}
	case a2a.StateCanceled:
		out.Kind, out.Result = domain.ObservedCancelled, t.Result
	case a2a.StateInputRequired, a2a.StateAuthRequired:
		out.Kind, out.A2AState, out.Result = domain.ObservedAwaiting, string(t.State), t.Message
	default: // submitted, working, unknown: the result comes by push or poll
		out.Kind = domain.ObservedAccepted
	}
	return out
}

func (s *Service) a2aHeader(ctx context.Context, l *jobstore.Loaded, attempt int) http.Header {
	h := http.Header{}
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(h))
	h.Set("X-Reach-Job-Id", l.JobID)
	h.Set("X-Reach-Attempt", strconv.Itoa(attempt))
	return h
}

func (s *Service) pushTarget(a *registry.Agent, jobID string, attempt int) *a2aclient.Push {
	return &a2aclient.Push{URL: s.cfg.PublicURL + server.PushPath + jobID + "/" + strconv.Itoa(attempt),
		Token: a2a.PushToken(a.SigningKeys(s.now())[0], jobID, attempt)}
}

// a2aEvents decides what an update of attempt's A2A task (pushed, or read
// by polling) does to the job l (domain.TaskUpdate).
// An update that records the attempt's delivery (it beat the dispatcher's
// record of it) starts the attempt's poller too, as the dispatcher would
// have: it watches the task of an agent that pushes.
func (s *Service) a2aEvents(l *jobstore.Loaded, attempt int, t a2a.Task, now time.Time, md domain.Metadata) ([]domain.Event, domain.Effects, domain.Recorded) {
	evs, fx, rec := domain.TaskUpdate(&l.Job, attempt, l.AttemptAgents[attempt], l.RoutedAt, t.ID,
		a2aOutcome(t, false), now, s.jitter(), s.attemptPolicy(), md)
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
// that does not await input is ErrConflict; a payload that is not JSON a
// *domain.FieldError; an agent that does not take it ErrAgentUnavailable.
func (s *Service) ProvideInput(ctx context.Context, id string, payload json.RawMessage, md domain.Metadata) (*jobstore.Loaded, error) {
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
	send := a2aclient.Send{Endpoint: a.Endpoint, JobID: l.JobID, Attempt: attempt,
		Capability: l.Capability, Payload: payload, TaskID: l.RemoteTaskID, MessageID: uuid.Must(uuid.NewV7()).String(),
		Header: s.a2aHeader(rctx, l, attempt)}
	t, err := s.a2a.SendMessage(rctx, send)
	// An agent that answers an internal error did not take the message: one
	// still closing the turn that asked for input (an SDK's "execution
	// already in progress") takes it a moment later. The same message id
	// goes again, a few times, within the bound.
	for wait := 25 * time.Millisecond; isInternalRPCError(err) && wait <= 400*time.Millisecond; wait *= 2 {
		select {
		case <-rctx.Done():
		case <-time.After(wait):
			t, err = s.a2a.SendMessage(rctx, send)
		}
	}
	cancel()
	if err != nil {
		return nil, fmt.Errorf("input for job %s to agent %s: %v: %w", id, a.AgentID, err, ErrAgentUnavailable) //nolint:errorlint // as above
	}
	md.TraceID = l.TraceID
	err = s.jobs.RetryTx(ctx, func(tx pgx.Tx) error {
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
		return s.jobs.AppendTx(ctx, tx, l, fx, append([]domain.Event{in}, evs...)...)
	})
	if err != nil {
		return nil, err
	}
	return s.Load(ctx, nil, id)
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
func (s *Service) ReportA2APush(ctx context.Context, id string, attempt int, token string, body []byte) (domain.Recorded, error) {
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
	l, err := s.Load(ctx, nil, id)
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
	var recorded domain.Recorded
	err = s.jobs.RetryTx(ctx, func(tx pgx.Tx) error {
		l, err := s.Load(ctx, tx, id)
		if err != nil {
			return err
		}
		evs, fx, rec := s.a2aEvents(l, attempt, t, s.now().UTC(), md)
		recorded = rec
		if len(evs) == 0 {
			return nil
		}
		return s.jobs.AppendTx(ctx, tx, l, fx, evs...)
	})
	return recorded, err
}

// A2APollArgs is the River job that looks after the task of a job's
// attempt at an A2A agent with GetTask: it reads the task of an agent that
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

// look is what one look at an attempt's task found.
type look struct {
	state a2a.State // none when it could not be read
	over  bool      // the attempt is decided or no longer the job's
	watch bool      // the agent pushes: nothing was recorded
}

// Work polls GetTask with a backoff (250 ms doubling to 5 s) for up to
// pollRun, records what changed, and ends when the attempt is decided or
// no longer the job's; otherwise it snoozes and polls again (after 30 s
// when the agent waits for input). The task of an agent that pushes is
// only watched, once a run, less often the longer it runs (watchEvery).
// An agent that answers TaskNotFound lost its task: the attempt fails at
// once and the job is routed again (ReasonTaskLost).
func (w *a2aPollWorker) Work(ctx context.Context, job *river.Job[A2APollArgs]) error {
	stop := time.Now().Add(pollRun)
	wait := 250 * time.Millisecond
	for {
		lk, err := w.poll(ctx, job)
		switch {
		case lk.over:
			return err
		case lk.state.Interrupted():
			return river.JobSnooze(30 * time.Second) // waiting on the caller, not the agent: look now and then
		case lk.watch:
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

// poll looks at the attempt's task once and records what changed.
func (w *a2aPollWorker) poll(ctx context.Context, job *river.Job[A2APollArgs]) (look, error) {
	s := w.s
	l, err := s.Load(ctx, nil, job.Args.JobID)
	if errors.Is(err, domain.ErrNotFound) {
		return look{over: true}, river.JobCancel(err)
	}
	if err != nil {
		return look{over: true}, err
	}
	if l.Attempts != job.Args.Attempt || (l.Status != domain.StatusDelivered && l.Status != domain.StatusAwaitingInput) {
		return look{over: true}, nil // decided, or the job moved on
	}
	if l.RemoteTaskID == "" {
		return look{over: true}, nil // nothing to poll: the deadline decides
	}
	a, err := s.agent(ctx, l.Namespace, l.AgentID)
	if err != nil {
		return look{over: true}, nil // gone: the deadline decides
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	t, err := s.a2a.GetTask(rctx, a.Endpoint, l.RemoteTaskID, s.a2aHeader(rctx, l, l.Attempts))
	cancel()
	var rpc *a2aclient.RPCError
	switch {
	case errors.As(err, &rpc) && rpc.Code == a2aclient.CodeTaskNotFound:
		return look{over: true}, w.lost(ctx, job, l.RemoteTaskID, rpc)
	case err != nil:
		s.logger.DebugContext(ctx, "a2a poll", "job_id", l.JobID, "agent_id", l.AgentID, "err", err)
		return look{watch: s.takesPush(a)}, nil
	case s.takesPush(a):
		return look{state: t.State, watch: true}, nil // its pushes say what happens
	}
	done, err := w.record(ctx, job, t)
	return look{state: t.State, over: done || err != nil}, err
}

// lost fails the attempt whose agent no longer knows its task (it
// restarted, say) and routes the job again at once, completing the River
// job in the same transaction.
func (w *a2aPollWorker) lost(ctx context.Context, job *river.Job[A2APollArgs], taskID string, cause error) error {
	s := w.s
	return s.jobs.RetryTx(ctx, func(tx pgx.Tx) error {
		l, err := s.Load(ctx, tx, job.Args.JobID)
		if err != nil {
			return err
		}
		if l.Attempts == job.Args.Attempt && (l.Status == domain.StatusDelivered || l.Status == domain.StatusAwaitingInput) {
			md := domain.Metadata{TraceID: l.TraceID, Actor: "a2a:poll", CausationID: fmt.Sprintf("river:%d", job.ID)}
			now, agentID := s.now().UTC(), l.AgentID
			evs, fx := domain.Reroute(&l.Job, func(at time.Time) domain.Event {
				return domain.NewEvent(domain.EventAttemptFailed, domain.AttemptFailed{Attempt: job.Args.Attempt, AgentID: agentID,
					Reason: ReasonTaskLost, Error: dispatch.Truncate(fmt.Sprintf("the agent no longer knows its task %s (%v)", taskID, cause), 256),
					RetryAt: at}, md)
			}, now, md, ReasonTaskLost)
			fx.Sample = &domain.Sample{AgentID: agentID, At: now, OK: false}
			if err := s.jobs.AppendTx(ctx, tx, l, fx, evs...); err != nil {
				return err
			}
		}
		_, err = river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
}

// record appends what the polled task t changes, and completes the River
// job in the same transaction once the task has ended.
func (w *a2aPollWorker) record(ctx context.Context, job *river.Job[A2APollArgs], t a2a.Task) (bool, error) {
	s := w.s
	done := false
	err := s.jobs.RetryTx(ctx, func(tx pgx.Tx) error {
		l, err := s.Load(ctx, tx, job.Args.JobID)
		if err != nil {
			return err
		}
		md := domain.Metadata{TraceID: l.TraceID, Actor: "a2a:poll", CausationID: fmt.Sprintf("river:%d", job.ID)}
		evs, fx, _ := s.a2aEvents(l, job.Args.Attempt, t, s.now().UTC(), md)
		if len(evs) > 0 {
			if err := s.jobs.AppendTx(ctx, tx, l, fx, evs...); err != nil {
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
func (s *Service) cancelAtAgent(ctx context.Context, l *jobstore.Loaded) {
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
