package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/agentreach/agentreach/auth"
	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/jobs/jobstore"
	mcpserver "github.com/agentreach/agentreach/mcp/server"
	"github.com/agentreach/agentreach/registry"
)

// The mount of Agent-Reach as an MCP server (package mcp/server): POST
// /mcp/{namespace} (and /mcp for the key's namespace), Streamable HTTP,
// for a key that sees the namespace. Its tools are the capabilities the
// key may submit; a call is a job like POST /v1/jobs's, with the same
// scopes and errors.

func newMCPServer(s *Server) *mcpserver.Server {
	return mcpserver.New(mcpserver.Config{Backend: mcpBackend{s}, Version: s.deps.Version, Error: mcpError})
}

// mcpRPC serves MCP for a namespace the key sees.
func (s *Server) mcpRPC(c *gin.Context) {
	p := principal(c)
	ns := c.Param("namespace")
	if ns == "" {
		ns = p.Namespace
		if ns == auth.AllNamespaces {
			ns = domain.DefaultNamespace
		}
	}
	if !domain.ValidNamespace(ns) || !p.Sees(ns) {
		_ = c.Error(NotFound("no namespace %q for this key", ns))
		return
	}
	s.mcp.ServeHTTP(c.Writer, c.Request, mcpserver.Caller{Principal: p, Namespace: ns, Metadata: s.meta(c, p.Actor())})
}

// mcpError answers an error in JSON-RPC's terms, by the API's one table of
// error kinds; an internal error's text is for the log only.
func mcpError(err error) *jsonrpc.Error {
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) {
		return rpc
	}
	e := toAPIError(err)
	if e.Code == CodeInternal {
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
	}
	msg := e.Message
	if e.Field != "" && msg != "" {
		msg = e.Field + ": " + msg
	}
	return &jsonrpc.Error{Code: int64(rpcCode(e.Code)), Message: msg}
}

// mcpBackend is the service as the MCP face needs it.
type mcpBackend struct{ s *Server }

func (b mcpBackend) Tools(ctx context.Context, c mcpserver.Caller) ([]mcpserver.Tool, error) {
	cat, err := b.s.deps.Intent.Catalogue(ctx, c.Namespace)
	if err != nil {
		return nil, err
	}
	serving := b.s.deps.Agents.Snapshot().Serving(c.Namespace)
	out := make([]mcpserver.Tool, 0, len(cat.Entries))
	for _, e := range cat.Entries {
		if len(e.Agents) == 0 || !serving[e.Name] {
			continue
		}
		out = append(out, mcpserver.Tool{Capability: e.Name, Title: e.Title, Description: e.Description, InputSchema: e.InputSchema,
			Allowed: c.Principal.CanSubmit(e.Name)})
	}
	return out, nil
}

func (b mcpBackend) Resolve(ctx context.Context, c mcpserver.Caller, intent string) (domain.IntentResolution, error) {
	if !c.Principal.Has(auth.ScopeCapabilitiesRead) && !c.Principal.Has(auth.ScopeAdmin) {
		// Without capabilities:read the key learns of no capability it
		// may not submit: neither the answer nor an ambiguity's candidates.
		res, err := b.s.deps.Intent.Resolve(ctx, c.Namespace, intent)
		if err != nil || !c.Principal.CanSubmit(res.Capability) {
			return res, &Error{Code: CodeNotFound, Message: "no capability this key may submit matches the intent"}
		}
		return res, nil
	}
	res, err := b.s.deps.Intent.Resolve(ctx, c.Namespace, intent)
	if err == nil && !c.Principal.CanSubmit(res.Capability) {
		return res, &Error{Code: CodePermissionDenied, Message: "the intent resolved to " + res.Capability + ", and this key may not submit jobs for it"}
	}
	return res, err
}

func (b mcpBackend) Submit(ctx context.Context, c mcpserver.Caller, sub domain.Submitted) (string, error) {
	if !c.Principal.CanSubmit(sub.Capability) {
		return "", &Error{Code: CodePermissionDenied, Message: "this key lacks the scope jobs:submit:" + sub.Capability}
	}
	res, err := b.s.deps.Jobs.Submit(ctx, sub, c.Metadata)
	return res.JobID, err
}

