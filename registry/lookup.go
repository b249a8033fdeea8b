package registry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/sql/queries"
)

// Lookup mode: a caller asks for the ranked candidates of a capability,
// calls the best itself with an invocation grant, and reports what came of
// it; the reports count in the agents' figures as brokered attempts do.

var (
	qRecordLookups       = queries.Must("RecordLookups")
	qLookedUp            = queries.Must("LookedUp")
	qRecordDirectSamples = queries.Must("RecordDirectSamples")
)

// Candidate is one agent a lookup offers, with the grant to call it.
type Candidate struct {
	AgentID         string            `json:"agent_id"`
	Namespace       string            `json:"namespace"`
	Endpoint        string            `json:"endpoint"`
	Protocol        string            `json:"protocol"`
	ProtocolVersion string            `json:"protocol_version"`
	Version         string            `json:"version"`
	Score           float64           `json:"score"`
	State           domain.AgentState `json:"state"`
	TTLMS           int64             `json:"ttl_ms"`
	Grant           string            `json:"grant"`
	GrantExpiresAt  time.Time         `json:"grant_expires_at"`
}

// Lookup ranks the candidates of req exactly as brokered routing does (the
// snapshot's Route) and answers the best limit of those that can be called
// directly (a pull agent cannot), each with a grant naming keyID. It
// remembers which agents keyID was given, so its reports can be checked.
func (r *Registry) Lookup(ctx context.Context, keyID string, req domain.RouteRequest, limit int) ([]Candidate, error) {
	now := r.now().UTC()
	res := r.snap.Route(req)
	out := []Candidate{}
	var ids []string
	for _, c := range res.Candidates {
		if len(out) == limit {
			break
		}
		a := r.snap.Agent(domain.AgentKey{Namespace: req.Namespace, ID: c.AgentID})
		if a == nil || a.Pull() || a.Endpoint == "" {
			continue
		}
		exp := now.Add(domain.GrantTTL)
		grant := domain.SignGrant(domain.Grant{Namespace: req.Namespace, Agent: a.AgentID, Capability: req.Capability, KeyID: keyID,
			IssuedAt: now.Unix(), Expires: exp.Unix()}, a.SigningKeys(now)...)
		out = append(out, Candidate{AgentID: a.AgentID, Namespace: a.Namespace, Endpoint: a.Endpoint, Protocol: a.Protocol,
			ProtocolVersion: a.ProtocolVersion, Version: a.Version, Score: c.Score, State: a.State,
			TTLMS: domain.LookupTTL.Milliseconds(), Grant: grant, GrantExpiresAt: time.Unix(exp.Unix(), 0).UTC()})
		ids = append(ids, a.AgentID)
	}
	if len(ids) > 0 {
		if _, err := r.pool.Exec(ctx, qRecordLookups, keyID, req.Namespace, ids, now); err != nil {
			return nil, fmt.Errorf("record lookup: %w", err)
		}
	}
	return out, nil
}

// Report records a caller's reports of its direct calls (checked by
// domain.DirectReport.Validate): each must name an agent keyID looked up
// in namespace ns within domain.ReportWindow, or nothing is written and the
// error names the first report at fault. In one transaction it appends
// DIRECT_REPORTED per agent and the breaker's samples.
func (r *Registry) Report(ctx context.Context, keyID, ns string, reports []domain.DirectReport, md domain.Metadata) error {
	now := r.now().UTC()
	byAgent := map[string][]domain.DirectReport{}
	var order []string
	for i := range reports {
		if err := reports[i].Validate(now); err != nil {
			var fe *domain.FieldError
			if !errors.As(err, &fe) {
				return err
			}
			return &domain.FieldError{Field: fmt.Sprintf("reports[%d].%s", i, fe.Field), Message: fe.Message}
		}
		id := reports[i].AgentID
		if byAgent[id] == nil {
			order = append(order, id)
		}
		byAgent[id] = append(byAgent[id], reports[i])
	}
	rows, err := r.pool.Query(ctx, qLookedUp, keyID, ns, order, now.Add(-domain.ReportWindow))
	if err != nil {
		return fmt.Errorf("check reports: %w", err)
	}
	known, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("check reports: %w", err)
	}
	for i, rep := range reports {
		if !slices.Contains(known, rep.AgentID) {
			return &domain.FieldError{Field: fmt.Sprintf("reports[%d].agent_id", i),
				Message: fmt.Sprintf("agent %s was not looked up with this key in namespace %s within %s", rep.AgentID, ns, domain.ReportWindow)}
		}
	}
	var ids []string
	var ats []time.Time
	var oks []bool
	for _, rep := range reports {
		smp := rep.ReportSample()
		ids, ats, oks = append(ids, smp.AgentID), append(ats, smp.At), append(oks, smp.OK)
	}
	return r.store.InTx(ctx, func(tx pgx.Tx) error {
		batch := uuid.Must(uuid.NewV7()).String()
		for _, id := range order {
			ev := domain.NewEvent(domain.EventDirectReported, domain.DirectReported{KeyID: keyID, Reports: byAgent[id]}, md)
			if _, err := r.store.AppendTx(ctx, tx, domain.DirectStream(domain.AgentKey{Namespace: ns, ID: id}, batch), eventstore.NoStream, ev); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, qRecordDirectSamples, ns, ids, ats, oks); err != nil {
			return fmt.Errorf("record direct samples: %w", err)
		}
		return nil
	})
}
