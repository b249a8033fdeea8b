// Package health reads Agent-Reach's health analytics: the reach_health
// views over the agent_stats projection (see sql/migrations/0005_health.sql).
package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qReachHealthAgents = queries.Must("ReachHealthAgents")
	qJudgeHealth       = queries.Must("JudgeHealth")
	qHealthSeries      = queries.Must("HealthSeries")
)

// Windows are the windows the views offer.
var Windows = []string{"1m", "5m", "1h", "24h"}

// ErrUnknownWindow is returned for a window the views do not offer.
var ErrUnknownWindow = domain.NewError(domain.ErrInvalid, "window must be one of 1m, 5m, 1h, 24h")

// AgentHealth is one agent's figures over one window.
type AgentHealth struct {
	Window        string   `json:"window"`
	Namespace     string   `json:"namespace"`
	AgentID       string   `json:"agent_id"`
	Attempted     int      `json:"attempted"`
	Delivered     int      `json:"delivered"`
	Succeeded     int      `json:"succeeded"`
	Failed        int      `json:"failed"`
	TimedOut      int      `json:"timed_out"`
	DeadLettered  int      `json:"dead_lettered"`
	ReachRate     *float64 `json:"reach_rate"`
	SuccessRate   *float64 `json:"success_rate"`
	HealthScore   *float64 `json:"health_score"`
	LatencyP50MS  *float64 `json:"latency_p50_ms"`
	LatencyP95MS  *float64 `json:"latency_p95_ms"`
	LatencyP99MS  *float64 `json:"latency_p99_ms"`
	DeliveryP50MS *float64 `json:"delivery_p50_ms"`
	DeliveryP95MS *float64 `json:"delivery_p95_ms"`
	// Pending attempts were delivered and wait for their result inside
	// their deadline: neither a success nor a failure yet.
	Pending int `json:"pending"`
	// BusinessSuccessRate is succeeded over delivered settled attempts:
	// the agent's own success, apart from reach.
	BusinessSuccessRate *float64 `json:"business_success_rate"`
	// Unclaimed attempts wait in a pull agent's inbox: in no rate yet.
	Unclaimed int `json:"unclaimed"`
	// Direct are the calls among them that callers made themselves
	// (lookup mode) and reported; the rest were brokered.
	Direct DirectCounts `json:"direct"`
}