// load is a job the caller may read: of the endpoint's namespace, with
// jobs:read or the right to submit its capability.
func (b mcpBackend) load(ctx context.Context, c mcpserver.Caller, id string) (*jobstore.Loaded, error) {
	l, err := b.s.deps.Jobs.Load(ctx, nil, id)
	if err == nil && (l.Namespace != c.Namespace || !c.Principal.Sees(l.Namespace) ||
		!c.Principal.Has(auth.ScopeJobsRead) && !c.Principal.CanSubmit(l.Capability)) {
		err = fmt.Errorf("job %s: %w", id, domain.ErrNotFound)
	}
	return l, err
}

func mcpJob(l *jobstore.Loaded) mcpserver.Job {
	return mcpserver.Job{ID: l.JobID, Namespace: l.Namespace, Capability: l.Capability, AgentID: l.AgentID, Status: l.Status,
		Result: l.Result, BizCode: l.BizCode, Error: l.Error, SubmittedAt: l.SubmittedAt, UpdatedAt: l.UpdatedAt, Routed: l.LastRouted}
}

func (b mcpBackend) Job(ctx context.Context, c mcpserver.Caller, id string) (mcpserver.Job, error) {
	l, err := b.load(ctx, c, id)
	if err != nil {
		return mcpserver.Job{}, err
	}
	return mcpJob(l), nil
}

// Await waits as wait_ms does: one of the key's waits, woken by the commit
// that ends the job in any process, holding no connection while it waits.
func (b mcpBackend) Await(ctx context.Context, c mcpserver.Caller, id string, until time.Time) (mcpserver.Job, error) {
	wait, err := b.s.deps.Waits.Reserve(c.Principal.Actor())
	if err != nil {
		return mcpserver.Job{}, err
	}
	defer wait.Close()
	wait.Watch(id)
	for {
		l, err := b.load(ctx, c, id)
		if err != nil {
			return mcpserver.Job{}, err
		}
		if l.Status.Terminal() || !wait.Until(ctx, until) {
			return mcpJob(l), nil
		}
	}
}

// Listen holds one of the key's waits (as wait_ms does) for a
// subscriptions/listen stream, woken by every commit of any process
// (the event store's notification) and ended by the shutdown's drain.
func (b mcpBackend) Listen(_ context.Context, c mcpserver.Caller) (mcpserver.Listening, error) {
	wait, err := b.s.deps.Waits.Reserve(c.Principal.Actor())
	if err != nil {
		return mcpserver.Listening{}, err
	}
	changed, cancel := b.s.deps.Store.Subscribe()
	return mcpserver.Listening{Changed: changed, Ending: b.s.deps.Waits.Draining(),
		Stop: func() { cancel(); wait.Close() }}, nil
}

// own loads a job the caller may act on (cancel, input).
func (b mcpBackend) own(ctx context.Context, c mcpserver.Caller, id string) (*jobstore.Loaded, error) {
	l, err := b.load(ctx, c, id)
	if err == nil && !c.Principal.CanSubmit(l.Capability) {
		err = &Error{Code: CodePermissionDenied, Message: "this key may not act on jobs for " + l.Capability}
	}
	return l, err
}

func (b mcpBackend) Cancel(ctx context.Context, c mcpserver.Caller, id, reason string) error {
	l, err := b.own(ctx, c, id)
	if err != nil {
		return err
	}
	if l.Status.Terminal() {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("task %s has ended (%s): there is nothing to cancel", id, l.Status)}
	}
	_, err = b.s.deps.Jobs.Cancel(ctx, id, reason, c.Metadata)
	return err
}

func (b mcpBackend) Input(ctx context.Context, c mcpserver.Caller, id string, payload json.RawMessage) error {
	if _, err := b.own(ctx, c, id); err != nil {
		return err
	}
	_, err := b.s.deps.Jobs.ProvideInput(ctx, id, payload, c.Metadata)
	return err
}

// The private MCP registry: GET /v0.1/servers and GET
// /v0.1/servers/{name}/versions/latest, in the MCP Registry's read format,
// of the MCP server agents of the key's namespace (agents:read). A
// server's name is <namespace>/<agent id>; its remote is Agent-Reach's
// MCP endpoint of the namespace, so calls through it are durable jobs.

type registryRemote struct {
	Type    string           `json:"type"`
	URL     string           `json:"url"`
	Headers []map[string]any `json:"headers,omitempty"`
}

type registryServer struct {
	Schema      string           `json:"$schema"`
	Name        string           `json:"name"`
	Description string           `json:"description"`
	Version     string           `json:"version"`
	Remotes     []registryRemote `json:"remotes"`
}

type registryEntry struct {
	Server registryServer `json:"server"`
	Meta   map[string]any `json:"_meta"`
}

