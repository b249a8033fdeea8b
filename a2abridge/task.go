package a2abridge

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/agentreach/agentreach/domain"
	"strconv"
	"strings"
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

// Task is what Agent-Reach reads of an A2A task (or of a direct Message
// answer, which counts as a completed task).
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
}

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
	var w wireTask
	kind := ""
	switch {
	case env.Task != nil:
		w, kind = *env.Task, "task"
	case env.Message != nil:
		w, kind = *env.Message, "message"
	case env.StatusUpdate != nil:
		w, kind = *env.StatusUpdate, "status-update"
	case env.ArtifactUpdate != nil:
		w, kind = *env.ArtifactUpdate, "artifact-update"
	default:
		if err := json.Unmarshal(raw, &w); err != nil {
			return Task{}, fmt.Errorf("%w: %w", ErrBadTask, err)
		}
		kind = w.Kind
		if kind == "" {
			switch {
			case w.Status != nil && w.ID != "":
				kind = "task"
			case w.MessageID != "" && w.Parts != nil:
				kind = "message"
			}
		}
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
			t.Result = messageResult(w.Status.Message)
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
			t.Result = messageResult(w.Status.Message)
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

func messageResult(msg json.RawMessage) json.RawMessage {
	var m struct {
		Parts []json.RawMessage `json:"parts"`
	}
	if json.Unmarshal(msg, &m) != nil {
		return nil
	}
	return ResultOf(m.Parts)
}

// ResultOf turns A2A parts into one JSON value: the data of a lone data
// part, the string of a lone text part, the texts joined by newlines when
// every part is text, else {"parts": [...]} as sent. Nil for no parts.
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
	b, _ := json.Marshal(map[string]any{"parts": parts})
	return b
}

// PushToken is the bearer token an A2A agent must present when it pushes
// updates of attempt of job: an HMAC of both under key (the agent's
// delivery-signing key), so nothing per job need be stored.
func PushToken(key []byte, jobID string, attempt int) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("a2a-push." + jobID + "." + strconv.Itoa(attempt)))
	return "arp_" + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// PushTokenValid checks token against PushToken under any of keys, in
// constant time.
func PushTokenValid(keys [][]byte, jobID string, attempt int, token string) bool {
	ok := false
	for _, k := range keys {
		if hmac.Equal([]byte(PushToken(k, jobID, attempt)), []byte(token)) {
			ok = true
		}
	}
	return ok && token != ""
}
