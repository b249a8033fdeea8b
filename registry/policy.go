package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qLoadRoutingPolicies = queries.Must("LoadRoutingPolicies")
	qLockRoutingPolicy   = queries.Must("LockRoutingPolicy")
	qUpsertRoutingPolicy = queries.Must("UpsertRoutingPolicy")
	qRoutingPolicyOf     = queries.Must("RoutingPolicyOf")
)

// configPolicy is the policy of a namespace that has none of its own: the
// process's configuration (the compiled-in defaults unless tuned), version 0.
func (r *Registry) configPolicy() domain.RoutingPolicy {
	p := domain.DefaultRoutingPolicy()
	if r.cfg.Route != (domain.RouteConfig{}) {
		c := r.cfg.Route
		p.ExactCapability, p.AliasHit, p.HintSimilarityMax, p.WeightMax, p.LoadMax = c.ExactMatch, c.AliasHit, c.TrigramMax, c.WeightMax, c.LoadMax
		p.FailurePenalty, p.FailureThreshold, p.FailureMinAttempts, p.SuspectPenalty = c.FailurePenalty, c.FailureThreshold, c.MinAttemptsForFailure, c.SuspectPenalty
	}
	b := r.cfg.Breaker
	if b.ErrorRate > 0 {
		p.BreakerErrorRate = b.ErrorRate
	}
	if b.Window > 0 {
		p.BreakerWindowS = int(b.Window.Seconds())
	}
	if b.MinAttempts > 0 {
		p.BreakerMinAttempts = b.MinAttempts
	}
	if b.CoolDown > 0 {
		p.BreakerCoolDownS = int(b.CoolDown.Seconds())
	}
	return p
}

// RoutingPolicy answers the namespace's current routing policy, from the
// database.
func (r *Registry) RoutingPolicy(ctx context.Context, ns string) (domain.RoutingPolicy, error) {
	return r.readPolicy(r.pool.QueryRow(ctx, qRoutingPolicyOf, ns))
}

func (r *Registry) readPolicy(row pgx.Row) (domain.RoutingPolicy, error) {
	var raw []byte
	err := row.Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return r.configPolicy(), nil
	}
	var p domain.RoutingPolicy
	if err == nil {
		err = json.Unmarshal(raw, &p)
	}
	if err != nil {
		return p, fmt.Errorf("routing policy: %w", err)
	}
	return p, nil
}

// SetRoutingPolicy makes p the namespace's routing policy, as its next
// version: checked (a *FieldError), recorded as ROUTING_POLICY_CHANGED with
// the policy before and after, and applied by every process at its next
// snapshot (a NOTIFY makes that at once; at worst within a second).
func (r *Registry) SetRoutingPolicy(ctx context.Context, ns string, p domain.RoutingPolicy, md domain.Metadata) (domain.RoutingPolicy, error) {
	if err := p.Validate(); err != nil {
		return p, err
	}
	err := r.store.InTx(ctx, func(tx pgx.Tx) error {
		prev, err := r.readPolicy(tx.QueryRow(ctx, qLockRoutingPolicy, ns))
		if err != nil {
			return err
		}
		p.Version = prev.Version + 1
		if _, err := r.store.AppendTx(ctx, tx, "policy:routing:"+ns, eventstore.Any, domain.NewEvent(domain.EventRoutingPolicyChanged,
			domain.RoutingPolicyChanged{Namespace: ns, From: prev, To: p}, md)); err != nil {
			return err
		}
		raw, _ := json.Marshal(p)
		_, err = tx.Exec(ctx, qUpsertRoutingPolicy, ns, p.Version, raw)
		return err
	})
	if err != nil {
		return p, err
	}
	r.changed(ctx)
	return p, nil
}

// loadPolicies reads every namespace's own routing policy.
func (s *Snapshot) loadPolicies(ctx context.Context) (map[string]domain.RoutingPolicy, error) {
	rows, err := s.r.pool.Query(ctx, qLoadRoutingPolicies)
	if err != nil {
		return nil, err
	}
	out := map[string]domain.RoutingPolicy{}
	var ns string
	var raw []byte
	_, err = pgx.ForEachRow(rows, []any{&ns, &raw}, func() error {
		var p domain.RoutingPolicy
		if err := json.Unmarshal(raw, &p); err != nil {
			return fmt.Errorf("routing policy of %s: %w", ns, err)
		}
		out[ns] = p
		return nil
	})
	return out, err
}

// Policy is namespace ns's routing policy as of the snapshot: its own, or
// the configured one (version 0).
func (s *Snapshot) Policy(ns string) domain.RoutingPolicy {
	s.mu.RLock()
	p, ok := s.policies[ns]
	s.mu.RUnlock()
	if ok {
		return p
	}
	return s.r.configPolicy()
}
