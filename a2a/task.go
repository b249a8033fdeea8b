package a2a

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentreach/agentreach/domain"
)

// State is an A2A task state, in v0.3's spelling (v1.0's TASK_STATE_*
// names are read into these).
type State string

// Task states.
const (
	StateSubmitted     State = "submitted"
	StateWorking       State = "working"
	StateCompleted     State = "completed"
	StateFailed        State = "failed"
	StateCanceled      State = "canceled"
	StateRejected      State = "rejected"
	StateInputRequired State = "input-required"
	StateAuthRequired  State = "auth-required"
	StateUnknown       State = "unknown"
)

// NormalizeState reads either version's name of a state.
func NormalizeState(s string) State {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.TrimPrefix(s, "task_state_")
	s = strings.ReplaceAll(s, "_", "-")
	switch st := State(s); st {
	case StateSubmitted, StateWorking, StateCompleted, StateFailed, StateCanceled, StateRejected,
		StateInputRequired, StateAuthRequired:
		return st
	case "cancelled":
		return StateCanceled
	}
	return StateUnknown
}

// Terminal reports whether a task in state s is finished.
func (s State) Terminal() bool {
	return s == StateCompleted || s == StateFailed || s == StateCanceled || s == StateRejected
}

// Interrupted reports whether the agent waits for the caller.
func (s State) Interrupted() bool { return s == StateInputRequired || s == StateAuthRequired }

// TaskV03 is a v0.3 task (kind "task").
type TaskV03 struct {
	Artifacts []ArtifactV03   `json:"artifacts,omitempty"`
	ContextID string          `json:"contextId"`
	History   []MessageV03    `json:"history,omitempty"`
	ID        string          `json:"id"`
	Kind      string          `json:"kind"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
	Status    TaskStatusV03   `json:"status"`
}

// TaskStatusV03 is a v0.3 task's state, with the agent's message about it.
type TaskStatusV03 struct {
	Message   *MessageV03 `json:"message,omitempty"`
	State     string      `json:"state"`
	Timestamp string      `json:"timestamp,omitempty"`
}

// ArtifactV03 is an output of a v0.3 task.
type ArtifactV03 struct {
	ArtifactID  string          `json:"artifactId"`
	Description string          `json:"description,omitempty"`
	Extensions  []string        `json:"extensions,omitempty"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
	Name        string          `json:"name,omitempty"`
	Parts       []PartV03       `json:"parts"`
}

// TaskV1 is a v1.0 task: no kind, TASK_STATE_* states.
type TaskV1 struct {
	Artifacts []ArtifactV1    `json:"artifacts,omitempty"`
	ContextID string          `json:"contextId"`
	History   []MessageV1     `json:"history,omitempty"`
	ID        string          `json:"id"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
	Status    TaskStatusV1    `json:"status"`
}

// TaskStatusV1 is a v1.0 task's state.
type TaskStatusV1 struct {
	Message   *MessageV1 `json:"message,omitempty"`
	State     string     `json:"state"`
	Timestamp string     `json:"timestamp,omitempty"`
}

// ArtifactV1 is an output of a v1.0 task.
type ArtifactV1 struct {
	ArtifactID  string          `json:"artifactId"`
	Description string          `json:"description,omitempty"`
	Extensions  []string        `json:"extensions,omitempty"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
	Name        string          `json:"name,omitempty"`
	Parts       []PartV1        `json:"parts"`
}

// StatusUpdateV03 is a v0.3 status-update event (kind "status-update"):
// final says the stream ends with it.
type StatusUpdateV03 struct {
	ContextID string          `json:"contextId"`
	Final     bool            `json:"final"`
	Kind      string          `json:"kind"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
	Status    TaskStatusV03   `json:"status"`
	TaskID    string          `json:"taskId"`
}

// ArtifactUpdateV03 is a v0.3 artifact-update event (kind
// "artifact-update").
type ArtifactUpdateV03 struct {
	Append    bool            `json:"append,omitempty"`
	Artifact  ArtifactV03     `json:"artifact"`
	ContextID string          `json:"contextId"`
	Kind      string          `json:"kind"`
	LastChunk bool            `json:"lastChunk,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
	TaskID    string          `json:"taskId"`
}

