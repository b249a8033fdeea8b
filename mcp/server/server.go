// Package server is Agent-Reach's MCP face: each namespace is an MCP
// server (Streamable HTTP, stateless) whose tools are the namespace's
// capabilities, and a tools/call is a durable job. It speaks the
// 2026-07-28 revision and the earlier ones current client SDKs send, by
// the official Go SDK (github.com/modelcontextprotocol/go-sdk); the SDK has
// no tasks, so this package answers tools/list and tools/call itself (a
// receiving middleware) and adds the Tasks extension (SEP-2663:
// tasks/get, tasks/update, tasks/cancel) and the 2025-11-25 experimental
// tasks (params.task, tasks/result) as custom methods.
package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentreach/agentreach/auth"
	"github.com/agentreach/agentreach/domain"
)

// TasksExtension is the Tasks extension's capability name.
const TasksExtension = "io.modelcontextprotocol/tasks"

// DefaultInline is how long a tools/call waits for its job to end before it
// answers (a client with tasks gets a task at once instead); a call's
// _meta "agentreach/wait_ms" sets it, up to MaxInline.
const (
	DefaultInline = 25 * time.Second
	MaxInline     = 60 * time.Second
)

// TaskTTL is how long a task's result is kept at least: the job's history,
// kept for the retention period, is the task.
const TaskTTL = 24 * time.Hour

// PollInterval is what tasks suggest between two tasks/get.
const PollInterval = 500 * time.Millisecond

// Job is a job as the MCP face shows it.
type Job struct {
	ID, Namespace, Capability, AgentID string
	Status                             domain.JobStatus
	Result                             json.RawMessage
	BizCode, Error                     string
	SubmittedAt, UpdatedAt             time.Time
	// Routed: its latest attempt is routed to AgentID and on its way
	// (nothing recorded of it since).
	Routed bool
}

// Tool is a capability as a tool. Tools are named over every tool of the
// namespace (so a name means one capability whichever key asks), and
// listed and called only where Allowed (the key may submit it).
type Tool struct {
	Capability, Title, Description string
	InputSchema                    json.RawMessage
	Allowed                        bool
}

// Caller is who calls, over which namespace's endpoint.
type Caller struct {
	Principal *auth.Principal
	Namespace string
	Metadata  domain.Metadata
	// legacyTask is a 2025-11-25 tools/call's params.task (its ttl in ms,
	// 0 for none asked; nil: no task asked for).
	legacyTask *int64
}

// Backend is what the face needs of the service. Errors are the service's
// own; Config.Error turns them into JSON-RPC errors.
type Backend interface {
	// Tools lists the capabilities of the caller's namespace that have an
	// agent in service or coming to it, by name, each saying whether the
	// caller may submit it.
	Tools(ctx context.Context, c Caller) ([]Tool, error)
	// Resolve resolves an intent to a capability with its explanation.
	Resolve(ctx context.Context, c Caller, intent string) (domain.IntentResolution, error)
	// Submit submits a job as POST /v1/jobs does, answering its id.
	Submit(ctx context.Context, c Caller, sub domain.Submitted) (string, error)
	// Job loads a job of the caller's namespace that the caller may read
	// (domain.ErrNotFound otherwise).
	Job(ctx context.Context, c Caller, id string) (Job, error)
	// Await loads the job once it has ended or when until passes,
	// whichever is first, woken by the commit that ends it.
	Await(ctx context.Context, c Caller, id string, until time.Time) (Job, error)
	// Cancel cancels the job; Input gives the input the agent asked for.
	Cancel(ctx context.Context, c Caller, id, reason string) error
	Input(ctx context.Context, c Caller, id string, payload json.RawMessage) error
	// Listen holds one of the caller's waits for a subscriptions/listen
	// stream, with its wake-ups.
	Listen(ctx context.Context, c Caller) (Listening, error)
}

// Config is what a Server serves with.
type Config struct {
	Backend Backend
	Version string
	// Error answers a backend error as a JSON-RPC error (its code and a
	// message for the caller).
	Error func(error) *jsonrpc.Error
}

// Server is the MCP face.
type Server struct {
	cfg  Config
	sdk  *mcp.Server
	http *mcp.StreamableHTTPHandler
}

