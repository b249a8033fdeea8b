package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/gin-gonic/gin"

	"github.com/agentreach/agentreach/auth"
	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/jobs"
)

// Agent-Reach as an A2A agent. Each namespace is one agent: its card at
// /a2a/{namespace}/.well-known/agent-card.json (the default namespace's
// also at /.well-known/agent-card.json) lists the capabilities its healthy
// agents offer as skills, and JSON-RPC at /a2a/{namespace} takes
// SendMessage / message/send as a job submission, GetTask / tasks/get from
// the job's event stream, CancelTask / tasks/cancel, SendStreamingMessage
// and SubscribeToTask as SSE, and push-notification configs as the job's
// callbacks. The JSON-RPC framing and the v0.3
// methods are a2a-go's (a2asrv); the v1.0 method names and shapes are
// translated to them on the way in.

// a2aBlockingWait bounds how long a blocking SendMessage waits for the job
// to end before it answers with the task as it is.
const a2aBlockingWait = 25 * time.Second

// a2aCall is what a JSON-RPC method needs of its HTTP request.
type a2aCall struct {
	p  *auth.Principal
	ns string
	md domain.Metadata
}

type a2aCallKey struct{}

func a2aCallFrom(ctx context.Context) *a2aCall { return ctx.Value(a2aCallKey{}).(*a2aCall) }

func (s *Server) a2aNamespace(c *gin.Context) string {
	if ns := c.Param("namespace"); ns != "" {
		return ns
	}
	if ns := c.Query("namespace"); ns != "" {
		return ns
	}
	return domain.DefaultNamespace
}

// a2aCard serves a namespace's Agent Card, with an ETag and a max-age so
// readers can revalidate cheaply. The card is public, as A2A discovery
// needs; it names skills, never agents or jobs.
func (s *Server) a2aCard(c *gin.Context) {
	ns := s.a2aNamespace(c)
	if !domain.ValidNamespace(ns) {
		_ = c.Error(NotFound("no namespace %q", ns))
		return
	}
	body, err := json.Marshal(s.agentCard(ns))
	if err != nil {
		_ = c.Error(err)
		return
	}
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	c.Header("ETag", etag)
	c.Header("Cache-Control", "public, max-age=60")
	if c.GetHeader("If-None-Match") == etag {
		c.Status(http.StatusNotModified)
		return
	}
	c.Data(http.StatusOK, "application/json", body)
}

