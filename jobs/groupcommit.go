package jobs

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qInsertJobTimers = queries.Must("InsertJobTimers")
	qTakeAgentSlots  = queries.Must("TakeAgentSlots")
)

// Group commit: concurrent submits share one transaction, so durable
// submits per second are not bounded by the database's commits per second.
// A submit is answered only after its transaction committed, so "202 means
// committed" holds for every one of them.
//
// Submits with neither an Idempotency-Key nor a parent (the common case)
// are written in bulk: one INSERT for all their events, one River
// InsertMany, one INSERT for their timers. The others go one by one, each
// in a savepoint, so that a conflict of one does not fail the batch. Should
// the shared transaction fail all the same, its members are written again
// one by one, so one submit never fails another.

type batchItem struct {
	ctx  context.Context
	sub  domain.Submitted
	md   domain.Metadata
	done chan batchResult
}

type batchResult struct {
	res SubmitResult
	err error
	// reserved: the submit holds a direct dispatcher (direct.go), which
	// starts on direct once the transaction committed.
	reserved bool
	direct   directStart
}

type batcher struct {
	s        *Service
	items    chan *batchItem
	window   time.Duration
	idle     time.Duration
	maxBatch int
}

// DefaultCommitWorkers is how many transactions of gathered submits, and
// as many of gathered writes, a process runs at once by default: one per
// two CPUs (GOMAXPROCS), from one to four (each holds a connection of
// the pool while its transaction runs). Fewer and larger transactions cost
// the database less than many small concurrent ones: on two cores, one
// worker each did 1,124 jobs/s end to end where two did 997 and four 892
// (builds differing only in it, alternate runs), the backends spending 0.57 ms a job
// instead of 0.73 and 0.92. A lone submit still commits at once.
func DefaultCommitWorkers() int { return min(max(runtime.GOMAXPROCS(0)/2, 1), 4) }

// StartGroupCommit turns group commit on: workers goroutines collect
// submits for at most window (and flush earlier when none has arrived for a
// tenth of it) into one transaction each; as many gather the dispatch
// side's writes (write.go), with no window. It runs until ctx ends.
func (s *Service) StartGroupCommit(ctx context.Context, window time.Duration, workers int) {
	b := &batcher{s: s, items: make(chan *batchItem), window: window, idle: max(window/10, 50*time.Microsecond), maxBatch: 500}
	s.batcher = b
	for range max(workers, 1) {
		go b.run(ctx)
	}
	s.startWriter(ctx, workers)
}

func (b *batcher) submit(ctx context.Context, sub domain.Submitted, md domain.Metadata) (SubmitResult, error) {
	it := &batchItem{ctx: ctx, sub: sub, md: md, done: make(chan batchResult, 1)}
	select {
	case b.items <- it:
	case <-ctx.Done():
		return SubmitResult{}, ctx.Err()
	}
	r := <-it.done // once taken, an item is always answered
	return r.res, r.err
}

func (b *batcher) run(ctx context.Context) {
	for {
		var first *batchItem
		select {
		case <-ctx.Done():
			return
		case first = <-b.items:
		}
		batch := []*batchItem{first}
		window := time.NewTimer(b.window)
		idle := time.NewTimer(b.idle)
	collect:
		for len(batch) < b.maxBatch {
			select {
			case it := <-b.items:
				batch = append(batch, it)
				idle.Reset(b.idle)
			case <-idle.C:
				break collect
			case <-window.C:
				break collect
			}
		}
		window.Stop()
		idle.Stop()
		b.commit(context.WithoutCancel(ctx), batch)
	}
}

