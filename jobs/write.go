package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qCountSlotsOfAgents = queries.Must("CountSlotsOfAgents")
	qLockJobTimers      = queries.Must("LockJobTimers")
	qTransactionTime    = queries.Must("TransactionTime")

	qTakeAgentSlotsReplacing = queries.Must("TakeAgentSlotsReplacing")
	qReleaseAgentSlots       = queries.Must("ReleaseAgentSlots")
	qClearJobTimers          = queries.Must("ClearJobTimers")
	qSetJobTimers            = queries.Must("SetJobTimers")
	qRecordAgentAttempts     = queries.Must("RecordAgentAttempts")
)

// Shared transactions on the dispatch side. A delivery's outcome, an
// attempt's ROUTED (with the agent slot it takes) and a callback's
// acknowledgement are each one job's write: events at the version of the
// fold they were decided on and the writes of their effects. Concurrent
// writes share one transaction (as submits do, groupcommit.go), and each
// transaction sends its statements a few round trips at a time, whatever
// the number of writes (pgx batches): BEGIN, the jobs' timer rows taken,
// every write's events in one statement and the writes' other statements
// in the same round trip, River's inserts (callbacks, A2A polls) for all
// of them in one, the timers that name those River jobs and the inbox
// notifications in one, then COMMIT.
//
// One write's failure never fails another's: a statement that fails
// belongs to one write (the events' statement names the writes whose
// version was stale), so the transaction is rolled back and run again
// without it, and that write alone gets the error (a conflict: its caller
// reloads and decides again). An error no write caused (a lost
// connection) fails them all, as it would have failed each alone; their
// callers do what they did before writes were shared (River retries, and
// the job's timer recovers an attempt whose outcome was never recorded).
// A write is answered only after its transaction committed.

// write is one job's share of a shared transaction.
type write struct {
	// l is the fold evs were decided on; once written, the fold after them.
	l   *Loaded
	evs []domain.Event
	fx  domain.Effects
	// slot, when set, is taken first; the write fails with errNoSlot
	// when the agent has none free.
	slot *slotClaim
	// notify, when set, is the pull agent ("namespace/agent_id") whose
	// claims are woken at commit (InboxChannel).
	notify string
	// callbackNow says the writer calls the caller back itself once the
	// write commits (callbacknow.go): a job it ends gets the callback
	// timer, the durable promise, but no River callback job.
	callbackNow bool
	// callbackByRiver queues the River callback job (available at once)
	// and the timer naming it; with it a write may have no events.
	callbackByRiver bool

	after domain.Job // the fold after evs
	at    time.Time  // the transaction's time: the events' recorded_at
	err   error
	done  chan struct{}
}

// slotClaim is the slot an attempt takes of its agent before it starts.
type slotClaim struct {
	agent         domain.AgentKey
	maxConcurrent int
	attempt       int
}

// callback reports whether the write ends a job whose caller waits for
// a callback.
func (w *write) callback() bool {
	return w.fx.Callback && w.after.Status.Terminal() && w.after.CallbackURL != ""
}

// callsBack reports whether the writer is to call the caller back itself,
// now that the write committed.
func (w *write) callsBack() bool { return w.callbackNow && w.callback() }

// riverCallback reports whether the write queues a River callback job.
func (w *write) riverCallback() bool { return w.callbackByRiver || w.callback() && !w.callbackNow }

// write appends w's events and writes their effects, in a transaction
// shared with concurrent writes when the writer runs (one of its own
// otherwise), and answers once it committed. On success w.l holds the new
// state.
func (s *Service) write(ctx context.Context, w *write) error {
	w.after = w.l.Job
	for _, e := range w.evs {
		if err := w.after.Apply(e); err != nil {
			return fmt.Errorf("job %s: %w", w.l.JobID, err)
		}
	}
	if len(w.evs) == 0 && !w.callbackByRiver {
		return nil
	}
	if wr := s.writer; wr != nil {
		w.done = make(chan struct{})
		select {
		case wr.items <- w:
			<-w.done // once taken, a write is always answered
		case <-wr.stopped:
			s.commitWrites(ctx, []*write{w})
		case <-ctx.Done():
			return ctx.Err()
		}
	} else {
		s.commitWrites(ctx, []*write{w})
	}
	if w.err != nil {
		return w.err
	}
	s.countFinished(ctx, w.l.Status, w.after.Status)
	l := w.l
	for _, e := range w.evs { // the times Load would read
		if e.Type != domain.EventCallbackSent && e.Type != domain.EventCallbackFailed {
			l.UpdatedAt = w.at
		}
		if e.Type == domain.EventRouted {
			l.RoutedAt = w.at
		}
	}
	if w.after.Status.Terminal() && !l.Status.Terminal() {
		l.FinishedAt = w.at
	}
	l.Job = w.after
	return nil
}