// agentCard is the card of namespace ns: the v0.3 fields a2a-go reads,
// plus v1.0's supportedInterfaces.
func (s *Server) agentCard(ns string) map[string]any {
	url := s.deps.Jobs.Config().PublicURL + "/a2a/" + ns
	skills := []a2a.AgentSkill{}
	for _, sk := range s.deps.Registry.Snapshot().Skills(ns) {
		skills = append(skills, a2a.AgentSkill{ID: sk.Capability, Name: sk.Capability, Tags: append([]string{}, sk.Aliases...),
			Description: fmt.Sprintf("%s, routed by Agent-Reach to %d healthy agent(s) with retries, timeouts and dead-lettering", sk.Capability, sk.Agents)})
	}
	card := a2a.AgentCard{
		Name: "Agent-Reach (" + ns + ")",
		Description: "Agent-Reach reaches every agent registered in namespace " + ns + ": name a skill in the message's " +
			"metadata.skill, and the job is routed to the best healthy agent offering it, delivered durably, and its task answered here.",
		URL: url, PreferredTransport: a2a.TransportProtocolJSONRPC, ProtocolVersion: "0.3.0", Version: s.deps.Version,
		Capabilities:                      a2a.AgentCapabilities{PushNotifications: true, Streaming: true, StateTransitionHistory: true},
		DefaultInputModes:                 []string{"application/json", "text/plain"},
		DefaultOutputModes:                []string{"application/json", "text/plain"},
		Skills:                            skills,
		SecuritySchemes:                   a2a.NamedSecuritySchemes{"api_key": a2a.HTTPAuthSecurityScheme{Scheme: "Bearer", Description: "an Agent-Reach API key"}},
		Security:                          []a2a.SecurityRequirements{{"api_key": a2a.SecuritySchemeScopes{}}},
		SupportsAuthenticatedExtendedCard: true,
	}
	b, _ := json.Marshal(card)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	out["supportedInterfaces"] = []map[string]any{{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0", "tenant": ns}}
	return out
}

// a2aRPC serves A2A JSON-RPC for a namespace the key sees.
func (s *Server) a2aRPC(c *gin.Context) {
	ns := s.a2aNamespace(c)
	p := principal(c)
	if !domain.ValidNamespace(ns) || !p.Sees(ns) {
		_ = c.Error(NotFound("no namespace %q for this key", ns))
		return
	}
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		_ = c.Error(err)
		return
	}
	if id, code, msg := checkRPCRequest(body); code != 0 {
		c.JSON(http.StatusOK, gin.H{"jsonrpc": "2.0", "id": id, "error": gin.H{"code": code, "message": msg}})
		return
	}
	ctx := context.WithValue(c.Request.Context(), a2aCallKey{}, &a2aCall{p: p, ns: ns, md: s.meta(c, p.Actor())})
	req := c.Request.Clone(ctx)
	req.Body = io.NopCloser(bytes.NewReader(normalizeA2ARequest(body)))
	c.Header("Content-Type", "application/json")
	var head struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	_ = json.Unmarshal(body, &head)
	v0 := v1Methods[head.Method]
	if v0 == "" {
		v0 = head.Method
	}
	if v0 == "message/stream" || v0 == "tasks/resubscribe" {
		s.a2aRPCHandler.ServeHTTP(c.Writer, req)
		return
	}
	var buf bufferedResponse
	s.a2aRPCHandler.ServeHTTP(&buf, req)
	out := buf.body.Bytes()
	switch {
	case len(bytes.TrimSpace(out)) == 0:
		// a2asrv answers a method without a result (a deleted push
		// config) with nothing at all; JSON-RPC wants a null result.
		out, _ = json.Marshal(gin.H{"jsonrpc": "2.0", "id": head.ID, "result": nil})
	case v0 != head.Method:
		out = v1Response(head.Method, out) // a v1.0 caller gets v1.0 shapes
	}
	c.Data(buf.status(), "application/json", out)
}

// rpcMembers are the members a JSON-RPC request may have, and rpcParams
// those of the params of the methods whose params are not A2A's
// push-config shapes (which differ between versions and are read leniently).
var (
	rpcMembers = map[string]bool{"jsonrpc": true, "id": true, "method": true, "params": true}
	sendParams = map[string]bool{"message": true, "configuration": true, "metadata": true, "tenant": true}
	taskParams = map[string]bool{"id": true, "historyLength": true, "metadata": true, "tenant": true}
	rpcParams  = map[string]map[string]bool{
		"message/send": sendParams, "SendMessage": sendParams, "message/stream": sendParams, "SendStreamingMessage": sendParams,
		"tasks/get": taskParams, "GetTask": taskParams, "tasks/cancel": taskParams, "CancelTask": taskParams,
		"tasks/resubscribe": taskParams, "SubscribeToTask": taskParams,
	}
)

// checkRPCRequest refuses, as REST refuses a body, a request that is not
// one JSON value (trailing data: -32700), has members JSON-RPC or the
// method does not define (-32600, -32602), or holds text PostgreSQL cannot
// store (-32602). It answers the request's id and a code, 0 if it passes.
func checkRPCRequest(body []byte) (json.RawMessage, int, string) {
	if !json.Valid(body) {
		return nil, -32700, "parse error: the body must be exactly one JSON object"
	}
	var req map[string]json.RawMessage
	if json.Unmarshal(body, &req) != nil {
		return nil, -32600, "invalid request: the body must be a JSON object"
	}
	id := req["id"]
	for k := range req {
		if !rpcMembers[k] {
			return id, -32600, fmt.Sprintf("invalid request: unknown member %q", k)
		}
	}
	var method string
	_ = json.Unmarshal(req["method"], &method)
	if known, ok := rpcParams[method]; ok && len(req["params"]) > 0 {
		var params map[string]json.RawMessage
		if json.Unmarshal(req["params"], &params) == nil {
			for k := range params {
				if !known[k] {
					return id, -32602, fmt.Sprintf("invalid params: unknown member params.%s", k)
				}
			}
		}
	}
	if at, bad := unstorableJSON(body); bad {
		return id, -32602, "invalid params: " + unstorableError(at).Message
	}
	return id, 0, ""
}

// bufferedResponse keeps a handler's answer to rewrite it.
type bufferedResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header {
	if b.header == nil {
		b.header = http.Header{}
	}
	return b.header
}

func (b *bufferedResponse) Write(p []byte) (int, error) { return b.body.Write(p) }

func (b *bufferedResponse) WriteHeader(code int) { b.code = code }

func (b *bufferedResponse) status() int {
	if b.code == 0 {
		return http.StatusOK
	}
	return b.code
}

// v1Response rewrites a2asrv's v0.3 answer for a v1.0 caller: no "kind"
// discriminators, TASK_STATE_* and ROLE_* names, and SendMessage's result
// wrapped as a SendMessageResponse ({"task": …} or {"message": …}).
func v1Response(method string, body []byte) []byte {
	var resp map[string]any
	if json.Unmarshal(body, &resp) != nil {
		return body
	}
	result, ok := resp["result"].(map[string]any)
	if !ok {
		return body
	}
	kind, _ := result["kind"].(string)
	v1Shapes(result)
	if method == "SendMessage" {
		if kind == "message" {
			resp["result"] = map[string]any{"message": result}
		} else {
			resp["result"] = map[string]any{"task": result}
		}
	}
	out, err := json.Marshal(resp)
	if err != nil {
		return body
	}
	return out
}

func v1Shapes(v any) {
	switch x := v.(type) {
	case map[string]any:
		delete(x, "kind")
		for k, e := range x {
			switch s, _ := e.(string); {
			case k == "state" && s != "":
				x[k] = "TASK_STATE_" + strings.ToUpper(strings.ReplaceAll(s, "-", "_"))
			case k == "role" && s != "":
				x[k] = "ROLE_" + strings.ToUpper(s)
			case k == "data" || k == "metadata":
				// The caller's and agents' own JSON: left as it is.
			default:
				v1Shapes(e)
			}
		}
	case []any:
		for _, e := range x {
			v1Shapes(e)
		}
	}
}

// v1Methods maps A2A v1.0 method names to the v0.3 ones a2asrv serves.
var v1Methods = map[string]string{
	"SendMessage":                      "message/send",
	"SendStreamingMessage":             "message/stream",
	"GetTask":                          "tasks/get",
	"CancelTask":                       "tasks/cancel",
	"SubscribeToTask":                  "tasks/resubscribe",
	"CreateTaskPushNotificationConfig": "tasks/pushNotificationConfig/set",
	"SetTaskPushNotificationConfig":    "tasks/pushNotificationConfig/set",
	"GetTaskPushNotificationConfig":    "tasks/pushNotificationConfig/get",
	"ListTaskPushNotificationConfig":   "tasks/pushNotificationConfig/list",
	"ListTaskPushNotificationConfigs":  "tasks/pushNotificationConfig/list",
	"DeleteTaskPushNotificationConfig": "tasks/pushNotificationConfig/delete",
	"GetExtendedAgentCard":             "agent/getAuthenticatedExtendedCard",
}

// normalizeA2ARequest rewrites a v1.0 request into v0.3 terms: the method
// name, the message's role and kind-less parts, returnImmediately, and the
// push config's single scheme. Anything it does not recognise passes as is.
func normalizeA2ARequest(body []byte) []byte {
	var req map[string]any
	if json.Unmarshal(body, &req) != nil {
		return body
	}
	method, _ := req["method"].(string)
	if m, ok := v1Methods[method]; ok {
		req["method"] = m
	}
	params, _ := req["params"].(map[string]any)
	if msg, ok := params["message"].(map[string]any); ok {
		if _, ok := msg["kind"]; !ok {
			msg["kind"] = "message"
		}
		switch msg["role"] {
		case "ROLE_USER":
			msg["role"] = "user"
		case "ROLE_AGENT":
			msg["role"] = "agent"
		}
		parts, _ := msg["parts"].([]any)
		for _, p := range parts {
			part, ok := p.(map[string]any)
			if !ok {
				continue
			}
			if _, ok := part["kind"]; ok {
				continue
			}
			switch {
			case part["text"] != nil:
				part["kind"] = "text"
			case part["data"] != nil:
				part["kind"] = "data"
				if _, ok := part["data"].(map[string]any); !ok {
					part["data"] = map[string]any{"value": part["data"]}
				}
			case part["url"] != nil:
				part["kind"], part["file"] = "file", map[string]any{"uri": part["url"]}
			case part["raw"] != nil:
				part["kind"], part["file"] = "file", map[string]any{"bytes": part["raw"]}
			}
		}
	}
	if cfg, ok := params["configuration"].(map[string]any); ok {
		if ri, ok := cfg["returnImmediately"].(bool); ok {
			cfg["blocking"] = !ri
			delete(cfg, "returnImmediately")
		}
		if tp, ok := cfg["taskPushNotificationConfig"].(map[string]any); ok {
			if a, ok := tp["authentication"].(map[string]any); ok {
				if sch, ok := a["scheme"].(string); ok {
					a["schemes"] = []string{sch}
				}
			}
			cfg["pushNotificationConfig"] = tp
			delete(cfg, "taskPushNotificationConfig")
		}
	}
	out, err := json.Marshal(req)
	if err != nil {
		return body
	}
	return out
}

// a2aPush is the ingress of push notifications from A2A agents:
// POST /a2a-push/{job_id}/{attempt} with the attempt's bearer token.
func (s *Server) a2aPush(c *gin.Context) {
	attempt, err := strconv.Atoi(c.Param("attempt"))
	if err != nil || attempt < 1 {
		_ = c.Error(Invalid("attempt", "must be a positive attempt number"))
		return
	}
	token := bearer(c)
	if token == "" {
		token = c.GetHeader("X-A2A-Notification-Token")
	}
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		_ = c.Error(err)
		return
	}
	rec, err := s.deps.Jobs.ReportA2APush(c.Request.Context(), c.Param("job_id"), attempt, token, body)
	if errors.Is(err, jobs.ErrPushToken) {
		_ = c.Error(&Error{Code: CodeUnauthenticated, Message: "push token missing or invalid (Authorization: Bearer <token given with the message>)"})
		return
	}
	if err != nil {
		_ = c.Error(err)
		return
	}
	if rec == "" {
		rec = "unchanged"
	}
	c.JSON(http.StatusOK, gin.H{"recorded": rec})
}

