package a2abridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// JSON-RPC and A2A error codes that change what Agent-Reach does.
const (
	CodeMethodNotFound       = -32601
	CodeTaskNotFound         = -32001
	CodePushNotSupported     = -32003
	CodeUnsupportedOperation = -32004
	CodeContentType          = -32005
	CodeInvalidAgentResponse = -32006
	CodeVersionNotSupported  = -32009
)

// RPCError is a JSON-RPC error answer.
type RPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("A2A error %d: %s", e.Code, e.Message) }

// Incompatible reports whether the error says this agent cannot take the
// job at all (so another agent should): the operation, the content type,
// push notifications or the protocol version is not supported.
func (e *RPCError) Incompatible() bool {
	switch e.Code {
	case CodePushNotSupported, CodeUnsupportedOperation, CodeContentType, CodeVersionNotSupported:
		return true
	}
	return false
}

// HTTPError is an answer other than 200.
type HTTPError struct {
	Status     int
	Body       string
	RetryAfter string
}

func (e *HTTPError) Error() string { return "HTTP " + strconv.Itoa(e.Status) + ": " + e.Body }

// Client calls A2A agents over JSON-RPC. It remembers which agents know
// only the v0.3 method names, so the v1.0 name is tried once per agent.
type Client struct {
	HTTP   *http.Client
	legacy sync.Map // endpoint → true
}

// Send is one SendMessage: a job's attempt.
type Send struct {
	Endpoint   string
	JobID      string
	Attempt    int
	Capability string
	Payload    json.RawMessage
	// Push is where the agent should push updates; nil when it offers no
	// push notifications (then Agent-Reach polls GetTask).
	Push *Push
	// Header is added to the request (trace context, job headers).
	Header http.Header
	// TaskID continues the agent's task (the answer to input-required);
	// MessageID then names this message (default: the job id).
	TaskID    string
	MessageID string
}

func (s Send) messageID() string {
	if s.MessageID != "" {
		return s.MessageID
	}
	return s.JobID
}

// Push is a per-attempt push-notification target.
type Push struct {
	URL   string
	Token string
}

// maxAnswer bounds an agent's answer.
const maxAnswer = 16 << 20

// SendMessage sends the job's payload as a message whose messageId is the
// job id (so an agent can drop a repeat), asks to return at once, and
// reads the task (or message) answered. A JSON-RPC error is a *RPCError, a
// status other than 200 an *HTTPError, an answer that is not a task
// ErrBadTask.
func (c *Client) SendMessage(ctx context.Context, s Send) (Task, error) {
	return c.callEither(ctx, s.Endpoint, "SendMessage", sendParamsV1(s), "message/send", sendParamsV03(s), s.Header)
}

// GetTask reads a task from the agent.
func (c *Client) GetTask(ctx context.Context, endpoint, taskID string, header http.Header) (Task, error) {
	params := map[string]any{"id": taskID}
	return c.callEither(ctx, endpoint, "GetTask", params, "tasks/get", params, header)
}

// CancelTask asks the agent to cancel a task.
func (c *Client) CancelTask(ctx context.Context, endpoint, taskID string, header http.Header) error {
	params := map[string]any{"id": taskID}
	_, err := c.callEither(ctx, endpoint, "CancelTask", params, "tasks/cancel", params, header)
	return err
}

// callEither calls the v1.0 method, or the v0.3 one for an agent that
// answered method-not-found to a v1.0 name before (or does now).
func (c *Client) callEither(ctx context.Context, endpoint, v1 string, v1Params any, v03 string, v03Params any, header http.Header) (Task, error) {
	if _, old := c.legacy.Load(endpoint); !old {
		t, err := c.call(ctx, endpoint, v1, "1.0", v1Params, header)
		var rpc *RPCError
		if !errors.As(err, &rpc) || rpc.Code != CodeMethodNotFound {
			return t, err
		}
		c.legacy.Store(endpoint, true)
	}
	return c.call(ctx, endpoint, v03, "0.3", v03Params, header)
}

func sendParamsV1(s Send) map[string]any {
	part := map[string]any{"data": json.RawMessage(s.Payload), "mediaType": "application/json"}
	var text string
	if json.Unmarshal(s.Payload, &text) == nil {
		part = map[string]any{"text": text}
	}
	cfg := map[string]any{"returnImmediately": true}
	if s.Push != nil {
		cfg["taskPushNotificationConfig"] = map[string]any{"url": s.Push.URL, "token": s.Push.Token,
			"authentication": map[string]any{"scheme": "Bearer", "credentials": s.Push.Token}}
	}
	msg := map[string]any{"messageId": s.messageID(), "role": "ROLE_USER", "parts": []any{part}, "metadata": metadata(s)}
	if s.TaskID != "" {
		msg["taskId"] = s.TaskID
	}
	return map[string]any{"message": msg, "configuration": cfg, "metadata": metadata(s)}
}

func sendParamsV03(s Send) map[string]any {
	var part map[string]any
	var text string
	var obj map[string]json.RawMessage
	switch {
	case json.Unmarshal(s.Payload, &text) == nil:
		part = map[string]any{"kind": "text", "text": text}
	case json.Unmarshal(s.Payload, &obj) == nil && obj != nil:
		part = map[string]any{"kind": "data", "data": json.RawMessage(s.Payload)}
	default: // v0.3 data parts are objects
		part = map[string]any{"kind": "data", "data": map[string]any{"value": json.RawMessage(s.Payload)}}
	}
	cfg := map[string]any{"blocking": false}
	if s.Push != nil {
		cfg["pushNotificationConfig"] = map[string]any{"url": s.Push.URL, "token": s.Push.Token,
			"authentication": map[string]any{"schemes": []string{"Bearer"}, "credentials": s.Push.Token}}
	}
	msg := map[string]any{"kind": "message", "messageId": s.messageID(), "role": "user", "parts": []any{part}, "metadata": metadata(s)}
	if s.TaskID != "" {
		msg["taskId"] = s.TaskID
	}
	return map[string]any{"message": msg, "configuration": cfg, "metadata": metadata(s)}
}

func metadata(s Send) map[string]any {
	return map[string]any{"skill": s.Capability, "reach_job_id": s.JobID, "reach_attempt": s.Attempt}
}

func (c *Client) call(ctx context.Context, endpoint, method, version string, params any, header http.Header) (Task, error) {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		return Task{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return Task{}, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("A2A-Version", version)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return Task{}, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return Task{}, err
	}
	if resp.StatusCode != http.StatusOK {
		b := string(answer)
		if len(b) > 256 {
			b = b[:256] + "…"
		}
		return Task{}, &HTTPError{Status: resp.StatusCode, Body: b, RetryAfter: resp.Header.Get("Retry-After")}
	}
	if len(answer) > maxAnswer {
		return Task{}, fmt.Errorf("%w: answer larger than 16 MiB", ErrBadTask)
	}
	var rpc struct {
		Result json.RawMessage `json:"result"`
		Error  *RPCError       `json:"error"`
	}
	if err := json.Unmarshal(answer, &rpc); err != nil {
		return Task{}, fmt.Errorf("%w: not a JSON-RPC answer: %w", ErrBadTask, err)
	}
	if rpc.Error != nil {
		return Task{}, rpc.Error
	}
	return ParseTask(rpc.Result)
}
