// Package dispatch is the dispatch room: one attempt of a job, routed,
// carried to its agent and recorded (route → deliver → record), as
// domain.PlanDispatch plans it. River's dispatch worker runs it, and so
// does the process that committed a plain submit (direct.go); the room
// itself knows nothing of River: a run completes its River job, if it has
// one, through Run.Complete.
package dispatch

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/telemetry"
	"github.com/agentreach/agentreach/jobs/callback"
	"github.com/agentreach/agentreach/jobs/inbox"
	"github.com/agentreach/agentreach/jobs/jobstore"
	"github.com/agentreach/agentreach/registry"
)

// Config tunes dispatch; the jobs service fills it from its own.
type Config struct {
	// InlineWait bounds how long a delivery waits for an inline answer.
	InlineWait time.Duration
	// RouteWait is how long an attempt of a job that names no
	// route_wait_ms waits for a routable agent.
	RouteWait time.Duration
	// CapacityWait is how long an attempt waits when every candidate is
	// at capacity, unless its namespace's routing policy says otherwise.
	CapacityWait time.Duration
	// LostAfter is how long past its deadline a routed attempt with no
	// outcome is declared lost, and how long a queued one may go
	// unrouted.
	LostAfter time.Duration
	// HoldFor is how old the queue depths that hold low work back may be.
	HoldFor time.Duration
	// Policy is what the attempt decisions need of the configuration.
	Policy domain.AttemptPolicy
	// Now and Jitter are the clock and the retry jitter.
	Now    func() time.Time
	Jitter func() float64
	// HoldLow reports whether namespace ns's low lane is held back
	// (backpressure: high work is waiting).
	HoldLow func(ctx context.Context, ns string) bool
	// HeldLow is HoldLow from what is known already, reading nothing
	// (known is false when that is too old).
	HeldLow func(ns string) (held, known bool)
}

// Carriers are the deliveries by protocol: A2A agents get SendMessage,
// every other push agent the native push (Push). A pull agent's attempt
// goes to its inbox instead: the agent's claim delivers it.
type Carriers struct {
	Push, A2A, MCP Carrier
}

// Dispatcher makes attempts of jobs.
type Dispatcher struct {
	cfg       Config
	events    *eventstore.Store
	jobs      *jobstore.Store
	registry  *registry.Registry
	inbox     *inbox.Inbox
	callbacks *callback.Sender
	carriers  Carriers
	logger    *slog.Logger

	tracer     trace.Tracer
	deliveries metric.Int64Counter
	duration   metric.Float64Histogram

	direct atomic.Pointer[directPool]
}

// New returns a Dispatcher; telemetry is off until SetTelemetry.
func New(events *eventstore.Store, jobs *jobstore.Store, reg *registry.Registry, in *inbox.Inbox, cb *callback.Sender,
	carriers Carriers, logger *slog.Logger, cfg Config) *Dispatcher {
	d := &Dispatcher{cfg: cfg, events: events, jobs: jobs, registry: reg, inbox: in, callbacks: cb, carriers: carriers, logger: logger}
	m := noop.NewMeterProvider().Meter("")
	deliveries, _ := m.Int64Counter("")
	duration, _ := m.Float64Histogram("")
	d.SetTelemetry(tracenoop.NewTracerProvider().Tracer(""), deliveries, duration)
	return d
}

// SetTelemetry gives the dispatcher its tracer and the delivery metrics:
// deliveries by outcome and reason, and their round trips.
func (d *Dispatcher) SetTelemetry(tracer trace.Tracer, deliveries metric.Int64Counter, duration metric.Float64Histogram) {
	d.tracer, d.deliveries, d.duration = tracer, deliveries, duration
}

// Run is one dispatch of an attempt: by River's dispatch job, or directly
// in the process that committed the submit, with no River job.
type Run struct {
	Attempt int
	// WaitingSince is when the attempt began waiting for a routable agent.
	WaitingSince time.Time
	// Cause is what the events record as their causation.
	Cause string
	// Prefer is the agent whose slot given back woke this waiter: it is
	// tried first, whatever the snapshot counts of its slots.
	Prefer string
	// Complete completes the run's River job in tx, when the run ends
	// waiting or without an agent; nil for a direct run.
	Complete func(ctx context.Context, tx pgx.Tx) error
}

func (run Run) complete(ctx context.Context, tx pgx.Tx) error {
	if run.Complete == nil {
		return nil
	}
	return run.Complete(ctx, tx)
}

