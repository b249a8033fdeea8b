package server

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentreach/agentreach/domain"
)

// MaxListenTasks is how many tasks one subscriptions/listen may follow.
const MaxListenTasks = 100

// codeMissingCapability is MISSING_REQUIRED_CLIENT_CAPABILITY (SEP-2663):
// notifications/tasks asked for without the tasks extension; and
// codeHeaderMismatch the 2026-07-28 transport's answer to an Mcp-Method
// header that is not the body's method.
const (
	codeMissingCapability = -32021
	codeHeaderMismatch    = -32020
)

// Listening is a subscription's wake-ups (Backend.Listen): Changed is
// signalled by every commit, this process's or another's (it may be
// spurious: the stream reads again and sends only what changed), Ending
// is closed when the process begins to shut down, and Stop ends both.
type Listening struct {
	Changed <-chan struct{}
	Ending  <-chan struct{}
	Stop    func()
}

// listenRequest is subscriptions/listen (2026-07-28, with SEP-2663's
// taskIds).
type listenRequest struct {
	ID     json.RawMessage `json:"id"`
	Params struct {
		Meta struct {
			Caps struct {
				Extensions map[string]json.RawMessage `json:"extensions"`
			} `json:"io.modelcontextprotocol/clientCapabilities"`
		} `json:"_meta"`
		Notifications struct {
			TaskIDs          []string `json:"taskIds"`
			ToolsListChanged bool     `json:"toolsListChanged"`
		} `json:"notifications"`
	} `json:"params"`
}

// listenKeepAlive is how often a quiet stream sends an SSE comment, and
// listenRecheck how often it reads again without a wake-up (a lost
// notification delays a notification, never loses it).
// listenGap is the least time between two reads of what a stream
// follows (a busy deployment commits far more often), listenToolsGap
// between two reads of the tool list, and ListenLifetime how long one
// stream lasts: then it is answered complete (a client listens again, its
// key checked again).
const (
	listenKeepAlive = 15 * time.Second
	listenRecheck   = time.Second
	listenGap       = 100 * time.Millisecond
	listenToolsGap  = time.Second
	ListenLifetime  = 10 * time.Minute
)

// listen serves subscriptions/listen: an SSE stream that acknowledges the
// tasks and the tool list it follows (a task the caller may not read is
// -32602, as tasks/get answers it), sends each
// task's state at once and then each time it changes (woken by the
// commits of any process), and notifications/tools/list_changed when the
// caller's tools change. It reads them again at most every listenGap. It
// ends, with the request's answer, when every task it follows has ended
// and it follows no tool list, when the process shuts down, or after
// ListenLifetime.
func (s *Server) listen(w http.ResponseWriter, r *http.Request, c Caller, body []byte) {
	ctx := r.Context()
	var req listenRequest
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		writeRPCError(w, http.StatusUnsupportedMediaType, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: "Content-Type must be 'application/json'"})
		return
	}
	if m := r.Header.Get("Mcp-Method"); m != "" && m != "subscriptions/listen" {
		writeRPCError(w, http.StatusBadRequest, nil, &jsonrpc.Error{Code: codeHeaderMismatch,
			Message: fmt.Sprintf("header mismatch: Mcp-Method %q, the body's method subscriptions/listen", m)})
		return
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.ID) == 0 || string(req.ID) == "null" {
		writeRPCError(w, http.StatusBadRequest, req.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: "subscriptions/listen must be a request with an id"})
		return
	}
	want := req.Params.Notifications
	if _, ok := req.Params.Meta.Caps.Extensions[TasksExtension]; len(want.TaskIDs) > 0 && !ok {
		data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}}})
		writeRPCError(w, http.StatusOK, req.ID, &jsonrpc.Error{Code: codeMissingCapability,
			Message: "Missing required client capability: taskIds need the " + TasksExtension + " extension", Data: data})
		return
	}
	if len(want.TaskIDs) > MaxListenTasks {
		writeRPCError(w, http.StatusOK, req.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("taskIds names %d tasks: one subscription follows at most %d", len(want.TaskIDs), MaxListenTasks)})
		return
	}
	l, err := s.cfg.Backend.Listen(ctx, c)
	if err != nil {
		writeRPCError(w, http.StatusTooManyRequests, req.ID, s.cfg.Error(err))
		return
	}
	defer l.Stop()
	st := &listenStream{s: s, c: c, w: w, id: req.ID, seen: map[string]string{}, tasks: []string{}}
	for _, id := range want.TaskIDs {
		if _, dup := st.seen[id]; dup {
			continue
		}
		if _, err := s.cfg.Backend.Job(ctx, c, id); errors.Is(err, domain.ErrNotFound) {
			writeRPCError(w, http.StatusOK, req.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
				Message: fmt.Sprintf("no task %q in namespace %s for this key", id, c.Namespace)})
			return
		} else if err != nil {
			writeRPCError(w, http.StatusServiceUnavailable, req.ID, s.cfg.Error(err))
			return
		}
		st.seen[id], st.tasks = "", append(st.tasks, id)
	}
	st.tools = want.ToolsListChanged
	if st.tools {
		if st.toolsSeen, err = s.toolsFingerprint(ctx, c); err != nil {
			writeRPCError(w, http.StatusServiceUnavailable, req.ID, s.cfg.Error(err))
			return
		}
		st.toolsRead = time.Now()
	}
	st.serve(ctx, l)
}

