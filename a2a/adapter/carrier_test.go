package adapter

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/a2a"
	"github.com/agentreach/agentreach/domain"
)

// TestOutcome: every state of an A2A task reads as the observation the
// decisions expect; a failed task's words are the job's error, and its
// result only when they did not come from the status message itself.
func TestOutcome(t *testing.T) {
	t.Parallel()
	msg := json.RawMessage(`{"parts":[{"text":"need a date"}]}`)
	out := json.RawMessage(`{"v":1}`)
	for _, tc := range []struct {
		name string
		task a2a.Task
		want domain.Observation
	}{
		{"completed", a2a.Task{ID: "t", State: a2a.StateCompleted, Result: out},
			domain.Observation{Kind: domain.ObservedResult, Status: domain.StatusSuccess, Result: out, RemoteTaskID: "t"}},
		{"failed with artifacts", a2a.Task{ID: "t", State: a2a.StateFailed, Result: out, Message: msg},
			domain.Observation{Kind: domain.ObservedResult, Status: domain.StatusFailed, Result: out, BizCode: "a2a_failed", ErrText: "need a date", RemoteTaskID: "t"}},
		{"failed, its message the result", a2a.Task{ID: "t", State: a2a.StateFailed, Result: out, Message: msg, FromMessage: true},
			domain.Observation{Kind: domain.ObservedResult, Status: domain.StatusFailed, BizCode: "a2a_failed", ErrText: "need a date", RemoteTaskID: "t"}},
		{"rejected", a2a.Task{ID: "t", State: a2a.StateRejected, Message: msg},
			domain.Observation{Kind: domain.ObservedRejected, Reason: domain.ReasonRejected, ErrText: "the agent rejected the task: need a date", RemoteTaskID: "t"}},
		{"canceled", a2a.Task{ID: "t", State: a2a.StateCanceled},
			domain.Observation{Kind: domain.ObservedCancelled, RemoteTaskID: "t"}},
		{"input required", a2a.Task{ID: "t", State: a2a.StateInputRequired, Message: msg},
			domain.Observation{Kind: domain.ObservedAwaiting, A2AState: string(a2a.StateInputRequired), Result: msg, RemoteTaskID: "t"}},
		{"working", a2a.Task{ID: "t", State: a2a.StateWorking},
			domain.Observation{Kind: domain.ObservedAccepted, RemoteTaskID: "t"}},
	} {
		require.Equal(t, tc.want, a2aOutcome(tc.task, false), tc.name)
		polled := tc.want
		polled.Poll = true
		require.Equal(t, polled, a2aOutcome(tc.task, true), tc.name)
	}
}
