package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/internal/telemetry"
	"github.com/agentreach/agentreach/jobs/jobstore"
	"github.com/agentreach/agentreach/registry"
	"github.com/agentreach/agentreach/webhook"
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
// stream and dispatches.
func (w *dispatchWorker) Work(ctx context.Context, job *river.Job[DispatchArgs]) error {
	l, err := w.s.Load(ctx, nil, job.Args.JobID)
	if errors.Is(err, domain.ErrNotFound) {
		return river.JobCancel(err)
	}
	if err != nil {
		return err
	}
	return w.s.dispatch(ctx, l, dispatchRun{args: job.Args, job: job, cause: fmt.Sprintf("river:%d", job.ID)})
}

// dispatchRun is one dispatch of an attempt: by River's dispatch job, or
// directly in the process that committed the submit (direct.go), with no
// River job.
type dispatchRun struct {
	args DispatchArgs
	job  *river.Job[DispatchArgs] // nil for a direct dispatch
	// cause is what the events record as their causation.
	cause string
}

// dispatch makes one attempt on the fold l as domain.PlanDispatch plans
// it: route, record ROUTED, deliver without holding a transaction, then
// record the outcome; or wait, or spend the attempt when no agent can
// take it. A dispatch whose attempt already started, or whose job moved
// on, does nothing.
func (s *Service) dispatch(ctx context.Context, l *jobstore.Loaded, run dispatchRun) error {
	ctx, span := s.dispatchSpan(ctx, l, run.args.Attempt)
	defer span.End()
	if !l.CanStart(run.args.Attempt) {
		return nil // stale: this attempt started already, or the job moved on
	}
	md := domain.Metadata{TraceID: l.TraceID, Actor: "dispatcher", CausationID: run.cause}
	in := domain.DispatchInput{Attempt: run.args.Attempt, WaitingSince: run.args.WaitingSince, HoldFor: pressureEvery,
		RouteWait: l.RouteWait(s.cfg.RouteWait), CapacityWait: s.capacityWait(l.Namespace), Now: s.now().UTC(), Jitter: s.jitter(), Metadata: md}
	in.HoldLow = l.Priority == domain.PriorityLow && s.holdLow(ctx, l.Namespace)
	var agent *registry.Agent
	if !in.HoldLow {
		in.Route, agent = s.route(l)
		in.Chosen, in.Pull = agent != nil, agent != nil && agent.Pull()
	}
	plan := domain.PlanDispatch(&l.Job, in)
	switch plan.Step {
	case domain.StepStale:
		return nil
	case domain.StepWait:
		return s.waitOn(ctx, run, l, *plan.Timer)
	case domain.StepNoAgent:
		return s.store.InTx(ctx, func(tx pgx.Tx) error {
			if err := s.jobs.AppendTx(ctx, tx, l, plan.Effects, plan.Events...); err != nil {
				return err
			}
			return run.completeTx(ctx, tx)
		})
	case domain.StepInbox:
		err := s.inbox.Put(ctx, l, agent, plan.Events[0])
		if errors.Is(err, jobstore.ErrNoSlot) {
			return s.waitForSlot(ctx, run, l) // another process took the last slot first
		}
		return err
	}
	deadline, err := s.recordRouted(ctx, l, agent, plan.Events[0])
	if errors.Is(err, jobstore.ErrNoSlot) {
		return s.waitForSlot(ctx, run, l) // another process took the last slot first
	}
	if err != nil {
		return err // River retries (a direct run hands the attempt to River); the next run reloads and sees whether it started
	}
	return s.deliverAndRecord(ctx, run, l, agent, deadline, md)
}

// capacityWait is how long an attempt of namespace ns waits when every
// candidate is at capacity: its routing policy's, or the service's.
func (s *Service) capacityWait(ns string) time.Duration {
	if p := s.registry.Snapshot().Policy(ns); p.Version > 0 {
		return p.CapacityWait()
	}
	return s.cfg.CapacityWait
}

// waitForSlot makes the attempt wait for a slot of its agent, which
// another process took first.
func (s *Service) waitForSlot(ctx context.Context, run dispatchRun, l *jobstore.Loaded) error {
	return s.waitOn(ctx, run, l, domain.WaitTimer(run.args.Attempt, true, run.args.WaitingSince, s.now().UTC(), s.capacityWait(l.Namespace)))
}

