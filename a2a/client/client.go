package client

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

	"github.com/agentreach/agentreach/a2a"
)

// JSON-RPC and A2A error codes that change what Agent-Reach does.
const (
	CodeMethodNotFound       = -32601
	CodeInternal             = -32603
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
// only the v0.3 method names, so the v1.0 name is tried once per agent,
// and which refused push notifications.
type Client struct {
	HTTP   *http.Client
	legacy sync.Map // endpoint → true
	noPush sync.Map // endpoint → true
}

// RefusedPush remembers that the agent at endpoint answered a message
// with a push config PushNotificationNotSupported, whatever its card says.
func (c *Client) RefusedPush(endpoint string) { c.noPush.Store(endpoint, true) }

// TakesPush reports whether the agent at endpoint has not refused push
// notifications (RefusedPush) since this process started.
func (c *Client) TakesPush(endpoint string) bool {
	_, refused := c.noPush.Load(endpoint)
	return !refused
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
// a2a.ErrBadTask.
func (c *Client) SendMessage(ctx context.Context, s Send) (a2a.Task, error) {
	params := s.params()
	return c.callEither(ctx, s.Endpoint, "SendMessage", params, params.V03(), s.Header)
}

// GetTask reads a task from the agent.
func (c *Client) GetTask(ctx context.Context, endpoint, taskID string, header http.Header) (a2a.Task, error) {
	params := taskParams{ID: taskID}
	return c.callEither(ctx, endpoint, "GetTask", params, params, header)
}

// CancelTask asks the agent to cancel a task.
func (c *Client) CancelTask(ctx context.Context, endpoint, taskID string, header http.Header) error {
	params := taskParams{ID: taskID}
	_, err := c.callEither(ctx, endpoint, "CancelTask", params, params, header)
	return err
}

// taskParams are the params of GetTask and CancelTask, in both versions.
type taskParams struct {
	ID string `json:"id"`
}

// metadata is what a message says of the job it carries, in both versions.
type metadata struct {
	ReachAttempt int    `json:"reach_attempt"`
	ReachJobID   string `json:"reach_job_id"`
	Skill        string `json:"skill"`
}

// params is the message of s in v1.0's shape: the payload as a text part
// if it is a string, else as a data part; returnImmediately, and the push
// target with its token as Bearer credentials.
func (s Send) params() a2a.SendParamsV1 {
	md, _ := json.Marshal(metadata{ReachAttempt: s.Attempt, ReachJobID: s.JobID, Skill: s.Capability})
	part := a2a.PartV1{Data: s.Payload, MediaType: "application/json"}
	var text string
	if json.Unmarshal(s.Payload, &text) == nil {
		part = a2a.PartV1{Text: &text}
	}
	returnNow := true
	cfg := &a2a.SendConfigV1{ReturnImmediately: &returnNow}
	if s.Push != nil {
		cfg.TaskPushNotificationConfig = &a2a.PushConfigV1{URL: s.Push.URL, Token: s.Push.Token,
			Authentication: &a2a.PushAuthV1{Scheme: "Bearer", Credentials: s.Push.Token}}
	}
	id := s.MessageID
	if id == "" {
		id = s.JobID
	}
	msg := &a2a.MessageV1{MessageID: id, Role: a2a.RoleUserV1, Parts: []a2a.PartV1{part}, Metadata: md, TaskID: s.TaskID}
	return a2a.SendParamsV1{Configuration: cfg, Message: msg, Metadata: md}
}

// callEither calls the v1.0 method, or its v0.3 name for an agent that
// answered method-not-found to a v1.0 name before (or does now).
func (c *Client) callEither(ctx context.Context, endpoint, method string, v1Params, v03Params any, header http.Header) (a2a.Task, error) {
	if _, old := c.legacy.Load(endpoint); !old {
		t, err := c.call(ctx, endpoint, method, "1.0", v1Params, header)
		var rpc *RPCError
		if !errors.As(err, &rpc) || rpc.Code != CodeMethodNotFound {
			return t, err
		}
		c.legacy.Store(endpoint, true)
	}
	return c.call(ctx, endpoint, a2a.MethodsV1[method], "0.3", v03Params, header)
}

// request is a JSON-RPC request.
type request struct {
	ID      int    `json:"id"`
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

func (c *Client) call(ctx context.Context, endpoint, method, version string, params any, header http.Header) (a2a.Task, error) {
	body, err := json.Marshal(request{ID: 1, JSONRPC: "2.0", Method: method, Params: params})
	if err != nil {
		return a2a.Task{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return a2a.Task{}, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("A2A-Version", version)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return a2a.Task{}, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return a2a.Task{}, err
	}
	if resp.StatusCode != http.StatusOK {
		b := string(answer)
		if len(b) > 256 {
			b = b[:256] + "…"
		}
		return a2a.Task{}, &HTTPError{Status: resp.StatusCode, Body: b, RetryAfter: resp.Header.Get("Retry-After")}
	}
	if len(answer) > maxAnswer {
		return a2a.Task{}, fmt.Errorf("%w: answer larger than 16 MiB", a2a.ErrBadTask)
	}
	var rpc struct {
		Result json.RawMessage `json:"result"`
		Error  *RPCError       `json:"error"`
	}
	if err := json.Unmarshal(answer, &rpc); err != nil {
		return a2a.Task{}, fmt.Errorf("%w: not a JSON-RPC answer: %w", a2a.ErrBadTask, err)
	}
	if rpc.Error != nil {
		return a2a.Task{}, rpc.Error
	}
	return a2a.ParseTask(rpc.Result)
}
