package server

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
)

func TestTaskStatus(t *testing.T) {
	for _, c := range []struct {
		job            domain.JobStatus
		current, older string
	}{
		{domain.StatusSubmitted, TaskWorking, TaskWorking},
		{domain.StatusAwaitingApproval, TaskWorking, TaskWorking},
		{domain.StatusDelivered, TaskWorking, TaskWorking},
		{domain.StatusTimeout, TaskWorking, TaskWorking},
		{domain.StatusAwaitingInput, TaskInputRequired, TaskInputRequired},
		{domain.StatusSuccess, TaskCompleted, TaskCompleted},
		{domain.StatusFailed, TaskCompleted, TaskFailed},
		{domain.StatusDeadLetter, TaskCompleted, TaskFailed},
		{domain.StatusRejected, TaskCompleted, TaskFailed},
		{domain.StatusCancelled, TaskCancelled, TaskCancelled},
	} {
		require.Equal(t, c.current, TaskStatus(c.job, false), "%s (2026-07-28)", c.job)
		require.Equal(t, c.older, TaskStatus(c.job, true), "%s (2025-11-25)", c.job)
	}
}

func TestStatusMessage(t *testing.T) {
	for _, c := range []struct {
		job  Job
		want string
	}{
		{Job{Status: domain.StatusSubmitted}, "submitted, waiting for an agent"},
		{Job{Status: domain.StatusSubmitted, AgentID: "a1"}, "submitted, waiting for an agent"}, // its last attempt failed: waiting again
		{Job{Status: domain.StatusSubmitted, AgentID: "a1", Routed: true}, "being delivered to a1"},
		{Job{Status: domain.StatusDelivered, AgentID: "a1"}, "delivered to a1"},
		{Job{Status: domain.StatusAwaitingInput}, "the agent asks for input"},
	} {
		require.Equal(t, c.want, StatusMessage(c.job), "%+v", c.job)
	}
}

func TestResultAsContent(t *testing.T) {
	for _, c := range []struct {
		name       string
		job        Job
		text       string
		structured any
		isError    bool
	}{
		{"an object", Job{Status: domain.StatusSuccess, Result: json.RawMessage(`{"sum":5}`)}, `{"sum":5}`, map[string]any{"sum": float64(5)}, false},
		{"a string", Job{Status: domain.StatusSuccess, Result: json.RawMessage(`"done"`)}, "done", nil, false},
		{"a number", Job{Status: domain.StatusSuccess, Result: json.RawMessage(`42`)}, "42", nil, false},
		{"nothing", Job{Status: domain.StatusSuccess}, "null", nil, false},
		{"failed", Job{ID: "j1", Status: domain.StatusFailed, BizCode: "out_of_stock", Error: "none left"}, "job j1 FAILED (out_of_stock): none left", nil, true},
		{"dead letter", Job{ID: "j2", Status: domain.StatusDeadLetter, Error: "no_agent"}, "job j2 DEAD_LETTER: no_agent", nil, true},
		{"cancelled", Job{ID: "j3", Status: domain.StatusCancelled}, "job j3 CANCELLED", nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Result(c.job)
			require.Len(t, r.Content, 1)
			require.Equal(t, "text", r.Content[0].Type)
			require.Equal(t, c.text, r.Content[0].Text)
			require.Equal(t, c.isError, r.IsError)
			if c.structured == nil {
				require.Nil(t, r.StructuredContent)
			} else {
				require.Equal(t, c.structured, r.StructuredContent)
			}
		})
	}
}

func TestToolNames(t *testing.T) {
	byTool, names := ToolNames([]string{"document:parse:ocr", "text.shout", "document_parse_ocr", "find_capability", "a b"})
	require.Equal(t, []string{"document_parse_ocr", "text.shout", "document_parse_ocr_2", "find_capability_2", "a_b"}, names)
	for i, n := range names {
		require.Equal(t, []string{"document:parse:ocr", "text.shout", "document_parse_ocr", "find_capability", "a b"}[i], byTool[n])
	}
}