// StatusUpdateV1 is v1.0's TaskStatusUpdateEvent: no kind and no final
// (the stream's end says it).
type StatusUpdateV1 struct {
	ContextID string          `json:"contextId"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
	Status    TaskStatusV1    `json:"status"`
	TaskID    string          `json:"taskId"`
}

// ArtifactUpdateV1 is v1.0's TaskArtifactUpdateEvent.
type ArtifactUpdateV1 struct {
	Append    bool            `json:"append,omitempty"`
	Artifact  ArtifactV1      `json:"artifact"`
	ContextID string          `json:"contextId"`
	LastChunk bool            `json:"lastChunk,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
	TaskID    string          `json:"taskId"`
}

// StreamResponseV1 is v1.0's StreamResponse, what its streams carry and
// its push notifications are: exactly one of a task, a message, a status
// update or an artifact update.
type StreamResponseV1 struct {
	ArtifactUpdate *ArtifactUpdateV1 `json:"artifactUpdate,omitempty"`
	Message        *MessageV1        `json:"message,omitempty"`
	StatusUpdate   *StatusUpdateV1   `json:"statusUpdate,omitempty"`
	Task           *TaskV1           `json:"task,omitempty"`
}

// SendResultV1 is v1.0's SendMessageResponse: a task or a message.
type SendResultV1 struct {
	Message *MessageV1 `json:"message,omitempty"`
	Task    *TaskV1    `json:"task,omitempty"`
}

// Task is what Agent-Reach reads of an A2A task (or of a direct Message
// answer, which counts as a completed task), of either version.
type Task struct {
	ID        string
	ContextID string
	State     State
	// Message is the status message, if any (raw JSON).
	Message json.RawMessage
	// Result is the task's output as one JSON value: see ResultOf.
	Result json.RawMessage
	// Partial: the update carried a status but not the task's artifacts
	// (a v1.0 statusUpdate), so Result may be incomplete.
	Partial bool
	// FromMessage: the task has no artifacts, and Result is its status
	// message's parts.
	FromMessage bool
}