// a2aHandler implements a2asrv.RequestHandler over the jobs service.
type a2aHandler struct{ s *Server }

var _ a2asrv.RequestHandler = (*a2aHandler)(nil)

func metaString(ms ...map[string]any) func(key string) string {
	return func(key string) string {
		for _, m := range ms {
			if v, ok := m[key].(string); ok && v != "" {
				return v
			}
		}
		return ""
	}
}

func metaInt(m map[string]any, key string) int {
	if v, ok := m[key].(float64); ok {
		return int(v)
	}
	return 0
}

// payloadOf turns a message's parts into a job payload: the data of a lone
// data part, the text of a lone text part, else the parts as sent.
func payloadOf(parts a2a.ContentParts) (json.RawMessage, error) {
	if len(parts) == 1 {
		switch p := parts[0].(type) {
		case a2a.DataPart:
			return json.Marshal(p.Data)
		case a2a.TextPart:
			return json.Marshal(p.Text)
		}
	}
	return json.Marshal(map[string]any{"parts": parts})
}

func (h *a2aHandler) OnSendMessage(ctx context.Context, params *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	id, done, err := h.send(ctx, params)
	if err != nil {
		return nil, err
	}
	wait := a2aBlockingWait
	if params.Config != nil && params.Config.Blocking != nil && !*params.Config.Blocking {
		wait = 0
	}
	l, err := h.s.waitJob(ctx, id, wait, done)
	if err != nil {
		return nil, rpcError(err)
	}
	return jobs.A2ATask(l), nil
}

