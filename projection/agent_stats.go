package projection

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qTruncateAgentStats     = queries.Must("TruncateAgentStats")
	qUpsertAgentStatsMinute = queries.Must("UpsertAgentStatsMinute")
	qUpsertAgentStatsHour   = queries.Must("UpsertAgentStatsHour")
)

// AgentStats keeps per-agent, per-capability buckets of one minute and one
// hour (agent_stats_minute, agent_stats_hour): attempts and their outcomes,
// and histograms of delivery round trip and time to result. The reach_health
// views read them.
//
// An attempt counts for the agent it was routed to: ROUTED is attempted,
// DELIVERED delivered, SUCCESS succeeded, FAILED (and a business failure
// that is retried) failed, TIMEOUT timed out, DEAD_LETTER dead-lettered (for
// the last attempt's agent). Attempts with no agent count for nobody.
//
// A caller's reports of its direct calls (DIRECT_REPORTED, lookup mode)
// count the same way, in the bucket of the call's time, and apart as
// direct_*: a call is attempted; reached, delivered; ok, succeeded; reached
// and not ok, failed.
//
// An attempt event names its agent, not its job's namespace and
// capability: those come from the job's SUBMITTED. Recent is the memory of
// recent jobs' SUBMITTED facts (they never change), so that attempt events
// of a job submitted in an earlier batch need no read of the log; nil
// reads the log every time.
type AgentStats struct {
	Recent *RecentSubmissions
}

// RecentSubmissions remembers the namespace and capability of the last
// jobs seen submitted, up to a bound, the oldest forgotten first. A job is
// remembered by its id's 16 bytes and its namespace and capability are
// shared with every other job's of the same: 100,000 jobs take about 7 MB
// (40 MB when each kept its own SUBMITTED's fields). A stream whose id is
// not a UUID is not remembered (it is read from the log).
type RecentSubmissions struct {
	mu     sync.Mutex
	jobs   map[uuid.UUID]origin
	order  []uuid.UUID // a ring of the jobs in jobs, oldest at next
	next   int
	shared map[string]string // namespaces and capabilities, each kept once
}

// origin is what RecentSubmissions keeps of a job's SUBMITTED.
type origin struct{ namespace, capability string }

// NewRecentSubmissions remembers up to n jobs.
func NewRecentSubmissions(n int) *RecentSubmissions {
	return &RecentSubmissions{jobs: make(map[uuid.UUID]origin, n), order: make([]uuid.UUID, 0, n), shared: map[string]string{}}
}

// jobOf is the id of a job's stream, false for any other stream.
func jobOf(stream string) (uuid.UUID, bool) {
	id, ok := strings.CutPrefix(stream, domain.JobStreamPrefix)
	if !ok {
		return uuid.UUID{}, false
	}
	u, err := uuid.Parse(id)
	return u, err == nil
}

