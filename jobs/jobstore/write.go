package jobstore

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

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qCountSlotsOfAgents = queries.Must("CountSlotsOfAgents")
	qWaitersOfAgents    = queries.Must("WaitersOfAgents")
	qLockAgentSlots     = queries.Must("LockAgentSlots")
	qTryLockAgentSlots  = queries.Must("TryLockAgentSlots")
	qLockJobTimers      = queries.Must("LockJobTimers")
	qTransactionTime    = queries.Must("TransactionTime")

	qTakeAgentSlotsReplacing = queries.Must("TakeAgentSlotsReplacing")
	qReleaseAgentSlots       = queries.Must("ReleaseAgentSlots")
	qWakeNewWaitersIfFree    = queries.Must("WakeNewWaitersIfFree")
	qClaimIdempotencyKeys    = queries.Must("ClaimIdempotencyKeys")
	qClearJobTimers          = queries.Must("ClearJobTimers")
	qSetJobTimers            = queries.Must("SetJobTimers")
	qRecordAgentAttempts     = queries.Must("RecordAgentAttempts")
	qNotifyInbox             = queries.Must("NotifyInbox")
	qPauseAgents             = queries.Must("PauseAgents")
	qLockOrderingKeysOfJobs  = queries.Must("LockOrderingKeysOfJobs")
	qLeaveOrder              = queries.Must("LeaveOrder")
	qEnterOrders             = queries.Must("EnterOrders")
)

// ErrNoSlot says every one of an agent's max_concurrent slots is taken.
var ErrNoSlot = errors.New("every slot of the agent is taken")

// The unit of work. Every change to a job is a write: the events decided
// on a fold, appended at that fold's version, and the writes of their
// effects (domain.Effects: the job's timer, its agent's slot, the
// agent's attempt sample, River's dispatch, callback and poll jobs), all
// in one transaction. writeIn is the one place that turns writes into
// statements, whatever their number:
//
//  1. when the writes ask for River jobs, the jobs' timer rows locked (in
//     job order), then River's jobs for every write, in one insert
//     through the Queue (their ids name the timers that watch them);
//  2. in one round trip: the timer rows locked (when not yet), every
//     write's events in one statement (eventstore.AppendAll), then one
//     statement of each kind for their effects, and the pull agents'
//     inbox notifications.
//
// How writes commit is never what they write:
//
//   - AppendTx: one write in a transaction of the caller's (a batch of one);
//   - Write: shared with concurrent writes by the writer's workers;
//   - Commit with a Prelude: writes decided in the transaction itself
//     (group commit's submits, which create their jobs' streams).
//
// One write's failure never fails another's: a statement that fails
// belongs to one write (the events' statement names the writes whose
// version was stale), so the transaction is rolled back and run again
// without it, and that write alone gets the error (a conflict: its caller
// reloads and decides again). When a statement shared by several writes
// fails on their data, they are run again each with statements of its
// own (alone) to find whose it was. An error no write caused (a lost
// connection) fails them all, as it would have failed each alone. A write
// is answered only after its transaction committed.

// Write is one job's share of a transaction: the events decided on a
// fold and their effects. Fill in L, Events and Effects (and Slot, Notify,
// CallbackNow); the store fills in the rest.
type Write struct {
	// L is the fold Events were decided on; once written, the fold after
	// them.
	L       *Loaded
	Events  []domain.Event
	Effects domain.Effects
	// Slot, when set, is taken first; the write fails with ErrNoSlot
	// when the agent has none free.
	Slot *Slot
	// Notify, when set, is the pull agent ("namespace/agent_id") whose
	// claims are woken at commit (InboxChannel).
	Notify string
	// CallbackNow says the writer calls the caller back itself once the
	// write commits: a job it ends gets the callback timer, the durable
	// promise, but no River callback job.
	CallbackNow bool
	// WaitsAtSubmit says the write sets the timer of an attempt that
	// waits for a slot (a submit's first, or one a dispatch found every
	// agent full for), every agent that could take it looking full in the
	// registry's snapshot: should one have a slot free after all by the
	// exact count, the commit wakes the most urgent waiter as a slot given
	// back would (WakeNewWaitersIfFree).
	WaitsAtSubmit bool
	// Key, when set, is the Idempotency-Key the write's new job claims in
	// the write's own statements: a write left out claims nothing. Its
	// lock is the caller's to hold (LockIdempotencyKeys).
	Key *KeyClaim
	// Then, when set, runs in the write's transaction once every write
	// and the routes of the waiters they woke are in, in a savepoint of
	// its own: what it does commits with the write, and its failure rolls
	// back only itself. The transaction may run more than once; Then runs
	// in each, and only the last one's work stands.
	Then func(ctx context.Context, tx pgx.Tx) error
	// TakeRouted, when set, is offered each route the transaction writes
	// for a waiter its slots woke, before it is written, until it took
	// TakeMax of them: it may add to the route's write (a pull agent's
	// claim of the attempt the route puts in its inbox) and answer true.
	// Taken holds the route writes it took in the run that committed;
	// Then runs only when it took fewer than TakeMax.
	TakeRouted func(r *Write) bool
	TakeMax    int
	Taken      []*Write
	// OnRun, when set, is called at the start of every run of the write's
	// transaction: what Then and TakeRouted gathered in a run rolled back
	// is dropped there.
	OnRun func()

	// After is the fold after Events (Decide).
	After domain.Job
	// At is the transaction's time: the events' recorded_at.
	At time.Time
	// Err is the write's own failure; a Prelude may set it to fail the
	// write alone.
	Err  error
	done chan struct{}
	// River's jobs inserted for the write (0: none).
	dispatchJob, callbackJob int64
	// arrival is the write's place in its Commit's list.
	arrival int
	// admitted: the write's new job was counted into its lane's depth
	// under the lane's lock (admit).
	admitted bool
}

