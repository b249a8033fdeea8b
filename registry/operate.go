package registry

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/sql/queries"
)

var qSetAgentSettings = queries.Must("SetAgentSettings")

// ErrNotNow: the agent's state does not allow the operator's action (an
// OFFLINE agent brought up, say).
var ErrNotNow = domain.NewError(domain.ErrConflict, "the agent's state does not allow this")

// Operate applies an operator's action (domain.SignalDrain,
// SignalConfirmDown, SignalUp) to an agent, recorded as its
// AGENT_STATE_CHANGED with the actor (md) and reason. An action its state
// refuses is ErrNotNow; one that changes nothing records nothing.
func (r *Registry) Operate(ctx context.Context, k domain.AgentKey, sig domain.AgentSignal, reason string, md domain.Metadata) (*Agent, error) {
	return r.applySignal(ctx, k, "", sig, reason, md, true)
}

// Update changes a running agent's settings (weight, rollout_percent,
// max_concurrent, aliases, context, metadata) without a restart: checked
// as a registration is, recorded as AGENT_UPDATED with the old and new
// values, applied by every process's router at its next snapshot. A patch
// that changes nothing records nothing.
func (r *Registry) Update(ctx context.Context, k domain.AgentKey, p domain.AgentPatch, md domain.Metadata) (*Agent, error) {
	var out *Agent
	changed := false
	err := r.store.InTx(ctx, func(tx pgx.Tx) error {
		a, err := r.load(ctx, tx, k, true)
		if err != nil {
			return err
		}
		if a.Deregistered {
			return noAgent(k)
		}
		out = a
		next, u, err := domain.ApplyPatch(a.AgentRegistration, p)
		if err != nil || len(u.Fields) == 0 {
			return err
		}
		recs, err := r.store.AppendTx(ctx, tx, domain.AgentStream(k), a.StreamVersion, domain.NewEvent(domain.EventAgentUpdated, u, md))
		if err != nil {
			return err
		}
		ctxJSON, _ := json.Marshal(orEmpty(next.Context))
		mdJSON, _ := json.Marshal(orEmpty(next.Metadata))
		aliases := next.Aliases
		if aliases == nil {
			aliases = []string{}
		}
		if _, err := tx.Exec(ctx, qSetAgentSettings, k.Namespace, k.ID, next.Weight, next.RolloutPercent, next.MaxConcurrent,
			aliases, ctxJSON, mdJSON, recs[0].Version); err != nil {
			return fmt.Errorf("update agent %s: %w", k, err)
		}
		b := *a
		b.AgentRegistration, b.StreamVersion = next, recs[0].Version
		out, changed = &b, true
		return nil
	})
	if changed {
		r.changed(ctx)
	}
	return out, err
}

// ErrNotPull: a claim or release from an agent that is not in pull mode.
var ErrNotPull error = &domain.KindError{Kind: domain.ErrConflict, Code: "not_pull",
	Message: "the agent is a push agent: it is delivered to, it does not claim (register with mode pull)"}

// PullAgent authenticates a pull agent's claim or release by its token: a
// push agent is ErrNotPull, an OFFLINE one ErrGone (register again),
// unless an operator's drain holds it: its claims are answered (with
// nothing) so that it does not register again and again while held.
func (r *Registry) PullAgent(ctx context.Context, id, token string) (*Agent, error) {
	a, err := r.Authenticate(ctx, id, token)
	switch {
	case err != nil:
		return nil, err
	case !a.Pull():
		return nil, fmt.Errorf("agent %s: %w", id, ErrNotPull)
	case a.Gone():
		return nil, fmt.Errorf("agent %s: %w", id, ErrGone)
	}
	return a, nil
}

// Claimed records that pull agent a claims: a claim renews its lease as
// a heartbeat does (buffered: an agent that claims is alive, and what it
// holds stays its own), and its first claim since it (re)registered proves
// it can serve, as a probe does, and makes it HEALTHY.
func (r *Registry) Claimed(ctx context.Context, a *Agent, md domain.Metadata) (*Agent, error) {
	r.heartbeats.add(a.Key(), r.now().UTC(), domain.HealthReport{})
	if a.State != domain.AgentProbing || a.ProbeOK {
		return a, nil
	}
	return r.signal(ctx, a.Key(), a.InstanceID, domain.SignalClaimed, "first claim", md)
}