func (b *batcher) commit(ctx context.Context, batch []*batchItem) {
	s := b.s
	results := make([]batchResult, len(batch))
	err := s.groupTx(ctx, batch, results)
	for i := range results {
		if r := &results[i]; r.reserved {
			if err == nil && r.err == nil && r.direct.l != nil {
				s.startDirect(r.direct)
			} else {
				s.releaseDirect()
			}
			r.reserved, r.direct = false, directStart{}
		}
	}
	if err != nil && len(batch) > 1 && memberFault(err) {
		// One member's data failed the shared transaction (the edge
		// refuses what it knows PostgreSQL cannot store, but a batch must
		// never fail for another's sake): nothing of it committed, so each
		// member is written again alone, within a bound, and only an
		// offender fails. An outage is not retried member by member. The
		// members are written beside the worker, which goes on with the
		// submits that wait (with one worker, they would wait for all).
		go func() {
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			for _, it := range batch {
				b.commit(rctx, []*batchItem{it})
			}
		}()
		return
	}
	for i, it := range batch {
		r := results[i]
		if err != nil && r.err == nil {
			r = batchResult{err: fmt.Errorf("submit (group commit of %d): %w", len(batch), err)}
		}
		it.done <- r
	}
}

// groupTx writes batch in one transaction, a few round trips whatever its
// size: BEGIN with the approval policies and the transaction's time; the
// submissions with an Idempotency-Key or a parent, each in a savepoint;
// River's inserts, if any; the plain submissions' events, timers and
// slots; COMMIT.
func (s *Service) groupTx(ctx context.Context, batch []*batchItem, results []batchResult) error {
	namespaces := map[string]bool{}
	for _, it := range batch {
		namespaces[it.sub.Namespace] = true
	}
	nsList := make([]string, 0, len(namespaces))
	for ns := range namespaces {
		nsList = append(nsList, ns)
	}
	first := &pgx.Batch{}
	first.BeginTx(pgx.TxOptions{})
	var patterns approvalPatterns
	queueApprovalPatterns(first, nsList, &patterns)
	var at time.Time
	first.Queue(qTransactionTime).QueryRow(func(row pgx.Row) error { return row.Scan(&at) })
	tx, _, err := sendBatch(ctx, s.pool, nil, first)
	if tx != nil {
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // after Commit, a no-op
	}
	if err != nil {
		return err
	}
	var bulk []int
	for i, it := range batch {
		if it.sub.IdempotencyKey == "" && it.sub.ParentJobID == "" {
			bulk = append(bulk, i)
			continue
		}
		results[i] = s.submitInSavepoint(ctx, tx, it, patterns)
	}
	if err := s.bulkSubmitTx(ctx, tx, batch, bulk, patterns, at, results); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	s.store.Committed()
	return nil
}

// memberFault reports whether a shared transaction failed on data (SQLSTATE
// class 22, data exception, or 23, integrity constraint), which one member
// alone may have caused, rather than on the database itself.
func memberFault(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "23"))
}

// submitInSavepoint writes one submission in a savepoint: its own errors
// (a reused key, the fan-out limit) stay its own.
func (s *Service) submitInSavepoint(ctx context.Context, tx pgx.Tx, it *batchItem, patterns approvalPatterns) batchResult {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return batchResult{err: err}
	}
	res, err := s.submitTx(ctx, sp, it.sub, it.md, patterns)
	if err != nil {
		_ = sp.Rollback(ctx)
		return batchResult{err: err}
	}
	if err := sp.Commit(ctx); err != nil {
		return batchResult{err: err}
	}
	return batchResult{res: res}
}

