package jobs

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/auth"
	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/jobs/jobstore"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qApprovalPatternsOf        = queries.Must("ApprovalPatternsOf")
	qApprovalPolicyOfNamespace = queries.Must("ApprovalPolicyOfNamespace")
	qDeleteApprovalPolicy      = queries.Must("DeleteApprovalPolicy")
	qInsertApprovalPattern     = queries.Must("InsertApprovalPattern")
)

// approvalPatterns are the approval policies of some namespaces, by
// namespace ("*" for every namespace).
type approvalPatterns map[string][]string

// queueApprovalPatterns queues on b reading the policies of namespaces
// (and of "*") into *out.
func queueApprovalPatterns(b *pgx.Batch, namespaces []string, out *approvalPatterns) {
	b.Queue(qApprovalPatternsOf, namespaces).Query(func(rows pgx.Rows) error {
		var err error
		*out, err = scanApprovalPatterns(rows)
		return err
	})
}

func scanApprovalPatterns(rows pgx.Rows) (approvalPatterns, error) {
	out := approvalPatterns{}
	var ns, p string
	if _, err := pgx.ForEachRow(rows, []any{&ns, &p}, func() error {
		out[ns] = append(out[ns], p)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("approval policy: %w", err)
	}
	return out, nil
}

// match reports whether jobs of capability in namespace wait for an
// operator: a configured pattern or a policy of the namespace (or of every
// namespace) matches it.
func (a approvalPatterns) match(namespace, capability string, configured []string) bool {
	for _, list := range [][]string{configured, a[namespace], a[auth.AllNamespaces]} {
		for _, p := range list {
			if auth.Match(p, capability) {
				return true
			}
		}
	}
	return false
}

// ApprovalPolicy returns the patterns that need approval in namespace: its
// own and the configured ones.
func (s *Service) ApprovalPolicy(ctx context.Context, namespace string) (own, configured []string, err error) {
	rows, err := s.pool.Query(ctx, qApprovalPolicyOfNamespace, namespace)
	if err != nil {
		return nil, nil, fmt.Errorf("approval policy: %w", err)
	}
	own, err = pgx.CollectRows(rows, pgx.RowTo[string])
	return own, s.cfg.ApprovalPatterns, err
}

// SetApprovalPolicy replaces the approval patterns of a namespace ("*":
// every namespace) and records the change with its actor.
func (s *Service) SetApprovalPolicy(ctx context.Context, namespace string, patterns []string, md domain.Metadata) error {
	if namespace != auth.AllNamespaces && !domain.ValidNamespace(namespace) {
		return &domain.FieldError{Field: "namespace", Message: "must be a namespace or *"}
	}
	clean := map[string]bool{}
	for _, p := range patterns {
		p = strings.TrimSpace(p)
		if p == "" || len(p) > domain.MaxCapabilityLength || !domain.ValidCapability(strings.ReplaceAll(p, "*", "x")) {
			return &domain.FieldError{Field: "patterns", Message: fmt.Sprintf("%q is not a capability pattern (a capability, '*' for any run of characters)", p)}
		}
		clean[p] = true
	}
	list := make([]string, 0, len(clean))
	for p := range clean {
		list = append(list, p)
	}
	sort.Strings(list)
	return s.store.RetryTx(ctx, func(tx pgx.Tx) error { // its append comes after its writes
		if _, err := tx.Exec(ctx, qDeleteApprovalPolicy, namespace); err != nil {
			return err
		}
		for _, p := range list {
			if _, err := tx.Exec(ctx, qInsertApprovalPattern, namespace, p, md.Actor); err != nil {
				return err
			}
		}
		_, err := s.store.AppendTx(ctx, tx, "policy:"+namespace, eventstore.Any, domain.NewEvent(domain.EventPolicyChanged,
			domain.PolicyChanged{Namespace: namespace, ApprovalPatterns: list}, md))
		return err
	})
}

// Approve lets a job that awaits approval go to dispatch.
func (s *Service) Approve(ctx context.Context, id, reason string, md domain.Metadata) (*jobstore.Loaded, error) {
	return s.decideApproval(ctx, id, true, reason, md)
}

// Reject ends a job that awaits approval with REJECTED (a terminal status;
// the caller is called back).
func (s *Service) Reject(ctx context.Context, id, reason string, md domain.Metadata) (*jobstore.Loaded, error) {
	return s.decideApproval(ctx, id, false, reason, md)
}

func (s *Service) decideApproval(ctx context.Context, id string, approve bool, reason string, md domain.Metadata) (*jobstore.Loaded, error) {
	err := s.jobs.RetryTx(ctx, func(tx pgx.Tx) error {
		l, err := s.Load(ctx, tx, id)
		if err != nil {
			return err
		}
		evs, fx, err := domain.Approval(&l.Job, approve, reason, md)
		if err != nil {
			return fmt.Errorf("job %s: %v: %w", id, err, ErrConflict) //nolint:errorlint // the kind is ErrConflict's
		}
		if approve && l.OrderingKey != "" { // approved, it may still wait for its turn
			// Under the key's lock: a job of the key ending meanwhile
			// either ended before (none ahead) or wakes this one after.
			if _, err := tx.Exec(ctx, qLockOrderingKeys, []string{l.Namespace}, []string{l.OrderingKey}); err != nil {
				return fmt.Errorf("lock ordering key: %w", err)
			}
			ahead, err := s.orderAhead(ctx, tx, l)
			if err != nil {
				return err
			}
			fx = domain.WaitTurn(fx, ahead, s.now())
		}
		return s.jobs.AppendTx(ctx, tx, l, fx, evs...)
	})
	if err != nil {
		return nil, err
	}
	return s.Load(ctx, nil, id)
}

// orderAhead answers how many jobs of l's ordering key are ahead of it.
func (s *Service) orderAhead(ctx context.Context, tx pgx.Tx, l *jobstore.Loaded) (int, error) {
	var ahead int
	if err := tx.QueryRow(ctx, qOrderAhead, l.JobID).Scan(&ahead); err != nil {
		return 0, fmt.Errorf("ordering key of job %s: %w", l.JobID, err)
	}
	return ahead, nil
}