// writeRetrying writes what decide decides, again (up to 5 times) when a
// concurrent append to the same stream won: decide then reloads (retry is
// true) and decides anew. A nil write from decide records nothing.
func (s *Service) writeRetrying(ctx context.Context, decide func(retry bool) (*write, error)) error {
	var err error
	for i := range 5 {
		var w *write
		if w, err = decide(i > 0); err != nil || w == nil {
			return err
		}
		if err = s.write(ctx, w); !errors.Is(err, eventstore.ErrConflict) {
			return err
		}
	}
	return err
}

// writer gathers concurrent writes: each of its workers takes what is
// waiting, up to maxBatch, and commits it as one transaction; what
// arrives meanwhile waits for the next free worker. A lone write is
// committed at once, so a lightly loaded service waits for no window.
type writer struct {
	s        *Service
	items    chan *write
	stopped  chan struct{}
	maxBatch int
}

// startWriter starts workers goroutines sharing writes until ctx ends.
func (s *Service) startWriter(ctx context.Context, workers int) {
	wr := &writer{s: s, items: make(chan *write), stopped: make(chan struct{}), maxBatch: 200}
	s.writer = wr
	var running sync.WaitGroup
	for range max(workers, 1) {
		running.Go(func() { wr.run(ctx) })
	}
	go func() {
		running.Wait()
		close(wr.stopped) // every worker is out: writes commit alone from now on
	}()
}

func (wr *writer) run(ctx context.Context) {
	for {
		var first *write
		select {
		case <-ctx.Done():
			return
		case first = <-wr.items:
		}
		batch := []*write{first}
	gather:
		for len(batch) < wr.maxBatch {
			select {
			case w := <-wr.items:
				batch = append(batch, w)
			default:
				break gather
			}
		}
		wr.s.commitWrites(context.WithoutCancel(ctx), batch)
		for _, w := range batch {
			close(w.done)
		}
	}
}

// commitWrites commits ws in one transaction, setting each one's err: a
// write whose statement failed is left out and the others are written
// again without it (errNoSlot leaves one out without a second run). A
// deadlock or serialization failure runs them all again, a few times.
func (s *Service) commitWrites(ctx context.Context, ws []*write) {
	pending := slices.Clone(ws)
	// One order for every transaction's row locks (job by job), so two
	// shared transactions never wait on each other in a circle.
	slices.SortStableFunc(pending, func(a, b *write) int { return cmp.Compare(a.l.JobID, b.l.JobID) })
	alone := false // each write's own statements, not one of each kind for all
	for transient := 0; len(pending) > 0; {
		for _, w := range pending {
			w.err = nil
		}
		culprit, err := s.writeTx(ctx, pending, alone)
		switch {
		case err == nil:
			s.store.Committed()
			return
		case transientTxError(err) && transient < 3:
			transient++
		case culprit == nil && !alone && len(pending) > 1 && statementError(err):
			alone = true // a statement of several writes failed: find whose
		case culprit != nil && len(pending) > 1:
			culprit.err = err
			pending = slices.DeleteFunc(pending, func(w *write) bool { return w == culprit })
		default:
			for _, w := range pending {
				w.err = err
			}
			return
		}
	}
}

// statementError reports whether err is PostgreSQL refusing a statement
// (not a lost connection, not a transaction it gave up on).
func statementError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && !strings.HasPrefix(pgErr.Code, "40")
}

// transientTxError reports whether err is PostgreSQL giving up on a
// transaction that may well succeed when run again (class 40: a deadlock,
// a serialization failure).
func transientTxError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "40")
}