// dispatchSpan is the context and span of one dispatch of attempt of l,
// with the job's trace id for the logs.
func (s *Service) dispatchSpan(ctx context.Context, l *jobstore.Loaded, attempt int) (context.Context, trace.Span) {
	ctx = telemetry.JobContext(ctx, l.TraceID)
	return s.tracer.Start(ctx, "dispatch", trace.WithAttributes(attribute.String("job_id", l.JobID),
		attribute.Int("attempt", attempt), attribute.String("capability", l.Capability)))
}

// deliverAndRecord delivers the attempt routed on l (its fold after ROUTED)
// to agent and records the outcome; a job that ends here is called back.
func (s *Service) deliverAndRecord(ctx context.Context, run dispatchRun, l *jobstore.Loaded, agent *registry.Agent, deadline time.Time, md domain.Metadata) error {
	out, latency := s.deliverMeasured(ctx, agent, l, run.args.Attempt, deadline)
	recorded, err := s.recordDelivery(ctx, run.args, l, out, deadline, latency, md)
	if err == nil && recorded != nil && recorded.CallsBack() {
		// The job ended here: its caller is called back from this fold, by
		// a direct dispatcher itself (its slot bounds the callbacks too).
		if run.job == nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			s.callbacks.Send(cctx, recorded.L, md.CausationID)
		} else {
			s.callbacks.Now(ctx, recorded.L, md.CausationID)
		}
	}
	return err
}

// route ranks the job's candidates in the snapshot and returns the route
// and the chosen agent (nil when none was chosen).
func (s *Service) route(l *jobstore.Loaded) (domain.RouteResult, *registry.Agent) {
	req := domain.RouteRequest{JobID: l.JobID, Namespace: l.Namespace, Capability: l.Capability, Hint: l.Hint,
		Version: l.Constraints.Version, Protocol: l.Constraints.Protocol, ProtocolVersions: l.Constraints.ProtocolVersions,
		Exclude: excluded(l),
		Intent:  l.Resolution, // ROUTED shows the resolution the capability came from
	}
	route := s.registry.Snapshot().Route(req)
	if route.Chosen == "" {
		return route, nil
	}
	return route, s.registry.Snapshot().Agent(domain.AgentKey{Namespace: l.Namespace, ID: route.Chosen})
}

// waitOn sets the attempt's retry timer t and completes the River job.
func (s *Service) waitOn(ctx context.Context, run dispatchRun, l *jobstore.Loaded, t domain.Timer) error {
	return s.store.InTx(ctx, func(tx pgx.Tx) error {
		held := *l // the fold goes on unchanged: a timer is no event
		if err := s.jobs.AppendTx(ctx, tx, &held, domain.Effects{Timer: &t}); err != nil {
			return err
		}
		return run.completeTx(ctx, tx)
	})
}

// completeTx completes the run's River job in tx (a direct run has none).
func (run dispatchRun) completeTx(ctx context.Context, tx pgx.Tx) error {
	if run.job == nil {
		return nil
	}
	_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, run.job)
	return err
}

// recordRouted takes a slot of the agent (jobstore.ErrNoSlot when none is free) and
// appends ROUTED with the attempt's routed timer (due when
// the dispatcher should have recorded an outcome) and answers the attempt's
// deadline; on success l is the fold after ROUTED. The write shares its
// transaction with concurrent ones (write.go).
func (s *Service) recordRouted(ctx context.Context, l *jobstore.Loaded, agent *registry.Agent, routed domain.Event) (time.Time, error) {
	now := s.now().UTC()
	deadline := now.Add(l.Timeout())
	attempt := l.Attempts + 1
	err := s.jobs.Write(ctx, &jobstore.Write{L: l, Events: []domain.Event{routed},
		Effects: domain.Effects{Timer: &domain.Timer{Attempt: attempt, AgentID: agent.AgentID, Phase: domain.PhaseRouted, Due: deadline.Add(s.cfg.LostAfter)}},
		Slot:    &jobstore.Slot{Agent: domain.AgentKey{Namespace: l.Namespace, ID: agent.AgentID}, MaxConcurrent: agent.MaxConcurrent, Attempt: attempt}})
	return deadline, err
}

