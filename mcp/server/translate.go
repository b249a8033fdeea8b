package server

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/agentreach/agentreach/domain"
)

// The task statuses of MCP's Tasks extension.
const (
	TaskWorking       = "working"
	TaskInputRequired = "input_required"
	TaskCompleted     = "completed"
	TaskFailed        = "failed"
	TaskCancelled     = "cancelled"
)

// TaskStatus is the task status a job's status maps to. Under the Tasks
// extension (2026-07-28) a tool that ran and failed is a completed task
// whose result says isError; under the 2025-11-25 experimental tasks it is
// a failed one (legacy).
func TaskStatus(s domain.JobStatus, legacy bool) string {
	switch s {
	case domain.StatusAwaitingInput:
		return TaskInputRequired
	case domain.StatusSuccess:
		return TaskCompleted
	case domain.StatusFailed, domain.StatusDeadLetter, domain.StatusRejected:
		if legacy {
			return TaskFailed
		}
		return TaskCompleted
	case domain.StatusCancelled:
		return TaskCancelled
	}
	return TaskWorking // SUBMITTED, AWAITING_APPROVAL, DELIVERED, TIMEOUT (it is tried again)
}

// StatusMessage says in words where a job stands, for a task's
// statusMessage.
func StatusMessage(j Job) string {
	switch j.Status {
	case domain.StatusSubmitted:
		if j.Routed && j.AgentID != "" {
			return "being delivered to " + j.AgentID
		}
		return "submitted, waiting for an agent"
	case domain.StatusAwaitingApproval:
		return "waiting for an approval"
	case domain.StatusDelivered:
		return "delivered to " + j.AgentID
	case domain.StatusTimeout:
		return "an attempt timed out; it is tried again"
	case domain.StatusAwaitingInput:
		return "the agent asks for input"
	case domain.StatusSuccess:
		return "succeeded"
	case domain.StatusCancelled:
		return "cancelled"
	}
	return failure(j)
}

// Content is one MCP content block (text only: results are JSON).
type Content struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// ToolResult is an MCP CallToolResult.
type ToolResult struct {
	Content           []Content `json:"content"`
	StructuredContent any       `json:"structuredContent,omitempty"`
	IsError           bool      `json:"isError,omitempty"`
}

// Result is the tool result of a job that ended: a SUCCESS's result as
// text (a JSON string as itself, any other JSON as its text) and, when it
// is a JSON object, as structured content; FAILED, DEAD_LETTER and
// REJECTED as isError with the reason; CANCELLED as isError too.
func Result(j Job) ToolResult {
	if j.Status != domain.StatusSuccess {
		return ToolResult{Content: []Content{{Type: "text", Text: failure(j)}}, IsError: true}
	}
	raw := json.RawMessage(strings.TrimSpace(string(j.Result)))
	if len(raw) == 0 {
		raw = json.RawMessage("null")
	}
	out := ToolResult{Content: []Content{{Type: "text", Text: string(raw)}}}
	var text string
	if raw[0] == '"' && json.Unmarshal(raw, &text) == nil {
		out.Content[0].Text = text
	}
	var obj map[string]any
	if json.Unmarshal(raw, &obj) == nil && obj != nil {
		out.StructuredContent = obj
	}
	return out
}

// failure says why a job did not succeed.
func failure(j Job) string {
	var b strings.Builder
	fmt.Fprintf(&b, "job %s %s", j.ID, j.Status)
	if j.BizCode != "" {
		fmt.Fprintf(&b, " (%s)", j.BizCode)
	}
	if j.Error != "" {
		fmt.Fprintf(&b, ": %s", j.Error)
	}
	return b.String()
}

var unsafeToolChars = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// ToolNames names each capability's tool: the capability with every
// character MCP does not allow in a tool name (A–Z, a–z, 0–9, _ - .) made
// "_", at most 128 long, a suffix where two would meet. The answer maps
// tool names to capabilities, and names lists them in caps' order.
func ToolNames(caps []string) (byTool map[string]string, names []string) {
	byTool = make(map[string]string, len(caps))
	names = make([]string, len(caps))
	for i, c := range caps {
		base := unsafeToolChars.ReplaceAllString(c, "_")
		if len(base) > 120 {
			base = base[:120]
		}
		name := base
		for n := 2; byTool[name] != "" || name == FindCapabilityTool; n++ {
			name = fmt.Sprintf("%s_%d", base, n)
		}
		byTool[name], names[i] = c, name
	}
	return byTool, names
}

// FindCapabilityTool is the tool that resolves an intent.
const FindCapabilityTool = "find_capability"

// PermissiveSchema is a tool's input schema when its capability has none.
var PermissiveSchema = json.RawMessage(`{"type":"object","additionalProperties":true}`)
