package jobs

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/jobs/dispatch"
	"github.com/agentreach/agentreach/jobs/jobstore"
)

// Group commit: concurrent submits share one transaction, so durable
// submits per second are not bounded by the database's commits per second.
// A submit is answered only after its transaction committed, so "202 means
// committed" holds for every one of them. Each submit is a write of the
// unit of work (write.go) that creates its job's stream, decided in the
// transaction (prepareSubmits): its events, and its first attempt queued
// in River, routed at once for a direct dispatcher (direct.go), or held
// for approval. The Idempotency-Keys of a transaction's submits are
// locked and read with its BEGIN (queueKeyLocks): a key an earlier submit
// holds answers that submit's job (or a conflict), and a new job claims its
// key in its own write, so a submit refused later claims nothing. A submit
// with a parent counts against its root in a savepoint of its own, so that
// a full root does not fail the others; should the transaction fail
// on one member's data all the same, the unit of work leaves that member
// out and commits the others. Without group commit a submit is a batch
// of one.

type batchItem struct {
	ctx  context.Context
	sub  domain.Submitted
	md   domain.Metadata
	done chan batchResult
	// with, when set, writes what the caller adds to a new job in its
	// transaction (an A2A submit's push config); such a job's first
	// attempt goes through River.
	with func(ctx context.Context, tx pgx.Tx, jobID string) error

	res domain.SubmitResult
	// reserved: the submit holds a direct dispatcher (dispatch/direct.go), which
	// starts on direct once the transaction committed.
	reserved bool
	direct   dispatch.Start
	// sameAs is the submit of the same transaction that claimed this one's
	// Idempotency-Key first: this one's answer is its job, or its error.
	sameAs *batchItem
}

type batchResult struct {
	res domain.SubmitResult
	err error
}