func (s *Server) registryEntry(c *gin.Context, ns string, m registry.MCPServer) registryEntry {
	desc := m.Description
	if desc == "" {
		desc = "MCP server " + m.AgentID + " of namespace " + ns + ", reached through Agent-Reach."
	}
	if len(desc) > 100 {
		desc = desc[:97] + "..."
	}
	version := m.Version
	if version == "" {
		version = "0.0.0"
	}
	status := "active"
	if m.State == domain.AgentOffline || m.State == domain.AgentDown {
		status = "deprecated"
	}
	return registryEntry{
		Server: registryServer{Schema: "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
			Name: ns + "/" + m.AgentID, Description: desc, Version: version,
			Remotes: []registryRemote{{Type: "streamable-http", URL: publicBase(c) + "/mcp/" + ns,
				Headers: []map[string]any{{"name": "Authorization", "description": "Bearer <an Agent-Reach API key>", "isRequired": true, "isSecret": true}}}}},
		Meta: map[string]any{
			"io.modelcontextprotocol.registry/official": map[string]any{"status": status, "publishedAt": m.RegisteredAt.UTC(),
				"updatedAt": m.RefreshedAt.UTC(), "isLatest": true},
			"io.agentreach/agent": map[string]any{"agent_id": m.AgentID, "namespace": ns, "state": m.State, "tools": nonNil(m.Tools)},
		},
	}
}

// publicBase is the service's base URL as the request reached it.
func publicBase(c *gin.Context) string {
	scheme := "http"
	if c.Request.TLS != nil || c.GetHeader("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	return scheme + "://" + c.Request.Host
}

func (s *Server) registryNamespace(c *gin.Context) (string, bool) {
	ns, err := scopeNamespace(c, c.Query("namespace"))
	if err == nil && ns == "" {
		ns = domain.DefaultNamespace
	}
	if err != nil {
		_ = c.Error(err)
		return "", false
	}
	return ns, true
}

// listRegistryServers serves GET /v0.1/servers (cursor, limit).
func (s *Server) listRegistryServers(c *gin.Context) {
	ns, ok := s.registryNamespace(c)
	if !ok {
		return
	}
	limit, err := queryInt(c, "limit", 30, 1, 100)
	if err != nil {
		_ = c.Error(err)
		return
	}
	all, err := s.deps.Agents.MCPServers(c.Request.Context(), ns)
	if err != nil {
		_ = c.Error(err)
		return
	}
	cursor := c.Query("cursor")
	entries := []registryEntry{}
	next := ""
	for _, m := range all {
		if cursor != "" && m.AgentID <= cursor {
			continue
		}
		if int64(len(entries)) == limit {
			next = entries[len(entries)-1].Meta["io.agentreach/agent"].(map[string]any)["agent_id"].(string)
			break
		}
		entries = append(entries, s.registryEntry(c, ns, m))
	}
	meta := gin.H{"count": len(entries)}
	if next != "" {
		meta["nextCursor"] = next
	}
	c.JSON(http.StatusOK, gin.H{"servers": entries, "metadata": meta})
}

// getRegistryServer serves GET /v0.1/servers/{name}/versions/latest.
func (s *Server) getRegistryServer(c *gin.Context) {
	ns, ok := s.registryNamespace(c)
	if !ok {
		return
	}
	rest := strings.TrimPrefix(c.Param("rest"), "/")
	name, ok := strings.CutSuffix(rest, "/versions/latest")
	if !ok {
		_ = c.Error(NotFound("no such registry path: GET /v0.1/servers/{name}/versions/latest"))
		return
	}
	if unescaped, err := url.PathUnescape(name); err == nil {
		name = unescaped
	}
	prefix, id, found := strings.Cut(name, "/")
	all, err := s.deps.Agents.MCPServers(c.Request.Context(), ns)
	if err != nil {
		_ = c.Error(err)
		return
	}
	for _, m := range all {
		if found && prefix == ns && m.AgentID == id {
			c.JSON(http.StatusOK, s.registryEntry(c, ns, m))
			return
		}
	}
	_ = c.Error(NotFound("no MCP server %q in namespace %s (GET /v0.1/servers lists them)", name, ns))
}

// mcpPostOnly answers a GET or DELETE of the MCP endpoint: a stateless
// server has no stream to open and no session to end (405, as Streamable
// HTTP says).
func mcpPostOnly(c *gin.Context) {
	c.Header("Allow", http.MethodPost)
	_ = c.Error(&Error{Code: CodeMethodNotAllowed, Message: "the MCP endpoint takes POST only: this server is stateless, with no stream to open or session to end"})
}
