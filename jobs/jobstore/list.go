package jobstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qListJobs       = queries.Must("ListJobs")
	qListNamespaces = queries.Must("ListNamespaces")
)

// ListFilter narrows List.
type ListFilter struct {
	Namespace  string
	Status     domain.JobStatus
	Capability string
	AgentID    string
	// Before is the cursor: jobs older than this job id.
	Before string
	Limit  int
}

// Summary is one job in a list, from the jobs read model.
type Summary struct {
	JobID       string     `json:"job_id"`
	Namespace   string     `json:"namespace"`
	Capability  string     `json:"capability"`
	Status      string     `json:"status"`
	AgentID     string     `json:"agent_id,omitempty"`
	Attempts    int        `json:"attempts"`
	MaxAttempts int        `json:"max_attempts"`
	Priority    string     `json:"priority"`
	BizCode     string     `json:"biz_code,omitempty"`
	Error       string     `json:"error,omitempty"`
	TraceID     string     `json:"trace_id,omitempty"`
	SubmittedAt time.Time  `json:"submitted_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
}

// List returns jobs newest first, from the jobs read model (which trails
// the log by the projector's lag, normally milliseconds).
func (s *Store) List(ctx context.Context, f ListFilter) ([]Summary, error) {
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 50
	}
	var namespaces []string
	if f.Namespace == "" && (f.Status != "" || f.Capability != "" || f.AgentID != "") {
		rows, err := s.reads().Query(ctx, qListNamespaces)
		if err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
		if namespaces, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
	}
	sql, args := listQuery(f, namespaces)
	rows, err := s.reads().Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Summary, error) {
		var x Summary
		err := r.Scan(&x.JobID, &x.Namespace, &x.Capability, &x.Status, &x.AgentID, &x.Attempts, &x.MaxAttempts,
			&x.Priority, &x.BizCode, &x.Error, &x.TraceID, &x.SubmittedAt, &x.UpdatedAt, &x.FinishedAt)
		return x, err
	})
}

// listQuery is ListJobs with the conditions of f's filters (only those
// given: a condition that may be empty would keep the planner from the
// index) and the page's order and size, and its arguments. Across
// namespaces (no f.Namespace) a filter's index leads with the namespace:
// each of namespaces (ListNamespaces) gets its own page, walking that
// index, and the pages merge.
func listQuery(f ListFilter, namespaces []string) (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		conds = append(conds, fmt.Sprintf(cond, len(args)))
	}
	across := f.Namespace == "" && (f.Status != "" || f.Capability != "" || f.AgentID != "")
	var b strings.Builder
	if across {
		args, conds = append(args, namespaces), append(conds, "namespace = n.namespace")
		b.WriteString("SELECT j.* FROM unnest($1::text[]) AS n(namespace) CROSS JOIN LATERAL (")
	}
	if f.Namespace != "" {
		add("namespace = $%d", f.Namespace)
	}
	if f.Status != "" {
		add("status = $%d", string(f.Status))
	}
	if f.Capability != "" {
		add("capability = $%d", f.Capability)
	}
	if f.AgentID != "" {
		add("agent_id = $%d", f.AgentID)
	}
	if f.Before != "" {
		add("jobs.job_id < $%d::uuid", f.Before)
	}
	b.WriteString(qListJobs)
	for i, c := range conds {
		b.WriteString(map[bool]string{true: " WHERE ", false: " AND "}[i == 0])
		b.WriteString(c)
	}
	args = append(args, f.Limit)
	fmt.Fprintf(&b, " ORDER BY jobs.job_id DESC LIMIT $%d", len(args))
	if across {
		fmt.Fprintf(&b, `) AS j ORDER BY j.job_id COLLATE "C" DESC LIMIT $%d`, len(args))
	}
	return b.String(), args
}
