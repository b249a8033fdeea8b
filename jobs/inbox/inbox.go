// Package inbox is the pull agents' room: an attempt routed to a pull
// agent waits in its inbox (Put) until the agent claims it (Claim) or
// gives it back (Release).
package inbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/jobs/jobstore"
	"github.com/agentreach/agentreach/registry"
	"github.com/agentreach/agentreach/sql/queries"
	"github.com/agentreach/agentreach/webhook"
)

// Pull agents. The router chooses a pull agent as it chooses any agent;
// the attempt then waits in that agent's inbox (its job's timer in phase
// inbox, due at the claim timeout) and the agent's claim delivers it. An
// attempt not claimed in time is routed again (domain.DueTimer, reason
// not_claimed). Each process LISTENs on jobstore.InboxChannel and wakes the claims
// it holds of the agent a notification names; a claim also looks again
// every second, so a lost notification only delays it.

var (
	qClaimInbox  = queries.Must("ClaimInbox")
	qInboxDepths = queries.Must("InboxDepths")
)

// claimPoll is the fallback poll of a waiting claim.
const claimPoll = time.Second

// Config tunes an Inbox.
type Config struct {
	// ClaimTimeout is how long an attempt waits in an inbox before it is
	// routed again, spending no attempt.
	ClaimTimeout time.Duration
	// ResultURL is where an agent posts the result of a job.
	ResultURL func(jobID string) string
	// Now is the clock; Jitter the source of backoff jitter, in [0, 1).
	Now    func() time.Time
	Jitter func() float64
	// Claimed, if set, is told of every attempt a claim delivered.
	Claimed func(ctx context.Context)
	// Waiters, if set, is told when a commit woke an attempt waiting for
	// a slot (jobstore.WakeWaiters on the same channel), and when the
	// listener (re)connects: something may have been missed.
	Waiters func()
}

// Inbox holds the pull agents' inboxes, and wakes this process's waiting
// claims.
type Inbox struct {
	pool   *pgxpool.Pool
	events *eventstore.Store
	jobs   *jobstore.Store
	logger *slog.Logger
	cfg    Config

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{} // by agent key
}

// New returns the inboxes of pool's database.
func New(pool *pgxpool.Pool, events *eventstore.Store, jobs *jobstore.Store, logger *slog.Logger, cfg Config) *Inbox {
	return &Inbox{pool: pool, events: events, jobs: jobs, logger: logger, cfg: cfg}
}

// wait registers a claim of agent k; the channel gets a signal when its
// inbox may have something. stop ends it.
func (b *Inbox) wait(k domain.AgentKey) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	key := k.String()
	b.mu.Lock()
	if b.waiters == nil {
		b.waiters = map[string]map[chan struct{}]struct{}{}
	}
	if b.waiters[key] == nil {
		b.waiters[key] = map[chan struct{}]struct{}{}
	}
	b.waiters[key][ch] = struct{}{}
	b.mu.Unlock()
	return ch, func() {
		b.mu.Lock()
		delete(b.waiters[key], ch)
		if len(b.waiters[key]) == 0 {
			delete(b.waiters, key)
		}
		b.mu.Unlock()
	}
}

