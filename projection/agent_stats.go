package projection

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

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
type AgentStats struct{}

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
func (AgentStats) Apply(ctx context.Context, tx pgx.Tx, batch []eventstore.Record) error {
	jobs := map[string]domain.Submitted{}
	var missing []string
	for _, r := range batch {
		if !strings.HasPrefix(r.StreamID, domain.JobStreamPrefix) {
			continue
		}
		if r.Type == domain.EventSubmitted {
			var s domain.Submitted
			if err := json.Unmarshal(r.Data, &s); err != nil {
				return fmt.Errorf("event %d: %w", r.Position, err)
			}
			jobs[r.StreamID] = s
		} else if counted[r.Type] {
			if _, ok := jobs[r.StreamID]; !ok {
				missing = append(missing, r.StreamID)
				jobs[r.StreamID] = domain.Submitted{}
			}
		}
	}
	if len(missing) > 0 {
		firsts, err := eventstore.FirstOfType(ctx, tx, missing, domain.EventSubmitted)
		if err != nil {
			return err
		}
		for stream, r := range firsts {
			var sub domain.Submitted
			if err := json.Unmarshal(r.Data, &sub); err != nil {
				return fmt.Errorf("event %d: %w", r.Position, err)
			}
			jobs[stream] = domain.Submitted{Namespace: sub.Namespace, Capability: sub.Capability}
		}
	}

	acc := map[statsKey]*statsRow{}
	for _, r := range batch {
		if !counted[r.Type] || !strings.HasPrefix(r.StreamID, domain.JobStreamPrefix) {
			continue
		}
		var f attemptFacts
		if err := json.Unmarshal(r.Data, &f); err != nil {
			return fmt.Errorf("event %d: %w", r.Position, err)
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
			switch r.Type {
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
				if f.Reason == "business_failure" {
					row.failed++
				}
			case domain.EventTimeout:
				row.timedOut++
			case domain.EventDeadLetter:
				row.deadLettered++
			}
		}
	}
	b := &pgx.Batch{}
	for k, row := range acc {
		query := qUpsertAgentStatsMinute
		if k.hourly {
			query = qUpsertAgentStatsHour
		}
		b.Queue(query,
			k.agent, k.capability, k.bucket, row.namespace, row.attempted, row.delivered, row.succeeded, row.failed,
			row.timedOut, row.deadLettered, nonNilFloats(row.deliveryMS), nonNilFloats(row.resultMS))
	}
	return tx.SendBatch(ctx, b).Close()
}

func nonNilFloats(f []float64) []float64 {
	if f == nil {
		return []float64{}
	}
	return f
}