// KeyClaim is an Idempotency-Key a new job claims, with the hash of the
// request that submitted it.
type KeyClaim struct {
	Key  string
	Hash []byte
}

// Slot is the slot an attempt takes of its agent before it starts; with
// no MaxConcurrent it is taken uncounted.
type Slot struct {
	Agent         domain.AgentKey
	MaxConcurrent int
	Attempt       int
	// Rank is the attempt's rank among those waiting for a slot
	// (domain.WaitRank): a slot whose turn came to an attempt of a lower
	// rank (a slot given back woke it) is left to it.
	Rank time.Time
}

// Decide folds the write's events onto a copy of its fold (the job's
// state machine refuses what may not follow).
func (w *Write) Decide() error {
	w.After = w.L.Job
	for _, e := range w.Events {
		if err := w.After.Apply(e); err != nil {
			return fmt.Errorf("job %s: %w", w.jobID(), err)
		}
	}
	return nil
}

// jobID is the write's job: its fold's, or for a new job its events'.
func (w *Write) jobID() string {
	if w.L.JobID != "" {
		return w.L.JobID
	}
	return w.After.JobID
}

// empty reports whether the write has nothing to write.
func (w *Write) empty() bool {
	fx := w.Effects
	return len(w.Events) == 0 && w.Slot == nil && fx.Timer == nil && !fx.ClearTimer && fx.Sample == nil && fx.Dispatch == nil &&
		!fx.RequeueCallback && fx.Poll == 0 && fx.Queue == nil && fx.Pause == nil && !fx.EnterOrder
}

// callback reports whether the write ends a job whose caller waits for
// a callback.
func (w *Write) callback() bool {
	return w.Effects.Callback && w.After.Status.Terminal() && w.After.CallbackURL != ""
}

// CallsBack reports whether the writer is to call the caller back itself,
// now that the write committed.
func (w *Write) CallsBack() bool { return w.CallbackNow && w.callback() }

// riverCallback reports whether the write queues a River callback job.
func (w *Write) riverCallback() bool {
	return w.Effects.RequeueCallback || w.callback() && !w.CallbackNow
}

// AppendTx writes evs, decided on l, with their effects fx in tx (the
// caller's), and on success moves l on to the fold after them. A stale
// version is eventstore.ErrConflict: the caller reloads and decides again.
// On any error the caller must roll tx back: the statements go out
// together, so some of them may have run.
func (s *Store) AppendTx(ctx context.Context, tx pgx.Tx, l *Loaded, fx domain.Effects, evs ...domain.Event) error {
	return s.appendTx(ctx, tx, &Write{L: l, Events: evs, Effects: fx})
}

// AppendAllTx writes ws, each decided on its own fold, in tx (the
// caller's) in one round trip, inside a savepoint: a write that fails
// alone (its version stale: eventstore.ErrConflict) gets the error in
// w.Err, and the others are written again without it. Each write written
// moves its fold on. The error is one no write caused (a lost
// connection): the caller must roll tx back.
func (s *Store) AppendAllTx(ctx context.Context, tx pgx.Tx, ws []*Write) error {
	pending := make([]*Write, 0, len(ws))
	for _, w := range ws {
		if w.Err = w.Decide(); w.Err == nil {
			pending = append(pending, w)
		}
	}
	slices.SortStableFunc(pending, func(a, b *Write) int { return cmp.Compare(a.jobID(), b.jobID()) })
	alone := false
	for len(pending) > 0 {
		sp, err := tx.Begin(ctx) // a savepoint
		if err != nil {
			return err
		}
		culprit, err := s.writeIn(ctx, sp, pending, alone, true, nil)
		if err == nil {
			if err = sp.Commit(ctx); err == nil {
				break
			}
		}
		_ = sp.Rollback(ctx)
		switch {
		case culprit != nil:
			culprit.Err = err
			pending = slices.DeleteFunc(pending, func(w *Write) bool { return w == culprit })
		case !alone && len(pending) > 1 && statementError(err):
			alone = true // a statement of several writes failed: find whose
		default:
			return err
		}
	}
	for _, w := range pending {
		if w.Err == nil {
			s.finished(ctx, w.L.Status, w.After.Status)
			w.L.Job = w.After
		}
	}
	return nil
}

// WaitForSlotTx sets t, the timer of an attempt of l that waits for a
// slot because every agent that could take it looked full in the
// registry's snapshot, in tx: should one have a slot free after all by the
// exact count, the commit wakes the most urgent waiter for it (this one
// or another), as a slot given back would (Write.WaitsAtSubmit).
func (s *Store) WaitForSlotTx(ctx context.Context, tx pgx.Tx, l *Loaded, t domain.Timer) error {
	return s.appendTx(ctx, tx, &Write{L: l, Effects: domain.Effects{Timer: &t}, WaitsAtSubmit: t.Capability != ""})
}

func (s *Store) appendTx(ctx context.Context, tx pgx.Tx, w *Write) error {
	l := w.L
	if err := w.Decide(); err != nil {
		return err
	}
	if _, err := s.writeIn(ctx, tx, []*Write{w}, true, false, nil); err != nil {
		return err
	}
	if w.Err != nil {
		return w.Err
	}
	s.finished(ctx, l.Status, w.After.Status)
	l.Job = w.After
	return nil
}