// StatusText is the text of the task's status message: its text parts,
// joined by newlines ("" if it has none).
func (t Task) StatusText() string {
	var m struct {
		Parts []struct {
			Text *string `json:"text"`
		} `json:"parts"`
	}
	if json.Unmarshal(t.Message, &m) != nil {
		return ""
	}
	var texts []string
	for _, p := range m.Parts {
		if p.Text != nil {
			texts = append(texts, *p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// An update as agents send it, of either version: its parts are kept as
// sent, for ResultOf.
type wireStatus struct {
	State   string          `json:"state"`
	Message json.RawMessage `json:"message"`
}

type wireArtifact struct {
	Parts []json.RawMessage `json:"parts"`
}

type wireTask struct {
	Kind      string         `json:"kind"`
	ID        string         `json:"id"`
	TaskID    string         `json:"taskId"` // a status or artifact update
	ContextID string         `json:"contextId"`
	Status    *wireStatus    `json:"status"`
	Artifacts []wireArtifact `json:"artifacts"`
	Artifact  *wireArtifact  `json:"artifact"`
	// A Message.
	MessageID string            `json:"messageId"`
	Role      string            `json:"role"`
	Parts     []json.RawMessage `json:"parts"`
}

// envelope is v1.0's SendMessageResponse / StreamResponse: one of these.
type envelope struct {
	Task           *wireTask `json:"task"`
	Message        *wireTask `json:"message"`
	StatusUpdate   *wireTask `json:"statusUpdate"`
	ArtifactUpdate *wireTask `json:"artifactUpdate"`
}

// ErrBadTask is an answer that is not a task, a message or an update.
var ErrBadTask = domain.NewError(domain.ErrInvalid, "not an A2A task or message")

// ParseTask reads a SendMessage or GetTask result, or a push notification
// body: a v0.3 object with a kind (task, message, status-update,
// artifact-update) or a v1.0 wrapper naming one of them.
func ParseTask(raw []byte) (Task, error) {
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return Task{}, fmt.Errorf("%w: %w", ErrBadTask, err)
	}
	if at, bad := domain.UnstorableJSON(raw); bad {
		// An agent's words go into the log: NUL, lone surrogates and
		// numbers beyond numeric's range could not be stored.
		return Task{}, fmt.Errorf("%w: it holds what cannot be stored at %q", ErrBadTask, at)
	}
	w, kind, err := unwrap(raw, env)
	if err != nil {
		return Task{}, err
	}
	switch kind {
	case "task":
		if w.ID == "" || w.Status == nil {
			return Task{}, fmt.Errorf("%w: a task needs an id and a status", ErrBadTask)
		}
		t := Task{ID: w.ID, ContextID: w.ContextID, State: NormalizeState(w.Status.State), Message: w.Status.Message}
		var parts []json.RawMessage
		for _, a := range w.Artifacts {
			parts = append(parts, a.Parts...)
		}
		t.Result = ResultOf(parts)
		if t.Result == nil && len(w.Status.Message) > 0 {
			t.Result, t.FromMessage = messageResult(w.Status.Message), true
		}
		return t, nil
	case "message":
		return Task{ID: w.TaskID, ContextID: w.ContextID, State: StateCompleted, Result: ResultOf(w.Parts)}, nil
	case "status-update":
		if w.Status == nil {
			return Task{}, fmt.Errorf("%w: a status update needs a status", ErrBadTask)
		}
		t := Task{ID: w.TaskID, ContextID: w.ContextID, State: NormalizeState(w.Status.State), Message: w.Status.Message, Partial: true}
		if len(w.Status.Message) > 0 {
			t.Result, t.FromMessage = messageResult(w.Status.Message), true
		}
		return t, nil
	case "artifact-update":
		t := Task{ID: w.TaskID, ContextID: w.ContextID, State: StateWorking, Partial: true}
		if w.Artifact != nil {
			t.Result = ResultOf(w.Artifact.Parts)
		}
		return t, nil
	}
	return Task{}, fmt.Errorf("%w: unknown kind %q", ErrBadTask, kind)
}

// unwrap finds the object an answer is and its kind: what a v1.0 wrapper
// holds, or a v0.3 object (whose kind, if missing, its fields tell).
func unwrap(raw []byte, env envelope) (wireTask, string, error) {
	switch {
	case env.Task != nil:
		return *env.Task, "task", nil
	case env.Message != nil:
		return *env.Message, "message", nil
	case env.StatusUpdate != nil:
		return *env.StatusUpdate, "status-update", nil
	case env.ArtifactUpdate != nil:
		return *env.ArtifactUpdate, "artifact-update", nil
	}
	var w wireTask
	if err := json.Unmarshal(raw, &w); err != nil {
		return w, "", fmt.Errorf("%w: %w", ErrBadTask, err)
	}
	kind := w.Kind
	if kind == "" {
		switch {
		case w.Status != nil && w.ID != "":
			kind = "task"
		case w.MessageID != "" && w.Parts != nil:
			kind = "message"
		}
	}
	return w, kind, nil
}

func messageResult(msg json.RawMessage) json.RawMessage {
	var m struct {
		Parts []json.RawMessage `json:"parts"`
	}
	if json.Unmarshal(msg, &m) != nil {
		return nil
	}
	return ResultOf(m.Parts)
}

// ResultOf turns A2A parts of either version into one JSON value: the data
// of a lone data part, the string of a lone text part, the texts joined by
// newlines when every part is text, else {"parts": [...]} as sent. Nil for
// no parts.
func ResultOf(parts []json.RawMessage) json.RawMessage {
	if len(parts) == 0 {
		return nil
	}
	var texts []string
	for _, p := range parts {
		var w struct {
			Kind string          `json:"kind"`
			Text *string         `json:"text"`
			Data json.RawMessage `json:"data"`
		}
		if json.Unmarshal(p, &w) != nil {
			return wrapParts(parts)
		}
		switch {
		case w.Text != nil:
			texts = append(texts, *w.Text)
		case len(w.Data) > 0 && len(parts) == 1:
			return w.Data
		default:
			return wrapParts(parts)
		}
	}
	b, _ := json.Marshal(strings.Join(texts, "\n"))
	return b
}

func wrapParts(parts []json.RawMessage) json.RawMessage {
	b, _ := json.Marshal(struct {
		Parts []json.RawMessage `json:"parts"`
	}{parts})
	return b
}
