package server

import (
	"encoding/json"

	sdk "github.com/a2aproject/a2a-go/a2a"

	"github.com/agentreach/agentreach/a2a"
	"github.com/agentreach/agentreach/domain"
)

// Task is a job as an A2A task: its id is the job id, its state the job's
// status in A2A terms, its result the one artifact. Callers read it from
// the server, and the jobs of callers with push configs are pushed it.
func Task(j *Job) *sdk.Task {
	t := &sdk.Task{ID: sdk.TaskID(j.JobID), ContextID: j.JobID,
		Metadata: map[string]any{"reach_status": string(j.Status), "capability": j.Capability, "attempts": j.Attempts,
			"trace_id": j.TraceID}}
	if j.AgentID != "" {
		t.Metadata["agent_id"] = j.AgentID
	}
	ts := j.UpdatedAt.UTC()
	t.Status = sdk.TaskStatus{State: State(j.Status, j.Attempts), Timestamp: &ts}
	if len(j.Result) > 0 && (j.Status == domain.StatusSuccess || j.Status == domain.StatusFailed) {
		t.Artifacts = []*sdk.Artifact{{ID: "result", Name: "result", Parts: sdk.ContentParts{partOf(j.Result)}}}
	}
	if j.Error != "" && j.Status.Terminal() && j.Status != domain.StatusSuccess {
		t.Status.Message = &sdk.Message{ID: j.JobID + ".status", Role: sdk.MessageRoleAgent, TaskID: t.ID, ContextID: t.ContextID,
			Parts: sdk.ContentParts{sdk.TextPart{Text: j.Error}}}
	}
	return t
}

// State is a job status in A2A terms.
func State(s domain.JobStatus, attempts int) sdk.TaskState {
	switch s {
	case domain.StatusSuccess:
		return sdk.TaskStateCompleted
	case domain.StatusFailed, domain.StatusDeadLetter:
		return sdk.TaskStateFailed
	case domain.StatusCancelled:
		return sdk.TaskStateCanceled
	case domain.StatusRejected:
		return sdk.TaskStateRejected
	case domain.StatusAwaitingInput:
		return sdk.TaskStateInputRequired
	case domain.StatusDelivered, domain.StatusTimeout:
		return sdk.TaskStateWorking
	case domain.StatusSubmitted:
		if attempts > 0 {
			return sdk.TaskStateWorking
		}
	}
	return sdk.TaskStateSubmitted
}

// partOf is a JSON value as an A2A part: an object as a data part, a
// string as a text part, anything else as data {"value": …}.
func partOf(v json.RawMessage) sdk.Part {
	var obj map[string]any
	if json.Unmarshal(v, &obj) == nil && obj != nil {
		return sdk.DataPart{Data: obj}
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return sdk.TextPart{Text: s}
	}
	var x any
	_ = json.Unmarshal(v, &x)
	return sdk.DataPart{Data: map[string]any{"value": x}}
}

// PushBody is the push notification of job j to a config created in
// version: the task itself for v0.3 (application/json), a StreamResponse
// holding the task for v1.0 (application/a2a+json), as each version's
// receivers read it. The whole task, with its artifacts, so a receiver
// needs no GetTask.
func PushBody(j *Job, version string) (body []byte, contentType string, err error) {
	body, err = json.Marshal(Task(j))
	if err != nil || version != VersionV1 {
		return body, "application/json", err
	}
	var t a2a.TaskV03
	if err := json.Unmarshal(body, &t); err != nil {
		return nil, "", err
	}
	v1 := t.V1()
	body, err = json.Marshal(a2a.StreamResponseV1{Task: &v1})
	return body, "application/a2a+json", err
}
