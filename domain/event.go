package domain

import (
	"encoding/json"
	"time"
)

// EventType names a fact in a stream. The names are stored in the event log
// and are part of the public audit trail, so they never change.
type EventType string

// Job event types. The first six (and the terminal ones after them) are the
// contract of docs/design.md; the others sit between them and carry detail.
const (
	EventSubmitted        EventType = "SUBMITTED"
	EventAwaitingApproval EventType = "AWAITING_APPROVAL"
	EventApproved         EventType = "APPROVED"
	EventRejected         EventType = "REJECTED"
	EventRouted           EventType = "ROUTED"
	EventDelivered        EventType = "DELIVERED"
	EventAttemptFailed    EventType = "ATTEMPT_FAILED"
	EventSuccess          EventType = "SUCCESS"
	EventFailed           EventType = "FAILED"
	EventTimeout          EventType = "TIMEOUT"
	EventDeadLetter       EventType = "DEAD_LETTER"
	EventCancelled        EventType = "CANCELLED"
	EventResultDuplicate  EventType = "RESULT_DUPLICATE"
	EventCallbackSent     EventType = "CALLBACK_DELIVERED"
	EventCallbackFailed   EventType = "CALLBACK_FAILED"
	// EventAwaitingInput: an A2A agent asked for input (input-required or
	// auth-required); the attempt's deadline stops until it resumes.
	EventAwaitingInput EventType = "AWAITING_INPUT"
	// EventResumed: an A2A agent that awaited input works again, under a
	// fresh deadline.
	EventResumed EventType = "RESUMED"
	// EventInputProvided records the caller's input sent to the agent of a
	// job that awaited it. It changes no status: the agent's answer does.
	EventInputProvided EventType = "INPUT_PROVIDED"
	// EventProgress: the agent working on the attempt said how far it got,
	// and may have extended its deadline (POST /v1/jobs/{id}/progress).
	EventProgress EventType = "PROGRESS"
)

// JobEventTypes lists every job event type, for exhaustive tests and for
// validating what is read back from the log.
var JobEventTypes = []EventType{
	EventSubmitted, EventAwaitingApproval, EventApproved, EventRejected,
	EventRouted, EventDelivered, EventAttemptFailed, EventSuccess, EventFailed,
	EventTimeout, EventDeadLetter, EventCancelled, EventResultDuplicate,
	EventCallbackSent, EventCallbackFailed, EventAwaitingInput, EventResumed, EventInputProvided,
	EventIntentResolved, EventProgress,
}

// The events of the other streams. Agent events (AGENT_REGISTERED and the
// rest of the agent's life) are in registration.go, beside the registration.
const (
	// EventAgentTokenRotated, on the agent's stream: a new token (never the
	// token itself).
	EventAgentTokenRotated EventType = "AGENT_TOKEN_ROTATED"
	// EventAgentContextChanged, on the agent's stream: its context (for
	// example accepting: false), which the router honours.
	EventAgentContextChanged EventType = "AGENT_CONTEXT_CHANGED"
	// EventAgentCardUpdated, on the agent's stream: its A2A Agent Card
	// changed what the registry knows of it.
	EventAgentCardUpdated EventType = "AGENT_CARD_UPDATED"
	// EventAgentUpdated, on the agent's stream: an operator changed its
	// settings at run time (PATCH /v1/agents/{id}), with old and new values.
	EventAgentUpdated EventType = "AGENT_UPDATED"
	// EventBreakerOpened and EventBreakerClosed, on the agent's stream: its
	// circuit breaker turned (half-open counts as still open).
	EventBreakerOpened EventType = "BREAKER_OPENED"
	EventBreakerClosed EventType = "BREAKER_CLOSED"
	// EventSelfPreservationEnded, on the namespace's registry stream.
	EventSelfPreservationEnded EventType = "SELF_PRESERVATION_ENDED"
	// EventKeyCreated and EventKeyRevoked, on "keys:<namespace>".
	EventKeyCreated EventType = "KEY_CREATED"
	EventKeyRevoked EventType = "KEY_REVOKED"
	// EventPolicyChanged, on "policy:<namespace>": the approval patterns.
	EventPolicyChanged EventType = "POLICY_CHANGED"
	// EventSecretRotated, on "secrets:<namespace>": the callback secret.
	EventSecretRotated EventType = "SECRET_ROTATED"
	// EventSweepReport, on "sweep:<name>": what a compensation sweep did.
	EventSweepReport EventType = "SWEEP_REPORT"
)

// HealthVerdict is the data of HEALTH_DEGRADED and HEALTH_RECOVERED: an
// agent's standing against the alert thresholds in the alert window.
type HealthVerdict struct {
	Window      string  `json:"window"`
	Attempted   int     `json:"attempted"`
	ReachRate   float64 `json:"reach_rate"`
	SuccessRate float64 `json:"success_rate"`
	Below       bool    `json:"below"`
}