// writeTx writes ws in one transaction and commits it. A write refused a
// slot gets errNoSlot and is left out. On an error it answers the write
// whose statement failed, if one did: with alone, each write's effects are
// statements of its own, so a failure names its write; without, one
// statement of each kind serves them all.
func (s *Service) writeTx(ctx context.Context, ws []*write, alone bool) (culprit *write, err error) {
	var tx pgx.Tx
	// send sends b: the first batch begins the transaction.
	send := func(b *pgx.Batch) (int, error) {
		t, failed, err := sendBatch(ctx, s.pool, tx, b)
		if tx == nil && t != nil {
			tx = t
		}
		return failed, err
	}
	defer func() {
		if tx != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx)) // after Commit, a no-op
		}
	}()
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	var at time.Time
	b.Queue(qTransactionTime).QueryRow(func(row pgx.Row) error { return row.Scan(&at) })
	owners := []*write{nil, nil} // the write each queued statement belongs to
	if limited := slotLimitedAgents(ws); len(limited) > 0 {
		queueSlotCount(b, ws, limited)
		if _, err := send(b); err != nil {
			return nil, fmt.Errorf("count slots: %w", err)
		}
		b, owners = &pgx.Batch{}, nil
	}
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i] = w.l.JobID
	}
	b.Queue(qLockJobTimers, eventstore.UUIDs(ids)) // ws is in job order
	owners = append(owners, nil)
	q, err := s.queueWrites(b, ws, owners, alone)
	if err != nil {
		return nil, err
	}
	if len(b.QueuedQueries) > 0 {
		if failed, err := send(b); err != nil {
			return q.culprit(failed), err
		}
	}
	if tx == nil {
		return nil, nil // nothing was left to write
	}
	if err := s.queueRiverWrites(ctx, tx, ws, q.inserts, q.inserted, send); err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	for _, w := range ws {
		w.at = at
	}
	return nil, nil
}

// queuedWrites is what queueWrites put on a batch: the write each
// statement belongs to, and River's inserts, which are made afterwards.
type queuedWrites struct {
	owners    []*write // the write of each statement (nil: all of them)
	appendsAt int      // the events' statement, or -1
	appenders []*write // the write of each of its appends
	stale     []int    // the appends it found stale, once read
	inserts   []river.InsertManyParams
	inserted  []*write // whose callback each insert is (nil: a poll)
}

// culprit is the write to leave out when statement failed failed.
func (q *queuedWrites) culprit(failed int) *write {
	if failed == q.appendsAt && len(q.stale) > 0 {
		return q.appenders[q.stale[0]]
	}
	return q.owners[failed]
}

// queueWrites queues on b (whose statements so far owners names) the
// writes of ws still to be made: their events in one statement, then the
// writes of their effects, each write's own (alone) or one statement of
// each kind for all.
func (s *Service) queueWrites(b *pgx.Batch, ws []*write, owners []*write, alone bool) (*queuedWrites, error) {
	q := &queuedWrites{owners: owners, appendsAt: -1}
	var appends []eventstore.StreamAppend
	for _, w := range ws {
		if w.err == nil && len(w.evs) > 0 {
			appends = append(appends, eventstore.StreamAppend{Stream: domain.JobStream(w.l.JobID), Expected: w.l.Version, Events: w.evs})
			q.appenders = append(q.appenders, w)
		}
	}
	if err := s.store.QueueAppends(b, appends, &q.stale); err != nil {
		return nil, err
	}
	if len(appends) > 0 {
		q.appendsAt = len(b.QueuedQueries) - 1
		q.owners = append(q.owners, nil)
	}
	var all effectRows
	for _, w := range ws {
		if w.err != nil {
			continue
		}
		if alone {
			var own effectRows
			s.addEffects(&own, w)
			start := len(b.QueuedQueries)
			own.queue(b)
			for range len(b.QueuedQueries) - start {
				q.owners = append(q.owners, w)
			}
		} else {
			s.addEffects(&all, w)
		}
		if w.fx.Poll > 0 {
			q.inserts = append(q.inserts, river.InsertManyParams{Args: A2APollArgs{JobID: w.l.JobID, Attempt: w.fx.Poll}})
			q.inserted = append(q.inserted, nil)
		}
		if w.riverCallback() {
			q.inserts = append(q.inserts, river.InsertManyParams{Args: CallbackArgs{JobID: w.l.JobID}})
			q.inserted = append(q.inserted, w)
		}
	}
	start := len(b.QueuedQueries)
	all.queue(b)
	for range len(b.QueuedQueries) - start {
		q.owners = append(q.owners, nil)
	}
	return q, nil
}

// queueSlotCount queues, under every limited agent's advisory lock (taken
// in one order), the count of the slots it holds for every process on the
// database; reading it, the writes of ws take the free ones in turn, and
// a write refused one gets errNoSlot.
func queueSlotCount(b *pgx.Batch, ws []*write, limited []domain.AgentKey) {
	nss, ids := make([]string, len(limited)), make([]string, len(limited))
	for i, k := range limited {
		nss[i], ids[i] = k.Namespace, k.ID
		b.Queue(qLockAgentSlots, k.Namespace, k.ID)
	}
	b.Queue(qCountSlotsOfAgents, nss, ids).Query(func(rows pgx.Rows) error {
		held := map[domain.AgentKey]int{}
		var k domain.AgentKey
		var n int
		if _, err := pgx.ForEachRow(rows, []any{&k.Namespace, &k.ID, &n}, func() error { held[k] = n; return nil }); err != nil {
			return err
		}
		for _, w := range ws {
			if c := w.slot; c != nil && c.maxConcurrent > 0 {
				if held[c.agent] >= c.maxConcurrent {
					w.err = errNoSlot
					continue
				}
				held[c.agent]++
			}
		}
		return nil
	})
}