// Write appends w's events and writes their effects, in a transaction
// shared with concurrent writes when the writer runs (one of its own
// otherwise), and answers once it committed. On success w.L holds the new
// state.
func (s *Store) Write(ctx context.Context, w *Write) error {
	if err := w.Decide(); err != nil {
		return err
	}
	if w.empty() {
		return nil
	}
	if wr := s.writer; wr != nil {
		w.done = make(chan struct{})
		select {
		case wr.items <- w:
			<-w.done // once taken, a write is always answered
		case <-wr.stopped:
			s.Commit(ctx, []*Write{w}, nil)
		case <-ctx.Done():
			return ctx.Err()
		}
	} else {
		s.Commit(ctx, []*Write{w}, nil)
	}
	if w.Err != nil {
		return w.Err
	}
	s.moveOn(ctx, w)
	return nil
}

// moveOn moves the fold of w, committed, on to the state after its events,
// with the times Load would read.
func (s *Store) moveOn(ctx context.Context, w *Write) {
	s.finished(ctx, w.L.Status, w.After.Status)
	l := w.L
	for _, e := range w.Events {
		if e.Type != domain.EventCallbackSent && e.Type != domain.EventCallbackFailed {
			l.UpdatedAt = w.At
		}
		if e.Type == domain.EventRouted {
			l.RoutedAt = w.At
		}
	}
	ended := w.After.Status.Terminal() && !l.Status.Terminal()
	if ended {
		l.FinishedAt = w.At
	}
	l.Job = w.After
	if ended && s.cfg.Ended != nil {
		c := *l
		s.cfg.Ended(&c)
	}
}

// WriteRetrying writes what decide decides, again (up to 5 times) when a
// concurrent append to the same stream won: decide then reloads (retry is
// true) and decides anew. A nil write from decide records nothing.
func (s *Store) WriteRetrying(ctx context.Context, decide func(retry bool) (*Write, error)) error {
	var err error
	for i := range 5 {
		var w *Write
		if w, err = decide(i > 0); err != nil || w == nil {
			return err
		}
		if err = s.Write(ctx, w); !errors.Is(err, eventstore.ErrConflict) {
			return err
		}
	}
	return err
}

// RetryTx runs fn in a transaction, again (up to 5 times) when a
// concurrent append to the same stream wins, or PostgreSQL gave up on the
// transaction (a deadlock with a shared write that locks the job's timer
// before appending, a serialization failure): fn reloads and decides anew.
// Without it, an A2A push that lost such a race was answered 500 and lost.
func (s *Store) RetryTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return s.events.RetryTx(ctx, fn)
}

// writer gathers concurrent writes: each of its workers takes what is
// waiting, up to maxBatch, and commits it as one transaction; what
// arrives meanwhile waits for the next free worker. A lone write is
// committed at once, so a lightly loaded service waits for no window.
type writer struct {
	s        *Store
	items    chan *Write
	stopped  chan struct{}
	maxBatch int
}

// StartWriter starts workers goroutines sharing writes until ctx ends.
func (s *Store) StartWriter(ctx context.Context, workers int) {
	wr := &writer{s: s, items: make(chan *Write), stopped: make(chan struct{}), maxBatch: 200}
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
		var first *Write
		select {
		case <-ctx.Done():
			return
		case first = <-wr.items:
		}
		batch := []*Write{first}
	gather:
		for len(batch) < wr.maxBatch {
			select {
			case w := <-wr.items:
				batch = append(batch, w)
			default:
				break gather
			}
		}
		wr.s.Commit(context.WithoutCancel(ctx), batch, nil)
		for _, w := range batch {
			close(w.done)
		}
	}
}

// Prelude is what a transaction of writes does before them: statements
// sent with its BEGIN (Begin), and decisions made in it (Prepare, which
// may fill the writes in, leave one empty, or fail one alone by setting
// its Err). A transaction run again runs its prelude again.
type Prelude struct {
	Begin   func(b *pgx.Batch)
	Prepare func(ctx context.Context, tx pgx.Tx, at time.Time, ws []*Write) error
	// Lanes are the lanes the writes may add jobs to, when known before
	// Prepare: their rows are taken and read with BEGIN, saving admit a
	// round trip.
	Lanes []Lane
}