func (r *RecentSubmissions) get(stream string) (domain.Submitted, bool) {
	if r == nil {
		return domain.Submitted{}, false
	}
	id, ok := jobOf(stream)
	if !ok {
		return domain.Submitted{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	o, ok := r.jobs[id]
	return domain.Submitted{Namespace: o.namespace, Capability: o.capability}, ok
}

func (r *RecentSubmissions) put(stream string, s domain.Submitted) {
	if r == nil {
		return
	}
	id, ok := jobOf(stream)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.jobs[id]; ok {
		return
	}
	if len(r.order) < cap(r.order) {
		r.order = append(r.order, id)
	} else {
		delete(r.jobs, r.order[r.next])
		r.order[r.next] = id
		r.next = (r.next + 1) % len(r.order)
	}
	r.jobs[id] = origin{namespace: r.share(s.Namespace), capability: r.share(s.Capability)}
}

// share answers the copy of v kept already, if any: the jobs of a
// namespace and capability share one string. What it keeps is bounded
// like the jobs (past the bound it starts again; a job keeps its string).
func (r *RecentSubmissions) share(v string) string {
	if kept, ok := r.shared[v]; ok {
		return kept
	}
	if len(r.shared) >= max(cap(r.order), 1) {
		clear(r.shared)
	}
	r.shared[v] = v
	return v
}

// Name implements eventstore.Projection.
func (AgentStats) Name() string { return "agent_stats" }

// Reset implements eventstore.Projection.
func (AgentStats) Reset(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, qTruncateAgentStats)
	return err
}

type statsKey struct {
	namespace         string
	agent, capability string
	bucket            time.Time
	hourly            bool
}

type statsRow struct {
	namespace                                                       string
	attempted, delivered, succeeded, failed, timedOut, deadLettered int
	deliveryMS, resultMS                                            []float64
	// The direct calls among them.
	directAttempted, directDelivered, directSucceeded, directFailed int
}

// attemptFacts is what every attempt event's data may say.
type attemptFacts struct {
	AgentID   string  `json:"agent_id"`
	LatencyMS float64 `json:"latency_ms"`
	Reason    string  `json:"reason"`
}

var counted = map[domain.EventType]bool{
	domain.EventRouted: true, domain.EventDelivered: true, domain.EventSuccess: true, domain.EventFailed: true,
	domain.EventAttemptFailed: true, domain.EventTimeout: true, domain.EventDeadLetter: true,
}

// Apply implements eventstore.Projection: one read of the jobs' SUBMITTED
// events and one batched write per batch.
func (a AgentStats) Apply(ctx context.Context, tx pgx.Tx, batch []eventstore.Record) error {
	jobs, err := submittedOf(ctx, tx, batch, a.Recent)
	if err != nil {
		return err
	}
	acc, err := accumulate(batch, jobs)
	if err != nil {
		return err
	}
	return writeStats(ctx, tx, acc)
}

// submittedOf returns what the jobs of the batch's counted events were
// submitted as: from the batch's own SUBMITTED events, and for jobs
// submitted in an earlier batch, from recent (when it remembers them) or
// the log.
func submittedOf(ctx context.Context, tx pgx.Tx, batch []eventstore.Record, recent *RecentSubmissions) (map[string]domain.Submitted, error) {
	jobs := map[string]domain.Submitted{}
	var missing []string
	for _, r := range batch {
		if !strings.HasPrefix(r.StreamID, domain.JobStreamPrefix) {
			continue
		}
		switch {
		case r.Type == domain.EventSubmitted:
			s, err := originOf(r)
			if err != nil {
				return nil, err
			}
			jobs[r.StreamID] = s
			recent.put(r.StreamID, s)
		case counted[r.Type]:
			if _, ok := jobs[r.StreamID]; ok {
				continue
			}
			if s, ok := recent.get(r.StreamID); ok {
				jobs[r.StreamID] = s
			} else {
				missing = append(missing, r.StreamID)
				jobs[r.StreamID] = domain.Submitted{}
			}
		}
	}
	if len(missing) == 0 {
		return jobs, nil
	}
	firsts, err := eventstore.FirstOfType(ctx, tx, missing, domain.EventSubmitted)
	if err != nil {
		return nil, err
	}
	for stream, r := range firsts {
		sub, err := originOf(r)
		if err != nil {
			return nil, err
		}
		jobs[stream] = sub
		recent.put(stream, sub)
	}
	return jobs, nil
}

// originOf reads the namespace and capability of the SUBMITTED r, and
// nothing else of it (not the payload).
func originOf(r eventstore.Record) (domain.Submitted, error) {
	var o struct {
		Namespace  string `json:"namespace"`
		Capability string `json:"capability"`
	}
	if err := json.Unmarshal(r.Data, &o); err != nil {
		return domain.Submitted{}, fmt.Errorf("event %d: %w", r.Position, err)
	}
	return domain.Submitted{Namespace: o.Namespace, Capability: o.Capability}, nil
}

// accumulate counts the batch's attempt events into minute and hour rows,
// for the agent each names; events of no agent count for nobody.
func accumulate(batch []eventstore.Record, jobs map[string]domain.Submitted) (map[statsKey]*statsRow, error) {
	acc := map[statsKey]*statsRow{}
	for _, r := range batch {
		if r.Type == domain.EventDirectReported {
			if err := accumulateDirect(acc, r); err != nil {
				return nil, err
			}
			continue
		}
		if !counted[r.Type] || !strings.HasPrefix(r.StreamID, domain.JobStreamPrefix) {
			continue
		}
		var f attemptFacts
		if err := json.Unmarshal(r.Data, &f); err != nil {
			return nil, fmt.Errorf("event %d: %w", r.Position, err)
		}
		if f.AgentID == "" {
			continue
		}
		job := jobs[r.StreamID]
		for _, hourly := range []bool{false, true} {
			k := statsKey{namespace: job.Namespace, agent: f.AgentID, capability: job.Capability, bucket: r.RecordedAt.UTC().Truncate(time.Minute), hourly: hourly}
			if hourly {
				k.bucket = r.RecordedAt.UTC().Truncate(time.Hour)
			}
			row := acc[k]
			if row == nil {
				row = &statsRow{namespace: job.Namespace}
				acc[k] = row
			}
			row.count(r.Type, f)
		}
	}
	return acc, nil
}

// accumulateDirect counts one DIRECT_REPORTED event's calls, each in the
// buckets of its own time.
func accumulateDirect(acc map[statsKey]*statsRow, r eventstore.Record) error {
	var d domain.DirectReported
	if err := json.Unmarshal(r.Data, &d); err != nil {
		return fmt.Errorf("event %d: %w", r.Position, err)
	}
	ns, _, _ := strings.Cut(strings.TrimPrefix(r.StreamID, domain.DirectStreamPrefix), "/")
	for _, rep := range d.Reports {
		for _, unit := range []time.Duration{time.Minute, time.Hour} {
			k := statsKey{namespace: ns, agent: rep.AgentID, capability: rep.Capability, bucket: rep.At.UTC().Truncate(unit), hourly: unit == time.Hour}
			row := acc[k]
			if row == nil {
				row = &statsRow{namespace: ns}
				acc[k] = row
			}
			row.attempted++
			row.directAttempted++
			if !rep.Reached {
				continue
			}
			row.delivered++
			row.directDelivered++
			row.resultMS = append(row.resultMS, rep.LatencyMS)
			if rep.OK {
				row.succeeded++
				row.directSucceeded++
			} else {
				row.failed++
				row.directFailed++
			}
		}
	}
	return nil
}

// count adds one attempt event to the row.
func (row *statsRow) count(t domain.EventType, f attemptFacts) {
	switch t {
	case domain.EventRouted:
		row.attempted++
	case domain.EventDelivered:
		row.delivered++
		row.deliveryMS = append(row.deliveryMS, f.LatencyMS)
	case domain.EventSuccess:
		row.succeeded++
		row.resultMS = append(row.resultMS, f.LatencyMS)
	case domain.EventFailed:
		row.failed++
		row.resultMS = append(row.resultMS, f.LatencyMS)
	case domain.EventAttemptFailed:
		switch f.Reason {
		case "business_failure":
			row.failed++
		case domain.ReasonAgentPaused:
			row.attempted-- // the agent said "not now" before taking it: no attempt of its
		}
	case domain.EventTimeout:
		row.timedOut++
	case domain.EventDeadLetter:
		row.deadLettered++
	}
}

// writeStats adds the rows to their buckets in one batch.
func writeStats(ctx context.Context, tx pgx.Tx, acc map[statsKey]*statsRow) error {
	b := &pgx.Batch{}
	for k, row := range acc {
		query := qUpsertAgentStatsMinute
		if k.hourly {
			query = qUpsertAgentStatsHour
		}
		b.Queue(query,
			k.agent, k.capability, k.bucket, row.namespace, row.attempted, row.delivered, row.succeeded, row.failed,
			row.timedOut, row.deadLettered, domain.LatencyHistogram(row.deliveryMS), domain.LatencyHistogram(row.resultMS),
			row.directAttempted, row.directDelivered, row.directSucceeded, row.directFailed)
	}
	return tx.SendBatch(ctx, b).Close()
}
