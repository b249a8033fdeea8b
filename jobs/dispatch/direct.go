package dispatch

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/jobs/jobstore"
	"github.com/agentreach/agentreach/registry"
)

// Direct dispatch. A plain submit's first attempt starts in the process
// that committed it, as soon as the commit returns: the dispatcher gets the
// fold the submit wrote (no read of the stream) and no River job is
// inserted, fetched or completed for it. Most often the submit routes the
// attempt itself (RouteAtSubmit): its ROUTED is appended with SUBMITTED,
// in the same transaction, with the routed timer and the agent's slot, and
// the dispatcher only delivers. Otherwise the durable promise is the
// attempt's queued timer, written in the submit's transaction as for a
// River dispatch but naming no River job: should the process die before
// the attempt's ROUTED is recorded, the deadline sweep finds the timer due
// after LostAfter and enqueues the attempt in River; a routed attempt with
// no outcome is declared lost by its routed timer, as any.
//
// Everything else goes through River's dispatch queues, with their
// priority lanes: a low job (its lane bounds it), a retry, a redispatch,
// a job released from approval, a submit with a parent or an
// ordering_key, a submit while every direct dispatcher is busy, and a direct
// dispatch that failed on the database (it hands its attempt to River, if
// it has not started). The direct run and River's run the same Dispatch;
// they differ only in who runs it.

// DefaultDirectDispatchers is how many direct dispatches may be under way
// at once in one process.
const DefaultDirectDispatchers = 128

type directPool struct {
	slots chan struct{} // one taken per direct dispatch, from the submit to its end
	// held: handoffs are dropped (the bench's paused dispatch): their
	// timers remain, for the sweep or DropDispatchBacklog.
	held atomic.Bool

	mu      sync.Mutex
	on      bool // false once stopping: no more reservations
	running sync.WaitGroup
	ctx     context.Context
}

// StartDirect turns direct dispatch on, with at most n dispatches under
// way at once (n ≤ 0: DefaultDirectDispatchers). The service calls it
// once River runs; StopDirect ends it.
func (d *Dispatcher) StartDirect(ctx context.Context, n int) {
	if n <= 0 {
		n = DefaultDirectDispatchers
	}
	d.direct.Store(&directPool{slots: make(chan struct{}, n), on: true, ctx: context.WithoutCancel(ctx)})
}

// StopDirect stops taking submits directly and waits (within ctx) for the
// direct dispatches under way, and those reserved by a submit still
// committing, as River's Stop waits for its workers.
func (d *Dispatcher) StopDirect(ctx context.Context) {
	p := d.direct.Load()
	if p == nil {
		return
	}
	p.mu.Lock()
	p.on = false
	p.mu.Unlock()
	done := make(chan struct{})
	go func() { p.running.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done(): // their timers answer for what is cut short
	}
}

// HoldDirect holds (true) or resumes direct handoffs: while held, a
// submit still writes its queued timer but nothing dispatches it (for a
// benchmark that measures submits alone; the sweep would find it later).
func (d *Dispatcher) HoldDirect(held bool) {
	if p := d.direct.Load(); p != nil {
		p.held.Store(held)
	}
}

// Reserve takes a direct dispatcher for a submit about to be written;
// false when there is none (direct dispatch off, or all busy). The
// submit's committer then calls Direct, or Release if the submit was not
// committed.
func (d *Dispatcher) Reserve() bool {
	p := d.direct.Load()
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on {
		return false
	}
	select {
	case p.slots <- struct{}{}:
		p.running.Add(1) // StopDirect waits for it, started or not
		return true
	default:
		return false
	}
}

// Release gives back a reservation whose submit was not committed.
func (d *Dispatcher) Release() {
	p := d.direct.Load()
	<-p.slots
	p.running.Done()
}

// Start is what a direct dispatcher starts from: the committed fold L
// and, when the submit routed it (RouteAtSubmit), the agent its first
// attempt goes to and the attempt's deadline. Attempt (1 when zero) and
// WaitingSince are those of a waiter whose turn at a slot came.
type Start struct {
	L            *jobstore.Loaded
	Agent        *registry.Agent
	Deadline     time.Time
	Attempt      int
	WaitingSince time.Time
	// Prefer is the agent whose slot was given to this waiter.
	Prefer string
}

// Direct dispatches an attempt of the committed job st.L (its first, or
// st.Attempt), which holds a reservation: it delivers an attempt routed at
// submit, and routes one that was not.
func (d *Dispatcher) Direct(st Start) {
	p := d.direct.Load()
	if p.held.Load() {
		d.Release()
		return
	}
	go func() { // StopDirect waits for it: the reservation counts as running
		defer d.Release()
		ctx, cancel := context.WithTimeout(p.ctx, d.cfg.InlineWait+30*time.Second) // as the dispatch job's Timeout
		defer cancel()
		run := Run{Attempt: max(st.Attempt, 1), WaitingSince: st.WaitingSince, Prefer: st.Prefer, Cause: "direct"}
		var err error
		if st.Agent != nil {
			err = d.deliverRouted(ctx, run, st)
		} else {
			err = d.Dispatch(ctx, st.L, run)
		}
		if err != nil {
			d.logger.DebugContext(ctx, "direct dispatch failed; River takes the attempt", "job_id", st.L.JobID, "err", err)
			hctx, cancel := context.WithTimeout(p.ctx, 10*time.Second) // the dispatch's own may be spent
			defer cancel()
			q := domain.QueuedAttempt{Attempt: run.Attempt, WaitingSince: run.WaitingSince, Agent: run.Prefer}
			if !run.WaitingSince.IsZero() { // a waiter: it keeps its place
				q.Capability, q.Rank = st.L.Capability, domain.WaitRank(st.L.Priority, run.WaitingSince)
			}
			d.HandOver(hctx, st.L.JobID, q)
		}
	}()
}