// New returns the MCP face.
func New(cfg Config) *Server {
	s := &Server{cfg: cfg}
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}} // on subscriptions/listen (listen.go)
	caps.AddExtension(TasksExtension, map[string]any{})
	s.sdk = mcp.NewServer(&mcp.Implementation{Name: "agent-reach", Title: "Agent-Reach", Version: cfg.Version}, &mcp.ServerOptions{
		Capabilities: caps,
		Instructions: "Each tool is a capability of this namespace, served by its registered agents. A call is a durable job: " +
			"routed, retried and timed out by Agent-Reach. Call " + FindCapabilityTool + " to find the tool for what you want done.",
	})
	s.sdk.AddReceivingMiddleware(s.middleware)
	must(mcp.AddReceivingCustomMethod(s.sdk, "tasks/get", s.tasksGet))
	must(mcp.AddReceivingCustomMethod(s.sdk, "tasks/cancel", s.tasksCancel))
	must(mcp.AddReceivingCustomMethod(s.sdk, "tasks/update", s.tasksUpdate))
	must(mcp.AddReceivingCustomMethod(s.sdk, "tasks/result", s.tasksResult))
	s.http = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.sdk },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, MaxRequestBodyBytes: 4 << 20})
	return s
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

type callerKey struct{}

func callerOf(ctx context.Context) (Caller, error) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	if !ok {
		return c, errors.New("mcp: no caller in the request's context")
	}
	return c, nil
}

// ServeHTTP serves one MCP request of caller c (authenticated, and
// allowed to see c.Namespace, by the API's middleware).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request, c Caller) {
	if r.Method == http.MethodPost && r.Body != nil {
		body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20+1))
		if err == nil && len(body) <= 4<<20 && !json.Valid(body) {
			writeRPCError(w, http.StatusBadRequest, nil, &jsonrpc.Error{Code: jsonrpc.CodeParseError,
				Message: "parse error: the body is not JSON (a JSON-RPC message is expected)"})
			return
		}
		var peek struct {
			Method string `json:"method"`
			Params struct {
				Task *struct {
					TTL *int64 `json:"ttl"`
				} `json:"task"`
			} `json:"params"`
		}
		if err == nil && json.Unmarshal(body, &peek) == nil {
			switch {
			case peek.Method == "subscriptions/listen":
				s.listen(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)), c, body)
				return
			case peek.Method == "tools/call" && peek.Params.Task != nil:
				// A 2025-11-25 client asks for a task in params.task,
				// which the SDK does not keep: read it here.
				ttl := int64(0)
				if peek.Params.Task.TTL != nil {
					ttl = *peek.Params.Task.TTL
				}
				c.legacyTask = &ttl
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	s.http.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
}

// middleware answers tools/list and tools/call from the namespace's
// catalogue and jobs, and adds the tasks capability of 2025-11-25 to
// initialize's answer; every other method goes to the SDK.
func (s *Server) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "tools/list":
			return s.listTools(ctx)
		case "tools/call":
			call, ok := req.(*mcp.CallToolRequest)
			if !ok {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "tools/call without params"}
			}
			return s.callTool(ctx, call)
		case "initialize":
			res, err := next(ctx, method, req)
			if err != nil {
				return res, err
			}
			return withLegacyTasks(res)
		}
		return next(ctx, method, req)
	}
}

// rawResult is a result the SDK sends as it is.
type rawResult struct {
	mcp.ResultBase
	raw json.RawMessage
}

func (r *rawResult) MarshalJSON() ([]byte, error) { return r.raw, nil }

// withLegacyTasks adds capabilities.tasks (2025-11-25: task-augmented
// tools/call, cancel) to initialize's answer.
func withLegacyTasks(res mcp.Result) (mcp.Result, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	caps, _ := m["capabilities"].(map[string]any)
	if caps == nil {
		caps = map[string]any{}
		m["capabilities"] = caps
	}
	caps["tasks"] = map[string]any{"cancel": map[string]any{}, "requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}
	raw, err := json.Marshal(m)
	return &rawResult{raw: raw}, err
}

type toolJSON struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Execution   map[string]any  `json:"execution,omitempty"`
}

type listToolsResult struct {
	mcp.ResultBase
	ResultType string     `json:"resultType,omitempty"`
	Tools      []toolJSON `json:"tools"`
}

var findCapabilitySchema = json.RawMessage(`{"type":"object","properties":{"intent":{"type":"string",` +
	`"description":"What you want done, in your own words."}},"required":["intent"],"additionalProperties":false}`)