// DirectCounts are an agent's reported direct calls in a window.
type DirectCounts struct {
	Attempted int `json:"attempted"`
	Delivered int `json:"delivered"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
}

func validWindow(w string) bool {
	for _, x := range Windows {
		if x == w {
			return true
		}
	}
	return false
}

// Agents returns every agent's figures over window, optionally of one
// namespace, by agent id.
func Agents(ctx context.Context, q eventstore.Querier, window, namespace string) ([]AgentHealth, error) {
	if !validWindow(window) {
		return nil, ErrUnknownWindow
	}
	rows, err := q.Query(ctx, qReachHealthAgents, window, namespace)
	if err != nil {
		return nil, fmt.Errorf("read reach_health: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AgentHealth, error) {
		var h AgentHealth
		err := r.Scan(&h.Window, &h.Namespace, &h.AgentID, &h.Attempted, &h.Delivered, &h.Succeeded, &h.Failed, &h.TimedOut,
			&h.DeadLettered, &h.ReachRate, &h.SuccessRate, &h.HealthScore, &h.LatencyP50MS, &h.LatencyP95MS, &h.LatencyP99MS,
			&h.DeliveryP50MS, &h.DeliveryP95MS, &h.Pending, &h.BusinessSuccessRate, &h.Unclaimed,
			&h.Direct.Attempted, &h.Direct.Delivered, &h.Direct.Succeeded, &h.Direct.Failed)
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("read reach_health: %w", err)
	}
	return out, nil
}

// Judge returns, for every agent with enough attempts in the alert window
// (health_settings), whether it is below a threshold. Agents without
// enough attempts are absent: there is no evidence either way.
func Judge(ctx context.Context, q eventstore.Querier) (map[domain.AgentKey]Verdict, error) {
	rows, err := q.Query(ctx, qJudgeHealth)
	if err != nil {
		return nil, fmt.Errorf("judge health: %w", err)
	}
	out := map[domain.AgentKey]Verdict{}
	var id domain.AgentKey
	var v Verdict
	_, err = pgx.ForEachRow(rows, []any{&id.Namespace, &id.ID, &v.Attempted, &v.ReachRate, &v.SuccessRate, &v.Below, &v.Window}, func() error {
		out[id] = v
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("judge health: %w", err)
	}
	return out, nil
}

// Verdict is one agent's standing against the alert thresholds: the data
// of HEALTH_DEGRADED and HEALTH_RECOVERED.
type Verdict = domain.HealthVerdict

// Point is one agent's minute of attempts, for trend lines.
type Point struct {
	Namespace string    `json:"namespace"`
	AgentID   string    `json:"agent_id"`
	Minute    time.Time `json:"minute"`
	Attempted int       `json:"attempted"`
	Delivered int       `json:"delivered"`
	Succeeded int       `json:"succeeded"`
}

// Series returns every agent's per-minute figures over the last hour,
// optionally of one namespace, oldest first.
func Series(ctx context.Context, q eventstore.Querier, namespace string) ([]Point, error) {
	rows, err := q.Query(ctx, qHealthSeries, namespace)
	if err != nil {
		return nil, fmt.Errorf("read series: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Point, error) {
		var p Point
		err := r.Scan(&p.Namespace, &p.AgentID, &p.Minute, &p.Attempted, &p.Delivered, &p.Succeeded)
		return p, err
	})
}

var qAgentMinuteSeries = queries.Must("AgentMinuteSeries")

// Minute is one minute of one agent: its attempts, their outcomes and the
// time to result, for the agent's page.
type Minute struct {
	Minute    time.Time `json:"minute"`
	Attempted int       `json:"attempted"`
	Delivered int       `json:"delivered"`
	Succeeded int       `json:"succeeded"`
	Failed    int       `json:"failed"`
	TimedOut  int       `json:"timed_out"`
	// LatencyP50MS and LatencyP95MS are the time to result (nil: none
	// settled in that minute).
	LatencyP50MS *float64 `json:"latency_p50_ms"`
	LatencyP95MS *float64 `json:"latency_p95_ms"`
}

// AgentSeries returns one agent's minutes over the last hour, oldest
// first; minutes without attempts are absent.
func AgentSeries(ctx context.Context, q eventstore.Querier, namespace, agentID string) ([]Minute, error) {
	rows, err := q.Query(ctx, qAgentMinuteSeries, namespace, agentID)
	if err != nil {
		return nil, fmt.Errorf("read series of %s/%s: %w", namespace, agentID, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Minute, error) {
		var m Minute
		err := r.Scan(&m.Minute, &m.Attempted, &m.Delivered, &m.Succeeded, &m.Failed, &m.TimedOut, &m.LatencyP50MS, &m.LatencyP95MS)
		return m, err
	})
}

var qListAlerts = queries.Must("ListAlerts")

// Alert is one alerting event (projection.Alerts): an agent's health or
// breaker turn, a namespace's self-preservation episode, a lane's
// watermark crossing.
type Alert struct {
	Position   int64           `json:"position"`
	Namespace  string          `json:"namespace"`
	Kind       string          `json:"kind"`
	Subject    string          `json:"subject"`
	Data       json.RawMessage `json:"data"`
	RecordedAt time.Time       `json:"recorded_at"`
}

// AlertFilter narrows ListAlerts: a namespace ("" every one), kinds (none:
// every kind), a subject (an agent id, a namespace or a lane), alerts
// before a position (0: the newest), and how many.
type AlertFilter struct {
	Namespace string
	Kinds     []string
	Subject   string
	Before    int64
	Limit     int
}

// ListAlerts returns alerts newest first.
func ListAlerts(ctx context.Context, q eventstore.Querier, f AlertFilter) ([]Alert, error) {
	kinds := f.Kinds
	if kinds == nil {
		kinds = []string{}
	}
	rows, err := q.Query(ctx, qListAlerts, f.Namespace, kinds, f.Subject, f.Before, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("list alerts: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Alert, error) {
		var a Alert
		err := r.Scan(&a.Position, &a.Namespace, &a.Kind, &a.Subject, &a.Data, &a.RecordedAt)
		return a, err
	})
}

var qAgentRecovery = queries.Must("AgentRecovery")

// Recovery is how fast an agent came back: from DOWN or HEALTH_DEGRADED to
// HEALTHY or HEALTH_RECOVERED (view reach_recovery).
type Recovery struct {
	LastRecoveredAt *time.Time `json:"last_recovered_at"`
	LastMS          *float64   `json:"last_ms"`
	Mean24hMS       *float64   `json:"mean_24h_ms"`
	Recoveries24h   int        `json:"recoveries_24h"`
}

// RecoveryOf answers the agent's time to recover; all empty when it never
// recovered from anything.
func RecoveryOf(ctx context.Context, q eventstore.Querier, namespace, agentID string) (Recovery, error) {
	var r Recovery
	err := q.QueryRow(ctx, qAgentRecovery, namespace, agentID).Scan(&r.LastRecoveredAt, &r.LastMS, &r.Mean24hMS, &r.Recoveries24h)
	if errors.Is(err, pgx.ErrNoRows) {
		return Recovery{}, nil
	}
	if err != nil {
		return Recovery{}, fmt.Errorf("recovery of agent %s/%s: %w", namespace, agentID, err)
	}
	return r, nil
}

var (
	qFleetMinutes = queries.Must("FleetMinutes")
	qFleetHours   = queries.Must("FleetHours")
)

// FleetWindows are the windows of the fleet's series: their bucket and
// how many buckets.
var FleetWindows = map[string]struct {
	Bucket  time.Duration
	Buckets int
}{"1h": {time.Minute, 60}, "24h": {time.Hour, 24}, "7d": {time.Hour, 168}}

// FleetPoint is one bucket of the fleet: its attempts, their outcomes, the
// error rate and the time to result.
type FleetPoint struct {
	At           time.Time `json:"at"`
	Attempted    int       `json:"attempted"`
	Delivered    int       `json:"delivered"`
	Succeeded    int       `json:"succeeded"`
	Failed       int       `json:"failed"`
	TimedOut     int       `json:"timed_out"`
	DeadLettered int       `json:"dead_lettered"`
	// ErrorRate is the share of the bucket's ended attempts that did not
	// succeed: not delivered (the agent was not reached, or answered an
	// error status), failed or timed out (nil: none ended). Attempts still
	// under way are in no share.
	ErrorRate    *float64 `json:"error_rate"`
	LatencyP50MS *float64 `json:"latency_p50_ms"`
	LatencyP95MS *float64 `json:"latency_p95_ms"`
}

// Fleet returns the fleet's figures (of one namespace, or "" for all) over
// window (a key of FleetWindows), every bucket present, oldest first: a
// read of the per-minute or per-hour agent figures, never of the log.
func Fleet(ctx context.Context, q eventstore.Querier, namespace, window string) ([]FleetPoint, error) {
	w, ok := FleetWindows[window]
	if !ok {
		return nil, fmt.Errorf("fleet window %q", window)
	}
	var rows pgx.Rows
	var err error
	if w.Bucket == time.Minute {
		rows, err = q.Query(ctx, qFleetMinutes, namespace)
	} else {
		rows, err = q.Query(ctx, qFleetHours, namespace, w.Buckets)
	}
	if err != nil {
		return nil, fmt.Errorf("read fleet series: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (FleetPoint, error) {
		var p FleetPoint
		err := r.Scan(&p.At, &p.Attempted, &p.Delivered, &p.Succeeded, &p.Failed, &p.TimedOut, &p.DeadLettered, &p.LatencyP50MS, &p.LatencyP95MS)
		undelivered := max(0, p.Attempted-p.Delivered)
		if ended := undelivered + p.Succeeded + p.Failed + p.TimedOut; ended > 0 {
			rate := float64(undelivered+p.Failed+p.TimedOut) / float64(ended)
			p.ErrorRate = &rate
		}
		return p, err
	})
}