func (h *a2aHandler) OnSendMessageStream(ctx context.Context, params *a2a.MessageSendParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		id, _, err := h.send(ctx, params)
		if err != nil {
			yield(nil, err)
			return
		}
		h.stream(ctx, id)(yield)
	}
}

func (h *a2aHandler) OnResubscribeToTask(ctx context.Context, p *a2a.TaskIDParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if p == nil {
			yield(nil, a2a.ErrInvalidParams)
			return
		}
		l, err := h.readableTask(ctx, p.ID)
		if err != nil {
			yield(nil, err)
			return
		}
		h.stream(ctx, l.JobID)(yield)
	}
}

// stream yields the job as a task now and at every change of its status,
// until it ends (or the client goes): SSE fed by the log's LISTEN/NOTIFY.
func (h *a2aHandler) stream(ctx context.Context, id string) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		var last domain.JobStatus
		_, err := h.s.followJob(ctx, id, nil, func(l *jobs.Loaded) bool {
			if l.Status != last {
				last = l.Status
				if !yield(jobs.A2ATask(l), nil) {
					return true
				}
			}
			return l.Status.Terminal()
		})
		if err != nil {
			yield(nil, rpcError(err))
		}
	}
}

// send takes a message: a new job, or, for a message to an existing task,
// the caller's input to a job that awaits it. It answers the job's id and
// when a blocking send may answer.
func (h *a2aHandler) send(ctx context.Context, params *a2a.MessageSendParams) (string, func(*jobs.Loaded) bool, error) {
	call := a2aCallFrom(ctx)
	if params == nil || params.Message == nil {
		return "", nil, fmt.Errorf("message is required: %w", a2a.ErrInvalidParams)
	}
	msg := params.Message
	if msg.TaskID != "" {
		return h.continueTask(ctx, params)
	}
	meta := metaString(params.Metadata, msg.Metadata)
	skill := meta("skill")
	if skill == "" {
		skill = meta("capability")
	}
	if skill == "" {
		var names []string
		for _, sk := range h.s.deps.Registry.Snapshot().Skills(call.ns) {
			names = append(names, sk.Capability)
		}
		if len(names) != 1 {
			return "", nil, fmt.Errorf("%w: name the skill in metadata.skill (this namespace offers: %s)", a2a.ErrInvalidParams, strings.Join(names, ", "))
		}
		skill = names[0]
	}
	if !call.p.CanSubmit(skill) {
		return "", nil, errPermission("this key lacks the scope jobs:submit:%s", skill)
	}
	payload, err := payloadOf(msg.Parts)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %w", a2a.ErrInvalidParams, err)
	}
	sub := domain.Submitted{Namespace: call.ns, Capability: skill, Payload: payload,
		Priority: domain.Priority(meta("priority")), TimeoutMS: metaInt(params.Metadata, "timeout_ms"),
		MaxAttempts: metaInt(params.Metadata, "max_attempts")}
	if msg.ID != "" {
		sub.IdempotencyKey = "a2a:" + msg.ID
	}
	var push *jobs.PushConfig
	if params.Config != nil && params.Config.PushConfig != nil {
		pc := params.Config.PushConfig
		push = &jobs.PushConfig{ID: pc.ID, URL: pc.URL, Token: pc.Token}
		if pc.Auth != nil && len(pc.Auth.Schemes) > 0 {
			push.Scheme, push.Credentials = pc.Auth.Schemes[0], pc.Auth.Credentials
		}
	}
	res, err := h.s.deps.Jobs.SubmitA2A(ctx, sub, call.md, push)
	if err != nil {
		return "", nil, rpcError(err)
	}
	return res.JobID, func(l *jobs.Loaded) bool { return l.Status.Terminal() || l.Status == domain.StatusAwaitingInput }, nil
}