func (s *Server) listTools(ctx context.Context) (mcp.Result, error) {
	c, err := callerOf(ctx)
	if err != nil {
		return nil, err
	}
	tools, names, err := s.namedTools(ctx, c)
	if err != nil {
		return nil, err
	}
	out := &listToolsResult{ResultType: "complete", Tools: make([]toolJSON, 0, len(tools)+1)}
	out.Tools = append(out.Tools, toolJSON{Name: FindCapabilityTool, Title: "Find a capability",
		Description: "Finds the tool of this namespace that does what the intent says, with the reasons; call that tool next.",
		InputSchema: findCapabilitySchema, Execution: map[string]any{"taskSupport": "forbidden"}})
	for i, t := range tools {
		if !t.Allowed {
			continue
		}
		schema := t.InputSchema
		if len(schema) == 0 {
			schema = PermissiveSchema
		}
		desc := t.Description
		if desc == "" {
			desc = "The capability " + t.Capability + " of this namespace."
		}
		out.Tools = append(out.Tools, toolJSON{Name: names[i], Title: t.Title, Description: desc, InputSchema: schema,
			Execution: map[string]any{"taskSupport": "optional"}})
	}
	return out, nil
}

// namedTools answers the namespace's tools and their names (ToolNames,
// over every tool, so a name means one capability whichever key asks).
func (s *Server) namedTools(ctx context.Context, c Caller) ([]Tool, []string, error) {
	tools, err := s.cfg.Backend.Tools(ctx, c)
	if err != nil {
		return nil, nil, s.cfg.Error(err)
	}
	caps := make([]string, len(tools))
	for i, t := range tools {
		caps[i] = t.Capability
	}
	_, names := ToolNames(caps)
	return tools, names, nil
}

// callToolResult is a tools/call's answer: a tool result, or a task.
type callToolResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType,omitempty"`
	ToolResult
}

// taskJSON is a task in the Tasks extension's shape (and, with ttl and
// pollInterval, in 2025-11-25's).
type taskJSON struct {
	TaskID         string `json:"taskId"`
	Status         string `json:"status"`
	StatusMessage  string `json:"statusMessage,omitempty"`
	CreatedAt      string `json:"createdAt"`
	LastUpdatedAt  string `json:"lastUpdatedAt"`
	TTLMs          *int64 `json:"ttlMs,omitempty"`
	PollIntervalMs int64  `json:"pollIntervalMs,omitempty"`
	TTL            *int64 `json:"ttl,omitempty"`
	PollInterval   int64  `json:"pollInterval,omitempty"`
}

type createTaskResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType,omitempty"`
	taskJSON
}

type legacyCreateTaskResult struct {
	mcp.ResultBase
	Task taskJSON `json:"task"`
}

func task(j Job, legacy bool) taskJSON {
	t := taskJSON{TaskID: j.ID, Status: TaskStatus(j.Status, legacy), StatusMessage: StatusMessage(j),
		CreatedAt: j.SubmittedAt.UTC().Format(time.RFC3339Nano), LastUpdatedAt: j.UpdatedAt.UTC().Format(time.RFC3339Nano)}
	ttl := TaskTTL.Milliseconds()
	if legacy {
		t.TTL, t.PollInterval = &ttl, PollInterval.Milliseconds()
	} else {
		t.TTLMs, t.PollIntervalMs = &ttl, PollInterval.Milliseconds()
	}
	return t
}

func wantsTasks(req *mcp.CallToolRequest) bool {
	caps := req.ClientCapabilities()
	if caps == nil {
		return false
	}
	_, ok := caps.Extensions[TasksExtension]
	return ok
}