// deliverMeasured calls the agent, with no transaction open, and counts the
// delivery in the metrics and the debug log.
func (s *Service) deliverMeasured(ctx context.Context, agent *registry.Agent, l *jobstore.Loaded, attempt int, deadline time.Time) (domain.Observation, time.Duration) {
	start := time.Now()
	out := s.deliver(ctx, agent, l, attempt, deadline)
	latency := time.Since(start)
	outcomeAttr := withAttrs(attribute.String("outcome", string(out.Kind)))
	s.metrics.deliveries.Add(ctx, 1, withAttrs(attribute.String("outcome", string(out.Kind)), attribute.String("reason", out.Reason)))
	s.metrics.duration.Record(ctx, latency.Seconds(), outcomeAttr)
	s.logger.DebugContext(ctx, "delivery", "job_id", l.JobID, "trace_id", l.TraceID, "agent_id", agent.AgentID,
		"attempt", attempt, "outcome", out.Kind, "reason", out.Reason, "latency_ms", latency.Milliseconds())
	return out, latency
}

// recordDelivery appends what the delivery decided (domain.Delivery), in
// a transaction shared with concurrent writes (write.go), and answers the
// write that committed (nil when nothing was recorded). Usually nothing
// happened since ROUTED, so it decides on the fold it holds and lets the
// expected version catch anything else; on a conflict it reloads, and if
// the job moved on meanwhile (a result through result_url, a lost
// attempt, a cancel) it records a late answer as RESULT_DUPLICATE. A River
// dispatch job is completed by River's batched completer once Work
// returns: should this process die first, River runs it again and it
// finds its attempt recorded (stale) and does nothing; a direct run has
// only the attempt's timer. A job that ends here is called back by this
// dispatcher (deliverAndRecord).
func (s *Service) recordDelivery(ctx context.Context, args DispatchArgs, l *jobstore.Loaded, out domain.Observation,
	deadline time.Time, latency time.Duration, md domain.Metadata) (*jobstore.Write, error) {
	attempt := args.Attempt
	var last *jobstore.Write
	err := s.jobs.WriteRetrying(ctx, func(retry bool) (*jobstore.Write, error) {
		last = nil
		cur := l
		if retry {
			loaded, err := s.Load(ctx, nil, args.JobID)
			if err != nil {
				return nil, err
			}
			cur = loaded
			if !cur.JustRouted(attempt) {
				if out.Kind != domain.ObservedResult || cur.Status == domain.StatusNone {
					return nil, nil
				}
				return &jobstore.Write{L: cur, Events: []domain.Event{domain.NewEvent(domain.EventResultDuplicate, domain.ResultDuplicate{
					Attempt: attempt, Status: out.Status, Reason: "late", Result: out.Result}, md)}}, nil
			}
		}
		held := *cur // a write moves its fold on; a retry starts from what was held
		evs, fx := domain.Delivery(&held.Job, held.RoutedAt, out, deadline, latency, s.now().UTC(), s.jitter(), s.attemptPolicy(), md)
		last = &jobstore.Write{L: &held, Events: evs, Effects: fx, CallbackNow: true}
		return last, nil
	})
	return last, err
}

