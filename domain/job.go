package domain

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"
)

// JobStatus is a job's current state: always a fold of its events.
type JobStatus string

// Job statuses. A job starts SUBMITTED; the terminal ones never change again.
const (
	StatusNone             JobStatus = ""
	StatusSubmitted        JobStatus = "SUBMITTED"
	StatusAwaitingApproval JobStatus = "AWAITING_APPROVAL"
	StatusDelivered        JobStatus = "DELIVERED"
	StatusTimeout          JobStatus = "TIMEOUT"
	StatusSuccess          JobStatus = "SUCCESS"
	StatusFailed           JobStatus = "FAILED"
	StatusDeadLetter       JobStatus = "DEAD_LETTER"
	StatusCancelled        JobStatus = "CANCELLED"
	StatusRejected         JobStatus = "REJECTED"
	// StatusAwaitingInput: an A2A agent holds the attempt and waits for
	// input; no deadline runs.
	StatusAwaitingInput JobStatus = "AWAITING_INPUT"
)

// JobStatuses lists every status a job can be in, including StatusNone (a
// stream with no events yet), for exhaustive tests.
var JobStatuses = []JobStatus{
	StatusNone, StatusSubmitted, StatusAwaitingApproval, StatusDelivered,
	StatusTimeout, StatusSuccess, StatusFailed, StatusDeadLetter,
	StatusCancelled, StatusRejected, StatusAwaitingInput,
}

// Waiting reports whether a job in status s waits for an attempt to
// start: what a lane's depth counts (backpressure).
func (s JobStatus) Waiting() bool { return s == StatusSubmitted || s == StatusTimeout }

// Terminal reports whether a job in status s is finished for good.
func (s JobStatus) Terminal() bool {
	switch s {
	case StatusSuccess, StatusFailed, StatusDeadLetter, StatusCancelled, StatusRejected:
		return true
	}
	return false
}

// EndingEvents lists the event types that end a job (lead a status that
// is not terminal to one that is), from the transitions table, sorted:
// what a wait for a job's end looks for in its stream.
func EndingEvents() []EventType {
	seen := map[EventType]bool{}
	for from, next := range transitions {
		if from.Terminal() {
			continue
		}
		for e, to := range next {
			if to.Terminal() {
				seen[e] = true
			}
		}
	}
	out := make([]EventType, 0, len(seen))
	for e := range seen {
		out = append(out, e)
	}
	slices.Sort(out)
	return out
}

// ErrIllegalTransition is returned (wrapped in a *TransitionError) when an
// event may not follow a job's current status.
var ErrIllegalTransition = NewError(ErrConflict, "illegal job transition")

// TransitionError says which event was refused in which status.
type TransitionError struct {
	From  JobStatus
	Event EventType
}

func (e *TransitionError) Error() string {
	from := string(e.From)
	if from == "" {
		from = "(new)"
	}
	return fmt.Sprintf("%s after %s: %v", e.Event, from, ErrIllegalTransition)
}

// Unwrap lets errors.Is find ErrIllegalTransition.
func (e *TransitionError) Unwrap() error { return ErrIllegalTransition }

// transitions is the one table of allowed (status, event) pairs and the
// status each leads to. Whatever is not here is illegal.
var transitions = map[JobStatus]map[EventType]JobStatus{
	StatusNone: {
		EventSubmitted: StatusSubmitted,
	},
	StatusSubmitted: {
		// INTENT_RESOLVED follows SUBMITTED in the same append (before any
		// attempt: applyData refuses it later).
		EventIntentResolved:   StatusSubmitted,
		EventAwaitingApproval: StatusAwaitingApproval,
		EventRouted:           StatusSubmitted,
		EventDelivered:        StatusDelivered,
		EventAttemptFailed:    StatusSubmitted,
		EventDeadLetter:       StatusDeadLetter,
		EventCancelled:        StatusCancelled,
		EventResultDuplicate:  StatusSubmitted,
	},
	StatusAwaitingApproval: {
		EventApproved:  StatusSubmitted,
		EventRejected:  StatusRejected,
		EventCancelled: StatusCancelled,
	},
	StatusDelivered: {
		EventSuccess:         StatusSuccess,
		EventFailed:          StatusFailed,
		EventAttemptFailed:   StatusSubmitted, // a business failure that will be retried
		EventTimeout:         StatusTimeout,
		EventCancelled:       StatusCancelled,
		EventResultDuplicate: StatusDelivered,
		EventAwaitingInput:   StatusAwaitingInput,
		EventInputProvided:   StatusDelivered, // the agent's answer to the input beat it
		EventProgress:        StatusDelivered,
	},
	StatusAwaitingInput: {
		EventInputProvided:   StatusAwaitingInput,
		EventResumed:         StatusDelivered,
		EventSuccess:         StatusSuccess,
		EventFailed:          StatusFailed,
		EventAttemptFailed:   StatusSubmitted,
		EventCancelled:       StatusCancelled,
		EventResultDuplicate: StatusAwaitingInput,
	},
	StatusTimeout: {
		EventRouted:          StatusSubmitted,
		EventAttemptFailed:   StatusSubmitted,
		EventDeadLetter:      StatusDeadLetter,
		EventCancelled:       StatusCancelled,
		EventResultDuplicate: StatusTimeout,
	},
}