// Commit commits ws in one transaction, setting each one's Err: a
// write whose statement failed is left out and the others are written
// again without it (ErrNoSlot leaves one out without a second run). A
// deadlock or serialization failure runs them all again, a few times.
func (s *Store) Commit(ctx context.Context, ws []*Write, pre *Prelude) {
	for i, w := range ws {
		w.arrival = i
	}
	pending := slices.Clone(ws)
	// One order for every transaction's row locks (job by job), so two
	// shared transactions never wait on each other in a circle.
	slices.SortStableFunc(pending, func(a, b *Write) int { return cmp.Compare(a.jobID(), b.jobID()) })
	alone := false // each write's own statements, not one of each kind for all
	for transient := 0; len(pending) > 0; {
		for _, w := range pending {
			w.Err = nil
		}
		culprit, err := s.writeTx(ctx, pending, pre, alone)
		switch {
		case err == nil:
			s.events.Committed()
			return
		case (TransientTxError(err) || errors.Is(err, eventstore.ErrAborted) || keyClaimedMeanwhile(err)) && transient < 3:
			transient++
		case culprit == nil && !alone && len(pending) > 1 && statementError(err):
			alone = true // a statement of several writes failed: find whose
		case culprit != nil && len(pending) > 1:
			culprit.Err = err
			pending = slices.DeleteFunc(pending, func(w *Write) bool { return w == culprit })
		default:
			for _, w := range pending {
				if w.Err == nil {
					w.Err = err
				}
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

// keyClaimedMeanwhile reports whether err is an Idempotency-Key claimed
// by another transaction since this one read the keys held (one that took
// no lock: a release before this one): run again, it finds the key held.
func keyClaimedMeanwhile(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "idempotency_keys_pkey"
}

// TransientTxError reports whether err is PostgreSQL giving up on a
// transaction that may well succeed when run again (class 40: a deadlock,
// a serialization failure).
func TransientTxError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "40")
}

// writeTx writes ws in a transaction of their own and commits it: BEGIN
// with the transaction's time, the prelude's statements and the slot
// counts, then the prelude's decisions, then writeIn. On an error it
// answers the write whose statement failed, if one did.
func (s *Store) writeTx(ctx context.Context, ws []*Write, pre *Prelude, alone bool) (culprit *Write, err error) {
	for _, w := range ws {
		w.Taken = nil // what a run before this one took
		if w.OnRun != nil {
			w.OnRun()
		}
	}
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	var at time.Time
	var xid string
	b.Queue(qTransactionTime).QueryRow(func(row pgx.Row) error { return row.Scan(&at, &xid) })
	var woken []Woken
	wokenInto := &woken
	if s.cfg.Woken == nil {
		wokenInto = nil // the commit wakes the deadline sweep
	}
	tx, culprit, err := s.begin(ctx, b, &at, ws, pre, alone, wokenInto)
	if tx != nil {
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // after Commit, a no-op
	}
	if err != nil {
		return culprit, err
	}
	var routed []Routed
	if len(woken) > 0 && s.cfg.Route != nil {
		routed = s.routeWoken(ctx, tx, woken, ws)
		defer func() {
			for _, r := range routed {
				r.Done(err == nil)
			}
		}()
	}
	for _, w := range ws {
		if w.Then != nil && w.Err == nil && !w.empty() && (w.TakeRouted == nil || len(w.Taken) < w.TakeMax) {
			thenIn(ctx, tx, w.Then)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		appended := slices.ContainsFunc(ws, func(w *Write) bool { return w.Err == nil && len(w.Events) > 0 }) || len(routed) > 0
		if err := eventstore.CommitOutcome(ctx, s.pool, xid, appended, err); err != nil {
			return nil, err
		}
	}
	for _, w := range ws {
		w.At = at
	}
	for _, r := range routed {
		r.Write.At = at
		s.moveOn(ctx, r.Write)
		woken = slices.DeleteFunc(woken, func(wk Woken) bool { return wk.JobID == r.JobID })
	}
	if len(woken) > 0 && s.cfg.Woken != nil {
		s.cfg.Woken(woken)
	}
	return nil, nil
}

// begin sends b (BEGIN and the query of the transaction's time, read into
// at) and writes ws in the transaction it begins, which it answers (nil
// if none began): with the appends in b when nothing needs an answer
// before them (appendsAtBegin), else after the prelude's statements and
// decisions, the slot counts and the lanes' admission (writeIn).
func (s *Store) begin(ctx context.Context, b *pgx.Batch, at *time.Time, ws []*Write, pre *Prelude, alone bool, woken *[]Woken) (pgx.Tx, *Write, error) {
	if appendsAtBegin(ws, pre, alone) {
		return s.appendAll(ctx, b, nil, ws, true, woken)
	}
	counted := pre == nil || pre.Prepare == nil // the slots wanted are known before the transaction
	if pre != nil && pre.Begin != nil {
		pre.Begin(b)
	}
	var lanes *laneView
	if pre != nil && len(pre.Lanes) > 0 {
		lanes = queueLaneLock(b, pre.Lanes)
	}
	if counted {
		queueSlotCount(b, ws, false)
	}
	br := s.pool.SendBatch(ctx, b)
	err := br.Close()
	tx := br.Tx()
	if err != nil {
		return tx, nil, err
	}
	if pre != nil && pre.Prepare != nil {
		// Decided in the order the writes came (a repeated Idempotency-Key
		// belongs to the submit that came first), written in job order.
		arrived := slices.SortedStableFunc(slices.Values(ws), func(a, b *Write) int { return cmp.Compare(a.arrival, b.arrival) })
		if err := pre.Prepare(ctx, tx, *at, arrived); err != nil {
			return tx, nil, err
		}
	}
	if err := s.admit(ctx, tx, ws, lanes); err != nil {
		return tx, nil, err
	}
	culprit, err := s.writeIn(ctx, tx, ws, alone, counted, woken)
	return tx, culprit, err
}

// thenIn runs then in a savepoint of tx (Write.Then); a failure rolls
// back the savepoint alone (a failure of the connection fails the
// commit).
func thenIn(ctx context.Context, tx pgx.Tx, then func(context.Context, pgx.Tx) error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return
	}
	if err := then(ctx, sp); err == nil && sp.Commit(ctx) == nil {
		return
	}
	_ = sp.Rollback(ctx)
}

// savepointRoute is the savepoint routeWoken writes its routes after: a
// route that fails rolls back to it, the rest of the transaction unharmed;
// one written is never released (the commit takes it with the rest).
const savepointRoute = "route_woken"

// routeWoken reads the jobs of the waiters woken in tx (with the
// savepoint, in one round trip), writes the routes Config.Route decides
// for them, and answers those written. When one fails (its job moved on,
// a slot taken after all), tx is rolled back to the savepoint and every
// waiter goes to Woken after the commit, as without Route. A batch that
// fails before its savepoint ran (a lost connection, or the prepare pgx
// sends first for statements new to the connection) fails the
// transaction, which the unit of work runs again.
func (s *Store) routeWoken(ctx context.Context, tx pgx.Tx, woken []Woken, ws []*Write) []Routed {
	ids := make([]string, len(woken))
	for i, w := range woken {
		ids[i] = w.JobID
	}
	b := &pgx.Batch{}
	b.Queue("SAVEPOINT " + savepointRoute)
	folds := queueLoadAll(b, ids, true)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		rollbackRoute(ctx, tx)
		return nil
	}
	loaded, err := folds()
	if err != nil {
		return nil
	}
	routed := s.cfg.Route(ctx, woken, loaded)
	if len(routed) == 0 {
		return nil // nothing written after the savepoint
	}
	for _, r := range routed {
		for _, w := range ws {
			if w.TakeRouted != nil && w.Err == nil && len(w.Taken) < w.TakeMax && w.TakeRouted(r.Write) {
				w.Taken = append(w.Taken, r.Write)
				break
			}
		}
	}
	if err := s.writeRouted(ctx, tx, routed); err == nil {
		return routed
	}
	for _, r := range routed {
		r.Done(false)
	}
	for _, w := range ws {
		w.Taken = nil // not written
	}
	rollbackRoute(ctx, tx)
	return nil
}

// rollbackRoute rolls tx back to the savepoint of routeWoken (should that
// fail, so does the commit).
func rollbackRoute(ctx context.Context, tx pgx.Tx) {
	_, _ = tx.Exec(ctx, "ROLLBACK TO SAVEPOINT "+savepointRoute)
}

// writeRouted writes the routes of routed in tx, each taking its agent's
// slot; one refused a slot fails them all.
func (s *Store) writeRouted(ctx context.Context, tx pgx.Tx, routed []Routed) error {
	ws := make([]*Write, len(routed))
	for i, r := range routed {
		if err := r.Write.Decide(); err != nil {
			return err
		}
		ws[i] = r.Write
	}
	if b := (&pgx.Batch{}); queueSlotCount(b, ws, true) {
		// The agents' slot locks come after this transaction's timer
		// rows, the reverse of every other writer's order: never wait
		// for one (a writer holding it gives the waiter to Woken).
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
	}
	if _, err := s.writeIn(ctx, tx, ws, false, true, nil); err != nil {
		return err
	}
	for _, w := range ws {
		if w.Err != nil {
			return w.Err
		}
	}
	return nil
}

// writeIn writes ws in tx: River's jobs, then the timer locks, events and
// effects (all writes' in one round trip, or with alone each write's in
// one of its own, so a failure names its write). counted says the agents'
// slots were counted already; a write refused one gets ErrNoSlot and is
// left out, as is a write that failed before or has nothing to write.
func (s *Store) writeIn(ctx context.Context, tx pgx.Tx, ws []*Write, alone, counted bool, woken *[]Woken) (culprit *Write, err error) {
	if !counted {
		b := &pgx.Batch{}
		if queueSlotCount(b, ws, false) {
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return nil, fmt.Errorf("count slots: %w", err)
			}
		}
	}
	live := make([]*Write, 0, len(ws))
	for _, w := range ws {
		if w.Err == nil && !w.empty() {
			live = append(live, w)
		}
	}
	if len(live) == 0 {
		return nil, nil
	}
	// The timer rows are locked before anything else a write takes: the
	// River jobs it inserts (an A2A poll's args are unique) and its append.
	// That is the deadline sweep's order too, so none waits on another in
	// a circle. With no River job to insert, the lock goes in the append's
	// round trip.
	lockFirst := false
	for _, w := range live {
		lockFirst = lockFirst || w.Effects.Queue != nil || w.Effects.Poll > 0 || w.riverCallback()
	}
	if lockFirst {
		if lock := lockTimers(live); lock != nil {
			if _, err := tx.Exec(ctx, lock.SQL, lock.Args...); err != nil {
				return nil, fmt.Errorf("lock job timers: %w", err)
			}
		}
		if err := s.insertRiverJobs(ctx, tx, live); err != nil {
			return nil, err
		}
	}
	if !alone {
		_, culprit, err := s.appendAll(ctx, nil, tx, live, !lockFirst, woken)
		return culprit, err
	}
	for _, w := range live {
		if _, _, err := s.appendAll(ctx, nil, tx, []*Write{w}, !lockFirst, woken); err != nil {
			return w, err
		}
	}
	return nil, nil
}