// continueTask takes a message to an existing task as the caller's input
// to the job, which must await it (AWAITING_INPUT).
func (h *a2aHandler) continueTask(ctx context.Context, params *a2a.MessageSendParams) (string, func(*jobs.Loaded) bool, error) {
	call := a2aCallFrom(ctx)
	l, err := h.ownTask(ctx, params.Message.TaskID)
	if err != nil {
		return "", nil, err
	}
	payload, err := payloadOf(params.Message.Parts)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %v", a2a.ErrInvalidParams, err)
	}
	l, err = h.s.deps.Jobs.ProvideInput(ctx, l.JobID, payload, call.md)
	if err != nil {
		if errors.Is(err, jobs.ErrConflict) {
			return "", nil, fmt.Errorf("%w: %v", a2a.ErrInvalidParams, err)
		}
		return "", nil, rpcError(err)
	}
	given := l.Version
	return l.JobID, func(l *jobs.Loaded) bool {
		// Done when the job ends, or the agent asks for input again.
		return l.Status.Terminal() || l.Status == domain.StatusAwaitingInput &&
			l.Records[len(l.Records)-1].Type == domain.EventAwaitingInput && l.Version > given
	}, nil
}

// waitJob loads a job, waiting up to d for done to hold of it.
func (s *Server) waitJob(ctx context.Context, id string, d time.Duration, done func(*jobs.Loaded) bool) (*jobs.Loaded, error) {
	if d <= 0 {
		return s.deps.Jobs.Load(ctx, nil, id)
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	return s.followJob(ctx, id, deadline.C, done)
}

// followJob loads a job now and again after commits to the log (at least
// every second) until visit returns true, until fires (then it loads it
// once more) or ctx ends, and answers the job as last loaded.
func (s *Server) followJob(ctx context.Context, id string, until <-chan time.Time, visit func(*jobs.Loaded) bool) (*jobs.Loaded, error) {
	wake, unsubscribe := s.deps.Store.Subscribe()
	defer unsubscribe()
	tick := time.NewTicker(time.Second) // in case a notification is missed
	defer tick.Stop()
	for {
		l, err := s.deps.Jobs.Load(ctx, nil, id)
		if err != nil || visit(l) {
			return l, err
		}
		select {
		case <-wake:
		case <-tick.C:
		case <-until:
			return s.deps.Jobs.Load(ctx, nil, id)
		case <-ctx.Done():
			return l, nil
		}
	}
}

// rpcError answers an error in A2A's terms: the A2A errors of their own
// (an unknown task, push configs), else its API error's
// JSON-RPC code (rpcCode) with its message; an internal error's text is for
// the log only.
func rpcError(err error) error {
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		return a2a.ErrTaskNotFound
	case errors.Is(err, jobs.ErrPushConfig):
		return fmt.Errorf("%w: %v", a2a.ErrUnsupportedOperation, err)
	}
	e := toAPIError(err)
	if e.Code == CodeInternal {
		return a2a.ErrInternalError
	}
	return fmt.Errorf("%w: %s", rpcErrors[rpcCode(e.Code)], e.Message)
}