type batcher struct {
	commit   func(ctx context.Context, batch []*batchItem) // Service.commitSubmits
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
// tenth of it) into one transaction each, a lone submit at once (run); as many gather the dispatch
// side's writes (write.go), with no window. It runs until ctx ends.
func (s *Service) StartGroupCommit(ctx context.Context, window time.Duration, workers int) {
	b := &batcher{commit: s.commitSubmits, items: make(chan *batchItem), window: window, idle: max(window/10, 50*time.Microsecond), maxBatch: 500}
	s.batcher = b
	for range max(workers, 1) {
		go b.run(ctx)
	}
	s.jobs.StartWriter(ctx, workers)
}

func (b *batcher) submit(ctx context.Context, sub domain.Submitted, md domain.Metadata) (domain.SubmitResult, error) {
	it := newBatchItem(ctx, sub, md)
	select {
	case b.items <- it:
	case <-ctx.Done():
		return domain.SubmitResult{}, ctx.Err()
	}
	r := <-it.done // once taken, an item is always answered
	return r.res, r.err
}

func newBatchItem(ctx context.Context, sub domain.Submitted, md domain.Metadata) *batchItem {
	return &batchItem{ctx: ctx, sub: sub, md: md, done: make(chan batchResult, 1)}
}

// run gathers submits into transactions until ctx ends. It takes the
// submits already waiting, and waits for more (up to the window, while
// they keep coming within the idle time) only when it found company or
// its last batch had some: a lone submit, one caller's next among
// others, commits at once instead of waiting the idle time for nobody.
func (b *batcher) run(ctx context.Context) {
	crowded := false // the last batch gathered more than one submit
	for {
		var first *batchItem
		select {
		case <-ctx.Done():
			return
		case first = <-b.items:
		}
		batch := []*batchItem{first}
	waiting:
		for len(batch) < b.maxBatch {
			select {
			case it := <-b.items:
				batch = append(batch, it)
			default:
				break waiting
			}
		}
		if crowded || len(batch) > 1 {
			batch = b.linger(batch)
		}
		crowded = len(batch) > 1
		b.commit(context.WithoutCancel(ctx), batch)
	}
}

// linger adds to batch the submits that arrive within the window, as
// long as each comes within the idle time of the one before.
func (b *batcher) linger(batch []*batchItem) []*batchItem {
	window := time.NewTimer(b.window)
	idle := time.NewTimer(b.idle)
	defer window.Stop()
	defer idle.Stop()
	for len(batch) < b.maxBatch {
		select {
		case it := <-b.items:
			batch = append(batch, it)
			idle.Reset(b.idle)
		case <-idle.C:
			return batch
		case <-window.C:
			return batch
		}
	}
	return batch
}

// commitSubmits writes batch in one transaction and answers each item.
func (s *Service) commitSubmits(ctx context.Context, batch []*batchItem) {
	ws := make([]*jobstore.Write, len(batch))
	of := make(map[*jobstore.Write]*batchItem, len(batch))
	namespaces := map[string]bool{}
	lanes := make([]jobstore.Lane, 0, len(batch))
	for i, it := range batch {
		ws[i] = &jobstore.Write{L: &jobstore.Loaded{Job: domain.Job{Submitted: domain.Submitted{JobID: it.sub.JobID}}}}
		of[ws[i]] = it
		namespaces[it.sub.Namespace] = true
		lanes = append(lanes, jobstore.Lane{Namespace: it.sub.Namespace, Priority: it.sub.Priority})
	}
	nsList := make([]string, 0, len(namespaces))
	for ns := range namespaces {
		nsList = append(nsList, ns)
	}
	var patterns approvalPatterns
	held := map[[2]string]keyHolder{}
	s.jobs.Commit(ctx, ws, &jobstore.Prelude{
		Lanes: lanes,
		Begin: func(b *pgx.Batch) {
			clear(held)
			queueKeyLocks(b, batch, held)
			queueApprovalPatterns(b, nsList, &patterns)
		},
		Prepare: func(ctx context.Context, tx pgx.Tx, at time.Time, ws []*jobstore.Write) error {
			if err := lockOrderingKeys(ctx, tx, batch); err != nil {
				return err
			}
			keys := map[[2]string]*batchItem{} // the keys this transaction claimed
			order := orderCount{}              // the submits of each ordering key it joins to its queue
			for _, w := range ws {
				it := of[w]
				it.sameAs = nil
				k := [2]string{it.sub.Namespace, it.sub.IdempotencyKey}
				if first := keys[k]; first != nil && k[1] != "" {
					// A retry of a submit in the same transaction: its job's
					// events are not written yet, so it is answered here.
					w.Events, w.Effects, w.Slot, w.Key, w.Notify = nil, domain.Effects{}, nil, nil, ""
					it.res, w.Err = sameKey(first, it)
					it.sameAs = first
					continue
				}
				s.prepareSubmit(ctx, tx, at, w, it, submitContext{patterns: patterns, order: order, held: held})
				if w.Err == nil && !it.res.Existing && k[1] != "" {
					keys[k] = it
				}
				if w.Err == nil && w.Effects.EnterOrder {
					order[[2]string{it.sub.Namespace, it.sub.OrderingKey}]++
				}
			}
			return nil
		},
	})
	writeOf := make(map[*batchItem]*jobstore.Write, len(batch))
	for i, it := range batch {
		writeOf[it] = ws[i]
	}
	for i, it := range batch {
		w := ws[i]
		if it.sameAs != nil && w.Err == nil && writeOf[it.sameAs].Err != nil {
			w.Err = writeOf[it.sameAs].Err // the job it was answered was not written (refused later)
		}
		if it.reserved {
			if w.Err == nil && it.direct.L != nil {
				s.dispatcher.Direct(it.direct)
			} else {
				s.dispatcher.Release()
			}
			it.reserved, it.direct = false, dispatch.Start{}
		}
		if w.Err != nil {
			it.done <- batchResult{err: w.Err}
			continue
		}
		it.done <- batchResult{res: it.res}
	}
}

// sameKey answers a submit it whose Idempotency-Key the submit first
// claimed in the same transaction, as heldKey would once first committed.
func sameKey(first, it *batchItem) (domain.SubmitResult, error) {
	if string(requestHash(first.sub)) != string(requestHash(it.sub)) {
		return domain.SubmitResult{}, fmt.Errorf("Idempotency-Key %q was used for another request (job %s): %w",
			it.sub.IdempotencyKey, first.res.JobID, ErrConflict)
	}
	res := first.res
	res.Existing = true
	return res, nil
}

// prepareSubmit decides the write w of the submission it in tx, begun at
// at: its events (SUBMITTED, AWAITING_APPROVAL, and ROUTED when a direct
// dispatcher routes it at once) and their effects. A submission whose
// Idempotency-Key names an earlier job writes nothing; one refused fails
// alone (w.Err).
func (s *Service) prepareSubmit(ctx context.Context, tx pgx.Tx, at time.Time, w *jobstore.Write, it *batchItem, sc submitContext) {
	w.Events, w.Effects, w.Slot, w.Key, w.Notify, w.WaitsAtSubmit, it.direct = nil, domain.Effects{}, nil, nil, "", false, dispatch.Start{}
	sub := it.sub // a try of its own: the checks fill in its root
	if sub.IdempotencyKey != "" {
		hash := requestHash(sub)
		if h, ok := sc.held[[2]string{sub.Namespace, sub.IdempotencyKey}]; ok {
			it.res, w.Err = s.heldKey(ctx, tx, sub, h, hash)
			return // nothing to write: an earlier submit created the job
		}
		w.Key = &jobstore.KeyClaim{Key: sub.IdempotencyKey, Hash: hash}
	}
	plain := sub.ParentJobID == ""
	if !plain {
		if err := s.checkSubmit(ctx, tx, &sub); err != nil {
			w.Err = err
			return
		}
	}
	ahead := 0
	if sub.OrderingKey != "" {
		plain = false // its key's queue is written beside it
		if err := tx.QueryRow(ctx, qOrderQueueLength, sub.Namespace, sub.OrderingKey).Scan(&ahead); err != nil {
			w.Err = fmt.Errorf("ordering key: %w", err)
			return
		}
		ahead += sc.order.before(sub) // the submits of the key before it in this transaction
		w.Effects.EnterOrder = true
	}
	evs, res := s.submittedEvents(sub, it.md, sc.patterns)
	it.res, w.Events = res, evs
	if it.with != nil {
		if err := it.with(ctx, tx, sub.JobID); err != nil {
			w.Err = err
			return
		}
		plain = false
	}
	step := domain.PlanSubmit(res.Status, plain, sub.Priority, ahead)
	var l *jobstore.Loaded // the fold of a job that may be routed now
	if step == domain.SubmitDirect || step == domain.SubmitQueue {
		var err error
		if l, err = submittedFold(sub.JobID, w.Events, at); err != nil {
			w.Err = err
			return
		}
		if t := s.dispatcher.WaitAtSubmit(l); t != nil {
			w.Effects.Timer, w.WaitsAtSubmit = t, true
			w.Err = w.Decide()
			return
		}
	}
	switch {
	case step == domain.SubmitOrdered:
		w.Effects.Timer = domain.OrderedTimer(s.now())
	case step == domain.SubmitApproval:
		w.Effects.Timer = &domain.Timer{Attempt: 1, Phase: domain.PhaseApproval, Due: s.now().Add(s.cfg.ApprovalTimeout)}
	case step == domain.SubmitDirect && (it.reserved || s.dispatcher.Reserve()):
		it.reserved = true
		if err := s.directStart(w, it, l, at); err != nil {
			w.Err = err
			return
		}
	default:
		w.Effects.Queue = &domain.QueuedAttempt{Attempt: 1}
	}
	w.Err = w.Decide()
}

// checkSubmit counts sub against its root's fan-out, in a savepoint of
// tx, so a full root fails this submission alone.
func (s *Service) checkSubmit(ctx context.Context, tx pgx.Tx, sub *domain.Submitted) error {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = sp.Rollback(ctx) }() // after Commit, a no-op
	if err := s.countDescendant(ctx, sp, sub); err != nil {
		return err
	}
	return sp.Commit(ctx)
}