// Dispatch makes one attempt on the fold l as domain.PlanDispatch plans
// it: route, record ROUTED, deliver without holding a transaction, then
// record the outcome; or wait, or spend the attempt when no agent can
// take it. A dispatch whose attempt already started, or whose job moved
// on, does nothing. An error means the attempt may not have started:
// River retries it (a direct run hands it to River); the next run
// reloads and sees whether it did.
func (d *Dispatcher) Dispatch(ctx context.Context, l *jobstore.Loaded, run Run) error {
	ctx, span := d.span(ctx, l, run.Attempt)
	defer span.End()
	if !l.CanStart(run.Attempt) {
		return nil // stale: this attempt started already, or the job moved on
	}
	in, plan, agent := d.plan(l, run, l.Priority == domain.PriorityLow && d.cfg.HoldLow(ctx, l.Namespace))
	md := in.Metadata
	switch plan.Step {
	case domain.StepStale:
		return nil
	case domain.StepWait:
		return d.waitOn(ctx, run, l, *plan.Timer, in.Route.AllAtCapacity)
	case domain.StepNoAgent:
		return d.events.InTx(ctx, func(tx pgx.Tx) error {
			if err := d.jobs.AppendTx(ctx, tx, l, plan.Effects, plan.Events...); err != nil {
				return err
			}
			return run.complete(ctx, tx)
		})
	case domain.StepInbox:
		err := d.inbox.Put(ctx, l, agent, plan.Events[0], d.rank(l, run))
		if errors.Is(err, jobstore.ErrNoSlot) {
			return d.waitForSlot(ctx, run, l) // another process took the last slot first
		}
		return err
	}
	deadline, err := d.recordRouted(ctx, l, agent, plan.Events[0], d.rank(l, run))
	if errors.Is(err, jobstore.ErrNoSlot) {
		return d.waitForSlot(ctx, run, l) // another process took the last slot first
	}
	if err != nil {
		return err
	}
	return d.deliverAndRecord(ctx, run, l, agent, deadline, md)
}

// plan plans a dispatch of run on l (holdLow: its low lane is held back,
// so it is not routed): what it planned from, the plan, and the agent
// routed to (nil: none).
func (d *Dispatcher) plan(l *jobstore.Loaded, run Run, holdLow bool) (domain.DispatchInput, domain.DispatchPlan, *registry.Agent) {
	md := domain.Metadata{TraceID: l.TraceID, Actor: "dispatcher", CausationID: run.Cause}
	in := domain.DispatchInput{Attempt: run.Attempt, WaitingSince: run.WaitingSince, HoldFor: d.cfg.HoldFor, HoldLow: holdLow,
		RouteWait: l.RouteWait(d.cfg.RouteWait), CapacityWait: d.capacityWait(l.Namespace), Now: d.cfg.Now().UTC(), Jitter: d.cfg.Jitter(), Metadata: md}
	var agent *registry.Agent
	if !holdLow {
		in.Route, agent = d.route(l, run.Prefer)
		in.Chosen, in.Pull = agent != nil, agent != nil && agent.Pull()
	}
	return in, domain.PlanDispatch(&l.Job, in), agent
}

// StillBusy reports, from the registry's snapshot alone, whether a waiter
// for a slot (attempt of l, waiting since waitingSince) that looks again
// by itself would only wait again: every agent that could take it is at
// capacity, and its wait's bound is not reached. It then answers when it
// should look next (domain.WaitTimer). A slot given back wakes the waiter
// anyway; this spares the dispatch (and its transactions) of a look that
// finds nothing, which a deep backlog makes by the hundred a second.
func (d *Dispatcher) StillBusy(l *jobstore.Loaded, attempt int, waitingSince time.Time) (time.Time, bool) {
	now := d.cfg.Now().UTC()
	bound := l.RouteWait(d.cfg.RouteWait)
	if waitingSince.IsZero() || !domain.RouteWait(true, waitingSince, now, bound) {
		return time.Time{}, false
	}
	if !d.registry.Snapshot().Route(routeRequest(l)).AllAtCapacity {
		return time.Time{}, false
	}
	t := domain.WaitTimer(&l.Job, attempt, true, waitingSince, now, d.capacityWait(l.Namespace), bound)
	return t.Due, true
}

// WaitAtSubmit is the timer of the first attempt of l, being submitted,
// when every agent that could take it is at capacity in the registry's
// snapshot: it waits for a slot from its submit on, woken when one is
// given back, with no dispatch to find that out (nil: some agent may take
// it). The snapshot may be a moment old; the submit's transaction checks
// the exact count (jobstore.Write.WaitsAtSubmit).
func (d *Dispatcher) WaitAtSubmit(l *jobstore.Loaded) *domain.Timer {
	if !d.registry.Snapshot().Route(routeRequest(l)).AllAtCapacity {
		return nil
	}
	t := domain.WaitTimer(&l.Job, 1, true, time.Time{}, d.cfg.Now().UTC(), d.capacityWait(l.Namespace), l.RouteWait(d.cfg.RouteWait))
	return &t
}