func init() {
	// Terminal statuses accept only bookkeeping: recorded duplicates and
	// the caller-callback outcome. Their status never changes.
	for _, s := range JobStatuses {
		if s.Terminal() {
			transitions[s] = map[EventType]JobStatus{
				EventResultDuplicate: s,
				EventCallbackSent:    s,
				EventCallbackFailed:  s,
				EventInputProvided:   s, // the agent's answer to the input ended the job first
			}
		}
	}
}

// Transition returns the status that event t leads to from status from, or a
// *TransitionError wrapping ErrIllegalTransition.
func Transition(from JobStatus, t EventType) (JobStatus, error) {
	to, ok := transitions[from][t]
	if !ok {
		return from, &TransitionError{From: from, Event: t}
	}
	return to, nil
}

// Priority is a job's lane.
type Priority string

// Priorities, highest first.
const (
	PriorityHigh   Priority = "high"
	PriorityNormal Priority = "normal"
	PriorityLow    Priority = "low"
)

// Constraints narrow which agents may take a job.
type Constraints struct {
	Version  string `json:"version,omitempty"`
	Protocol string `json:"protocol,omitempty"`
	// ProtocolVersions are the protocol versions the caller speaks; only
	// an agent speaking one of them ("1.*" is a prefix) is a candidate.
	ProtocolVersions []string `json:"protocol_versions,omitempty"`
}

