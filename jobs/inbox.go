package jobs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"

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
	qClaimInbox   = queries.Must("ClaimInbox")
	qInboxDepths  = queries.Must("InboxDepths")
	errNotInInbox = errors.New("the attempt no longer waits in the inbox")
)

// claimPoll is the fallback poll of a waiting claim.
const claimPoll = time.Second

// inbox wakes this process's waiting claims.
type inbox struct {
	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{} // by agent key
}

// wait registers a claim of agent k; the channel gets a signal when its
// inbox may have something. stop ends it.
func (b *inbox) wait(k domain.AgentKey) (<-chan struct{}, func()) {
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
func (b *inbox) wake(key string) {
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

// RunInbox listens for attempts put in pull agents' inboxes, by any
// process, and wakes this process's claims, until ctx ends.
func (s *Service) RunInbox(ctx context.Context) {
	eventstore.ListenPayloads(ctx, s.pool, jobstore.InboxChannel, s.logger, s.inbox.wake)
}

// toInbox puts the attempt in pull agent's inbox: in one write (shared
// with concurrent ones, write.go) it takes one of the agent's slots
// (jobstore.ErrNoSlot when none is free), appends ROUTED with the inbox timer and
// announces it to the agent's claims at commit; River's batched completer
// completes the River job once Work returns (a rerun finds the attempt
// routed and does nothing). Nothing is sent: the agent's claim delivers
// it.
func (s *Service) toInbox(ctx context.Context, l *jobstore.Loaded, agent *registry.Agent, routed domain.Event) error {
	key := domain.AgentKey{Namespace: l.Namespace, ID: agent.AgentID}
	attempt := l.Attempts + 1
	return s.jobs.Write(ctx, &jobstore.Write{L: l, Events: []domain.Event{routed}, Notify: key.String(),
		Effects: domain.Effects{Timer: domain.InboxTimer(attempt, key.Namespace, key.ID, s.now().UTC(), s.cfg.ClaimTimeout)},
		Slot:    &jobstore.Slot{Agent: key, MaxConcurrent: agent.MaxConcurrent, Attempt: attempt}})
}

// Claim answers up to max deliveries from pull agent a's inbox, waiting up
// to wait for the first (woken by jobstore.InboxChannel, looking again every
// second). Each claimed attempt is DELIVERED at the claim, with a deadline
// from now. No delivery is ever claimed twice: the inbox rows are taken
// FOR UPDATE SKIP LOCKED and DELIVERED is appended at the job's version.
// An empty answer means nothing came (or the caller went away).
func (s *Service) Claim(ctx context.Context, a *registry.Agent, max int, wait time.Duration) ([]webhook.Envelope, error) {
	wake, stop := s.inbox.wait(a.Key())
	defer stop()
	until := time.Now().Add(wait)
	for {
		out, err := s.claimOnce(ctx, a, max)
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

// claimOnce claims what waits in a's inbox now, in one transaction; a job
// that moved on meanwhile (a cancel, a re-route) is skipped.
func (s *Service) claimOnce(ctx context.Context, a *registry.Agent, max int) ([]webhook.Envelope, error) {
	var out []webhook.Envelope
	err := s.store.InTx(ctx, func(tx pgx.Tx) error {
		out = out[:0]
		rows, err := tx.Query(ctx, qClaimInbox, a.Namespace, a.AgentID, max)
		if err != nil {
			return fmt.Errorf("claim inbox of agent %s: %w", a.Key(), err)
		}
		type entry struct {
			id      string
			attempt int
		}
		entries, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (entry, error) {
			var e entry
			return e, r.Scan(&e.id, &e.attempt)
		})
		if err != nil {
			return fmt.Errorf("claim inbox of agent %s: %w", a.Key(), err)
		}
		for _, e := range entries {
			env, err := s.claimTx(ctx, tx, a, e.id, e.attempt)
			if errors.Is(err, errNotInInbox) {
				continue
			}
			if err != nil {
				return err
			}
			out = append(out, env)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for range out {
		s.metrics.deliveries.Add(ctx, 1, withAttrs(attribute.String("outcome", string(domain.ObservedAccepted)),
			attribute.String("reason", "claimed")))
	}
	return out, nil
}

// claimTx delivers one attempt of a's inbox, in a savepoint of tx so a job
// that moved on (errNotInInbox, or a conflict with a concurrent writer)
// leaves the others claimed.
func (s *Service) claimTx(ctx context.Context, tx pgx.Tx, a *registry.Agent, id string, attempt int) (webhook.Envelope, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return webhook.Envelope{}, err
	}
	defer func() { _ = sp.Rollback(ctx) }()
	l, err := s.Load(ctx, sp, id)
	if err != nil {
		return webhook.Envelope{}, err
	}
	md := domain.Metadata{TraceID: l.TraceID, Actor: "agent:" + a.AgentID}
	evs, fx, deadline, ok := domain.Claim(&l.Job, attempt, a.AgentID, l.RoutedAt, s.now().UTC(), md)
	if !ok {
		return webhook.Envelope{}, errNotInInbox
	}
	if err := s.jobs.AppendTx(ctx, sp, l, fx, evs...); err != nil {
		if errors.Is(err, eventstore.ErrConflict) {
			return webhook.Envelope{}, errNotInInbox
		}
		return webhook.Envelope{}, err
	}
	if err := sp.Commit(ctx); err != nil {
		return webhook.Envelope{}, err
	}
	return webhook.Envelope{JobID: l.JobID, TraceID: l.TraceID, Capability: l.Capability, Payload: l.Payload, Attempt: attempt,
		Deadline: deadline, ResultURL: s.resultURL(l.JobID)}, nil
}

// resultURL is where an agent posts the result of job id.
func (s *Service) resultURL(id string) string { return s.cfg.PublicURL + "/v1/jobs/" + id + "/result" }

// Release gives back what pull agent a holds (domain.Release): the listed
// attempts, unstarted (errText empty: routed again at once, no attempt
// spent) or failed (errText set: retried after backoff); with none listed,
// everything still waiting in its inbox. It answers what was given back;
// an attempt that is not the agent's, or moved on, is left alone.
func (s *Service) Release(ctx context.Context, a *registry.Agent, held []domain.HeldAttempt, errText string) ([]domain.HeldAttempt, error) {
	if len(held) == 0 {
		var err error
		if held, err = s.inboxOf(ctx, a); err != nil {
			return nil, err
		}
		errText = ""
	}
	out := []domain.HeldAttempt{}
	for _, h := range held {
		ok, err := s.release(ctx, a, h, errText)
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
func (s *Service) inboxOf(ctx context.Context, a *registry.Agent) ([]domain.HeldAttempt, error) {
	var held []domain.HeldAttempt
	err := s.store.InTx(ctx, func(tx pgx.Tx) error {
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

func (s *Service) release(ctx context.Context, a *registry.Agent, h domain.HeldAttempt, errText string) (bool, error) {
	released := false
	err := s.retryConflict(ctx, func(tx pgx.Tx) error {
		released = false
		l, err := s.Load(ctx, tx, h.JobID)
		if errors.Is(err, domain.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		md := domain.Metadata{TraceID: l.TraceID, Actor: "agent:" + a.AgentID}
		evs, fx, ok := domain.Release(&l.Job, h.Attempt, a.AgentID, errText, s.now().UTC(), s.jitter(), md)
		if !ok || l.Namespace != a.Namespace {
			return nil
		}
		released = true
		return s.jobs.AppendTx(ctx, tx, l, fx, evs...)
	})
	return released, err
}

// InboxDepths counts what waits in every pull agent's inbox.
func (s *Service) InboxDepths(ctx context.Context) (map[domain.AgentKey]int, error) {
	rows, err := s.pool.Query(ctx, qInboxDepths)
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
func (s *Service) CancelledOf(ctx context.Context, k domain.AgentKey, since time.Time) ([]domain.HeldAttempt, error) {
	rows, err := s.pool.Query(ctx, qCancelledOfAgent, k.Namespace, k.ID, since)
	if err != nil {
		return nil, fmt.Errorf("cancelled jobs of agent %s: %w", k, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.HeldAttempt, error) {
		var h domain.HeldAttempt
		return h, r.Scan(&h.JobID, &h.Attempt)
	})
}