// submitContext is what the submits of one transaction share: the
// approval patterns of their namespaces, the jobs each ordering key
// gained, and the Idempotency-Keys earlier submits hold.
type submitContext struct {
	patterns approvalPatterns
	order    orderCount
	held     map[[2]string]keyHolder
}

// directStart readies the submission of w, whose fold is l, for its
// direct dispatcher, as of its transaction's time at: routed at once when
// it can be (dispatch.Dispatcher.RouteAtSubmit), its ROUTED in the same
// append as its SUBMITTED, with the routed timer and the agent's slot (a
// pull agent's: put in its inbox, with nothing left to dispatch). One
// that cannot be waits on the queued timer, naming no River job, for its
// dispatcher to route it.
func (s *Service) directStart(w *jobstore.Write, it *batchItem, l *jobstore.Loaded, at time.Time) error {
	it.direct = dispatch.Start{L: l}
	routed, agent, deadline := s.dispatcher.RouteAtSubmit(l)
	if agent == nil {
		w.Effects.Timer = &domain.Timer{Attempt: 1, Phase: domain.PhaseQueued, Due: s.now().Add(s.cfg.LostAfter)}
		return nil
	}
	if agent.Pull() {
		// It waits in the agent's inbox, its claim woken at the commit:
		// nothing for the dispatcher to do (released after the commit).
		put := s.dispatcher.InboxWrite(l, agent, routed)
		if err := l.ApplyNew(domain.JobStream(it.sub.JobID), routed, at); err != nil {
			return err
		}
		w.Events = append(w.Events, put.Events...)
		w.Effects.Timer, w.Slot, w.Notify = put.Effects.Timer, put.Slot, put.Notify
		it.direct = dispatch.Start{}
		return nil
	}
	if err := l.ApplyNew(domain.JobStream(it.sub.JobID), routed, at); err != nil {
		return err
	}
	w.Events = append(w.Events, routed)
	l.RoutedAt = at
	it.direct.Agent, it.direct.Deadline = agent, deadline
	w.Effects.Timer = &domain.Timer{Attempt: 1, Phase: domain.PhaseRouted, Due: deadline.Add(s.cfg.LostAfter), AgentID: agent.AgentID}
	w.Slot = &jobstore.Slot{Agent: domain.AgentKey{Namespace: l.Namespace, ID: agent.AgentID}, Attempt: 1}
	return nil
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

// lockOrderingKeys takes the locks of the ordering keys of batch's
// submits, in one order, before any of them joins its key's queue.
func lockOrderingKeys(ctx context.Context, tx pgx.Tx, batch []*batchItem) error {
	var nss, keys []string
	for _, it := range batch {
		if it.sub.OrderingKey != "" {
			nss, keys = append(nss, it.sub.Namespace), append(keys, it.sub.OrderingKey)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, qLockOrderingKeys, nss, keys); err != nil {
		return fmt.Errorf("lock ordering keys: %w", err)
	}
	return nil
}

// orderCount counts, by namespace and ordering key, the submits of a
// transaction that join their key's queue: a later one of the same key is
// behind them too.
type orderCount map[[2]string]int

func (o orderCount) before(sub domain.Submitted) int {
	return o[[2]string{sub.Namespace, sub.OrderingKey}]
}
