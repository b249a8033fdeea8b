package dispatch

import (
	"context"
	"errors"

	"github.com/agentreach/agentreach/domain"
	mcpclient "github.com/agentreach/agentreach/mcp/client"
	"github.com/agentreach/agentreach/registry"
)

// MCP carries an attempt to an MCP server agent: a tools/call of the job's
// capability (the tool's name) with its payload as the arguments, answered
// within the call, or with a task (the Tasks extension) that is polled. A tool result is the attempt's result (isError: FAILED,
// biz_code tool_error, its text as the error); a transport or protocol
// error is an attempt not delivered.
type MCP struct {
	Client mcpclient.Client
	// Endpoint answers where an MCP server agent is, with its headers.
	Endpoint func(ctx context.Context, k domain.AgentKey) (mcpclient.Endpoint, error)
}

// Span implements Carrier.
func (MCP) Span() string { return "mcp tools/call" }

// Carry implements Carrier.
func (m MCP) Carry(ctx context.Context, a *registry.Agent, at Attempt) domain.Observation {
	ep, err := m.Endpoint(ctx, domain.AgentKey{Namespace: a.Namespace, ID: a.AgentID})
	if err != nil {
		return domain.Observation{Kind: domain.ObservedFailed, Reason: "mcp_server_unknown", ErrText: err.Error()}
	}
	out, task, err := m.Client.CallTool(ctx, ep, at.L.Capability, at.L.Payload, at.Deadline)
	switch {
	case err == nil && task != nil && !task.Ended():
		// A task: the result comes later, read by the poller (River's
		// a2a_poll queue) at the server's poll interval, holding no worker.
		return domain.Observation{Kind: domain.ObservedAccepted, RemoteTaskID: task.ID, Poll: true}
	case err == nil && task != nil:
		return TaskObservation(*task)
	case err == nil && out.IsError:
		return domain.Observation{Kind: domain.ObservedResult, Status: domain.StatusFailed, Result: out.Result, BizCode: "tool_error",
			ErrText: Truncate(out.Text, 1024)}
	case err == nil:
		return domain.Observation{Kind: domain.ObservedResult, Status: domain.StatusSuccess, Result: out.Result}
	case ctx.Err() != nil:
		// No answer within the call: an MCP server gives no later result.
		return domain.Observation{Kind: domain.ObservedHung, Reason: "timeout", ErrText: "no tool result by the deadline"}
	case errors.Is(err, mcpclient.ErrProtocol):
		return domain.Observation{Kind: domain.ObservedFailed, Reason: "mcp_error", ErrText: Truncate(err.Error(), 1024)}
	}
	return domain.Observation{Kind: domain.ObservedFailed, Reason: classifyNetErr(ctx, err), ErrText: Truncate(err.Error(), 1024)}
}

// TaskObservation is what an ended task of an MCP server says of its
// attempt: a completed task's tool result (isError: FAILED, biz_code
// tool_error), a failed task's JSON-RPC error (FAILED, mcp_task_failed),
// a task the server cancelled (FAILED, mcp_task_cancelled).
func TaskObservation(t mcpclient.Task) domain.Observation {
	switch t.Status {
	case "completed":
		if t.Outcome.IsError {
			return domain.Observation{Kind: domain.ObservedResult, Status: domain.StatusFailed, Result: t.Outcome.Result, BizCode: "tool_error",
				ErrText: Truncate(t.Outcome.Text, 1024)}
		}
		return domain.Observation{Kind: domain.ObservedResult, Status: domain.StatusSuccess, Result: t.Outcome.Result}
	case "failed":
		return domain.Observation{Kind: domain.ObservedResult, Status: domain.StatusFailed, BizCode: "mcp_task_failed",
			ErrText: Truncate("the MCP server's task failed: "+t.Error, 1024)}
	}
	return domain.Observation{Kind: domain.ObservedResult, Status: domain.StatusFailed, BizCode: "mcp_task_cancelled",
		ErrText: Truncate("the MCP server cancelled its task: "+t.Message, 1024)}
}