// RouteAtSubmit routes the first attempt of the job l being submitted when
// nothing needs the dispatcher's care: the chosen agent has no
// max_concurrent (its slot needs no count). It returns ROUTED, the agent
// and the attempt's deadline, or a nil agent. A pull agent's attempt is
// put in its inbox by the submit's own write (InboxWrite).
func (d *Dispatcher) RouteAtSubmit(l *jobstore.Loaded) (domain.Event, *registry.Agent, time.Time) {
	route, agent := d.route(l, "")
	if agent == nil || agent.MaxConcurrent > 0 {
		return domain.Event{}, nil, time.Time{}
	}
	md := domain.Metadata{TraceID: l.TraceID, Actor: "dispatcher", CausationID: "direct"}
	// The deadline is on the process's clock, as the delivery's timeout
	// and recordRouted's.
	return domain.NewRouted(1, route, md), agent, d.cfg.Now().UTC().Add(l.Timeout())
}

// InboxWrite is what puts l's next attempt, routed to pull agent agent
// (ROUTED), in its inbox (inbox.Inbox.PutWrite): its events, timer, slot
// and notification, for a write of the caller's.
func (d *Dispatcher) InboxWrite(l *jobstore.Loaded, agent *registry.Agent, routed domain.Event) *jobstore.Write {
	return d.inbox.PutWrite(l, agent, routed, d.rank(l, Run{}))
}

// deliverRouted delivers the first attempt the submit routed and records
// its outcome, as Dispatch does after ROUTED.
func (d *Dispatcher) deliverRouted(ctx context.Context, run Run, st Start) error {
	l := st.L
	ctx, span := d.span(ctx, l, run.Attempt)
	defer span.End()
	md := domain.Metadata{TraceID: l.TraceID, Actor: "dispatcher", CausationID: run.Cause}
	return d.deliverAndRecord(ctx, run, l, st.Agent, st.Deadline, md)
}

// RouteWoken routes, in the transaction whose slot given back woke them
// (jobstore.Config.Route), the waiters woken for a slot of their agent,
// from their jobs' folds read there (loaded): a push agent's attempt is
// delivered by a direct dispatcher once that transaction commits, a pull
// agent's waits in its inbox, its claim woken at the commit. A waiter it
// cannot route to that agent here (its job moved on, its low lane held
// back, the agent no longer a candidate, no direct dispatcher free) is
// left to jobstore.Config.Woken.
func (d *Dispatcher) RouteWoken(_ context.Context, woken []jobstore.Woken, loaded map[string]*jobstore.Loaded) []jobstore.Routed {
	var out []jobstore.Routed
	for _, w := range woken {
		l := loaded[w.JobID]
		if l == nil || !l.CanStart(w.Attempt) {
			continue
		}
		run := Run{Attempt: w.Attempt, WaitingSince: w.WaitingSince, Prefer: w.Agent, Cause: "direct"}
		holdLow := false
		if l.Priority == domain.PriorityLow {
			// Whether its lane is held is read from what is known: tx
			// holds locks and must not wait on a read (unknown: left).
			held, known := d.cfg.HeldLow(l.Namespace)
			if !known {
				continue
			}
			holdLow = held
		}
		_, plan, agent := d.plan(l, run, holdLow)
		if agent == nil || agent.AgentID != w.Agent {
			continue // held back, or routed elsewhere: not this slot's
		}
		switch {
		case plan.Step == domain.StepInbox:
			out = append(out, jobstore.Routed{JobID: l.JobID, Write: d.inbox.PutWrite(l, agent, plan.Events[0], d.rank(l, run)),
				Done: func(bool) {}})
		case plan.Step == domain.StepDeliver && d.Reserve():
			wr, deadline := d.routedWrite(l, agent, plan.Events[0], d.rank(l, run))
			out = append(out, jobstore.Routed{JobID: l.JobID, Write: wr, Done: func(committed bool) {
				if !committed {
					d.Release()
					return
				}
				d.Direct(Start{L: l, Agent: agent, Deadline: deadline, Attempt: w.Attempt, WaitingSince: w.WaitingSince, Prefer: w.Agent})
			}})
		}
	}
	return out
}

// HandOver enqueues the attempt q of job id in River's dispatch queue,
// unless it has started (or the job moved on): what a direct dispatch
// could not do, River does, with its retries. Should this fail too, the
// attempt's timer answers for it.
func (d *Dispatcher) HandOver(ctx context.Context, id string, q domain.QueuedAttempt) {
	err := d.events.InTx(ctx, func(tx pgx.Tx) error {
		l, err := d.jobs.Load(ctx, tx, id)
		if err != nil {
			return err
		}
		if !l.CanStart(q.Attempt) {
			return nil
		}
		return d.jobs.AppendTx(ctx, tx, l, domain.Effects{Queue: &q})
	})
	if err != nil {
		d.logger.WarnContext(ctx, "hand a direct dispatch to River; its timer will", "job_id", id, "err", err)
	}
}