// bulkSubmitTx writes the plain submissions batch[idx...] in tx (begun at
// at) with a handful of statements in one round trip (two with River's
// inserts), whatever their number. A submission that gets a direct
// dispatcher has no River job (directStarts).
func (s *Service) bulkSubmitTx(ctx context.Context, tx pgx.Tx, batch []*batchItem, idx []int, patterns approvalPatterns, at time.Time,
	results []batchResult) error {
	if len(idx) == 0 {
		return nil
	}
	streams := make([]eventstore.NewStream, 0, len(idx))
	var params []river.InsertManyParams
	var dispatched, direct []int
	now := s.now()
	var timers timerSet
	for _, i := range idx {
		it := batch[i]
		evs, res := s.submittedEvents(it.sub, it.md, patterns)
		streams = append(streams, eventstore.NewStream{Stream: domain.JobStream(it.sub.JobID), Events: evs})
		results[i] = batchResult{res: res}
		switch {
		case res.Status == domain.StatusAwaitingApproval:
			timers.set(it.sub.JobID, domain.Timer{Attempt: 1, Phase: domain.PhaseApproval, Due: now.Add(s.cfg.ApprovalTimeout)})
		case it.sub.Priority != domain.PriorityLow && s.reserveDirect(): // low work waits in its own lane
			results[i].reserved = true
			direct = append(direct, len(streams)-1)
		default:
			params = append(params, river.InsertManyParams{Args: DispatchArgs{JobID: it.sub.JobID, Attempt: 1}, InsertOpts: dispatchOpts(it.sub.Priority)})
			dispatched = append(dispatched, i)
		}
	}
	var slots slotRows
	if err := s.directStarts(idx, direct, streams, results, at, &timers, &slots); err != nil {
		return err
	}
	if len(params) > 0 {
		inserted, err := s.client.InsertManyTx(ctx, tx, params)
		if err != nil {
			return fmt.Errorf("enqueue dispatches: %w", err)
		}
		if len(inserted) != len(dispatched) {
			return errors.New("enqueue dispatches: River returned fewer jobs than inserted")
		}
		for k, i := range dispatched {
			id := inserted[k].Job.ID
			timers.set(batch[i].sub.JobID, domain.Timer{Attempt: 1, Phase: domain.PhaseQueued, Due: now.Add(s.cfg.LostAfter), RiverJobID: id})
		}
	}
	b := &pgx.Batch{}
	if err := s.store.QueueAppendNew(b, streams); err != nil {
		return err
	}
	timers.queueNew(b)
	slots.queue(b)
	if _, _, err := sendBatch(ctx, s.pool, tx, b); err != nil {
		return fmt.Errorf("write submissions: %w", err)
	}
	return nil
}

// directStarts readies the submissions streams[direct...] (of batch[idx[k]]
// for streams[k]) for their direct dispatchers, as of tx's time: each gets
// the fold its dispatcher starts from and, routed at once when it can be
// (routeAtSubmit), its ROUTED in the same append as its SUBMITTED, with the
// routed timer and the agent's slot; one that cannot be waits on the
// queued timer for its dispatcher to route it.
func (s *Service) directStarts(idx, direct []int, streams []eventstore.NewStream, results []batchResult, at time.Time,
	timers *timerSet, slots *slotRows) error {
	for _, k := range direct {
		st := &streams[k]
		r := &results[idx[k]]
		id := r.res.JobID
		l, err := submittedFold(id, st.Events, at)
		if err != nil {
			return err
		}
		r.direct = directStart{l: l}
		routed, agent, deadline := s.routeAtSubmit(l)
		if agent == nil {
			timers.set(id, domain.Timer{Attempt: 1, Phase: domain.PhaseQueued, Due: s.now().Add(s.cfg.LostAfter)})
			continue
		}
		if err := l.applyNew(st.Stream, routed, at); err != nil {
			return err
		}
		st.Events = append(st.Events, routed)
		l.RoutedAt = at
		r.direct.agent, r.direct.deadline = agent, deadline
		timers.set(id, domain.Timer{Attempt: 1, Phase: domain.PhaseRouted, Due: deadline.Add(s.cfg.LostAfter), AgentID: agent.AgentID})
		slots.add(id, l.Namespace, agent.AgentID, 1)
	}
	return nil
}

// slotRows collects agent slots for one INSERT.
type slotRows struct {
	jobIDs, namespaces, agentIDs []string
	attempts                     []int32
}

func (r *slotRows) add(jobID, namespace, agentID string, attempt int) {
	r.jobIDs = append(r.jobIDs, jobID)
	r.namespaces = append(r.namespaces, namespace)
	r.agentIDs = append(r.agentIDs, agentID)
	r.attempts = append(r.attempts, int32(attempt))
}

func (r *slotRows) queue(b *pgx.Batch) {
	if len(r.jobIDs) > 0 {
		b.Queue(qTakeAgentSlots, eventstore.UUIDs(r.jobIDs), r.namespaces, r.agentIDs, r.attempts)
	}
}
