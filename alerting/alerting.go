// Package alerting keeps a namespace's alert webhooks (GET/PUT
// /v1/policies/alerts): the operator URLs its alerts are sent to. Sending
// is River's work, in alerting/alertwork.
package alerting

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/netguard"
	"github.com/agentreach/agentreach/registry"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qAlertPolicyOf    = queries.Must("AlertPolicyOf")
	qLockAlertPolicy  = queries.Must("LockAlertPolicy")
	qUpsertAlertPolic = queries.Must("UpsertAlertPolicy")
	qAlertPoliciesOf  = queries.Must("AlertPoliciesOf")
)

// Service keeps alert policies.
type Service struct {
	pool  *pgxpool.Pool
	store *eventstore.Store
	guard *netguard.Policy
}

// New returns a Service whose webhook URLs guard checks (nil: the
// default policy).
func New(pool *pgxpool.Pool, store *eventstore.Store, guard *netguard.Policy) *Service {
	if guard == nil {
		p := netguard.DefaultPolicy()
		guard = &p
	}
	return &Service{pool: pool, store: store, guard: guard}
}

// PoliciesOf answers the alert policies with webhooks of the namespaces
// named, read in tx.
func PoliciesOf(ctx context.Context, tx pgx.Tx, namespaces []string) (map[string]domain.AlertPolicy, error) {
	rows, err := tx.Query(ctx, qAlertPoliciesOf, namespaces)
	if err != nil {
		return nil, err
	}
	policies := map[string]domain.AlertPolicy{}
	var ns string
	var p domain.AlertPolicy
	_, err = pgx.ForEachRow(rows, []any{&ns, &p}, func() error { policies[ns] = p; return nil })
	return policies, err
}

// Policy answers namespace ns's alert policy (version 0, no webhooks, when
// it has none), routing keys included: callers that show it use Shown.
func (s *Service) Policy(ctx context.Context, ns string) (domain.AlertPolicy, error) {
	return readPolicy(s.pool.QueryRow(ctx, qAlertPolicyOf, ns))
}

func readPolicy(row pgx.Row) (domain.AlertPolicy, error) {
	var p domain.AlertPolicy
	err := row.Scan(&p)
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.AlertPolicy{Webhooks: []domain.AlertWebhook{}}, nil
	}
	if err != nil {
		return p, fmt.Errorf("alert policy: %w", err)
	}
	return p, nil
}

// SetPolicy makes p namespace ns's alert policy, as its next version:
// normalized against the current one (a pagerduty webhook named again
// without its routing key keeps it), checked (a *domain.FieldError, or the
// guard's refusal of a URL), and recorded as ALERT_POLICY_CHANGED.
func (s *Service) SetPolicy(ctx context.Context, ns string, p domain.AlertPolicy, md domain.Metadata) (domain.AlertPolicy, error) {
	var out domain.AlertPolicy
	err := s.store.InTx(ctx, func(tx pgx.Tx) error {
		prev, err := readPolicy(tx.QueryRow(ctx, qLockAlertPolicy, ns))
		if err != nil {
			return err
		}
		out = p.Normalize(prev)
		if err := out.Validate(); err != nil {
			return err
		}
		urls := map[string]string{}
		for i, w := range out.Webhooks {
			urls[fmt.Sprintf("webhooks[%d].url", i)] = w.URL
		}
		if err := registry.CheckURLs(ctx, s.guard, urls); err != nil {
			return err
		}
		out.Version = prev.Version + 1
		if _, err := s.store.AppendTx(ctx, tx, "policy:alerts:"+ns, eventstore.Any, domain.NewEvent(domain.EventAlertPolicyChanged,
			domain.AlertPolicyChanged{Namespace: ns, From: prev.Shown(), To: out.Shown()}, md)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, qUpsertAlertPolic, ns, out.Version, out)
		return err
	})
	return out, err
}
