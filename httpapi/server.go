package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/agentreach/agentreach/alerting"
	mcpserver "github.com/agentreach/agentreach/mcp/server"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/contrib/instrumentation/github.com/gin-gonic/gin/otelgin"
	"go.opentelemetry.io/otel/trace"

	a2aserver "github.com/agentreach/agentreach/a2a/server"
	"github.com/agentreach/agentreach/auth"
	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/intent"
	"github.com/agentreach/agentreach/jobs/jobwait"
)

// Deps is what the API needs from the rest of the program.
type Deps struct {
	Pool  *pgxpool.Pool
	Store *eventstore.Store
	// The faces of the services behind the handlers (deps.go).
	Jobs      Jobs
	Approvals Approvals
	Callbacks Callbacks
	Inbox     Inbox
	A2AJobs   A2AJobs
	Agents    Agents
	Routing   Routing
	Retention Retention
	// Alerts keeps the alert webhooks (nil: one over Pool and Store with
	// the default URL guard).
	Alerts Alerts
	// Intent resolves intents over the capability catalogue (nil: one with
	// the lexical resolver only, over Pool).
	Intent *intent.Service
	// Waits holds the requests that wait for a job's end (wait_ms; nil:
	// one over Store and Pool, DefaultWaitsPerKey a key).
	Waits  *jobwait.Hub
	Logger *slog.Logger
	// Ready reports whether the service can take traffic: database
	// reachable and schema current. Nil means always ready.
	Ready func(ctx context.Context) error
	// ReadPool, when set, serves the figures, series and alerts (a hot
	// standby); nil: Pool.
	ReadPool *pgxpool.Pool
	// ReadyDetails, when set, adds to a ready /readyz what the service
	// says of itself (the database's standbys, whether writes go).
	ReadyDetails func() map[string]any
	// Writable, when set, says why requests that may write are refused
	// now (nil: they are not): 503 unavailable before any handler runs.
	Writable func() error
	// Version is reported by /healthz.
	Version string
	// Tracer traces requests (nil: no tracing).
	Tracer trace.TracerProvider
	// Metrics serves GET /metrics (nil: not served).
	Metrics http.Handler
	// Auth checks API keys; Insecure admits requests without one as an
	// admin of every namespace (development only).
	Auth     *auth.Store
	Insecure bool
	// Limiter rate-limits each key, and each agent on the routes its
	// token takes (nil: no limit).
	Limiter *auth.Limiter
	// FailLimiter rate-limits failed authentications per client address
	// (nil: no limit): an unknown key costs a database lookup.
	FailLimiter *auth.Limiter
	// Extra mounts more handlers (River UI) on the engine; operator is the
	// chain that sends a browser without a key to the dashboard's sign-in
	// and admits only admin keys of every namespace ("*").
	Extra func(r *gin.Engine, operator ...gin.HandlerFunc)
}

// Server holds the API's handlers.
type Server struct {
	deps Deps
	a2a  *a2aserver.Server
	mcp  *mcpserver.Server
}

// protocolRoutes mounts Agent-Reach as an A2A agent and as an MCP server
// per namespace, and the push ingress of A2A agents.
func (s *Server) protocolRoutes(r *gin.Engine) {
	r.GET("/.well-known/agent-card.json", s.a2aCard)
	r.GET("/.well-known/agent.json", s.a2aCard)
	r.GET("/a2a/:namespace/.well-known/agent-card.json", s.a2aCard)
	r.GET("/a2a/:namespace/.well-known/agent.json", s.a2aCard)
	r.POST("/a2a/:namespace", s.need(""), s.a2aRPC)
	// MCP over Streamable HTTP: POST only (a stateless server has no GET
	// stream, and sessions are not kept, so nothing to DELETE).
	r.POST("/mcp", s.need(""), s.mcpRPC)
	r.POST("/mcp/:namespace", s.need(""), s.mcpRPC)
	for _, path := range []string{"/mcp", "/mcp/:namespace"} {
		r.GET(path, mcpPostOnly)
		r.DELETE(path, mcpPostOnly)
	}
	// The private MCP registry of the namespace's MCP server agents. The
	// name holds a '/', escaped (%2F) as the MCP Registry's clients send it.
	r.GET("/v0.1/servers", s.need(auth.ScopeAgentsRead), s.listRegistryServers)
	r.GET("/v0.1/servers/*rest", s.need(auth.ScopeAgentsRead), s.getRegistryServer) // {name}/versions/latest
	r.POST(a2aserver.PushPath+":job_id/:attempt", s.a2aPush)                        // per-attempt push token
}