// capacityWait is how long an attempt of namespace ns waits when every
// candidate is at capacity: its routing policy's, or the service's.
func (d *Dispatcher) capacityWait(ns string) time.Duration {
	if p := d.registry.Snapshot().Policy(ns); p.Version > 0 {
		return p.CapacityWait()
	}
	return d.cfg.CapacityWait
}

// waitForSlot makes the attempt wait for a slot of its agent, which
// another process took first.
func (d *Dispatcher) waitForSlot(ctx context.Context, run Run, l *jobstore.Loaded) error {
	return d.waitOn(ctx, run, l, domain.WaitTimer(&l.Job, run.Attempt, true, run.WaitingSince, d.cfg.Now().UTC(),
		d.capacityWait(l.Namespace), l.RouteWait(d.cfg.RouteWait)), true)
}

// span is the context and span of one dispatch of attempt of l, with the
// job's trace id for the logs.
func (d *Dispatcher) span(ctx context.Context, l *jobstore.Loaded, attempt int) (context.Context, trace.Span) {
	ctx = telemetry.JobContext(ctx, l.TraceID)
	return d.tracer.Start(ctx, "dispatch", trace.WithAttributes(attribute.String("job_id", l.JobID),
		attribute.Int("attempt", attempt), attribute.String("capability", l.Capability)))
}

// deliverAndRecord delivers the attempt routed on l (its fold after ROUTED)
// to agent and records the outcome; a job that ends here is called back.
func (d *Dispatcher) deliverAndRecord(ctx context.Context, run Run, l *jobstore.Loaded, agent *registry.Agent, deadline time.Time, md domain.Metadata) error {
	out, latency := d.carry(ctx, agent, Attempt{L: l, N: run.Attempt, Deadline: deadline})
	recorded, err := d.recordDelivery(ctx, run, l, out, deadline, latency, md)
	if err == nil && out.Kind == domain.ObservedPaused {
		// The agent is paused from this commit on: the job's next route
		// (at once) must know it, before the registry's NOTIFY lands.
		if err := d.registry.Snapshot().Refresh(ctx); err != nil {
			d.logger.WarnContext(ctx, "refresh the registry after an agent's pause", "err", err)
		}
	}
	if err == nil && recorded != nil && recorded.CallsBack() {
		// The job ended here: its caller is called back from this fold, by
		// a direct dispatcher itself (its slot bounds the callbacks too).
		if run.Complete == nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			d.callbacks.Send(cctx, recorded.L, md.CausationID)
		} else {
			d.callbacks.Now(ctx, recorded.L, md.CausationID)
		}
	}
	return err
}

// route ranks the job's candidates in the snapshot and returns the route
// and the chosen agent (nil when none was chosen): prefer, the agent whose
// slot was given to the job, when it is a candidate.
func (d *Dispatcher) route(l *jobstore.Loaded, prefer string) (domain.RouteResult, *registry.Agent) {
	req := routeRequest(l)
	snap := d.registry.Snapshot()
	if prefer != "" {
		// A slot of prefer was given to this job: the snapshot may not
		// know yet, and the unit of work counts its slots exactly.
		req.IgnoreCapacity = true
	}
	// Every agent full in the snapshot: the attempt waits for a slot
	// (waitOn), its write checking the exact count. The snapshot counts
	// slots being handed over as taken, so a free one it missed is rare,
	// where trying an agent anyway was refused most of the time, two
	// transactions spent to learn it.
	route := snap.Route(req).Preferring(prefer)
	if route.Chosen == "" {
		return route, nil
	}
	return route, snap.Agent(domain.AgentKey{Namespace: l.Namespace, ID: route.Chosen})
}

// routeRequest is what routing the next attempt of l asks.
func routeRequest(l *jobstore.Loaded) domain.RouteRequest {
	return domain.RouteRequest{JobID: l.JobID, Namespace: l.Namespace, Capability: l.Capability, Hint: l.Hint,
		Version: l.Constraints.Version, Protocol: l.Constraints.Protocol, ProtocolVersions: l.Constraints.ProtocolVersions,
		Exclude: excluded(l),
		Intent:  l.Resolution, // ROUTED shows the resolution the capability came from
	}
}

// excluded are the agents the next attempt must avoid: the last one that
// failed, and every one that refused the job.
func excluded(l *jobstore.Loaded) []string {
	out := append([]string(nil), l.RefusedBy...)
	if l.LastFailedAgent != "" {
		out = append(out, l.LastFailedAgent)
	}
	return out
}

