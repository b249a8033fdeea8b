package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The Tasks extension (SEP-2663) as a client: the official Go SDK's client
// reads no task from a tools/call, so a server that speaks the 2026-07-28
// revision and declares the extension is called here, by plain JSON-RPC
// over HTTP (that revision is stateless: no session to keep), and its
// tasks are read with tasks/get.

// TasksExtension is the Tasks extension's capability name.
const TasksExtension = "io.modelcontextprotocol/tasks"

// statelessRevision is the first revision without sessions (SEP-2575).
const statelessRevision = "2026-07-28"

// ErrTaskUnknown marks tasks/get's answer that the server knows no such
// task (-32602, invalid params): it lost it, a restart say. Any other
// error may be passing, and the task still running.
var ErrTaskUnknown = errors.New("the MCP server knows no such task")

// Task is a task an MCP server answered (a tools/call's, or tasks/get's).
type Task struct {
	ID     string
	Status string // working, input_required, completed, failed, cancelled
	// PollInterval is what the server asks between two tasks/get (0: none).
	PollInterval time.Duration
	// Message is the server's statusMessage; Error a failed task's error.
	Message string
	Error   string
	// Outcome is a completed task's tool result.
	Outcome Outcome
}

// Ended reports whether the task has ended.
func (t Task) Ended() bool {
	return t.Status == "completed" || t.Status == "failed" || t.Status == "cancelled"
}

// speaksTasks reports the revision to speak with a server that declared
// the Tasks extension in its discovery, or "" when it did not.
func speaksTasks(cs *mcp.ClientSession) string {
	res := cs.InitializeResult()
	if res == nil || res.ProtocolVersion < statelessRevision || res.Capabilities == nil {
		return ""
	}
	if _, ok := res.Capabilities.Extensions[TasksExtension]; !ok {
		return ""
	}
	return res.ProtocolVersion
}

// taskJSON is a task on the wire, and a tools/call's answer read as one.
type taskJSON struct {
	ResultType     string          `json:"resultType"`
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage"`
	PollIntervalMs int64           `json:"pollIntervalMs"`
	Result         json.RawMessage `json:"result"`
	Error          *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (t taskJSON) task() (Task, error) {
	out := Task{ID: t.TaskID, Status: t.Status, Message: t.StatusMessage, PollInterval: time.Duration(t.PollIntervalMs) * time.Millisecond}
	if t.Error != nil {
		out.Error = fmt.Sprintf("%s (%d)", t.Error.Message, t.Error.Code)
	}
	if t.Status == "completed" {
		var res mcp.CallToolResult
		if err := json.Unmarshal(t.Result, &res); err != nil {
			return out, fmt.Errorf("%w: the completed task %s has no tool result: %w", ErrProtocol, t.TaskID, err)
		}
		out.Outcome = OutcomeOf(&res)
	}
	return out, nil
}

// callTask is a tools/call that may be answered with a task.
func (c Client) callTask(ctx context.Context, ep Endpoint, revision, name string, args json.RawMessage, deadline time.Time) (Outcome, *Task, error) {
	params := map[string]any{"name": name, "arguments": args}
	raw, err := c.post(ctx, ep, revision, "tools/call", name, params, callMeta(deadline))
	if err != nil {
		return Outcome{}, nil, err
	}
	var t taskJSON
	if err := json.Unmarshal(raw, &t); err != nil {
		return Outcome{}, nil, fmt.Errorf("%w: tools/call %s: %w", ErrProtocol, name, err)
	}
	if t.ResultType == "task" {
		if t.TaskID == "" {
			return Outcome{}, nil, fmt.Errorf("%w: tools/call %s answered a task without its taskId", ErrProtocol, name)
		}
		task, err := t.task()
		return Outcome{}, &task, err
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return Outcome{}, nil, fmt.Errorf("%w: tools/call %s: %w", ErrProtocol, name, err)
	}
	return OutcomeOf(&res), nil, nil
}

// GetTask reads task id of ep (tasks/get). A server that no longer knows
// the task answers -32602 (ErrTaskUnknown); other errors are ErrProtocol
// (a JSON-RPC error, a malformed answer) or the transport's.
func (c Client) GetTask(ctx context.Context, ep Endpoint, id string) (Task, error) {
	revision := statelessRevision
	raw, err := c.post(ctx, ep, revision, "tasks/get", "", map[string]any{"taskId": id}, nil)
	var rpc *rpcError
	if errors.As(err, &rpc) && rpc.Code == -32602 {
		return Task{}, fmt.Errorf("%w: %w", ErrTaskUnknown, err)
	}
	if err != nil {
		return Task{}, err
	}
	var t taskJSON
	if err := json.Unmarshal(raw, &t); err != nil {
		return Task{}, fmt.Errorf("%w: tasks/get %s: %w", ErrProtocol, id, err)
	}
	if t.TaskID == "" {
		t.TaskID = id
	}
	return t.task()
}

// CancelTask asks ep to cancel task id (tasks/cancel); the server decides
// whether and when it does.
func (c Client) CancelTask(ctx context.Context, ep Endpoint, id string) error {
	_, err := c.post(ctx, ep, statelessRevision, "tasks/cancel", "", map[string]any{"taskId": id}, nil)
	return err
}

// post sends one request of the stateless revision (with meta's keys in
// its _meta) and answers its result: a JSON-RPC error is ErrProtocol, an
// HTTP failure a plain error.
func (c Client) post(ctx context.Context, ep Endpoint, revision, method, name string, params map[string]any, meta mcp.Meta) (json.RawMessage, error) {
	m := map[string]any{
		"io.modelcontextprotocol/protocolVersion":    revision,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "agent-reach", "version": c.Version},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}},
	}
	for k, v := range meta {
		m[k] = v
	}
	params["_meta"] = m
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range ep.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", revision)
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	msg, err := readResponse(resp)
	if err != nil {
		return nil, fmt.Errorf("%s of %s: HTTP %d: %w", method, ep.URL, resp.StatusCode, err)
	}
	if msg.Error != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrProtocol, method, &rpcError{Code: msg.Error.Code, Message: msg.Error.Message})
	}
	if len(msg.Result) == 0 {
		return nil, fmt.Errorf("%w: %s answered no result", ErrProtocol, method)
	}
	return msg.Result, nil
}

// rpcError is a JSON-RPC error a server answered.
type rpcError struct {
	Code    int64
	Message string
}

func (e *rpcError) Error() string { return fmt.Sprintf("%s (%d)", e.Message, e.Code) }

type rpcResponse struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// readResponse reads the answer to request 1, as JSON or as the first
// response on an SSE stream (its notifications skipped).
func readResponse(resp *http.Response) (rpcResponse, error) {
	var msg rpcResponse
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	body := io.LimitReader(resp.Body, 16<<20)
	if ct != "text/event-stream" {
		raw, err := io.ReadAll(body)
		if err != nil {
			return msg, err
		}
		if err := json.Unmarshal(raw, &msg); err != nil || (msg.Result == nil && msg.Error == nil) {
			return msg, fmt.Errorf("no JSON-RPC answer: %.200s", raw)
		}
		return msg, nil
	}
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue
		}
		if json.Unmarshal([]byte(strings.TrimSpace(data)), &msg) == nil && string(msg.ID) == "1" && (msg.Result != nil || msg.Error != nil) {
			return msg, nil
		}
		msg = rpcResponse{}
	}
	if err := sc.Err(); err != nil {
		return msg, err
	}
	return msg, fmt.Errorf("the stream ended without an answer")
}
