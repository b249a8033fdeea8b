package httpapi

import (
	"time"

	"github.com/agentreach/agentreach/auth"
	"github.com/agentreach/agentreach/health"
	"github.com/agentreach/agentreach/jobs/jobstore"
	"github.com/agentreach/agentreach/registry"
)

// The API's own shapes of what other packages return: the wire names are
// the API's (see openapi.yaml), so a package may rename a field without
// moving the contract. Each has the fields of its source, so it converts.

type jobSummaryResponse struct {
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
	// Via is the face the job was submitted through: rest, a2a or mcp.
	Via string `json:"via"`
}

type agentHealthResponse struct {
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
	// Pending: under way, not answered yet (an inline call, a 202 waiting
	// for its result, a claim): never counted as a failure.
	Pending             int      `json:"pending"`
	BusinessSuccessRate *float64 `json:"business_success_rate"`
	// Unclaimed: waiting in a pull agent's inbox, in no rate yet.
	Unclaimed int `json:"unclaimed"`
	// Direct: the calls callers made themselves and reported (lookup
	// mode), counted in the totals too; the rest were brokered.
	Direct health.DirectCounts `json:"direct"`
}

type pointResponse struct {
	Namespace string    `json:"namespace"`
	AgentID   string    `json:"agent_id"`
	Minute    time.Time `json:"minute"`
	Attempted int       `json:"attempted"`
	Delivered int       `json:"delivered"`
	Succeeded int       `json:"succeeded"`
}

type alertResponse struct {
	Position   int64     `json:"position"`
	Namespace  string    `json:"namespace"`
	Kind       string    `json:"kind"`
	Subject    string    `json:"subject"`
	Data       rawJSON   `json:"data"`
	RecordedAt time.Time `json:"recorded_at"`
}

type minuteResponse struct {
	Minute       time.Time `json:"minute"`
	Attempted    int       `json:"attempted"`
	Delivered    int       `json:"delivered"`
	Succeeded    int       `json:"succeeded"`
	Failed       int       `json:"failed"`
	TimedOut     int       `json:"timed_out"`
	LatencyP50MS *float64  `json:"latency_p50_ms"`
	LatencyP95MS *float64  `json:"latency_p95_ms"`
}

type keyInfoResponse struct {
	KeyID     string     `json:"key_id"`
	Namespace string     `json:"namespace"`
	Name      string     `json:"name"`
	Scopes    []string   `json:"scopes"`
	CreatedAt time.Time  `json:"created_at"`
	CreatedBy string     `json:"created_by"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

type recentResponse struct {
	Window    string  `json:"window"`
	Routed    int     `json:"routed"`
	Attempted int     `json:"attempted"`
	Delivered int     `json:"delivered"`
	Succeeded int     `json:"succeeded"`
	Failed    int     `json:"failed"`
	TimedOut  int     `json:"timed_out"`
	ReachRate float64 `json:"reach_rate"`
	Success   float64 `json:"success_rate"`
}

// each converts every element of in, answering an empty list for none.
func each[In, Out any](in []In, conv func(In) Out) []Out {
	out := make([]Out, len(in))
	for i, x := range in {
		out[i] = conv(x)
	}
	return out
}

func toJobSummary(s jobstore.Summary) jobSummaryResponse     { return jobSummaryResponse(s) }
func toAgentHealth(h health.AgentHealth) agentHealthResponse { return agentHealthResponse(h) }
func toPoint(p health.Point) pointResponse                   { return pointResponse(p) }
func toMinute(m health.Minute) minuteResponse                { return minuteResponse(m) }
func toAlert(a health.Alert) alertResponse {
	return alertResponse{a.Position, a.Namespace, a.Kind, a.Subject, rawJSON(a.Data), a.RecordedAt}
}
func toKeyInfo(k auth.KeyInfo) keyInfoResponse {
	return keyInfoResponse{KeyID: k.KeyID, Namespace: k.Namespace, Name: k.Name, Scopes: k.Scopes, CreatedAt: k.CreatedAt,
		CreatedBy: k.CreatedBy, ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt}
}
func toRecent(r registry.Recent) recentResponse { return recentResponse(r) }