// New returns the HTTP handler of the whole API.
// DefaultWaitsPerKey bounds the requests one key may have waiting for
// jobs to end at once (wait_ms).
const DefaultWaitsPerKey = 100

func New(deps Deps) *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	if deps.Intent == nil {
		deps.Intent = intent.New(deps.Pool, deps.Store, deps.Logger, intent.Config{})
	}
	if deps.Alerts == nil {
		deps.Alerts = alerting.New(deps.Pool, deps.Store, nil)
	}
	if deps.Waits == nil {
		deps.Waits = jobwait.New(deps.Store, deps.Pool, DefaultWaitsPerKey, deps.Logger)
	}
	s := &Server{deps: deps, a2a: newA2AServer(deps)}
	s.mcp = newMCPServer(s)
	r := gin.New()
	// The client address is the peer's: X-Forwarded-For would let anyone
	// choose the address their failed authentications count against.
	_ = r.SetTrustedProxies(nil)
	r.Use(headerLimit, gin.CustomRecoveryWithWriter(nil, func(c *gin.Context, rec any) {
		deps.Logger.ErrorContext(c.Request.Context(), "panic in handler", "panic", rec, "path", c.FullPath())
		c.AbortWithStatusJSON(http.StatusInternalServerError, errorBody{Error: errorDetail{Code: CodeInternal, Message: "internal error"}})
	}))
	if deps.Tracer != nil {
		r.Use(otelgin.Middleware("agent-reach", otelgin.WithTracerProvider(deps.Tracer),
			otelgin.WithGinFilter(func(c *gin.Context) bool { return c.FullPath() != "/metrics" && c.FullPath() != "/healthz" })))
	}
	r.Use(logMiddleware(deps.Logger), errorMiddleware(deps.Logger), bodyLimit, cleanPathAndQuery, writable(deps.Writable))
	admin := s.need(auth.ScopeAdmin)
	if deps.Metrics != nil {
		// Prometheus' series name every namespace: an operator's (a
		// scrape config sends the key as its bearer credentials).
		r.GET("/metrics", admin, everyNamespace, gin.WrapH(deps.Metrics))
	}
	// gin's own trailing-slash redirect runs before any handler, so a path
	// holding bad text was redirected rather than refused: NoRoute
	// redirects instead, once the path's text is checked.
	r.RedirectTrailingSlash = false
	r.NoRoute(func(c *gin.Context) {
		p := c.Request.URL.Path
		if !storableText(p) {
			// A path value holding '/' matches no route; what it holds is still refused as bad text, as on a route.
			_ = c.Error(Invalid("path", "the path must be UTF-8 text without NUL characters"))
			return
		}
		// Only to a path of this host: "//evil.com/" would answer a
		// Location a browser takes for another host.
		if trimmed := strings.TrimRight(p, "/"); trimmed != "" && trimmed != p && !strings.HasPrefix(trimmed, "//") {
			u := *c.Request.URL
			u.Path, u.RawPath = trimmed, ""
			code := http.StatusMovedPermanently // as gin redirected
			if c.Request.Method != http.MethodGet {
				code = http.StatusTemporaryRedirect
			}
			c.Redirect(code, u.String())
			return
		}
		_ = c.Error(NotFound("no route %s %s", c.Request.Method, p))
	})

	r.GET("/healthz", s.healthz)
	r.GET("/readyz", s.readyz)
	r.GET("/openapi.json", s.openAPI)
	s.protocolRoutes(r)
	v1 := r.Group("/v1")
	v1.GET("/events", admin, everyNamespace, s.listEvents) // the log spans namespaces
	v1.GET("/events/stream", admin, everyNamespace, s.eventStream)
	v1.GET("/session", s.need(""), s.getSession)
	v1.POST("/session", s.need(""), s.createSession)
	v1.DELETE("/session", s.deleteSession)
	v1.GET("/metrics/agents", s.need(auth.ScopeAgentsRead), s.agentMetrics)
	v1.GET("/metrics/agents/series", s.need(auth.ScopeAgentsRead), s.agentSeries)
	v1.GET("/metrics/fleet", s.need(auth.ScopeAgentsRead), s.fleetSeries)
	v1.GET("/alerts", s.need(auth.ScopeAgentsRead), s.listAlerts)
	r.GET("/", func(c *gin.Context) { c.Redirect(http.StatusFound, "/dashboard/") })
	r.GET("/dashboard", func(c *gin.Context) { c.Redirect(http.StatusFound, "/dashboard/") })
	r.GET("/dashboard/*file", dashboardHandler())

	s.agentRoutes(v1)

	s.jobRoutes(v1)

	s.intentRoutes(v1)

	v1.GET("/callbacks/secret", admin, s.callbackSecret) // the secret forges callbacks
	v1.POST("/callbacks/secret:rotate", admin, s.rotateCallbackSecret)
	v1.POST("/keys", admin, s.createKey)
	v1.GET("/keys", admin, s.listKeys)
	v1.DELETE("/keys/:key_id", admin, s.revokeKey)
	v1.GET("/policies/approvals", admin, s.getApprovalPolicy)
	v1.PUT("/policies/approvals", admin, s.setApprovalPolicy)
	v1.GET("/policies/routing", admin, s.getRoutingPolicy)
	v1.PUT("/policies/routing", admin, s.setRoutingPolicy)
	v1.GET("/policies/alerts", admin, s.getAlertPolicy)
	v1.PUT("/policies/alerts", admin, s.setAlertPolicy)
	v1.GET("/policies/retention", admin, s.getRetention)
	v1.PUT("/policies/retention", admin, s.setRetention)
	if deps.Extra != nil {
		deps.Extra(r, s.browserSignIn, admin, everyNamespace)
	}
	return r
}