// rpcErrors are the a2a-go errors that a2asrv answers with each code.
var rpcErrors = map[int]error{
	-32600: a2a.ErrInvalidRequest,
	-32602: a2a.ErrInvalidParams,
	-32603: a2a.ErrInternalError,
	-32001: a2a.ErrTaskNotFound,
}

// task loads the job of a task id that the call's key may see.
func (h *a2aHandler) task(ctx context.Context, id a2a.TaskID) (*jobs.Loaded, error) {
	if id == "" {
		return nil, fmt.Errorf("%w: id is required", a2a.ErrInvalidParams)
	}
	call := a2aCallFrom(ctx)
	l, err := h.s.deps.Jobs.Load(ctx, nil, string(id))
	if err != nil {
		return nil, rpcError(err)
	}
	if l.Namespace != call.ns || !call.p.Sees(l.Namespace) {
		return nil, a2a.ErrTaskNotFound
	}
	return l, nil
}

// errPermission is a JSON-RPC method refused for the key's scopes, as its
// REST twin refuses it with 403. A2A defines no code for it: it is an
// invalid request (-32600) whose message says why.
func errPermission(format string, args ...any) error {
	return fmt.Errorf("%w: permission denied: %s", a2a.ErrInvalidRequest, fmt.Sprintf(format, args...))
}

// readableTask is task for a key that may read jobs (jobs:read), as
// GET /v1/jobs/{id} demands.
func (h *a2aHandler) readableTask(ctx context.Context, id a2a.TaskID) (*jobs.Loaded, error) {
	l, err := h.task(ctx, id)
	if err == nil && !a2aCallFrom(ctx).p.Has(auth.ScopeJobsRead) {
		return nil, errPermission("this key lacks the scope %s", auth.ScopeJobsRead)
	}
	return l, err
}

// ownTask is task for a key that may submit the job's capability, as REST
// cancel and replay demand; push configs, which send the job's result
// elsewhere, demand it too.
func (h *a2aHandler) ownTask(ctx context.Context, id a2a.TaskID) (*jobs.Loaded, error) {
	l, err := h.task(ctx, id)
	if err == nil && !a2aCallFrom(ctx).p.CanSubmit(l.Capability) {
		return nil, errPermission("this key may not act on jobs for %s", l.Capability)
	}
	return l, err
}

func (h *a2aHandler) OnGetTask(ctx context.Context, q *a2a.TaskQueryParams) (*a2a.Task, error) {
	if q == nil {
		return nil, a2a.ErrInvalidParams
	}
	l, err := h.readableTask(ctx, q.ID)
	if err != nil {
		return nil, err
	}
	return jobs.A2ATask(l), nil
}

