// Package jobstore is the jobs' unit of work: it reads a job's fold from
// its stream (Load) and writes every change to a job, its events and
// their effects (domain.Effects), in one transaction (Write, AppendTx,
// Commit). It knows nothing of River but the Queue it inserts River's
// jobs with, and nothing of how a job is dispatched.
package jobstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
)

// ErrConflict is what the jobs' services answer when a request
// contradicts a job's state or an earlier request (a reused
// Idempotency-Key with another body, cancelling a finished job, input for
// a job that awaits none).
var ErrConflict = domain.NewError(domain.ErrConflict, "conflict")

// ErrOverloaded: the lane's queue is at its limit (Config.QueueLimit);
// the submit is refused and nothing of it is written (429 overloaded,
// Retry-After).
var ErrOverloaded error = &domain.KindError{Kind: domain.ErrUnavailable, Code: "overloaded",
	Message: "overloaded: too many jobs wait in this namespace and lane, try again later"}

// InboxChannel is the PostgreSQL channel on which an attempt put in a pull
// agent's inbox is announced (its payload: "namespace/agent_id"), by the
// transaction that put it there (Write.Notify).
const InboxChannel = "agentreach_inbox"

// WakeWaiters is the payload on InboxChannel of a transaction that gave a
// slot to a waiting attempt (its timer came due): it wakes the deadline
// sweep, which dispatches it, in whichever process leads the sweeps.
const WakeWaiters = "!waiters"

// Config tunes the timers the store writes.
type Config struct {
	// Reads, when set, is the pool the job lists read from (a hot
	// standby); nil: the primary's. A list may then lag the primary by
	// the standby's replay lag.
	Reads *pgxpool.Pool
	// LostAfter is how long a queued attempt's River job may take to
	// route it before its timer presumes it lost.
	LostAfter time.Duration
	// CallbackGrace is how long a callback may take before its timer
	// presumes its sender died.
	CallbackGrace time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// QueueLimit is how many jobs a namespace's lane may hold waiting for
	// an attempt: a submit past it fails with ErrOverloaded (0: no limit).
	QueueLimit int
	// AgentsChannel is the channel that tells the registries of every
	// process that an agent changed (a pause, domain.Effects.Pause).
	AgentsChannel string
	// Woken, if set, is told of the waiting attempts that slots given back
	// by a committed Commit woke, and must dispatch them: their timers are
	// queued, due after LostAfter (should the process die first, the
	// deadline sweep enqueues them in River). Unset, a commit wakes the
	// deadline sweep instead (WakeWaiters).
	Woken func([]Woken)
	// Route, if set, routes the waiters a slot given back woke in the
	// transaction that gave it back, from their jobs' folds read there
	// (loaded; a job with no stream is absent): the writes it answers
	// (each taking the slot of its waiter's agent, ROUTED appended) are
	// written there after a savepoint, so the next job's route costs no
	// transaction of its own. A waiter it leaves out, or whose write fails
	// (rolled back to the savepoint, the rest of the transaction
	// unharmed), goes to Woken.
	Route func(ctx context.Context, woken []Woken, loaded map[string]*Loaded) []Routed
	// Finished, if set, is told of every job a committed write ended.
	Finished func(ctx context.Context, before, after domain.JobStatus)
	// Ended, if set, is handed a copy of the fold of every job a shared
	// write (Write, Commit) ended, once it committed: a request waiting
	// for that job's end answers from it without reading the job again.
	Ended func(l *Loaded)
}

// Woken is a waiting attempt that a slot given back woke: its job, its
// attempt, when its wait began, and the agent whose slot it is.
type Woken struct {
	JobID        string
	Attempt      int
	WaitingSince time.Time
	Agent        string
}

// Routed is a woken waiter routed in the transaction that woke it
// (Config.Route): its write, and Done, told once the transaction ends
// whether the write committed in it.
type Routed struct {
	JobID string
	Write *Write
	Done  func(committed bool)
}

// EnqueueKind is what a River job inserted for a write does.
type EnqueueKind int