func (s *Server) callTool(ctx context.Context, req *mcp.CallToolRequest) (mcp.Result, error) {
	c, err := callerOf(ctx)
	if err != nil {
		return nil, err
	}
	p := req.Params
	if p.Name == FindCapabilityTool {
		return s.findCapability(ctx, c, p.Arguments)
	}
	tools, names, err := s.namedTools(ctx, c)
	if err != nil {
		return nil, err
	}
	capability, ok := "", false
	for i, t := range tools {
		if names[i] == p.Name && t.Allowed {
			capability, ok = t.Capability, true
		}
	}
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("no tool %q in namespace %s for this key (tools/list lists them)", p.Name, c.Namespace)}
	}
	args := p.Arguments
	if len(bytes.TrimSpace(args)) == 0 || string(bytes.TrimSpace(args)) == "null" {
		args = json.RawMessage("{}")
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(args, &obj) != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "arguments must be a JSON object: they are the job's payload"}
	}
	sub := domain.Submitted{Namespace: c.Namespace, Capability: capability, Payload: args, Via: domain.ViaMCP, TimeoutMS: metaInt(p.Meta, "agentreach/timeout_ms"),
		MaxAttempts: metaInt(p.Meta, "agentreach/max_attempts"), Priority: domain.Priority(metaString(p.Meta, "agentreach/priority")),
		CallbackURL: metaString(p.Meta, "agentreach/callback_url")}
	if key := metaString(p.Meta, "agentreach/idempotency_key"); key != "" {
		sub.IdempotencyKey = "mcp:" + key
	}
	id, err := s.cfg.Backend.Submit(ctx, c, sub)
	if err != nil {
		return nil, s.cfg.Error(err)
	}
	// The job is stored: a task may be handed out now.
	switch {
	case wantsTasks(req):
		j, err := s.cfg.Backend.Job(ctx, c, id)
		if err != nil {
			return nil, s.cfg.Error(err)
		}
		return &createTaskResult{ResultType: "task", taskJSON: task(j, false)}, nil
	case c.legacyTask != nil:
		j, err := s.cfg.Backend.Job(ctx, c, id)
		if err != nil {
			return nil, s.cfg.Error(err)
		}
		return &legacyCreateTaskResult{Task: task(j, true)}, nil
	}
	wait := DefaultInline
	if ms := metaInt(p.Meta, "agentreach/wait_ms"); ms > 0 {
		wait = min(time.Duration(ms)*time.Millisecond, MaxInline)
	}
	j, err := s.cfg.Backend.Await(ctx, c, id, time.Now().Add(wait))
	if err != nil {
		return nil, s.cfg.Error(err)
	}
	if !j.Status.Terminal() {
		return &callToolResult{ResultType: "complete", ToolResult: ToolResult{IsError: true, Content: []Content{{Type: "text",
			Text: fmt.Sprintf("job %s has not ended within %s (%s); it goes on: GET /v1/jobs/%s, or call with the tasks extension",
				id, wait, StatusMessage(j), id)}}, StructuredContent: map[string]any{"job_id": id, "status": j.Status}}}, nil
	}
	return &callToolResult{ResultType: "complete", ToolResult: Result(j)}, nil
}

func (s *Server) findCapability(ctx context.Context, c Caller, args json.RawMessage) (mcp.Result, error) {
	var in struct {
		Intent string `json:"intent"`
	}
	if json.Unmarshal(args, &in) != nil || strings.TrimSpace(in.Intent) == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: `arguments: {"intent": "what you want done"}`}
	}
	res, err := s.cfg.Backend.Resolve(ctx, c, in.Intent)
	if err != nil {
		var rpc *jsonrpc.Error
		if e := s.cfg.Error(err); errors.As(e, &rpc) && rpc.Code != jsonrpc.CodeInternalError {
			// Nothing matched, or it is ambiguous: the model reads why.
			return &callToolResult{ResultType: "complete", ToolResult: ToolResult{IsError: true, Content: []Content{{Type: "text", Text: rpc.Message}}}}, nil
		}
		return nil, s.cfg.Error(err)
	}
	// The tool's name as tools/list gives it (named over the namespace's
	// tools: a collision's suffix included).
	tools, names, err := s.namedTools(ctx, c)
	if err != nil {
		return nil, err
	}
	name := res.Capability
	for i, t := range tools {
		if t.Capability == res.Capability {
			name = names[i]
		}
	}
	structured := map[string]any{"tool": name, "capability": res.Capability, "resolution": res}
	text := fmt.Sprintf("Call the tool %s (capability %s).", name, res.Capability)
	return &callToolResult{ResultType: "complete", ToolResult: ToolResult{Content: []Content{{Type: "text", Text: text}}, StructuredContent: structured}}, nil
}

func metaString(m mcp.Meta, key string) string {
	v, _ := m[key].(string)
	return v
}

func metaInt(m mcp.Meta, key string) int {
	switch v := m[key].(type) {
	case float64:
		return int(v)
	case json.Number:
		n, _ := v.Int64()
		return int(n)
	}
	return 0
}

// TaskParams are the params of tasks/get, tasks/cancel and tasks/result.
type TaskParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

// UpdateParams are tasks/update's: the answers to the input requests.
type UpdateParams struct {
	mcp.ParamsBase
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
}

type getTaskResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType,omitempty"`
	taskJSON
	Result        *ToolResult     `json:"result,omitempty"`
	Error         *jsonrpc.Error  `json:"error,omitempty"`
	InputRequests json.RawMessage `json:"inputRequests,omitempty"`
}

type ackResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

// legacy reports whether the request speaks 2025-11-25's experimental
// tasks (no 2026 protocol version in its _meta).
func legacy(p mcp.ParamsBase) bool {
	v, _ := p.Meta["io.modelcontextprotocol/protocolVersion"].(string)
	return v == "" || v < "2026-07-28"
}