// listenStream is one subscriptions/listen's stream.
type listenStream struct {
	s  *Server
	c  Caller
	w  http.ResponseWriter
	id json.RawMessage
	// tasks are the tasks it follows; seen each one's state last sent.
	tasks []string
	seen  map[string]string
	// tools: it follows the caller's tool list, last seen as toolsSeen.
	tools     bool
	toolsSeen string
	toolsRead time.Time
}

func (st *listenStream) serve(ctx context.Context, l Listening) {
	h := st.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	st.w.WriteHeader(http.StatusOK)
	ack := map[string]any{"taskIds": st.tasks}
	if st.tools {
		ack["toolsListChanged"] = true
	}
	if !st.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
		"params": map[string]any{"_meta": st.meta(), "notifications": ack}}) {
		return
	}
	keepAlive := time.NewTicker(listenKeepAlive)
	defer keepAlive.Stop()
	recheck := time.NewTicker(listenRecheck)
	defer recheck.Stop()
	lifetime := time.NewTimer(ListenLifetime)
	defer lifetime.Stop()
	for {
		if done, ok := st.update(ctx); !ok || done {
			if ok {
				st.complete()
			}
			return
		}
		gap := time.NewTimer(listenGap)
		select { // no read again before the gap
		case <-ctx.Done():
			gap.Stop()
			return
		case <-gap.C:
		}
		select {
		case <-ctx.Done():
			return
		case <-l.Ending:
			st.complete()
			return
		case <-lifetime.C:
			st.complete()
			return
		case <-l.Changed:
		case <-recheck.C:
		case <-keepAlive.C:
			if _, err := fmt.Fprint(st.w, ":\n\n"); err != nil {
				return
			}
			flush(st.w)
		}
	}
}

// update sends what changed since the last look: each followed task's
// state, and list_changed when the caller's tools changed. done: every
// task has ended and no tool list is followed; ok false: the client is
// gone.
func (st *listenStream) update(ctx context.Context) (done, ok bool) {
	done = !st.tools
	for _, id := range st.tasks {
		j, err := st.s.cfg.Backend.Job(ctx, st.c, id)
		if err != nil {
			done = false // read again at the next wake-up
			continue
		}
		state := string(j.Status) + "|" + j.UpdatedAt.String() + "|" + StatusMessage(j)
		if !j.Status.Terminal() {
			done = false
		}
		if st.seen[id] == state {
			continue
		}
		st.seen[id] = state
		t := detailedTask(j)
		t.Meta = st.meta()
		if !st.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/tasks", "params": t}) {
			return false, false
		}
	}
	if st.tools && time.Since(st.toolsRead) >= listenToolsGap {
		st.toolsRead = time.Now()
		if fp, err := st.s.toolsFingerprint(ctx, st.c); err == nil && fp != st.toolsSeen {
			st.toolsSeen = fp
			if !st.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": map[string]any{"_meta": st.meta()}}) {
				return false, false
			}
		}
	}
	return done, true
}

func (st *listenStream) meta() mcp.Meta {
	return mcp.Meta{"io.modelcontextprotocol/subscriptionId": st.id}
}

// complete answers the listen request: the subscription ended gracefully.
func (st *listenStream) complete() {
	st.send(map[string]any{"jsonrpc": "2.0", "id": st.id, "result": map[string]any{"resultType": "complete", "_meta": st.meta()}})
}

// send writes one message as an SSE event; false when the client is gone.
func (st *listenStream) send(msg any) bool {
	b, err := json.Marshal(msg)
	if err != nil {
		return false
	}
	if _, err := fmt.Fprintf(st.w, "event: message\ndata: %s\n\n", b); err != nil {
		return false
	}
	flush(st.w)
	return true
}

func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// toolsFingerprint is a digest of the tools the caller may call, with
// their words and schemas: it changes when tools/list's answer would.
func (s *Server) toolsFingerprint(ctx context.Context, c Caller) (string, error) {
	tools, names, err := s.namedTools(ctx, c)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for i, t := range tools {
		if t.Allowed {
			_, _ = fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%s\x00", names[i], t.Capability, t.Title, t.Description, t.InputSchema)
		}
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}

// writeRPCError answers a JSON-RPC error as JSON with an HTTP status.
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, e *jsonrpc.Error) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": id, "error": e})
}