// queueRiverWrites inserts the River jobs of the writes (inserted names
// whose callback each insert is; nil: a poll), then sends the timers that
// name them and the inbox notifications, one of each pull agent.
func (s *Service) queueRiverWrites(ctx context.Context, tx pgx.Tx, ws []*write, inserts []river.InsertManyParams, inserted []*write,
	send func(*pgx.Batch) (int, error)) error {
	b := &pgx.Batch{}
	if len(inserts) > 0 {
		res, err := s.client.InsertManyTx(ctx, tx, inserts)
		if err != nil {
			return fmt.Errorf("enqueue callbacks and polls: %w", err)
		}
		var timers timerSet
		for i, w := range inserted {
			if w != nil {
				timers.set(w.l.JobID, s.callbackTimer(res[i].Job.ID))
			}
		}
		timers.queue(b)
	}
	notified := map[string]bool{}
	for _, w := range ws {
		if w.err == nil && w.notify != "" && !notified[w.notify] {
			notified[w.notify] = true
			b.Queue(qNotifyInbox, InboxChannel, w.notify)
		}
	}
	if len(b.QueuedQueries) > 0 {
		if _, err := send(b); err != nil {
			return err
		}
	}
	return nil
}

// addEffects adds to r the writes of w's effects, as appendTx makes them
// (but its events, which writeTx appends for every write in one
// statement, and River's inserts): its slot taken or given back, its timer
// cleared or set, its agent's attempt sample. A timer replaced in the same
// transaction is not deleted first.
func (s *Service) addEffects(r *effectRows, w *write) {
	l := w.l
	if c := w.slot; c != nil {
		r.take.set(l.JobID, c.agent.Namespace, c.agent.ID, c.attempt)
	}
	fx := w.fx
	if l.SlotHolder != "" && w.after.SlotHolder == "" {
		r.release = append(r.release, l.JobID)
	}
	replaced := fx.Timer != nil || fx.Dispatch != nil || w.callback() || w.callbackByRiver
	if fx.ClearTimer && !replaced {
		r.clear = append(r.clear, l.JobID)
	}
	if fx.Timer != nil {
		r.timers.set(l.JobID, *fx.Timer)
	}
	if smp := fx.Sample; smp != nil && smp.AgentID != "" {
		r.samples.add(l.Namespace, smp.AgentID, smp.At, smp.OK)
	}
	if d := fx.Dispatch; d != nil {
		r.timers.set(l.JobID, domain.Timer{Attempt: d.Attempt, Phase: domain.PhaseRetry, Due: d.At})
	}
	if w.callsBack() {
		r.timers.set(l.JobID, s.callbackTimer(0)) // no River job yet: the sweep queues one if the writer's call never lands
	}
}

// effectRows are the rows of writes' effects, a statement of each kind:
// slots taken, slots given back, timers cleared, timers set and attempt
// samples, in the order appendTx writes them. A job's slot and timer are
// the last set.
type effectRows struct {
	take           slotSet
	release, clear []string
	timers         timerSet
	samples        sampleRows
}

// queue queues r's statements on b.
func (r *effectRows) queue(b *pgx.Batch) {
	if len(r.take.jobIDs) > 0 {
		b.Queue(qTakeAgentSlotsReplacing, eventstore.UUIDs(r.take.jobIDs), r.take.namespaces, r.take.agentIDs, r.take.attempts)
	}
	if len(r.release) > 0 {
		b.Queue(qReleaseAgentSlots, eventstore.UUIDs(r.release))
	}
	if len(r.clear) > 0 {
		b.Queue(qClearJobTimers, eventstore.UUIDs(r.clear))
	}
	r.timers.queue(b)
	if m := &r.samples; len(m.agentIDs) > 0 {
		b.Queue(qRecordAgentAttempts, m.namespaces, m.agentIDs, m.ats, m.oks)
	}
}

// slotSet is slots to take, a job's last.
type slotSet struct {
	slotRows
	at map[string]int
}

