package projection

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qTruncateJobs  = queries.Must("TruncateJobs")
	qUpsertJobRows = queries.Must("UpsertJobRows")
	qLoadJobRows   = queries.Must("LoadJobRows")
)

// Jobs keeps the jobs table: each job's current status, for listing and
// filtering. It folds with domain.Job, the same rules the writers use.
type Jobs struct{}

// Name implements eventstore.Projection.
func (Jobs) Name() string { return "jobs" }

// Reset implements eventstore.Projection.
func (Jobs) Reset(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, qTruncateJobs)
	return err
}

type jobRow struct {
	job         domain.Job
	traceID     string
	submittedAt time.Time
	updatedAt   time.Time
	finishedAt  *time.Time
}

// Apply implements eventstore.Projection: one read and one batched write per
// batch of events, whatever its size.
func (Jobs) Apply(ctx context.Context, tx pgx.Tx, batch []eventstore.Record) error {
	var ids []string
	seen := map[string]bool{}
	for _, r := range batch {
		id, ok := strings.CutPrefix(r.StreamID, domain.JobStreamPrefix)
		if ok && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := loadJobRows(ctx, tx, ids)
	if err != nil {
		return err
	}
	for _, r := range batch {
		id, ok := strings.CutPrefix(r.StreamID, domain.JobStreamPrefix)
		if !ok {
			continue
		}
		row := rows[id]
		if row == nil {
			row = &jobRow{}
			rows[id] = row
		}
		if r.Version <= row.job.Version {
			continue // already folded (an earlier version that came late, below)
		}
		if r.Version > row.job.Version+1 {
			// Versions that come after this one in the log's order: a log
			// written before appends onto a younger transaction's event were
			// refused (eventstore's appendSQL) may hold a job's ROUTED before
			// its SUBMITTED. Fold them from the stream first; each is passed
			// over above when the log reaches it.
			gap, err := eventstore.ReadStreamVersions(ctx, tx, r.StreamID, row.job.Version+1, r.Version-1)
			if err != nil {
				return err
			}
			if len(gap) != r.Version-1-row.job.Version {
				return fmt.Errorf("job %s version %d: versions %d to %d are not in the log", id, r.Version, row.job.Version+1, r.Version-1)
			}
			for _, g := range gap {
				if err := row.fold(id, g); err != nil {
					return err
				}
			}
		}
		if err := row.fold(id, r); err != nil {
			return err
		}
	}
	return upsertJobRows(ctx, tx, rows)
}

// fold folds r, the job's next event, into row.
func (row *jobRow) fold(id string, r eventstore.Record) error {
	if err := row.job.Apply(r.Event()); err != nil {
		return fmt.Errorf("job %s version %d: %w", id, r.Version, err)
	}
	if r.Version == 1 || row.submittedAt.IsZero() {
		row.submittedAt = r.RecordedAt
	}
	if row.traceID == "" {
		row.traceID = r.Metadata.TraceID
	}
	if r.Type != domain.EventCallbackSent && r.Type != domain.EventCallbackFailed && r.Type != domain.EventResultDuplicate {
		row.updatedAt = r.RecordedAt
	}
	if row.job.Status.Terminal() && row.finishedAt == nil {
		t := r.RecordedAt
		row.finishedAt = &t
	}
	return nil
}

// upsertJobRows writes the rows in one statement, one array a column.
func upsertJobRows(ctx context.Context, tx pgx.Tx, rows map[string]*jobRow) error {
	var c jobColumns
	for id, row := range rows {
		c.add(id, row)
	}
	_, err := tx.Exec(ctx, qUpsertJobRows, eventstore.UUIDs(c.ids), c.namespaces, c.capabilities, c.statuses, c.agents, c.attempts, c.maxAttempts,
		c.priorities, c.bizCodes, c.errors, c.traces, c.parents, c.roots, c.versions,
		c.submitted, c.updated, c.finished, c.callbacks, c.done, c.replays, c.vias)
	if err != nil {
		return fmt.Errorf("write %d jobs: %w", len(rows), err)
	}
	return nil
}

// jobColumns are job rows as the columns UpsertJobRows takes.
type jobColumns struct {
	ids, namespaces, capabilities, statuses, agents, priorities  []string
	bizCodes, errors, traces, parents, roots, callbacks, replays []string
	vias                                                         []string
	attempts, maxAttempts, versions                              []int32
	submitted, updated                                           []time.Time
	finished                                                     []*time.Time
	done                                                         []bool
}

func (c *jobColumns) add(id string, row *jobRow) {
	j := row.job
	c.ids = append(c.ids, id)
	c.namespaces = append(c.namespaces, j.Namespace)
	c.capabilities = append(c.capabilities, j.Capability)
	c.statuses = append(c.statuses, string(j.Status))
	c.agents = append(c.agents, j.AgentID)
	c.attempts = append(c.attempts, int32(j.Attempts))
	c.maxAttempts = append(c.maxAttempts, int32(j.MaxAttempts))
	c.priorities = append(c.priorities, string(j.Priority))
	c.bizCodes = append(c.bizCodes, j.BizCode)
	c.errors = append(c.errors, j.Error)
	c.traces = append(c.traces, row.traceID)
	c.parents = append(c.parents, j.ParentJobID)
	c.roots = append(c.roots, j.RootJobID)
	c.versions = append(c.versions, int32(j.Version))
	c.submitted = append(c.submitted, row.submittedAt)
	c.updated = append(c.updated, row.updatedAt)
	c.finished = append(c.finished, row.finishedAt)
	c.callbacks = append(c.callbacks, j.CallbackURL)
	c.done = append(c.done, j.CallbackAcked || j.CallbackGaveUp)
	c.replays = append(c.replays, j.ReplayOf)
	c.vias = append(c.vias, j.Via)
}

func loadJobRows(ctx context.Context, tx pgx.Tx, ids []string) (map[string]*jobRow, error) {
	rows, err := tx.Query(ctx, qLoadJobRows, eventstore.UUIDs(ids))
	if err != nil {
		return nil, fmt.Errorf("load jobs: %w", err)
	}
	defer rows.Close()
	out := make(map[string]*jobRow, len(ids))
	for rows.Next() {
		var id, status, priority string
		row := &jobRow{}
		j := &row.job
		if err := rows.Scan(&id, &j.Namespace, &j.Capability, &status, &j.AgentID, &j.Attempts,
			&j.MaxAttempts, &priority, &j.BizCode, &j.Error, &row.traceID,
			&j.ParentJobID, &j.RootJobID, &j.Version, &row.submittedAt, &row.updatedAt, &row.finishedAt,
			&j.CallbackURL, &j.CallbackAcked, &j.ReplayOf, &j.Via); err != nil {
			return nil, fmt.Errorf("load jobs: %w", err)
		}
		j.JobID, j.Status, j.Priority = id, domain.JobStatus(status), domain.Priority(priority)
		out[id] = row
	}
	return out, rows.Err()
}