// Submitted is the data of a SUBMITTED event: everything the caller asked for.
type Submitted struct {
	JobID          string          `json:"job_id"`
	Namespace      string          `json:"namespace"`
	Capability     string          `json:"capability"`
	Hint           string          `json:"hint,omitempty"`
	Payload        json.RawMessage `json:"payload"`
	Priority       Priority        `json:"priority"`
	TimeoutMS      int             `json:"timeout_ms"`
	MaxAttempts    int             `json:"max_attempts"`
	CallbackURL    string          `json:"callback_url,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	ParentJobID    string          `json:"parent_job_id,omitempty"`
	RootJobID      string          `json:"root_job_id,omitempty"`
	// Via is the face that took the submit: ViaA2A or ViaMCP (empty: the
	// REST API).
	Via           string      `json:"via,omitempty"`
	Constraints   Constraints `json:"constraints,omitzero"`
	RetryOnFailed bool        `json:"retry_on_failed,omitempty"`
	BackoffBaseMS int         `json:"backoff_base_ms"`
	BackoffMaxMS  int         `json:"backoff_max_ms"`
	ReplayOf      string      `json:"replay_of,omitempty"`
	// OrderingKey, when set, orders the job among its namespace's jobs of
	// the same key: they are delivered one at a time, in submit order, the
	// next when the one before is terminal (ordering.go).
	OrderingKey string `json:"ordering_key,omitempty"`
	// RouteWaitMS bounds how long an attempt waits, spending nothing, for an
	// agent to become routable; 0 means the service's default (30 s unless
	// configured).
	RouteWaitMS int `json:"route_wait_ms,omitempty"`
	// Intent is the caller's words when the job was submitted with an
	// intent instead of a capability; Capability is what it resolved to.
	Intent string `json:"intent,omitempty"`
	// Resolution is how Intent was resolved. It is not part of SUBMITTED's
	// data: it travels to the stream as the INTENT_RESOLVED that follows,
	// and the fold brings it back from there.
	Resolution *IntentResolution `json:"-"`
}

// Routed is the data of a ROUTED event: which agent got the attempt and why.
type Routed struct {
	Attempt int             `json:"attempt"`
	AgentID string          `json:"agent_id"`
	Route   json.RawMessage `json:"route,omitempty"`
}

// Delivered is the data of a DELIVERED event. LatencyMS is the delivery's
// HTTP round trip.
type Delivered struct {
	Attempt   int       `json:"attempt"`
	AgentID   string    `json:"agent_id"`
	Deadline  time.Time `json:"deadline"`
	Async     bool      `json:"async"`
	LatencyMS float64   `json:"latency_ms"`
	// RemoteTaskID is the A2A agent's task id for the attempt, if any.
	RemoteTaskID string `json:"remote_task_id,omitempty"`
	// Claimed: a pull agent claimed the attempt from its inbox; the
	// claim is the delivery, and LatencyMS the time it waited there.
	Claimed bool `json:"claimed,omitempty"`
	// HTTPStatus is the status the agent answered the delivery with
	// (200 inline, 202 accepted; absent for A2A and pull agents).
	HTTPStatus int `json:"http_status,omitempty"`
}

// AwaitingInput is the data of an AWAITING_INPUT event.
type AwaitingInput struct {
	Attempt int    `json:"attempt"`
	AgentID string `json:"agent_id"`
	// State is the A2A task state: input-required or auth-required.
	State   string          `json:"state"`
	Message json.RawMessage `json:"message,omitempty"`
}

// InputProvided is the data of an INPUT_PROVIDED event.
type InputProvided struct {
	Attempt int             `json:"attempt"`
	AgentID string          `json:"agent_id"`
	Payload json.RawMessage `json:"payload"`
}

// Resumed is the data of a RESUMED event.
type Resumed struct {
	Attempt  int       `json:"attempt"`
	AgentID  string    `json:"agent_id"`
	Deadline time.Time `json:"deadline"`
}

// AttemptFailed is the data of an ATTEMPT_FAILED event: an attempt that did
// not produce a usable answer and will be retried (or dead-lettered).
type AttemptFailed struct {
	Attempt int       `json:"attempt"`
	AgentID string    `json:"agent_id,omitempty"`
	Reason  string    `json:"reason"`
	Error   string    `json:"error,omitempty"`
	BizCode string    `json:"biz_code,omitempty"`
	RetryAt time.Time `json:"retry_at,omitzero"`
	// HTTPStatus is the status of the agent's answer, if it answered;
	// LatencyMS how long the delivery took until it failed; Body the
	// first bytes of an answer that was not a usable result (a 200 that
	// is not a result; for other statuses Error holds them).
	HTTPStatus int     `json:"http_status,omitempty"`
	LatencyMS  float64 `json:"latency_ms,omitempty"`
	Body       string  `json:"body,omitempty"`
	// PausedUntil is when the pause an agent asked for ends (reason
	// agent_paused: a 429 or 503 with Retry-After).
	PausedUntil time.Time `json:"paused_until,omitzero"`
}

// Outcome is the data of a SUCCESS or FAILED event. LatencyMS is the time
// from the attempt's ROUTED to its outcome (time to result).
type Outcome struct {
	Attempt   int             `json:"attempt"`
	AgentID   string          `json:"agent_id"`
	Result    json.RawMessage `json:"result,omitempty"`
	BizCode   string          `json:"biz_code,omitempty"`
	Error     string          `json:"error,omitempty"` // FAILED: the agent's own words, if any
	LatencyMS float64         `json:"latency_ms"`
}

// TimedOut is the data of a TIMEOUT event.
type TimedOut struct {
	Attempt  int       `json:"attempt"`
	AgentID  string    `json:"agent_id"`
	Deadline time.Time `json:"deadline"`
	RetryAt  time.Time `json:"retry_at,omitzero"`
}

// DeadLettered is the data of a DEAD_LETTER event.
type DeadLettered struct {
	Attempts int    `json:"attempts"`
	Reason   string `json:"reason"`
	// AgentID is the agent of the last attempt, if it had one.
	AgentID string `json:"agent_id,omitempty"`
}

// Cancelled is the data of CANCELLED, APPROVED and REJECTED events.
type Cancelled struct {
	Reason string `json:"reason,omitempty"`
}

// ResultDuplicate is the data of a RESULT_DUPLICATE event: a result that was
// recorded and changed nothing.
type ResultDuplicate struct {
	Attempt int             `json:"attempt"`
	Status  JobStatus       `json:"status"`
	Reason  string          `json:"reason"`
	Result  json.RawMessage `json:"result,omitempty"`
}

// CallbackOutcome is the data of CALLBACK_DELIVERED and CALLBACK_FAILED.
type CallbackOutcome struct {
	Attempt    int    `json:"attempt"`
	StatusCode int    `json:"status_code,omitempty"`
	Error      string `json:"error,omitempty"`
	Final      bool   `json:"final,omitempty"`
}

// Job is the state of one job: the fold of its stream.
type Job struct {
	Submitted

	Status    JobStatus
	Version   int       // stream version of the last applied event
	Attempts  int       // attempts started (ROUTED events)
	AgentID   string    // agent of the latest attempt
	Delivered bool      // the latest attempt reached its agent and awaits a result
	Deadline  time.Time // result deadline of the latest delivered attempt
	// Progress is what the agent last said of its progress (PROGRESS).
	Progress json.RawMessage
	// RemoteTaskID is the A2A task id of the latest delivered attempt.
	RemoteTaskID string
	Result       json.RawMessage
	BizCode      string
	Error        string

	CallbackAcked  bool
	CallbackGaveUp bool // the last callback attempt failed
	Callbacks      int

	// AttemptAgents maps each attempt number to the agent it was routed to.
	AttemptAgents map[int]string
	// LastFailedAgent is the agent of the latest attempt that failed or
	// timed out: the router prefers another one next time.
	LastFailedAgent string
	// RefusedBy are the agents that refused the job (an A2A REJECTED task,
	// or an operation they do not support): no later attempt goes to them.
	RefusedBy []string
	// SlotHolder is the agent holding one of its max_concurrent slots for
	// the latest attempt: set at ROUTED, kept while the agent holds the job
	// (DELIVERED, AWAITING_INPUT), cleared when the attempt ends (a failed
	// attempt, TIMEOUT, an outcome, a cancel, the dead letter).
	SlotHolder string
	// Claimed: the latest attempt was claimed by a pull agent (its
	// DELIVERED is the claim).
	Claimed bool
	// LastRouted: the latest event is a ROUTED, so the latest attempt is
	// under way and nothing has been recorded of it since (JustRouted).
	LastRouted bool
	// Unspent counts the attempts that did not count against max_attempts:
	// those a pull agent never claimed or gave back unstarted (at most
	// MaxAttempts of them, so a job cannot bounce for ever).
	Unspent int
}

// Attempt-failure reasons of attempts a pull agent never started: they
// are routed again at once and spend no attempt (Job.Unspent).
const (
	ReasonNotClaimed = "not_claimed"
	ReasonReleased   = "released"
	// ReasonAgentPaused: the agent answered the delivery 429 or 503 with
	// a Retry-After; it gets no work until then (Effects.Pause), and the
	// job goes elsewhere or waits. Not a failure of the agent's.
	ReasonAgentPaused = "agent_paused"
)

// Attempt-failure reasons that mean the agent refused the job, so it is
// routed again at once to another agent.
const (
	ReasonRejected     = "rejected"
	ReasonIncompatible = "a2a_incompatible"
)

// Spent is how many attempts count against max_attempts: those started
// less those a pull agent never started.
func (j *Job) Spent() int { return j.Attempts - j.Unspent }

// CanRetry reports whether another attempt is allowed.
func (j *Job) CanRetry() bool { return j.Spent() < j.MaxAttempts }

// Apply folds one event into the job. It refuses, without changing j, an
// event that may not follow the current status (ErrIllegalTransition) or
// whose data does not decode.
func (j *Job) Apply(e Event) error {
	to, err := Transition(j.Status, e.Type)
	if err != nil {
		return err
	}
	next := *j
	if err := next.applyData(e); err != nil {
		return fmt.Errorf("apply %s: %w", e.Type, err)
	}
	next.Status = to
	next.Version++
	next.LastRouted = e.Type == EventRouted
	*j = next
	return nil
}

// JustRouted reports whether attempt is the latest and nothing has been
// recorded of it since its ROUTED: its delivery (or claim, or first task
// update) is still to be recorded.
func (j *Job) JustRouted(attempt int) bool { return j.LastRouted && j.Attempts == attempt }

func (j *Job) applyData(e Event) error {
	switch e.Type {
	case EventAttemptFailed, EventSuccess, EventFailed, EventTimeout, EventDeadLetter, EventCancelled:
		j.SlotHolder = "" // the attempt ended; its slot is given back
	}
	switch e.Type {
	case EventSubmitted:
		if d, ok := e.value.(Submitted); ok {
			d.Resolution = nil // not in Data: INTENT_RESOLVED brings it
			j.Submitted = d
			return nil
		}
		// Decoded onto a copy, not into &j.Submitted: that pointer would
		// put every fold's copy of the job (Apply's next) on the heap.
		d := j.Submitted
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return err
		}
		j.Submitted = d
		return nil
	case EventIntentResolved:
		if j.Attempts > 0 || j.Resolution != nil {
			return &TransitionError{From: j.Status, Event: e.Type} // only once, before the first attempt
		}
		return applyAs(e, func(d IntentResolution) { j.Resolution = &d })
	case EventRouted:
		if d, ok := e.value.(Routed); ok {
			j.onRouted(d)
			return nil
		}
		// The fold needs the attempt and its agent, not the route's
		// explanation: it is skipped, not kept.
		return applyAs(e, func(d struct {
			Attempt int    `json:"attempt"`
			AgentID string `json:"agent_id"`
		}) {
			j.onRouted(Routed{Attempt: d.Attempt, AgentID: d.AgentID})
		})
	case EventDelivered:
		return applyAs(e, func(d Delivered) {
			j.Delivered, j.Deadline, j.RemoteTaskID, j.Claimed = true, d.Deadline, d.RemoteTaskID, d.Claimed
		})
	case EventAwaitingInput:
		j.Deadline = time.Time{}
	case EventResumed:
		return applyAs(e, func(d Resumed) { j.Deadline = d.Deadline })
	case EventProgress:
		return applyAs(e, func(d Progressed) { j.Deadline, j.Progress = d.Deadline, d.Progress })
	case EventAttemptFailed:
		return applyAs(e, j.onAttemptFailed)
	case EventSuccess, EventFailed:
		return applyAs(e, func(d Outcome) {
			j.Delivered, j.Result, j.BizCode, j.Error = false, d.Result, d.BizCode, d.Error
		})
	case EventTimeout:
		return applyAs(e, func(d TimedOut) {
			j.Delivered, j.Error, j.LastFailedAgent = false, "timeout", d.AgentID
		})
	case EventDeadLetter:
		return applyAs(e, func(d DeadLettered) { j.Error = d.Reason })
	case EventCancelled:
		return applyAs(e, func(d Cancelled) { j.Delivered, j.Error = false, d.Reason })
	case EventRejected:
		return applyAs(e, func(d Decided) { j.Delivered, j.Error = false, d.Reason })
	case EventCallbackSent:
		j.Callbacks++
		j.CallbackAcked = true
	case EventCallbackFailed:
		return applyAs(e, func(d CallbackOutcome) {
			j.Callbacks++
			j.CallbackGaveUp = d.Final
		})
	}
	return nil
}

// applyAs decodes e's payload as a T and hands it to apply.
func applyAs[T any](e Event, apply func(T)) error {
	if d, ok := e.value.(T); ok { // made here: Data is its encoding
		apply(d)
		return nil
	}
	var d T
	if err := json.Unmarshal(e.Data, &d); err != nil {
		return err
	}
	apply(d)
	return nil
}

func (j *Job) onRouted(d Routed) {
	j.Attempts, j.AgentID, j.Delivered, j.SlotHolder, j.Claimed = d.Attempt, d.AgentID, false, d.AgentID, false
	if j.AttemptAgents == nil {
		j.AttemptAgents = map[int]string{}
	} else {
		j.AttemptAgents = maps.Clone(j.AttemptAgents)
	}
	j.AttemptAgents[d.Attempt] = d.AgentID
}

func (j *Job) onAttemptFailed(d AttemptFailed) {
	j.Delivered, j.Error, j.BizCode = false, d.Reason, d.BizCode
	if d.AgentID != "" {
		j.LastFailedAgent = d.AgentID
		if d.Reason == ReasonRejected || d.Reason == ReasonIncompatible {
			j.RefusedBy = append(slices.Clip(j.RefusedBy), d.AgentID)
		}
	}
	if d.Error != "" {
		j.Error = d.Reason + ": " + d.Error
	}
	if (d.Reason == ReasonNotClaimed || d.Reason == ReasonReleased || d.Reason == ReasonAgentPaused) && j.Unspent < j.MaxAttempts {
		j.Unspent++
	}
}

// FoldJob replays a job's events in stream order.
func FoldJob(events []Event) (Job, error) {
	var j Job
	for i, e := range events {
		if err := j.Apply(e); err != nil {
			return j, fmt.Errorf("event %d of job %s: %w", i+1, j.JobID, err)
		}
	}
	return j, nil
}

// JobStreamPrefix starts the stream id of every job.
const JobStreamPrefix = "job:"

// JobStream is the event stream of job id.
func JobStream(id string) string { return JobStreamPrefix + id }