// lockTimers is the statement that locks the timer rows of ws' jobs that
// exist already (nil: none), in job order.
func lockTimers(ws []*Write) *eventstore.Statement {
	var ids []string
	for _, w := range ws {
		if w.L.Version > 0 {
			ids = append(ids, w.jobID())
		}
	}
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	return &eventstore.Statement{SQL: qLockJobTimers, Args: []any{eventstore.UUIDs(ids)}}
}

// appendsAtBegin reports whether the transaction of ws can send their
// appends with its BEGIN (appendAll with a begin batch), saving a round
// trip: when nothing needs an answer before them (no prelude, no slot of
// a limited agent to count, no River job to insert, no new job to admit
// into its lane) and every write is written (not alone, not empty).
func appendsAtBegin(ws []*Write, pre *Prelude, alone bool) bool {
	if pre != nil || alone || len(slotLimitedAgents(ws)) > 0 {
		return false
	}
	for _, w := range ws {
		if w.empty() || w.Effects.Queue != nil || w.Effects.Poll > 0 || w.riverCallback() || w.L.Status == domain.StatusNone {
			return false
		}
	}
	return len(ws) > 0
}

// appendAll sends, in one round trip, the lock of ws' timer rows (with
// lock), their events and the statements of their effects: on tx, or with
// begin, which begins the transaction it answers. It answers the write
// whose events were stale, if one's were.
func (s *Store) appendAll(ctx context.Context, begin *pgx.Batch, tx pgx.Tx, ws []*Write, lock bool, woken *[]Woken) (pgx.Tx, *Write, error) {
	var appends []eventstore.StreamAppend
	var appenders []*Write // the write of each append
	fx := effectRows{agentsChannel: s.cfg.AgentsChannel, woken: woken, lostAfter: s.cfg.LostAfter}
	for _, w := range ws {
		if len(w.Events) > 0 {
			appends = append(appends, eventstore.StreamAppend{Stream: domain.JobStream(w.jobID()), Expected: w.L.Version, Events: w.Events})
			appenders = append(appenders, w)
		}
		s.addEffects(&fx, w)
	}
	var before []eventstore.Statement
	if l := lockTimers(ws); lock && l != nil {
		before = append(before, *l)
	}
	var err error
	if begin != nil {
		tx, err = s.events.BeginAppendAll(ctx, begin, before, appends, fx.statements())
	} else {
		err = s.events.AppendAll(ctx, tx, before, appends, fx.statements())
	}
	if ce := (*eventstore.ConflictError)(nil); errors.As(err, &ce) && len(ce.Stale) > 0 {
		return tx, appenders[ce.Stale[0]], err
	}
	return tx, nil, err
}