// The River jobs a write may ask for.
const (
	// EnqueueDispatch runs an attempt (domain.Effects.Queue).
	EnqueueDispatch EnqueueKind = iota + 1
	// EnqueueCallback calls the caller back.
	EnqueueCallback
	// EnqueuePoll polls an A2A agent for an attempt's task.
	EnqueuePoll
)

// Enqueued is one River job a write asks for.
type Enqueued struct {
	Kind         EnqueueKind
	JobID        string
	Attempt      int
	WaitingSince time.Time
	Priority     domain.Priority
	// Agent is the agent whose slot was handed to this waiter (a queued
	// dispatch only): its dispatch tries it first, whatever the snapshot
	// counts (the waiter's own claim on the slot among them).
	Agent string
}

// Queue inserts River's jobs in a write's transaction and answers their
// ids, in order.
type Queue interface {
	InsertTx(ctx context.Context, tx pgx.Tx, jobs []Enqueued) ([]int64, error)
}

// Store reads and writes jobs.
type Store struct {
	pool   *pgxpool.Pool
	events *eventstore.Store
	queue  Queue
	cfg    Config
	writer *writer
	kept   keptFolds
}

// New returns a Store over events, inserting River's jobs with queue.
func New(pool *pgxpool.Pool, events *eventstore.Store, queue Queue, cfg Config) *Store {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Store{pool: pool, events: events, queue: queue, cfg: cfg}
}

func (s *Store) now() time.Time { return s.cfg.Now() }

// reads is the pool lists read from: Config.Reads, or the primary's.
func (s *Store) reads() *pgxpool.Pool {
	if s.cfg.Reads != nil {
		return s.cfg.Reads
	}
	return s.pool
}

func (s *Store) finished(ctx context.Context, before, after domain.JobStatus) {
	if s.cfg.Finished != nil {
		s.cfg.Finished(ctx, before, after)
	}
}

// Loaded is a job folded from its stream, with the times of its events.
type Loaded struct {
	domain.Job
	TraceID     string
	SubmittedAt time.Time
	UpdatedAt   time.Time
	FinishedAt  time.Time
	// RoutedAt is when the latest attempt was routed (claimed, for a pull
	// agent's): what its time to result is measured from.
	RoutedAt time.Time
	Records  []eventstore.Record
}

// Load folds a job's stream; domain.ErrNotFound if it has none.
func (s *Store) Load(ctx context.Context, q eventstore.Querier, id string) (*Loaded, error) {
	if _, err := uuid.Parse(id); err != nil {
		return nil, fmt.Errorf("job %q: %w", id, domain.ErrNotFound)
	}
	recs, err := s.events.ReadStream(ctx, q, domain.JobStream(id))
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("job %s: %w", id, domain.ErrNotFound)
	}
	return fold(id, recs)
}

// LoadAll folds the jobs of ids in one round trip; a job with no stream
// is absent.
func (s *Store) LoadAll(ctx context.Context, q eventstore.BatchQuerier, ids []string) (map[string]*Loaded, error) {
	if q == nil {
		q = s.pool
	}
	byStream, err := eventstore.ReadStreamsOf(ctx, q, jobStreams(ids))
	if err != nil {
		return nil, err
	}
	return foldAll(ids, byStream)
}

// queueLoadAll queues in b the reads of the jobs of ids (in a transaction:
// generic), and answers what folds them once b is sent.
func queueLoadAll(b *pgx.Batch, ids []string, generic bool) func() (map[string]*Loaded, error) {
	byStream := eventstore.QueueReadStreams(b, jobStreams(ids), generic)
	return func() (map[string]*Loaded, error) { return foldAll(ids, byStream) }
}

// jobStreams are the streams of the jobs of ids.
func jobStreams(ids []string) []string {
	streams := make([]string, len(ids))
	for i, id := range ids {
		streams[i] = domain.JobStream(id)
	}
	return streams
}