// agentRoutes are the registry's: registration, operator actions, the
// agent's own calls (its token), and the router's explanation.
func (s *Server) agentRoutes(v1 *gin.RouterGroup) {
	v1.POST("/agents", s.need(auth.ScopeAgentsWrite), s.registerAgent)
	v1.GET("/agents", s.need(auth.ScopeAgentsRead), s.listAgents)
	v1.GET("/agents/watch", s.need(""), s.watchAgents) // agents:read or agents:lookup
	v1.GET("/agents/:agent_id", s.need(auth.ScopeAgentsRead), s.getAgent)
	v1.GET("/agents/:agent_id/series", s.need(auth.ScopeAgentsRead), s.oneAgentSeries)
	v1.DELETE("/agents/:agent_id", s.need(auth.ScopeAgentsWrite), s.deleteAgent)
	v1.PATCH("/agents/:agent_id", s.need(auth.ScopeAgentsWrite), s.patchAgent)
	v1.POST("/agents/:agent_id/drain", s.need(auth.ScopeAgentsWrite), s.operate(domain.SignalDrain))
	v1.POST("/agents/:agent_id/down", s.need(auth.ScopeAgentsWrite), s.operate(domain.SignalConfirmDown))
	v1.POST("/agents/:agent_id/up", s.need(auth.ScopeAgentsWrite), s.operate(domain.SignalUp))
	v1.PUT("/agents/:agent_id/heartbeat", s.agentRate, s.heartbeat) // agent token
	v1.POST("/agents/:agent_id/offline", s.agentRate, s.offline)    // agent token
	v1.POST("/agents/:agent_id/claim", s.agentRate, s.claim)        // agent token
	v1.POST("/agents/:agent_id/release", s.agentRate, s.release)    // agent token
	v1.POST("/agents/:agent_id/token:rotate", s.agentRate, s.agentOrKey(auth.ScopeAgentsWrite), s.rotateToken)
	v1.GET("/route", s.need(auth.ScopeAgentsRead), s.route)
	v1.POST("/lookup", s.need(""), lookupScope, s.lookup)   // agents:lookup or agents:lookup:<pattern>
	v1.POST("/reports", s.need(""), lookupScope, s.reports) // the same, for each report's capability
}

// intentRoutes are the capability catalogue's and intent resolution's.
func (s *Server) intentRoutes(v1 *gin.RouterGroup) {
	v1.GET("/capabilities", s.need(""), catalogueScope, s.listCapabilities)
	v1.GET("/capabilities/*name", s.need(""), catalogueScope, s.getCapability) // a capability may hold '/'
	v1.PUT("/capabilities/*name", s.need(auth.ScopeAgentsWrite), s.putCapability)
	v1.POST("/resolve", s.need(""), catalogueScope, s.resolve)
}

// MaxHeaderBytes bounds a request's header; a larger one gets 431 with the
// error body. The http.Server's own limit (which answers in plain text)
// must sit above it.
const MaxHeaderBytes = 64 << 10