// AwaitingApproval is the data of AWAITING_APPROVAL: when the job is
// rejected unless decided.
type AwaitingApproval struct {
	Until time.Time `json:"until"`
}

// Decided is the data of APPROVED and REJECTED: the approver's reason.
type Decided struct {
	Reason string `json:"reason,omitempty"`
}

// AgentTokenRotated is the data of AGENT_TOKEN_ROTATED.
type AgentTokenRotated struct {
	PreviousValidUntil time.Time `json:"previous_valid_until"`
	InstanceID         string    `json:"instance_id"`
}

// AgentContextChanged is the data of AGENT_CONTEXT_CHANGED: the agent's own
// context before and after.
type AgentContextChanged struct {
	From map[string]any `json:"from"`
	To   map[string]any `json:"to"`
}

// AgentDeregistered is the data of AGENT_DEREGISTERED.
type AgentDeregistered struct {
	AgentID string `json:"agent_id"`
}

// CardView is what an Agent Card says of its agent.
type CardView struct {
	Capabilities []string `json:"capabilities"`
	Aliases      []string `json:"aliases"`
	Version      string   `json:"version"`
	Endpoint     string   `json:"endpoint"`
	Push         *bool    `json:"push,omitempty"`
	// CapabilityInfo is what its skills say of each capability.
	CapabilityInfo map[string]CapabilityDoc `json:"capability_info,omitempty"`
}

// AgentCardUpdated is the data of AGENT_CARD_UPDATED.
type AgentCardUpdated struct {
	CardURL string   `json:"card_url"`
	From    CardView `json:"from"`
	To      CardView `json:"to"`
}

// SelfPreservationEnded is the data of SELF_PRESERVATION_ENDED. Reason is
// "recovered" (few enough agents lapse again) or "bound" (the episode
// outlived its bound and the lapsed agents went DOWN).
type SelfPreservationEnded struct {
	Namespace  string `json:"namespace"`
	Reason     string `json:"reason,omitempty"`
	DurationMS int64  `json:"duration_ms,omitempty"`
}

// KeyCreated is the data of KEY_CREATED: the key without its secret.
type KeyCreated struct {
	KeyID     string     `json:"key_id"`
	Namespace string     `json:"namespace"`
	Name      string     `json:"name"`
	Scopes    []string   `json:"scopes"`
	CreatedAt time.Time  `json:"created_at"`
	CreatedBy string     `json:"created_by"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// KeyRevoked is the data of KEY_REVOKED.
type KeyRevoked struct {
	KeyID string `json:"key_id"`
}

// PolicyChanged is the data of POLICY_CHANGED.
type PolicyChanged struct {
	Namespace        string   `json:"namespace"`
	ApprovalPatterns []string `json:"approval_patterns"`
}

// SecretRotated is the data of SECRET_ROTATED (never the secret).
type SecretRotated struct {
	Namespace          string    `json:"namespace"`
	Secret             string    `json:"secret"` // which secret: "callbacks"
	PreviousValidUntil time.Time `json:"previous_valid_until"`
}

// SweepReported is the data of SWEEP_REPORT: the jobs a sweep acted on.
type SweepReported struct {
	Sweep             string   `json:"sweep"`
	TimedOut          []string `json:"timed_out,omitempty"`
	Lost              []string `json:"lost,omitempty"`
	Redispatched      []string `json:"redispatched,omitempty"`
	CallbacksRequeued []string `json:"callbacks_requeued,omitempty"`
	// NotClaimed are attempts a pull agent did not claim in time, routed
	// again.
	NotClaimed []string `json:"not_claimed,omitempty"`
	// AgentGone are attempts claimed by a pull agent that went DOWN or
	// OFFLINE holding them, routed again.
	AgentGone []string `json:"agent_gone,omitempty"`
}

// Metadata travels with every event: who caused it and within which trace.
type Metadata struct {
	TraceID     string `json:"trace_id,omitempty"`
	Actor       string `json:"actor,omitempty"`
	CausationID string `json:"causation_id,omitempty"`
}

// Event is a fact not yet stored: its type, its JSON data and its metadata.
// The event store gives it a stream version and a global position.
type Event struct {
	Type     EventType
	Data     json.RawMessage
	Metadata Metadata
	// value is what NewEvent encoded as Data: folding an event made in
	// this process reads it instead of decoding Data again (applyAs).
	value any
}

// NewEvent builds an Event, encoding data as JSON. Data must be encodable
// (plain structs and maps); a value that is not is a programming error, so
// NewEvent panics rather than storing a half-made fact.
func NewEvent(t EventType, data any, md Metadata) Event {
	var raw json.RawMessage
	switch d := data.(type) {
	case nil:
		raw = json.RawMessage(`{}`)
	case json.RawMessage:
		raw = d
	default:
		b, err := json.Marshal(d)
		if err != nil {
			panic("domain: event data of " + string(t) + " is not JSON: " + err.Error())
		}
		return Event{Type: t, Data: b, Metadata: md, value: d}
	}
	return Event{Type: t, Data: raw, Metadata: md}
}