// insertRiverJobs inserts, in one statement, the River jobs ws' effects
// ask for (a queued attempt, the caller's callback, an A2A poll) and
// keeps the ids of those a timer names.
func (s *Store) insertRiverJobs(ctx context.Context, tx pgx.Tx, ws []*Write) error {
	var jobs []Enqueued
	var ids []*int64 // where each insert's id goes (nil: nowhere)
	for _, w := range ws {
		id := w.jobID()
		if q := w.Effects.Queue; q != nil {
			jobs = append(jobs, Enqueued{Kind: EnqueueDispatch, JobID: id, Attempt: q.Attempt, WaitingSince: q.WaitingSince,
				Priority: w.After.Priority, Agent: q.Agent})
			ids = append(ids, &w.dispatchJob)
		}
		if w.Effects.Poll > 0 {
			jobs = append(jobs, Enqueued{Kind: EnqueuePoll, JobID: id, Attempt: w.Effects.Poll})
			ids = append(ids, nil)
		}
		if w.riverCallback() {
			jobs = append(jobs, Enqueued{Kind: EnqueueCallback, JobID: id})
			ids = append(ids, &w.callbackJob)
		}
	}
	if len(jobs) == 0 {
		return nil
	}
	got, err := s.queue.InsertTx(ctx, tx, jobs)
	if err != nil {
		return fmt.Errorf("enqueue dispatches, callbacks and polls: %w", err)
	}
	if len(got) != len(jobs) {
		return errors.New("enqueue: fewer River jobs than inserted")
	}
	for i, id := range ids {
		if id != nil {
			*id = got[i]
		}
	}
	return nil
}

// queueSlotCount queues on b, under every limited agent's advisory lock
// (taken in one order), the count of the slots it holds for every process
// on the database: the agents with a max_concurrent that ws take slots
// of, and the attempts whose turn at one of their slots came
// (WaitersOfAgents). Reading them, the writes of ws take the free ones in
// turn, leaving one to each attempt whose turn came with a lower rank
// than theirs (Slot.Rank; a slot given back woke it, and its dispatch is
// on its way); a write refused one gets ErrNoSlot. With try, a lock
// another transaction holds is not waited for: the writes for that agent
// get ErrNoSlot. It reports whether it queued any.
func queueSlotCount(b *pgx.Batch, ws []*Write, try bool) bool {
	limited := slotLimitedAgents(ws)
	if len(limited) == 0 {
		return false
	}
	nss, ids := make([]string, len(limited)), make([]string, len(limited))
	busy := map[domain.AgentKey]bool{} // locked by another transaction (try)
	for i, k := range limited {
		nss[i], ids[i] = k.Namespace, k.ID
		if !try {
			b.Queue(qLockAgentSlots, k.Namespace, k.ID)
			continue
		}
		b.Queue(qTryLockAgentSlots, k.Namespace, k.ID).QueryRow(func(row pgx.Row) error {
			var locked bool
			err := row.Scan(&locked)
			busy[k] = !locked
			return err
		})
	}
	type waiter struct {
		job  string
		rank time.Time
	}
	waiters := map[domain.AgentKey][]waiter{}
	b.Queue(qWaitersOfAgents, nss, ids).Query(func(rows pgx.Rows) error {
		var k domain.AgentKey
		var wt waiter
		_, err := pgx.ForEachRow(rows, []any{&k.Namespace, &k.ID, &wt.job, &wt.rank}, func() error {
			waiters[k] = append(waiters[k], wt)
			return nil
		})
		return err
	})
	b.Queue(qCountSlotsOfAgents, nss, ids).Query(func(rows pgx.Rows) error {
		held := map[domain.AgentKey]int{}
		var k domain.AgentKey
		var n int
		if _, err := pgx.ForEachRow(rows, []any{&k.Namespace, &k.ID, &n}, func() error { held[k] = n; return nil }); err != nil {
			return err
		}
		taken := map[string]bool{} // the jobs that took a slot here: no longer waiting
		for _, w := range ws {
			c := w.Slot
			if c == nil || c.MaxConcurrent <= 0 || w.Err != nil {
				continue
			}
			if busy[c.Agent] {
				w.Err = ErrNoSlot
				continue
			}
			ahead := 0
			for _, wt := range waiters[c.Agent] {
				if wt.job != w.jobID() && !taken[wt.job] && wt.rank.Before(c.Rank) {
					ahead++
				}
			}
			if held[c.Agent]+ahead >= c.MaxConcurrent {
				w.Err = ErrNoSlot
				continue
			}
			held[c.Agent]++
			taken[w.jobID()] = true
		}
		return nil
	})
	return true
}