// foldAll folds the jobs of ids from their streams' records; a job with
// none is absent.
func foldAll(ids []string, byStream map[string][]eventstore.Record) (map[string]*Loaded, error) {
	out := make(map[string]*Loaded, len(ids))
	for _, id := range ids {
		if recs := byStream[domain.JobStream(id)]; len(recs) > 0 && out[id] == nil {
			l, err := fold(id, recs)
			if err != nil {
				return nil, err
			}
			out[id] = l
		}
	}
	return out, nil
}

// fold folds job id's records, as stored.
func fold(id string, recs []eventstore.Record) (*Loaded, error) {
	l := &Loaded{Records: recs, TraceID: recs[0].Metadata.TraceID, SubmittedAt: recs[0].RecordedAt}
	for _, r := range recs {
		if err := l.Apply(r.Event()); err != nil {
			return nil, fmt.Errorf("fold job %s: %w", id, err)
		}
		if r.Type != domain.EventCallbackSent && r.Type != domain.EventCallbackFailed {
			l.UpdatedAt = r.RecordedAt
		}
		if r.Type == domain.EventRouted || (r.Type == domain.EventDelivered && l.Claimed) {
			l.RoutedAt = r.RecordedAt // a pull agent's attempt runs from its claim
		}
		if l.Status.Terminal() && l.FinishedAt.IsZero() {
			l.FinishedAt = r.RecordedAt
		}
	}
	return l, nil
}

// The folds kept (Keep) are bounded in number and in the bytes of their
// payloads and results; past either, the oldest go first.
const (
	keptMax   = 4096
	keptBytes = 16 << 20
)

// keptFolds are folds of jobs this process just wrote and expects to be
// asked for soon, by job id, and in a ring, oldest first (a fold handed
// out or kept again stays in the ring, no longer in byID).
type keptFolds struct {
	mu          sync.Mutex
	byID        map[string]*Loaded
	ring        [keptMax]*Loaded
	head, count int
	bytes       int
}

// keptSize is what a kept fold counts against keptBytes.
func keptSize(l *Loaded) int { return len(l.Payload) + len(l.Result) + 512 }

// Keep keeps l, a fold this process committed, without its records, for
// the one Kept that asks for it next: a pull agent's claimed job, whose
// result usually comes to the process that handed it out. A kept fold
// saves a read, never a check: a write decided on it appends at its
// version, and a concurrent write by another process since makes that a
// conflict (the writer reloads and decides again).
func (s *Store) Keep(l *Loaded) {
	size := keptSize(l)
	if size > keptBytes/64 {
		return // a large payload: read again rather than held
	}
	l.Records = nil
	k := &s.kept
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.byID == nil {
		k.byID = make(map[string]*Loaded, keptMax)
	}
	k.forget(k.byID[l.JobID])
	if k.count == keptMax {
		k.drop()
	}
	k.ring[(k.head+k.count)%keptMax] = l
	k.count++
	k.byID[l.JobID] = l
	k.bytes += size
	for k.bytes > keptBytes {
		k.drop()
	}
}

// Kept hands out the fold of job id that Keep kept, once (nil: none).
func (s *Store) Kept(id string) *Loaded {
	k := &s.kept
	k.mu.Lock()
	defer k.mu.Unlock()
	l := k.byID[id]
	k.forget(l)
	return l
}

// forget takes l (nil: none) out of byID.
func (k *keptFolds) forget(l *Loaded) {
	if l != nil && k.byID[l.JobID] == l {
		delete(k.byID, l.JobID)
		k.bytes -= keptSize(l)
	}
}

// drop takes the oldest fold out of the ring.
func (k *keptFolds) drop() {
	k.forget(k.ring[k.head])
	k.ring[k.head] = nil
	k.head = (k.head + 1) % keptMax
	k.count--
}

// ApplyNew folds e, the next event of l's stream appended at at, and
// keeps its record, as Load would read it.
func (l *Loaded) ApplyNew(stream string, e domain.Event, at time.Time) error {
	if err := l.Apply(e); err != nil {
		return err
	}
	l.Records = append(l.Records, eventstore.Record{StreamID: stream, Version: len(l.Records) + 1, Type: e.Type, Data: e.Data,
		Metadata: e.Metadata, RecordedAt: at})
	return nil
}