func (h *a2aHandler) OnCancelTask(ctx context.Context, p *a2a.TaskIDParams) (*a2a.Task, error) {
	if p == nil {
		return nil, a2a.ErrInvalidParams
	}
	l, err := h.ownTask(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	call := a2aCallFrom(ctx)
	l, err = h.s.deps.Jobs.Cancel(ctx, l.JobID, "cancelled over A2A", call.md)
	if errors.Is(err, jobs.ErrConflict) {
		return nil, fmt.Errorf("%w: %v", a2a.ErrTaskNotCancelable, err) // it ended already
	}
	if err != nil {
		return nil, rpcError(err)
	}
	return jobs.A2ATask(l), nil
}

func toTaskPushConfig(id a2a.TaskID, p jobs.PushConfig) *a2a.TaskPushConfig {
	cfg := a2a.PushConfig{ID: p.ID, URL: p.URL, Token: p.Token}
	if p.Scheme != "" {
		cfg.Auth = &a2a.PushAuthInfo{Schemes: []string{p.Scheme}} // credentials are not read back
	}
	return &a2a.TaskPushConfig{TaskID: id, Config: cfg}
}

// pushConfigs lists the push configs of a task the call's key may see.
func (h *a2aHandler) pushConfigs(ctx context.Context, id a2a.TaskID) ([]jobs.PushConfig, error) {
	l, err := h.ownTask(ctx, id)
	if err != nil {
		return nil, err
	}
	return h.s.deps.Jobs.PushConfigs(ctx, l.JobID)
}

func (h *a2aHandler) OnGetTaskPushConfig(ctx context.Context, p *a2a.GetTaskPushConfigParams) (*a2a.TaskPushConfig, error) {
	configs, err := h.pushConfigs(ctx, p.TaskID)
	if err != nil {
		return nil, err
	}
	for _, c := range configs {
		if p.ConfigID == "" || c.ID == p.ConfigID {
			return toTaskPushConfig(p.TaskID, c), nil
		}
	}
	return nil, fmt.Errorf("%w: task %s has no push config %q", a2a.ErrInvalidParams, p.TaskID, p.ConfigID)
}

func (h *a2aHandler) OnListTaskPushConfig(ctx context.Context, p *a2a.ListTaskPushConfigParams) ([]*a2a.TaskPushConfig, error) {
	configs, err := h.pushConfigs(ctx, p.TaskID)
	if err != nil {
		return nil, err
	}
	out := make([]*a2a.TaskPushConfig, 0, len(configs))
	for _, c := range configs {
		out = append(out, toTaskPushConfig(p.TaskID, c))
	}
	return out, nil
}

func (h *a2aHandler) OnSetTaskPushConfig(ctx context.Context, p *a2a.TaskPushConfig) (*a2a.TaskPushConfig, error) {
	if p == nil {
		return nil, a2a.ErrInvalidParams
	}
	l, err := h.ownTask(ctx, p.TaskID)
	if err != nil {
		return nil, err
	}
	pc := jobs.PushConfig{ID: p.Config.ID, URL: p.Config.URL, Token: p.Config.Token}
	if p.Config.Auth != nil && len(p.Config.Auth.Schemes) > 0 {
		pc.Scheme, pc.Credentials = p.Config.Auth.Schemes[0], p.Config.Auth.Credentials
	}
	saved, err := h.s.deps.Jobs.SetPushConfig(ctx, l, pc)
	if err != nil {
		return nil, rpcError(err)
	}
	return toTaskPushConfig(p.TaskID, saved), nil
}

func (h *a2aHandler) OnDeleteTaskPushConfig(ctx context.Context, p *a2a.DeleteTaskPushConfigParams) error {
	l, err := h.ownTask(ctx, p.TaskID)
	if err != nil {
		return err
	}
	if err := h.s.deps.Jobs.DeletePushConfig(ctx, l.JobID, p.ConfigID); err != nil {
		return fmt.Errorf("%w: task %s has no push config %q", a2a.ErrInvalidParams, p.TaskID, p.ConfigID)
	}
	return nil
}

func (h *a2aHandler) OnGetExtendedAgentCard(ctx context.Context) (*a2a.AgentCard, error) {
	b, _ := json.Marshal(h.s.agentCard(a2aCallFrom(ctx).ns))
	var card a2a.AgentCard
	if err := json.Unmarshal(b, &card); err != nil {
		return nil, err
	}
	return &card, nil
}