// addEffects adds to r the rows of w's effects: its slot taken or given
// back, its timer cleared or set, its agent's attempt sample, and its
// pull agent's notification. A job's timer is the last one set: the one
// its effects set, then its retry's, then the one watching its callback,
// then the one watching its queued attempt. A timer replaced in the same
// transaction is not deleted first.
func (s *Store) addEffects(r *effectRows, w *Write) {
	id, fx := w.jobID(), w.Effects
	if c := w.Slot; c != nil {
		r.take.set(id, c.Agent.Namespace, c.Agent.ID, c.Attempt)
	}
	if w.L.SlotHolder != "" && w.After.SlotHolder == "" {
		r.release = append(r.release, id)
	}
	replaced := fx.Timer != nil || fx.Dispatch != nil || w.callback() || fx.RequeueCallback || fx.Queue != nil
	if fx.ClearTimer && !replaced {
		r.clear = append(r.clear, id)
	}
	if fx.Timer != nil {
		r.timers.setOf(&w.After, *fx.Timer)
		if w.WaitsAtSubmit {
			r.waits = append(r.waits, id)
		}
	}
	if smp := fx.Sample; smp != nil && smp.AgentID != "" {
		r.samples.add(w.After.Namespace, smp.AgentID, smp.At, smp.OK)
	}
	if d := fx.Dispatch; d != nil {
		// A retry waits on the job's timer rather than as a scheduled River
		// job: River promotes scheduled jobs every 5 s, the deadline sweep
		// every DeadlineSweepInterval (1 s).
		r.timers.setOf(&w.After, domain.Timer{Attempt: d.Attempt, Phase: domain.PhaseRetry, Due: d.At})
	}
	if w.CallsBack() {
		r.timers.setOf(&w.After, s.callbackTimer(0)) // no River job yet: the sweep queues one if the writer's call never lands
	}
	if w.riverCallback() {
		r.timers.setOf(&w.After, s.callbackTimer(w.callbackJob))
	}
	if q := fx.Queue; q != nil {
		t := domain.Timer{Attempt: q.Attempt, Phase: domain.PhaseQueued, Due: s.now().Add(s.cfg.LostAfter),
			RiverJobID: w.dispatchJob, WaitingSince: q.WaitingSince}
		if q.Capability != "" { // a waiter's turn came: it keeps its place
			t.Namespace, t.Capability, t.Rank, t.AgentID = w.After.Namespace, q.Capability, q.Rank, q.Agent
		}
		r.timers.setOf(&w.After, t)
	}
	if p := fx.Pause; p != nil {
		r.pauses.namespaces, r.pauses.agentIDs = append(r.pauses.namespaces, w.After.Namespace), append(r.pauses.agentIDs, p.AgentID)
		r.pauses.until = append(r.pauses.until, p.Until)
	}
	if k := w.Key; k != nil {
		r.keys.namespaces, r.keys.keys = append(r.keys.namespaces, w.After.Namespace), append(r.keys.keys, k.Key)
		r.keys.jobIDs, r.keys.hashes = append(r.keys.jobIDs, id), append(r.keys.hashes, k.Hash)
	}
	if fx.EnterOrder && w.After.OrderingKey != "" {
		r.entered = append(r.entered, w)
	}
	if w.After.OrderingKey != "" && w.After.Status.Terminal() && !w.L.Status.Terminal() {
		r.ended = append(r.ended, id) // the next job of its key may start
	}
	if !w.L.Status.Waiting() && w.After.Status.Waiting() { // the job (again) waits for an attempt
		r.lanes.add(w.After.Namespace, string(w.After.Priority), w.admitted)
	}
	if w.Notify != "" && !slices.Contains(r.notify, w.Notify) {
		r.notify = append(r.notify, w.Notify)
	}
}

// effectRows are the rows of writes' effects, a statement of each kind:
// slots taken, timers cleared, timers set, slots given back (each to the
// most urgent waiter), attempt samples and inbox notifications. A job's slot and timer are the last
// set.
type effectRows struct {
	take           slotSet
	release, clear []string
	timers         timerSet
	samples        sampleRows
	lanes          laneRows
	pauses         pauseRows
	waits          []string // jobs whose first attempt waits at submit (Write.WaitsAtSubmit)
	keys           keyRows
	ended          []string // jobs with an ordering key that ended
	entered        []*Write // new jobs that join their ordering key's queue
	notify         []string
	agentsChannel  string
	// woken collects the waiters the slots given back woke, for the
	// committing process to dispatch (nil: the deadline sweep does).
	woken *[]Woken
	// lostAfter is how long a woken waiter's queued timer waits for that.
	lostAfter time.Duration
}

// readWoken reads the waiters a statement woke into r.woken (when kept).
func (r *effectRows) readWoken(rows pgx.Rows) error {
	var wk Woken
	_, err := pgx.ForEachRow(rows, []any{&wk.JobID, &wk.Attempt, &wk.WaitingSince, &wk.Agent}, func() error {
		if r.woken != nil {
			*r.woken = append(*r.woken, wk)
		}
		return nil
	})
	return err
}

// keyRows are the Idempotency-Keys new jobs claim (ClaimIdempotencyKeys'
// arrays).
type keyRows struct {
	namespaces, keys, jobIDs []string
	hashes                   [][]byte
}

// pauseRows are agents' pauses (PauseAgents' arrays).
type pauseRows struct {
	namespaces, agentIDs []string
	until                []time.Time
}