func headerLimit(c *gin.Context) {
	n := len(c.Request.RequestURI)
	for k, vs := range c.Request.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	if n > MaxHeaderBytes {
		c.AbortWithStatusJSON(http.StatusRequestHeaderFieldsTooLarge, errorBody{Error: errorDetail{Code: CodeHeadersTooLarge,
			Message: fmt.Sprintf("request headers are larger than %d bytes", MaxHeaderBytes)}})
		return
	}
	c.Next()
}

// maxBody bounds every request body; larger ones get 413.
const maxBody = 2 << 20

func bodyLimit(c *gin.Context) {
	if c.Request.Body != nil {
		c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, maxBody)
	}
	c.Next()
}

// meta is the metadata of the events a request causes: its trace and the
// actor it acts for.
func (s *Server) meta(c *gin.Context, actor string) domain.Metadata {
	return domain.Metadata{TraceID: traceID(c), Actor: actor}
}

// traceID is the request's W3C trace id, from its traceparent header, or a
// fresh one.
func traceID(c *gin.Context) string {
	if v, ok := c.Get("trace_id"); ok {
		return v.(string)
	}
	if sc := trace.SpanContextFromContext(c.Request.Context()); sc.IsValid() {
		id := sc.TraceID().String()
		c.Set("trace_id", id)
		return id
	}
	id := ""
	if tp := c.GetHeader("traceparent"); len(tp) >= 55 && tp[2] == '-' && tp[35] == '-' {
		if _, err := hex.DecodeString(tp[3:35]); err == nil {
			id = strings.ToLower(tp[3:35])
		}
	}
	if id == "" || strings.Trim(id, "0") == "" {
		id = newTraceID()
	}
	c.Set("trace_id", id)
	return id
}

func logMiddleware(logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		ctx := c.Request.Context()
		if c.FullPath() == "/healthz" || c.FullPath() == "/readyz" || !logger.Enabled(ctx, slog.LevelDebug) {
			return // its arguments cost allocations even when it is off
		}
		logger.DebugContext(ctx, "http request", "method", c.Request.Method, "path", c.Request.URL.Path,
			"status", c.Writer.Status(), "duration_ms", float64(time.Since(start).Microseconds())/1000)
	}
}

// stillWritable are the routes writable lets through while it refuses
// writes: what agents report of work already accepted (a result, a
// progress report, a heartbeat, a claim or release of their inbox), so
// that the jobs under way finish rather than time out, and the POSTs that
// only read or sign in. Their commits may rest on one node: a failover that
// erases one sends the attempt again, which delivery is built for.
var stillWritable = map[string]bool{
	"/v1/agents/:agent_id/heartbeat": true, "/v1/agents/:agent_id/claim": true,
	"/v1/agents/:agent_id/release": true, "/v1/agents/:agent_id/offline": true,
	"/v1/jobs/:job_id/result": true, "/v1/jobs/:job_id/progress": true,
	"/v1/session": true, "/v1/resolve": true,
}

// writable refuses the requests that may write (any method but GET, HEAD
// and OPTIONS, save stillWritable's routes) with 503 unavailable while
// refused says why writes may not go (--require-sync-standby), before any
// handler reads or writes.
func writable(refused func() error) gin.HandlerFunc {
	return func(c *gin.Context) {
		if refused == nil || stillWritable[c.FullPath()] {
			return
		}
		switch c.Request.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			return
		}
		if err := refused(); err != nil {
			_ = c.Error(writeRefused{api: withRetry(&Error{Code: CodeUnavailable, Message: err.Error()})})
			c.Abort()
		}
	}
}

// writeRefused is a write refused by writable: answered 503 like any
// unavailable error, but not logged a request at a time (the service logs
// when refusals begin and end).
type writeRefused struct{ api *Error }

func (w writeRefused) Error() string { return w.api.Error() }
func (w writeRefused) Unwrap() error { return w.api }

// reads is the pool for reads a standby may serve: ReadPool, or Pool.
func (s *Server) reads() *pgxpool.Pool {
	if s.deps.ReadPool != nil {
		return s.deps.ReadPool
	}
	return s.deps.Pool
}

func (s *Server) healthz(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok", "version": s.deps.Version})
}

func (s *Server) readyz(c *gin.Context) {
	if s.deps.Ready != nil {
		ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
		defer cancel()
		if err := s.deps.Ready(ctx); err != nil {
			c.JSON(http.StatusServiceUnavailable, gin.H{"status": "unavailable", "reason": err.Error()})
			return
		}
	}
	body := gin.H{"status": "ready"}
	if s.deps.ReadyDetails != nil {
		for k, v := range s.deps.ReadyDetails() {
			body[k] = v
		}
	}
	c.JSON(http.StatusOK, body)
}

