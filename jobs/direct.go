package jobs

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
// attempt itself (routeAtSubmit): its ROUTED is appended with SUBMITTED,
// in the same transaction, with the routed timer and the agent's slot, and
// the dispatcher only delivers. Otherwise the durable promise is the
// attempt's queued timer, written in the submit's transaction as for a
// River dispatch but naming no River job: should the process die before
// the attempt's ROUTED is recorded, the deadline sweep finds the timer due
// after LostAfter and enqueues the attempt in River; a routed attempt with
// no outcome is declared lost by its routed timer, as any.
//
// Everything else goes through River's dispatch queues, with their
// priority lanes, as before: a low job (its lane bounds it), a retry, a
// redispatch, a job released from approval, a submit with an
// Idempotency-Key or a parent, a submit while every direct dispatcher is
// busy, and a direct dispatch that failed on the database (it hands its
// attempt to River, if it has not started).

// DefaultDirectDispatchers is how many direct dispatches may be under way
// at once in one process.
const DefaultDirectDispatchers = 128

type directDispatch struct {
	s     *Service
	slots chan struct{} // one taken per direct dispatch, from the submit to its end
	// held: handoffs are dropped (the bench's paused dispatch): their
	// timers remain, for the sweep or DropDispatchBacklog.
	held atomic.Bool

	mu      sync.Mutex
	on      bool // false once stopping: no more reservations
	running sync.WaitGroup
	ctx     context.Context
}

// StartDirectDispatch turns direct dispatch on, with at most n dispatches
// under way at once (n ≤ 0: DefaultDirectDispatchers). The service calls
// it once River runs; StopDirectDispatch ends it.
func (s *Service) StartDirectDispatch(ctx context.Context, n int) {
	if n <= 0 {
		n = DefaultDirectDispatchers
	}
	s.direct.Store(&directDispatch{s: s, slots: make(chan struct{}, n), on: true, ctx: context.WithoutCancel(ctx)})
}

// StopDirectDispatch stops taking submits directly and waits (within ctx)
// for the direct dispatches under way, and those reserved by a submit
// still committing, as River's Stop waits for its workers.
func (s *Service) StopDirectDispatch(ctx context.Context) {
	d := s.direct.Load()
	if d == nil {
		return
	}
	d.mu.Lock()
	d.on = false
	d.mu.Unlock()
	done := make(chan struct{})
	go func() { d.running.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done(): // their timers answer for what is cut short
	}
}

// HoldDirectDispatch holds (true) or resumes direct handoffs: while held,
// a submit still writes its queued timer but nothing dispatches it (for a
// benchmark that measures submits alone; the sweep would find it later).
func (s *Service) HoldDirectDispatch(held bool) {
	if d := s.direct.Load(); d != nil {
		d.held.Store(held)
	}
}

// reserveDirect takes a direct dispatcher for a submit about to be
// written; false when there is none (direct dispatch off, or all busy).
func (s *Service) reserveDirect() bool {
	d := s.direct.Load()
	if d == nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.on {
		return false
	}
	select {
	case d.slots <- struct{}{}:
		d.running.Add(1) // StopDirectDispatch waits for it, started or not
		return true
	default:
		return false
	}
}

// releaseDirect gives back a reservation whose submit was not committed.
func (s *Service) releaseDirect() {
	d := s.direct.Load()
	<-d.slots
	d.running.Done()
}

// directStart is what a direct dispatcher starts from: the committed
// fold l and, when the submit routed it (routeAtSubmit), the agent its
// first attempt goes to and the attempt's deadline.
type directStart struct {
	l        *jobstore.Loaded
	agent    *registry.Agent
	deadline time.Time
}

// startDirect dispatches the first attempt of the committed job st.l,
// which holds a reservation: it delivers an attempt routed at submit, and
// routes one that was not.
func (s *Service) startDirect(st directStart) {
	d := s.direct.Load()
	if d.held.Load() {
		s.releaseDirect()
		return
	}
	go func() { // StopDirectDispatch waits for it: the reservation counts as running
		defer s.releaseDirect()
		ctx, cancel := context.WithTimeout(d.ctx, s.cfg.InlineWait+30*time.Second) // as the dispatch job's Timeout
		defer cancel()
		run := dispatchRun{args: DispatchArgs{JobID: st.l.JobID, Attempt: 1}, cause: "direct"}
		var err error
		if st.agent != nil {
			err = s.deliverRouted(ctx, run, st)
		} else {
			err = s.dispatch(ctx, st.l, run)
		}
		if err != nil {
			s.logger.DebugContext(ctx, "direct dispatch failed; River takes the attempt", "job_id", st.l.JobID, "err", err)
			hctx, cancel := context.WithTimeout(d.ctx, 10*time.Second) // the dispatch's own may be spent
			defer cancel()
			s.handToRiver(hctx, st.l.JobID)
		}
	}()
}

// routeAtSubmit routes the first attempt of the job l being submitted when
// nothing needs the dispatcher's care: the chosen agent is a push agent
// with no max_concurrent (its slot needs no count). It returns ROUTED, the
// agent and the attempt's deadline, or a nil agent.
func (s *Service) routeAtSubmit(l *jobstore.Loaded) (domain.Event, *registry.Agent, time.Time) {
	route, agent := s.route(l)
	if agent == nil || agent.Pull() || agent.MaxConcurrent > 0 {
		return domain.Event{}, nil, time.Time{}
	}
	md := domain.Metadata{TraceID: l.TraceID, Actor: "dispatcher", CausationID: "direct"}
	// The deadline is on the process's clock, as the delivery's timeout
	// and recordRouted's.
	return domain.NewRouted(1, route, md), agent, s.now().UTC().Add(l.Timeout())
}

// deliverRouted delivers the first attempt the submit routed and records
// its outcome, as dispatch does after ROUTED.
func (s *Service) deliverRouted(ctx context.Context, run dispatchRun, st directStart) error {
	l := st.l
	ctx, span := s.dispatchSpan(ctx, l, 1)
	defer span.End()
	md := domain.Metadata{TraceID: l.TraceID, Actor: "dispatcher", CausationID: run.cause}
	return s.deliverAndRecord(ctx, run, l, st.agent, st.deadline, md)
}

// handToRiver enqueues the first attempt of job id in River, unless it has
// started (or the job moved on): what a direct dispatch could not do, River
// does, with its retries. Should this fail too, the attempt's timer
// answers for it.
func (s *Service) handToRiver(ctx context.Context, id string) {
	err := s.store.InTx(ctx, func(tx pgx.Tx) error {
		l, err := s.Load(ctx, tx, id)
		if err != nil {
			return err
		}
		if l.Attempts != 0 || l.Status != domain.StatusSubmitted {
			return nil
		}
		return s.jobs.AppendTx(ctx, tx, l, domain.Effects{Queue: &domain.QueuedAttempt{Attempt: 1}})
	})
	if err != nil {
		s.logger.WarnContext(ctx, "hand a direct dispatch to River; its timer will", "job_id", id, "err", err)
	}
}

// submittedFold is the fold of a job whose stream is evs, appended by a
// transaction that began at at: what Load would read once it committed.
func submittedFold(jobID string, evs []domain.Event, at time.Time) (*jobstore.Loaded, error) {
	l := &jobstore.Loaded{TraceID: evs[0].Metadata.TraceID, SubmittedAt: at, UpdatedAt: at}
	stream := domain.JobStream(jobID)
	for _, e := range evs {
		if err := l.ApplyNew(stream, e, at); err != nil {
			return nil, err
		}
	}
	return l, nil
}