func (r *slotSet) set(jobID, namespace, agentID string, attempt int) {
	if i, ok := r.at[jobID]; ok {
		r.namespaces[i], r.agentIDs[i], r.attempts[i] = namespace, agentID, int32(attempt)
		return
	}
	if r.at == nil {
		r.at = map[string]int{}
	}
	r.at[jobID] = len(r.jobIDs)
	r.add(jobID, namespace, agentID, attempt)
}

// timerSet is timers to set (SetJobTimers' arrays), a job's last.
type timerSet struct {
	jobIDs, agentIDs, phases, namespaces []string
	attempts                             []int32
	dues                                 []time.Time
	riverIDs                             []*int64
	since                                []*time.Time
	at                                   map[string]int
}

func (r *timerSet) set(jobID string, t domain.Timer) {
	rj, since := timerNulls(t)
	i, ok := r.at[jobID]
	if !ok {
		if r.at == nil {
			r.at = map[string]int{}
		}
		i = len(r.jobIDs)
		r.at[jobID] = i
		r.jobIDs = append(r.jobIDs, jobID)
		r.agentIDs, r.phases, r.namespaces = append(r.agentIDs, ""), append(r.phases, ""), append(r.namespaces, "")
		r.attempts, r.dues = append(r.attempts, 0), append(r.dues, time.Time{})
		r.riverIDs, r.since = append(r.riverIDs, nil), append(r.since, nil)
	}
	r.attempts[i], r.agentIDs[i], r.phases[i], r.dues[i] = int32(t.Attempt), t.AgentID, string(t.Phase), t.Due
	r.riverIDs[i], r.since[i], r.namespaces[i] = rj, since, t.Namespace
}

// queue queues setting r's timers, each replacing the one its job had.
func (r *timerSet) queue(b *pgx.Batch) { r.queueAs(b, qSetJobTimers) }

// queueNew queues inserting r's timers, of jobs that have none yet.
func (r *timerSet) queueNew(b *pgx.Batch) { r.queueAs(b, qInsertJobTimers) }

func (r *timerSet) queueAs(b *pgx.Batch, query string) {
	if len(r.jobIDs) > 0 {
		b.Queue(query, eventstore.UUIDs(r.jobIDs), r.attempts, r.agentIDs, r.phases, r.dues, r.riverIDs, r.since, r.namespaces)
	}
}

// sampleRows are attempt samples to record (RecordAgentAttempts' arrays).
type sampleRows struct {
	namespaces, agentIDs []string
	ats                  []time.Time
	oks                  []bool
}

func (r *sampleRows) add(namespace, agentID string, at time.Time, ok bool) {
	r.namespaces, r.agentIDs = append(r.namespaces, namespace), append(r.agentIDs, agentID)
	r.ats, r.oks = append(r.ats, at), append(r.oks, ok)
}

// callbackTimer is the timer that watches a callback: due after the
// callback grace, naming its River job (0: none yet).
func (s *Service) callbackTimer(riverJobID int64) domain.Timer {
	return domain.Timer{Phase: domain.PhaseCallback, Due: s.now().Add(s.cfg.CallbackGrace), RiverJobID: riverJobID}
}

// sendBatch sends b, on tx or (when b begins a transaction) on a
// connection of pool, and reads every result. It answers the transaction,
// and on an error the index in b of the statement that failed (0 when
// none can be named).
func sendBatch(ctx context.Context, pool interface {
	SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
}, tx pgx.Tx, b *pgx.Batch) (pgx.Tx, int, error) {
	failed := 0
	for i, qq := range b.QueuedQueries {
		fn := qq.Fn
		qq.Fn = func(br pgx.BatchResults) error {
			var err error
			if fn != nil {
				err = fn(br)
			} else {
				_, err = br.Exec()
			}
			if err != nil {
				failed = i
			}
			return err
		}
	}
	var br pgx.BatchResults
	if tx != nil {
		br = tx.SendBatch(ctx, b)
	} else {
		br = pool.SendBatch(ctx, b)
	}
	err := br.Close()
	if tx == nil {
		tx = br.Tx()
	}
	return tx, failed, err
}

// slotLimitedAgents are the agents with a max_concurrent that ws take
// slots of, sorted.
func slotLimitedAgents(ws []*write) []domain.AgentKey {
	var out []domain.AgentKey
	for _, w := range ws {
		if c := w.slot; c != nil && c.maxConcurrent > 0 && !slices.Contains(out, c.agent) {
			out = append(out, c.agent)
		}
	}
	slices.SortFunc(out, func(a, b domain.AgentKey) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.ID, b.ID))
	})
	return out
}