type eventResponse struct {
	Position   int64     `json:"position"`
	StreamID   string    `json:"stream_id"`
	Version    int       `json:"version"`
	Type       string    `json:"type"`
	Data       any       `json:"data"`
	Metadata   any       `json:"metadata"`
	RecordedAt time.Time `json:"recorded_at"`
}

func toEventResponse(r eventstore.Record) eventResponse {
	return eventResponse{Position: r.Position, StreamID: r.StreamID, Version: r.Version, Type: string(r.Type),
		Data: rawJSON(r.Data), Metadata: r.Metadata, RecordedAt: r.RecordedAt.UTC()}
}

type rawJSON []byte

// MarshalJSON returns the stored JSON as it is.
func (r rawJSON) MarshalJSON() ([]byte, error) {
	if len(r) == 0 {
		return []byte("null"), nil
	}
	return r, nil
}

// cursorAt turns the after= position a client sent into a place in the
// log; a position that names no event is the client's mistake.
func (s *Server) cursorAt(ctx context.Context, after int64) (eventstore.Cursor, error) {
	cur, err := s.deps.Store.CursorAt(ctx, after)
	if errors.Is(err, domain.ErrNotFound) {
		return cur, Invalid("after", "after must be the position of an event you received, or 0")
	}
	if errors.Is(err, eventstore.ErrDropped) {
		return cur, &Error{Code: CodeHistoryDropped, Field: "after", Message: fmt.Sprintf("the event at position %d was dropped "+
			"with its partition of the log, past its retention period: read again from after=0, the oldest event kept "+
			"(agents' and policies' streams are never dropped; see GET /v1/policies/retention)", after)}
	}
	return cur, err
}

// listEvents serves the global log: GET /v1/events?after=POSITION&limit=N.
// after is the position of the last event the client received; the log's
// order is commit-safe (see eventstore.Cursor), so resuming from it never
// skips an event that committed late.
func (s *Server) listEvents(c *gin.Context) {
	after, err := queryInt(c, "after", 0, 0, 1<<62)
	if err != nil {
		_ = c.Error(err)
		return
	}
	limit, err := queryInt(c, "limit", 100, 1, 1000)
	if err != nil {
		_ = c.Error(err)
		return
	}
	cur, err := s.cursorAt(c.Request.Context(), after)
	if err != nil {
		_ = c.Error(err)
		return
	}
	recs, err := s.deps.Store.ReadAll(c.Request.Context(), nil, cur, int(limit))
	if err != nil {
		_ = c.Error(err)
		return
	}
	out := make([]eventResponse, len(recs))
	for i, r := range recs {
		out[i] = toEventResponse(r)
	}
	next := after
	if len(recs) > 0 {
		next = recs[len(recs)-1].Position
	}
	c.JSON(http.StatusOK, gin.H{"events": out, "next_after": next})
}

func queryInt(c *gin.Context, name string, def, lo, hi int64) (int64, error) {
	raw, ok := c.GetQuery(name)
	if !ok || raw == "" {
		return def, nil
	}
	v, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || v < lo || v > hi {
		return 0, Invalid(name, "%s must be an integer between %d and %d", name, lo, hi)
	}
	return v, nil
}

func newTraceID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// jobRoutes are the jobs' routes.
func (s *Server) jobRoutes(v1 *gin.RouterGroup) {
	v1.POST("/jobs", s.need(""), s.submitJob) // jobs:submit:<pattern>, checked per capability
	v1.GET("/jobs", s.need(auth.ScopeJobsRead), s.listJobs)
	v1.GET("/jobs/:job_id", s.need(auth.ScopeJobsRead), s.getJob)
	v1.GET("/jobs/:job_id/events", s.need(auth.ScopeJobsRead), s.jobEvents)
	v1.POST("/jobs/:job_id/result", s.agentRate, s.reportResult)     // agent token
	v1.POST("/jobs/:job_id/progress", s.agentRate, s.reportProgress) // agent token
	v1.POST("/jobs/:job_id/cancel", s.need(""), s.cancelJob)
	v1.POST("/jobs/:job_id/replay", s.need(""), s.replayJob)
	v1.POST("/jobs/:job_id/input", s.need(""), s.provideInput)
	v1.POST("/jobs/:job_id/approve", s.need(auth.ScopeJobsApprove), s.approveJob)
	v1.POST("/jobs/:job_id/reject", s.need(auth.ScopeJobsApprove), s.rejectJob)
}