// wake signals the claims of the agent named by key ("" wakes all).
func (b *Inbox) wake(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, set := range b.waiters {
		if key != "" && k != key {
			continue
		}
		for ch := range set {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// Run listens for attempts put in pull agents' inboxes, by any process,
// and wakes this process's claims, until ctx ends. The same channel wakes
// the attempts waiting for a slot (Config.Waiters): one listening
// connection a process serves both.
func (b *Inbox) Run(ctx context.Context) {
	eventstore.ListenPayloads(ctx, b.pool, jobstore.InboxChannel, b.logger, func(payload string) {
		if payload == jobstore.WakeWaiters || payload == "" {
			if b.cfg.Waiters != nil {
				b.cfg.Waiters()
			}
			if payload != "" {
				return
			}
		}
		b.wake(payload)
	})
}

// Put puts the attempt in pull agent's inbox: in one write (shared
// with concurrent ones, write.go) it takes one of the agent's slots
// (jobstore.ErrNoSlot when none is free), appends ROUTED with the inbox timer and
// announces it to the agent's claims at commit; River's batched completer
// completes the River job once Work returns (a rerun finds the attempt
// routed and does nothing). Nothing is sent: the agent's claim delivers
// it.
func (b *Inbox) Put(ctx context.Context, l *jobstore.Loaded, agent *registry.Agent, routed domain.Event, rank time.Time) error {
	return b.jobs.Write(ctx, b.PutWrite(l, agent, routed, rank))
}

// PutWrite is Put's write, for a transaction of the caller's.
func (b *Inbox) PutWrite(l *jobstore.Loaded, agent *registry.Agent, routed domain.Event, rank time.Time) *jobstore.Write {
	key := domain.AgentKey{Namespace: l.Namespace, ID: agent.AgentID}
	attempt := l.Attempts + 1
	return &jobstore.Write{L: l, Events: []domain.Event{routed}, Notify: key.String(),
		Effects: domain.Effects{Timer: domain.InboxTimer(attempt, key.Namespace, key.ID, b.cfg.Now().UTC(), b.cfg.ClaimTimeout)},
		Slot:    &jobstore.Slot{Agent: key, MaxConcurrent: agent.MaxConcurrent, Attempt: attempt, Rank: rank}}
}

// Claim answers up to max deliveries from pull agent a's inbox, waiting up
// to wait for the first (woken by jobstore.InboxChannel, looking again every
// second). Each claimed attempt is DELIVERED at the claim, with a deadline
// from now. No delivery is ever claimed twice: the inbox rows are taken
// FOR UPDATE SKIP LOCKED and DELIVERED is appended at the job's version.
// An empty answer means nothing came (or the caller went away).
func (b *Inbox) Claim(ctx context.Context, a *registry.Agent, max int, wait time.Duration) ([]webhook.Envelope, error) {
	wake, stop := b.wait(a.Key())
	defer stop()
	until := time.Now().Add(wait)
	for {
		out, err := b.claimOnce(ctx, a, max)
		if err != nil || len(out) > 0 {
			return out, err
		}
		left := time.Until(until)
		if left <= 0 {
			return []webhook.Envelope{}, nil
		}
		t := time.NewTimer(min(left, claimPoll))
		select {
		case <-ctx.Done():
			t.Stop()
			return []webhook.Envelope{}, nil
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// claimOnce claims what waits in a's inbox now, in one transaction whose
// BEGIN goes with the take of the inbox rows, in one round trip (an empty
// inbox ends it there); a job that moved on meanwhile (a cancel, a
// re-route) is skipped.
func (b *Inbox) claimOnce(ctx context.Context, a *registry.Agent, max int) ([]webhook.Envelope, error) {
	var entries []entry
	batch := &pgx.Batch{}
	batch.BeginTx(pgx.TxOptions{})
	batch.Queue(qClaimInbox, a.Namespace, a.AgentID, max).Query(func(rows pgx.Rows) error {
		var err error
		entries, err = collectEntries(rows)
		return err
	})
	br := b.pool.SendBatch(ctx, batch)
	err := br.Close()
	if tx := br.Tx(); tx != nil {
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // after a commit: nothing to do
	}
	if err != nil {
		return nil, fmt.Errorf("claim inbox of agent %s: %w", a.Key(), err)
	}
	if len(entries) == 0 {
		return []webhook.Envelope{}, nil
	}
	tx := br.Tx()
	out, folds, err := b.claimEntries(ctx, tx, a, entries)
	if err != nil {
		return nil, err
	}
	if err := b.events.Commit(ctx, tx); err != nil {
		return nil, err
	}
	b.Claimed(ctx, folds)
	return out, nil
}

// entry is an attempt waiting in an inbox, its row taken by a claim.
type entry struct {
	id      string
	attempt int
}

// collectEntries reads the rows of qClaimInbox.
func collectEntries(rows pgx.Rows) ([]entry, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (entry, error) {
		var e entry
		return e, r.Scan(&e.id, &e.attempt)
	})
}

// ClaimIn claims up to max deliveries of a's inbox in tx, as a claim
// does: they are a's once tx commits, and the caller then hands their
// jobs' folds, answered beside them, to Claimed. A job that moved on
// meanwhile is skipped.
func (b *Inbox) ClaimIn(ctx context.Context, tx pgx.Tx, a *registry.Agent, max int) ([]webhook.Envelope, []*jobstore.Loaded, error) {
	rows, err := tx.Query(ctx, qClaimInbox, a.Namespace, a.AgentID, max)
	if err != nil {
		return nil, nil, fmt.Errorf("claim inbox of agent %s: %w", a.Key(), err)
	}
	entries, err := collectEntries(rows)
	if err != nil {
		return nil, nil, fmt.Errorf("claim inbox of agent %s: %w", a.Key(), err)
	}
	if len(entries) == 0 {
		return []webhook.Envelope{}, nil, nil
	}
	return b.claimEntries(ctx, tx, a, entries)
}

// claimEntries claims in tx the attempts of a's inbox whose rows tx took
// (ClaimIn).
func (b *Inbox) claimEntries(ctx context.Context, tx pgx.Tx, a *registry.Agent, entries []entry) ([]webhook.Envelope, []*jobstore.Loaded, error) {
	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = e.id
	}
	loaded, err := b.jobs.LoadAll(ctx, tx, ids)
	if err != nil {
		return nil, nil, fmt.Errorf("claim inbox of agent %s: %w", a.Key(), err)
	}
	now := b.cfg.Now().UTC()
	type claimed struct {
		w        *jobstore.Write
		attempt  int
		deadline time.Time
	}
	var claims []claimed
	var ws []*jobstore.Write
	for _, e := range entries {
		l := loaded[e.id]
		if l == nil {
			continue
		}
		md := domain.Metadata{TraceID: l.TraceID, Actor: "agent:" + a.AgentID}
		evs, fx, deadline, ok := domain.Claim(&l.Job, e.attempt, a.AgentID, l.RoutedAt, now, md)
		if !ok {
			continue // the job moved on meanwhile
		}
		w := &jobstore.Write{L: l, Events: evs, Effects: fx}
		claims = append(claims, claimed{w: w, attempt: e.attempt, deadline: deadline})
		ws = append(ws, w)
	}
	if err := b.jobs.AppendAllTx(ctx, tx, ws); err != nil {
		return nil, nil, fmt.Errorf("claim inbox of agent %s: %w", a.Key(), err)
	}
	out := make([]webhook.Envelope, 0, len(claims))
	folds := make([]*jobstore.Loaded, 0, len(claims))
	for _, c := range claims {
		if errors.Is(c.w.Err, eventstore.ErrConflict) {
			continue // a concurrent writer came first
		}
		if c.w.Err != nil {
			return nil, nil, fmt.Errorf("claim job %s: %w", c.w.L.JobID, c.w.Err)
		}
		l := c.w.L
		out = append(out, b.envelope(l, c.attempt, c.deadline))
		l.RoutedAt, l.UpdatedAt = now, now // the claim's, as a reload reads them within the transaction's time
		folds = append(folds, l)
	}
	return out, folds, nil
}

// ClaimRouted claims for a, in the write r that routes it, the attempt r
// puts in a's inbox (a waiter one of a's slots woke, routed in the
// transaction that gave the slot back: jobstore.Write.TakeRouted): r then
// appends DELIVERED after ROUTED, with the delivered timer in place of
// the inbox timer and no notification, as a claim would have a moment
// later. False when r is no such route.
func (b *Inbox) ClaimRouted(r *jobstore.Write, a *registry.Agent) bool {
	if r.Notify != a.Key().String() || r.Decide() != nil {
		return false
	}
	now := b.cfg.Now().UTC()
	md := domain.Metadata{TraceID: r.L.TraceID, Actor: "agent:" + a.AgentID}
	evs, fx, _, ok := domain.Claim(&r.After, r.After.Attempts, a.AgentID, now, now, md)
	if !ok {
		return false
	}
	r.Events = append(r.Events, evs...)
	r.Effects.Timer, r.Notify = fx.Timer, ""
	return true
}

// Delivery is the delivery of the attempt a committed write claimed
// (ClaimRouted), as a claim answers it, and the job's fold for Claimed.
func (b *Inbox) Delivery(r *jobstore.Write) (webhook.Envelope, *jobstore.Loaded) {
	return b.envelope(r.L, r.L.Attempts, r.Effects.Timer.Due), r.L
}

// envelope is the delivery of attempt of l, due by deadline, as a claim
// answers it.
func (b *Inbox) envelope(l *jobstore.Loaded, attempt int, deadline time.Time) webhook.Envelope {
	return webhook.Envelope{JobID: l.JobID, TraceID: l.TraceID, Capability: l.Capability, Payload: l.Payload,
		Attempt: attempt, Deadline: deadline, ResultURL: b.cfg.ResultURL(l.JobID)}
}

// Claimed tells Config.Claimed of the deliveries a committed claim
// handed out, and keeps their jobs' folds for the results that come next
// (jobstore.Store.Keep).
func (b *Inbox) Claimed(ctx context.Context, folds []*jobstore.Loaded) {
	for _, l := range folds {
		b.jobs.Keep(l)
		if b.cfg.Claimed != nil {
			b.cfg.Claimed(ctx)
		}
	}
}

// Release gives back what pull agent a holds (domain.Release): the listed
// attempts, unstarted (errText empty: routed again at once, no attempt
// spent) or failed (errText set: retried after backoff); with none listed,
// everything still waiting in its inbox. It answers what was given back;
// an attempt that is not the agent's, or moved on, is left alone.
func (b *Inbox) Release(ctx context.Context, a *registry.Agent, held []domain.HeldAttempt, errText string) ([]domain.HeldAttempt, error) {
	if len(held) == 0 {
		var err error
		if held, err = b.inboxOf(ctx, a); err != nil {
			return nil, err
		}
		errText = ""
	}
	out := []domain.HeldAttempt{}
	for _, h := range held {
		ok, err := b.release(ctx, a, h, errText)
		if err != nil {
			return out, err
		}
		if ok {
			out = append(out, h)
		}
	}
	return out, nil
}

// inboxOf lists what waits in a's inbox, oldest first.
func (b *Inbox) inboxOf(ctx context.Context, a *registry.Agent) ([]domain.HeldAttempt, error) {
	var held []domain.HeldAttempt
	err := b.events.InTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, qClaimInbox, a.Namespace, a.AgentID, 10_000)
		if err != nil {
			return err
		}
		held, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.HeldAttempt, error) {
			var h domain.HeldAttempt
			return h, r.Scan(&h.JobID, &h.Attempt)
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("inbox of agent %s: %w", a.Key(), err)
	}
	return held, nil
}

func (b *Inbox) release(ctx context.Context, a *registry.Agent, h domain.HeldAttempt, errText string) (bool, error) {
	released := false
	err := b.jobs.RetryTx(ctx, func(tx pgx.Tx) error {
		released = false
		l, err := b.jobs.Load(ctx, tx, h.JobID)
		if errors.Is(err, domain.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		md := domain.Metadata{TraceID: l.TraceID, Actor: "agent:" + a.AgentID}
		evs, fx, ok := domain.Release(&l.Job, h.Attempt, a.AgentID, errText, b.cfg.Now().UTC(), b.cfg.Jitter(), md)
		if !ok || l.Namespace != a.Namespace {
			return nil
		}
		released = true
		return b.jobs.AppendTx(ctx, tx, l, fx, evs...)
	})
	return released, err
}

// InboxDepths counts what waits in every pull agent's inbox.
func (b *Inbox) InboxDepths(ctx context.Context) (map[domain.AgentKey]int, error) {
	rows, err := b.pool.Query(ctx, qInboxDepths)
	if err != nil {
		return nil, fmt.Errorf("inbox depths: %w", err)
	}
	defer rows.Close()
	out := map[domain.AgentKey]int{}
	for rows.Next() {
		var k domain.AgentKey
		var n int
		if err := rows.Scan(&k.Namespace, &k.ID, &n); err != nil {
			return nil, err
		}
		out[k] = n
	}
	return out, rows.Err()
}

var qCancelledOfAgent = queries.Must("CancelledOfAgent")

// CancelledOf lists the latest attempts of agent k's jobs cancelled since
// since: a pull agent has no endpoint for a cancel notice, so its
// heartbeats carry them (from the jobs read model, a second or so behind).
func (b *Inbox) CancelledOf(ctx context.Context, k domain.AgentKey, since time.Time) ([]domain.HeldAttempt, error) {
	rows, err := b.pool.Query(ctx, qCancelledOfAgent, k.Namespace, k.ID, since)
	if err != nil {
		return nil, fmt.Errorf("cancelled jobs of agent %s: %w", k, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.HeldAttempt, error) {
		var h domain.HeldAttempt
		return h, r.Scan(&h.JobID, &h.Attempt)
	})
}
