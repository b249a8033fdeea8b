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
	// Via is the face the jobs were submitted through: rest, a2a or mcp.
	Via string
	// Before is the cursor: jobs older than this job id.
	Before string
	Limit  int
	// Query is a job id or trace id prefix when it looks like one
	// (SearchesIDs), else text searched in the job's error, which then
	// needs Since (the search is bounded by its time range).
	Query string
	// TraceID is a trace id or its prefix.
	TraceID string
	// Since and Until bound the jobs' submit time (zero: unbounded): a
	// range of their UUIDv7 ids, walked by the same indexes.
	Since, Until time.Time
}

// SearchesIDs reports whether q is searched as a job id or trace id
// prefix (hex digits and dashes, at least four), not as error text.
func SearchesIDs(q string) bool {
	digits := 0
	for _, r := range q {
		switch {
		case r >= '0' && r <= '9', r >= 'a' && r <= 'f', r >= 'A' && r <= 'F':
			digits++
		case r == '-':
		default:
			return false
		}
	}
	return digits >= 4 && digits <= 32
}

// idRange is the range of UUIDs that begin with the hex digits of prefix.
func idRange(prefix string) (lo, hi string) {
	hex := strings.ToLower(strings.ReplaceAll(prefix, "-", ""))
	lo, hi = hex+strings.Repeat("0", 32-len(hex)), hex+strings.Repeat("f", 32-len(hex))
	dashed := func(h string) string {
		return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
	}
	return dashed(lo), dashed(hi)
}

// idAt is the least UUIDv7 of a job submitted at t (its millisecond, then
// zeros): jobs submitted at t or later have ids at or above it.
func idAt(t time.Time) string {
	ms := uint64(max(t.UnixMilli(), 0))
	return fmt.Sprintf("%08x-%04x-0000-0000-000000000000", ms>>16, ms&0xffff)
}

// likeEscape escapes s for LIKE (its default escape, a backslash).
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
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
	Via         string     `json:"via"`
}

// List returns jobs newest first, from the jobs read model (which trails
// the log by the projector's lag, normally milliseconds).
func (s *Store) List(ctx context.Context, f ListFilter) ([]Summary, error) {
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 50
	}
	var namespaces []string
	if f.Namespace == "" && (f.Status != "" || f.Capability != "" || f.AgentID != "" || f.Via != "") {
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
			&x.Priority, &x.BizCode, &x.Error, &x.TraceID, &x.SubmittedAt, &x.UpdatedAt, &x.FinishedAt, &x.Via)
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
	across := f.Namespace == "" && (f.Status != "" || f.Capability != "" || f.AgentID != "" || f.Via != "")
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
	switch f.Via {
	case "":
	case "rest":
		conds = append(conds, "via IS NULL")
	default:
		add("via = $%d", f.Via)
	}
	if f.Before != "" {
		add("jobs.job_id < $%d::uuid", f.Before)
	}
	if !f.Since.IsZero() {
		add("jobs.job_id >= $%d::uuid", idAt(f.Since))
	}
	if !f.Until.IsZero() {
		add("jobs.job_id < $%d::uuid", idAt(f.Until))
	}
	if f.TraceID != "" {
		add("trace_id LIKE $%d", likeEscape(strings.ToLower(strings.ReplaceAll(f.TraceID, "-", "")))+"%")
	}
	switch {
	case f.Query == "":
	case SearchesIDs(f.Query):
		lo, hi := idRange(f.Query)
		args = append(args, lo, hi, likeEscape(strings.ToLower(strings.ReplaceAll(f.Query, "-", "")))+"%")
		conds = append(conds, fmt.Sprintf("(jobs.job_id BETWEEN $%d::uuid AND $%d::uuid OR trace_id LIKE $%d)", len(args)-2, len(args)-1, len(args)))
	default:
		add("error ILIKE $%d", "%"+likeEscape(f.Query)+"%")
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