// deliver POSTs the envelope to the agent and classifies what happened. It
// waits for an answer until the attempt's deadline.
func (s *Service) deliver(ctx context.Context, a *registry.Agent, l *jobstore.Loaded, attempt int, deadline time.Time) (obs domain.Observation) {
	if a.Protocol == domain.ProtocolA2A {
		return s.deliverA2A(ctx, a, l, attempt, deadline)
	}
	body, _ := json.Marshal(webhook.Envelope{JobID: l.JobID, TraceID: l.TraceID, Capability: l.Capability, Payload: l.Payload,
		Attempt: attempt, Deadline: deadline, ResultURL: s.resultURL(l.JobID)})
	ctx, wait, wrote, end := s.deliveryCtx(ctx, "deliver", a, l, attempt, deadline)
	defer end()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.Endpoint, bytes.NewReader(body))
	if err != nil {
		return domain.Observation{Kind: domain.ObservedFailed, Reason: "bad_endpoint", ErrText: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(req.Header)) // traceparent
	req.Header.Set("X-Reach-Job-Id", l.JobID)
	req.Header.Set("X-Reach-Attempt", strconv.Itoa(attempt))
	webhook.SetHeaders(req.Header, l.JobID+"."+strconv.Itoa(attempt), s.now(), body, a.SigningKeys(s.now())...)

	resp, err := s.http.Do(req)
	if err != nil {
		if ctx.Err() != nil && wrote() && wait.Before(deadline) {
			// Past the longest inline wait: the agent has the job; its
			// result must come through result_url by the deadline.
			return domain.Observation{Kind: domain.ObservedAccepted}
		}
		if ctx.Err() != nil && wrote() {
			return domain.Observation{Kind: domain.ObservedHung, Reason: "timeout", ErrText: "no answer by the deadline"}
		}
		return domain.Observation{Kind: domain.ObservedFailed, Reason: classifyNetErr(ctx, err), ErrText: err.Error()}
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, webhook.MaxAnswerBytes+1))
	if err != nil {
		if ctx.Err() != nil {
			return domain.Observation{Kind: domain.ObservedHung, Reason: "timeout", ErrText: "answer not complete by the deadline"}
		}
		return domain.Observation{Kind: domain.ObservedFailed, Reason: "connection_error", ErrText: err.Error()}
	}
	defer func() { noteAnswer(&obs, resp.StatusCode, answer) }() // what the agent answered, for the timeline
	switch resp.StatusCode {
	case http.StatusOK:
		r, err := webhook.ParseAnswer(answer)
		if err != nil {
			return domain.Observation{Kind: domain.ObservedFailed, Reason: "bad_response", ErrText: err.Error()}
		}
		if at, bad := domain.UnstorableJSON(answer); bad || len(r.BizCode) > 128 {
			return domain.Observation{Kind: domain.ObservedFailed, Reason: "bad_response",
				ErrText: "the answer holds what cannot be stored (NUL, a lone surrogate, a number out of range, a biz_code over 128 characters) at " + at}
		}
		return domain.Observation{Kind: domain.ObservedResult, Status: domain.JobStatus(r.Status), Result: r.Result, BizCode: r.BizCode}
	case http.StatusAccepted:
		return domain.Observation{Kind: domain.ObservedAccepted}
	case http.StatusTooManyRequests:
		return domain.Observation{Kind: domain.ObservedFailed, Reason: "http_429", ErrText: "agent is rate limiting",
			RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), s.now())}
	default:
		return domain.Observation{Kind: domain.ObservedFailed, Reason: "http_" + strconv.Itoa(resp.StatusCode), ErrText: truncate(string(answer), 256)}
	}
}

// deliveryCtx starts an attempt's client span and bounds the call by the
// attempt's deadline or the longest inline wait, whichever comes first
// (wait). wrote reports whether the request went out whole, so a timeout
// after it means the agent has the job; end ends the span and the context.
func (s *Service) deliveryCtx(ctx context.Context, name string, a *registry.Agent, l *jobstore.Loaded, attempt int, deadline time.Time) (_ context.Context, wait time.Time, wrote func() bool, end func()) {
	ctx, span := s.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("job_id", l.JobID), attribute.Int("attempt", attempt),
			attribute.String("agent_id", a.AgentID), attribute.String("url.full", a.Endpoint)))
	wait = deadline
	if capped := s.now().Add(s.cfg.InlineWait); capped.Before(deadline) {
		wait = capped
	}
	ctx, cancel := context.WithDeadline(ctx, wait)
	var w atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) { w.Store(info.Err == nil) },
	})
	return ctx, wait, w.Load, func() { cancel(); span.End() }
}

func classifyNetErr(ctx context.Context, err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection_refused"
	case ctx.Err() != nil:
		return "timeout"
	}
	return "connection_error"
}

// parseRetryAfter reads seconds or an HTTP date; anything else is zero. It
// is capped at an hour.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return min(time.Duration(n)*time.Second, time.Hour)
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), time.Hour)
	}
	return 0
}

// truncate keeps the first n bytes of an agent's text for an event, as text
// PostgreSQL can store: no NUL, valid UTF-8.
func truncate(s string, n int) string {
	cut := len(s) > n
	if cut {
		s = s[:n]
	}
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "")
	if cut {
		s += "…"
	}
	return s
}
