package domain

import "encoding/json"

// EventType names a fact in a stream. The names are stored in the event log
// and are part of the public audit trail, so they never change.
type EventType string

// Job event types. The first six (and the terminal ones after them) are the
// contract of DESIGN.md; the others sit between them and carry detail.
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
)

// JobEventTypes lists every job event type, for exhaustive tests and for
// validating what is read back from the log.
var JobEventTypes = []EventType{
	EventSubmitted, EventAwaitingApproval, EventApproved, EventRejected,
	EventRouted, EventDelivered, EventAttemptFailed, EventSuccess, EventFailed,
	EventTimeout, EventDeadLetter, EventCancelled, EventResultDuplicate,
	EventCallbackSent, EventCallbackFailed, EventAwaitingInput, EventResumed, EventInputProvided,
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
		raw = b
	}
	return Event{Type: t, Data: raw, Metadata: md}
}