func (s *Server) taskJob(ctx context.Context, id string) (Caller, Job, error) {
	c, err := callerOf(ctx)
	if err != nil {
		return c, Job{}, err
	}
	if id == "" {
		return c, Job{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "taskId is required"}
	}
	j, err := s.cfg.Backend.Job(ctx, c, id)
	if errors.Is(err, domain.ErrNotFound) {
		return c, j, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("no task %q in namespace %s for this key", id, c.Namespace)}
	}
	if err != nil {
		return c, j, s.cfg.Error(err)
	}
	return c, j, nil
}

func (s *Server) tasksGet(ctx context.Context, _ *mcp.ServerSession, p *TaskParams) (*getTaskResult, error) {
	_, j, err := s.taskJob(ctx, p.TaskID)
	if err != nil {
		return nil, err
	}
	if legacy(p.ParamsBase) {
		return &getTaskResult{taskJSON: task(j, true)}, nil // 2025-11-25: the result comes by tasks/result
	}
	out := detailedTask(j)
	out.ResultType = "complete"
	return out, nil
}

// detailedTask is a task as tasks/get and notifications/tasks show it
// (SEP-2663's DetailedTask): its input requests while it waits for
// input, its result inline once it has ended.
func detailedTask(j Job) *getTaskResult {
	out := &getTaskResult{taskJSON: task(j, false)}
	switch {
	case j.Status == domain.StatusAwaitingInput:
		out.InputRequests = json.RawMessage(`{"input":{"method":"elicitation/create","params":{"message":` +
			mustJSON(StatusMessage(j)) + `,"requestedSchema":{"type":"object"}}}}`)
	case j.Status == domain.StatusCancelled:
	case j.Status.Terminal():
		r := Result(j)
		out.Result = &r
	}
	return out
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// tasksResult is 2025-11-25's tasks/result: the tool result of a task
// that ended, waiting for it (up to MaxInline) if it has not.
func (s *Server) tasksResult(ctx context.Context, _ *mcp.ServerSession, p *TaskParams) (*callToolResult, error) {
	c, j, err := s.taskJob(ctx, p.TaskID)
	if err != nil {
		return nil, err
	}
	if !j.Status.Terminal() {
		if j, err = s.cfg.Backend.Await(ctx, c, j.ID, time.Now().Add(MaxInline)); err != nil {
			return nil, s.cfg.Error(err)
		}
		if !j.Status.Terminal() {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "task " + j.ID + " has not ended: " + StatusMessage(j)}
		}
	}
	out := &callToolResult{ToolResult: Result(j)}
	out.Meta = mcp.Meta{"io.modelcontextprotocol/related-task": map[string]any{"taskId": j.ID}}
	return out, nil
}

func (s *Server) tasksCancel(ctx context.Context, _ *mcp.ServerSession, p *TaskParams) (mcp.Result, error) {
	c, j, err := s.taskJob(ctx, p.TaskID)
	if err != nil {
		return nil, err
	}
	if err := s.cfg.Backend.Cancel(ctx, c, j.ID, "cancelled over MCP (tasks/cancel)"); err != nil {
		return nil, s.cfg.Error(err)
	}
	if legacy(p.ParamsBase) {
		if j, err = s.cfg.Backend.Job(ctx, c, j.ID); err != nil {
			return nil, s.cfg.Error(err)
		}
		return &createTaskResult{taskJSON: task(j, true)}, nil
	}
	return &ackResult{ResultType: "complete"}, nil
}

// tasksUpdate gives a job waiting for input (AWAITING_INPUT) the input: the
// first of inputResponses' values (an elicitation's content, or the
// object itself). It never approves: approval keeps its own scope.
func (s *Server) tasksUpdate(ctx context.Context, _ *mcp.ServerSession, p *UpdateParams) (*ackResult, error) {
	c, j, err := s.taskJob(ctx, p.TaskID)
	if err != nil {
		return nil, err
	}
	var payload json.RawMessage
	for _, v := range p.InputResponses {
		var elicit struct {
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(v, &elicit) == nil && len(elicit.Content) > 0 {
			payload = elicit.Content
		} else {
			payload = v
		}
		break
	}
	if payload == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "inputResponses is empty: give the input the task asks for"}
	}
	if err := s.cfg.Backend.Input(ctx, c, j.ID, payload); err != nil {
		return nil, s.cfg.Error(err)
	}
	return &ackResult{ResultType: "complete"}, nil
}