// waitOn sets the attempt's retry timer t and completes the River job.
// forSlot says it waits because every agent that could take it looked
// full: its write checks the exact count, and a slot free after all wakes
// the most urgent waiter (jobstore.Write.WaitsAtSubmit). A direct run's
// wait shares the writer's transaction, whose commit hands a woken waiter
// to this process at once.
func (d *Dispatcher) waitOn(ctx context.Context, run Run, l *jobstore.Loaded, t domain.Timer, forSlot bool) error {
	held := *l // the fold goes on unchanged: a timer is no event
	forSlot = forSlot && t.Capability != ""
	if run.Complete == nil {
		return d.jobs.Write(ctx, &jobstore.Write{L: &held, Effects: domain.Effects{Timer: &t}, WaitsAtSubmit: forSlot})
	}
	return d.events.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		if forSlot {
			err = d.jobs.WaitForSlotTx(ctx, tx, &held, t)
		} else {
			err = d.jobs.AppendTx(ctx, tx, &held, domain.Effects{Timer: &t})
		}
		if err != nil {
			return err
		}
		return run.complete(ctx, tx)
	})
}

// recordRouted takes a slot of the agent (jobstore.ErrNoSlot when none is
// free) and appends ROUTED with the attempt's routed timer (due when the
// dispatcher should have recorded an outcome), and answers the attempt's
// deadline; on success l is the fold after ROUTED. The write shares its
// transaction with concurrent ones (the unit of work's writer).
func (d *Dispatcher) recordRouted(ctx context.Context, l *jobstore.Loaded, agent *registry.Agent, routed domain.Event, rank time.Time) (time.Time, error) {
	w, deadline := d.routedWrite(l, agent, routed, rank)
	return deadline, d.jobs.Write(ctx, w)
}

// routedWrite is recordRouted's write, and the attempt's deadline.
func (d *Dispatcher) routedWrite(l *jobstore.Loaded, agent *registry.Agent, routed domain.Event, rank time.Time) (*jobstore.Write, time.Time) {
	deadline := d.cfg.Now().UTC().Add(l.Timeout())
	attempt := l.Attempts + 1
	return &jobstore.Write{L: l, Events: []domain.Event{routed},
		Effects: domain.Effects{Timer: &domain.Timer{Attempt: attempt, AgentID: agent.AgentID, Phase: domain.PhaseRouted, Due: deadline.Add(d.cfg.LostAfter)}},
		Slot: &jobstore.Slot{Agent: domain.AgentKey{Namespace: l.Namespace, ID: agent.AgentID}, MaxConcurrent: agent.MaxConcurrent,
			Attempt: attempt, Rank: rank}}, deadline
}

// rank is the run's rank among the attempts waiting for a slot
// (domain.WaitRank): from when its wait began, or now.
func (d *Dispatcher) rank(l *jobstore.Loaded, run Run) time.Time {
	since := run.WaitingSince
	if since.IsZero() {
		since = d.cfg.Now().UTC()
	}
	return domain.WaitRank(l.Priority, since)
}

// recordDelivery appends what the delivery decided (domain.Delivery), in
// a transaction shared with concurrent writes, and answers the write that
// committed (nil when nothing was recorded). Usually nothing happened
// since ROUTED, so it decides on the fold it holds and lets the expected
// version catch anything else; on a conflict it reloads, and if the job
// moved on meanwhile (a result through result_url, a lost attempt, a
// cancel) it records a late answer as RESULT_DUPLICATE. A River dispatch
// job is completed by River's batched completer once its run returns:
// should this process die first, River runs it again and it finds its
// attempt recorded (stale) and does nothing; a direct run has only the
// attempt's timer.
func (d *Dispatcher) recordDelivery(ctx context.Context, run Run, l *jobstore.Loaded, out domain.Observation,
	deadline time.Time, latency time.Duration, md domain.Metadata) (*jobstore.Write, error) {
	attempt := run.Attempt
	var last *jobstore.Write
	err := d.jobs.WriteRetrying(ctx, func(retry bool) (*jobstore.Write, error) {
		last = nil
		cur := l
		if retry {
			loaded, err := d.jobs.Load(ctx, nil, l.JobID)
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
		evs, fx := domain.Delivery(&held.Job, held.RoutedAt, out, deadline, latency, d.cfg.Now().UTC(), d.cfg.Jitter(), d.cfg.Policy, md)
		last = &jobstore.Write{L: &held, Events: evs, Effects: fx, CallbackNow: true}
		return last, nil
	})
	return last, err
}