// statements are r's statements, in that order.
func (r *effectRows) statements() []eventstore.Statement {
	var out []eventstore.Statement
	add := func(sql string, args ...any) { out = append(out, eventstore.Statement{SQL: sql, Args: args}) }
	if t := &r.take; len(t.jobIDs) > 0 {
		add(qTakeAgentSlotsReplacing, eventstore.UUIDs(t.jobIDs), t.namespaces, t.agentIDs, t.attempts)
	}
	if len(r.clear) > 0 {
		add(qClearJobTimers, eventstore.UUIDs(r.clear))
	}
	if t := &r.timers; len(t.jobIDs) > 0 {
		add(qSetJobTimers, eventstore.UUIDs(t.jobIDs), t.attempts, t.agentIDs, t.phases, t.dues, t.riverIDs, t.since, t.namespaces,
			t.capabilities, t.ranks, t.lanes)
	}
	if len(r.release) > 0 { // after the timers: a waiter written here may take a slot given back here
		add(qReleaseAgentSlots, eventstore.UUIDs(r.release), InboxChannel, WakeWaiters, r.woken != nil, r.lostAfter)
		out[len(out)-1].Rows = r.readWoken
	}
	if k := &r.keys; len(k.keys) > 0 {
		add(qClaimIdempotencyKeys, k.namespaces, k.keys, eventstore.UUIDs(k.jobIDs), k.hashes)
	}
	if len(r.waits) > 0 { // after the slots given back: they went to the waiters before
		add(qWakeNewWaitersIfFree, eventstore.UUIDs(r.waits), InboxChannel, WakeWaiters, r.woken != nil, r.lostAfter)
		out[len(out)-1].Rows = r.readWoken
	}
	if len(r.entered) > 0 { // in the order they came (the keys' locks are the submits')
		ws := slices.SortedStableFunc(slices.Values(r.entered), func(a, b *Write) int { return cmp.Compare(a.arrival, b.arrival) })
		var nss, keys, ids []string
		for _, w := range ws {
			nss, keys, ids = append(nss, w.After.Namespace), append(keys, w.After.OrderingKey), append(ids, w.jobID())
		}
		add(qEnterOrders, nss, keys, eventstore.UUIDs(ids))
	}
	if len(r.ended) > 0 { // after the timers too: the next job of a key may be written here
		add(qLockOrderingKeysOfJobs, eventstore.UUIDs(r.ended))
		add(qLeaveOrder, eventstore.UUIDs(r.ended), InboxChannel, WakeWaiters)
	}
	if m := &r.samples; len(m.agentIDs) > 0 {
		add(qRecordAgentAttempts, m.namespaces, m.agentIDs, m.ats, m.oks)
	}
	if l := &r.lanes.admitted; len(l.n) > 0 {
		add(qAddLaneDepths, l.namespaces, l.lanes, l.n)
	}
	if l := &r.lanes.entered; len(l.n) > 0 {
		add(qAddLaneEntries, l.namespaces, l.lanes, l.n)
	}
	if p := &r.pauses; len(p.agentIDs) > 0 {
		add(qPauseAgents, p.namespaces, p.agentIDs, p.until, r.agentsChannel)
	}
	for _, agent := range r.notify {
		add(qNotifyInbox, InboxChannel, agent)
	}
	return out
}

// slotSet is slots to take, a job's last.
type slotSet struct {
	jobIDs, namespaces, agentIDs []string
	attempts                     []int32
	at                           map[string]int
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
	r.jobIDs, r.namespaces, r.agentIDs = append(r.jobIDs, jobID), append(r.namespaces, namespace), append(r.agentIDs, agentID)
	r.attempts = append(r.attempts, int32(attempt))
}

// timerSet is timers to set (SetJobTimers' arrays), a job's last.
type timerSet struct {
	jobIDs, agentIDs, phases, namespaces, capabilities, lanes []string
	attempts                                                  []int32
	dues                                                      []time.Time
	riverIDs                                                  []*int64
	since, ranks                                              []*time.Time
	at                                                        map[string]int
}

func (r *timerSet) set(jobID string, t domain.Timer) {
	var rj *int64
	if t.RiverJobID != 0 {
		rj = &t.RiverJobID
	}
	var since *time.Time
	if !t.WaitingSince.IsZero() {
		since = &t.WaitingSince
	}
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
		r.capabilities, r.ranks, r.lanes = append(r.capabilities, ""), append(r.ranks, nil), append(r.lanes, "")
	}
	var rank *time.Time
	if !t.Rank.IsZero() {
		rank = &t.Rank
	}
	r.attempts[i], r.agentIDs[i], r.phases[i], r.dues[i] = int32(t.Attempt), t.AgentID, string(t.Phase), t.Due
	r.riverIDs[i], r.since[i], r.namespaces[i] = rj, since, t.Namespace
	r.capabilities[i], r.ranks[i] = t.Capability, rank
}

// setOf sets the timer t of job j: in j's namespace (when t names none)
// and lane, which a lane's recount reads.
func (r *timerSet) setOf(j *domain.Job, t domain.Timer) {
	if t.Namespace == "" {
		t.Namespace = j.Namespace
	}
	r.set(j.JobID, t)
	r.lanes[r.at[j.JobID]] = string(j.Priority)
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
func (s *Store) callbackTimer(riverJobID int64) domain.Timer {
	return domain.Timer{Phase: domain.PhaseCallback, Due: s.now().Add(s.cfg.CallbackGrace), RiverJobID: riverJobID}
}

// slotLimitedAgents are the agents with a max_concurrent that ws take
// slots of, sorted.
func slotLimitedAgents(ws []*Write) []domain.AgentKey {
	var out []domain.AgentKey
	for _, w := range ws {
		if c := w.Slot; c != nil && c.MaxConcurrent > 0 && w.Err == nil && !slices.Contains(out, c.Agent) {
			out = append(out, c.Agent)
		}
	}
	slices.SortFunc(out, func(a, b domain.AgentKey) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.ID, b.ID))
	})
	return out
}
