package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/gin-gonic/gin"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/health"
	"github.com/agentreach/agentreach/registry"
)

type registerRequest struct {
	AgentID      string   `json:"agent_id"`
	Namespace    string   `json:"namespace"`
	Capabilities []string `json:"capabilities"`
	Aliases      []string `json:"aliases"`
	Endpoint     string   `json:"endpoint"`
	HealthURL    string   `json:"health_url"`
	Protocol     string   `json:"protocol"`
	// Mode is push (the default) or pull (no endpoint: it claims its work).
	Mode string `json:"mode"`
	// ProtocolVersion is the version of its protocol the agent speaks.
	ProtocolVersion string         `json:"protocol_version"`
	Weight          *int           `json:"weight"`
	MaxConcurrent   int            `json:"max_concurrent"`
	Version         string         `json:"version"`
	RolloutPercent  *int           `json:"rollout_percent"`
	TTLSeconds      int            `json:"ttl_seconds"`
	Context         map[string]any `json:"context"`
	Metadata        map[string]any `json:"metadata"`
	// CardURL registers an A2A agent by its Agent Card instead.
	CardURL string `json:"card_url"`
	// CapabilityInfo says what some of its capabilities do, for the
	// capability catalogue (intent resolution).
	CapabilityInfo map[string]capabilityDocJSON `json:"capability_info"`
	// Headers go with every request to an MCP server (protocol mcp): its
	// credentials, kept apart and never shown.
	Headers map[string]string `json:"headers"`
	// Server registers an MCP server by its MCP Registry server.json (its
	// first streamable-http remote); read leniently (serverJSON): the
	// format has many fields registration has no use for.
	Server json.RawMessage `json:"server"`
}

// serverJSON is what registration reads of an MCP Registry server.json.
type serverJSON struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Version     string `json:"version"`
	Remotes     []struct {
		Type    string `json:"type"`
		URL     string `json:"url"`
		Headers []struct {
			Name       string `json:"name"`
			Value      string `json:"value"`
			IsRequired bool   `json:"isRequired"`
		} `json:"headers"`
	} `json:"remotes"`
}

// mcpRegistration fills an MCP server's registration from its server.json
// (the endpoint, the version, an agent id from the name, the headers that
// have a value; headers given in the request win).
func mcpRegistration(req *registerRequest, reg *domain.AgentRegistration) error {
	reg.Protocol = domain.ProtocolMCP
	if len(req.Server) == 0 || string(req.Server) == "null" {
		return nil
	}
	sj := &serverJSON{}
	if err := json.Unmarshal(req.Server, sj); err != nil {
		return Invalid("server", "must be an MCP Registry server.json: %v", err)
	}
	if reg.Endpoint != "" {
		return Invalid("endpoint", "give the endpoint or a server.json (server), not both")
	}
	for _, r := range sj.Remotes {
		if r.Type != "streamable-http" {
			continue
		}
		if strings.Contains(r.URL, "{") {
			return Invalid("server.remotes", "the streamable-http remote's url %q has variables: give the endpoint itself", r.URL)
		}
		reg.Endpoint = r.URL
		if req.Headers == nil {
			req.Headers = map[string]string{}
		}
		for _, h := range r.Headers {
			_, given := req.Headers[h.Name]
			switch {
			case given:
			case h.Value != "" && !strings.Contains(h.Value, "{"):
				req.Headers[h.Name] = h.Value
			case h.IsRequired:
				return Invalid("headers", "the server needs the header %s: give its value in headers", h.Name)
			}
		}
		break
	}
	if reg.Endpoint == "" {
		return Invalid("server.remotes", "no streamable-http remote: Agent-Reach reaches MCP servers over Streamable HTTP")
	}
	if reg.AgentID == "" {
		_, name, _ := strings.Cut(sj.Name, "/")
		reg.AgentID = agentIDOf(name)
	}
	if reg.Version == "" {
		reg.Version = sj.Version
	}
	if reg.Metadata == nil {
		reg.Metadata = map[string]any{}
	}
	reg.Metadata["mcp_server_name"] = sj.Name
	if sj.Description != "" {
		reg.Metadata["description"] = sj.Description
	}
	return nil
}

// agentIDOf makes a name an agent id: letters, digits, '.', '_' and '-'.
func agentIDOf(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteRune('-')
		}
	}
	return strings.Trim(b.String(), "-")
}

type breakerResponse struct {
	State     string     `json:"state"`
	ErrorRate float64    `json:"error_rate"`
	Attempts  int        `json:"attempts"`
	OpenedAt  *time.Time `json:"opened_at,omitempty"`
	RetryAt   *time.Time `json:"retry_at,omitempty"`
}

type agentResponse struct {
	AgentID          string          `json:"agent_id"`
	Namespace        string          `json:"namespace"`
	Capabilities     []string        `json:"capabilities"`
	Aliases          []string        `json:"aliases"`
	Endpoint         string          `json:"endpoint"`
	HealthURL        string          `json:"health_url,omitempty"`
	Protocol         string          `json:"protocol"`
	Mode             string          `json:"mode"`
	ProtocolVersion  string          `json:"protocol_version"`
	Weight           int             `json:"weight"`
	MaxConcurrent    int             `json:"max_concurrent"`
	Version          string          `json:"version"`
	RolloutPercent   int             `json:"rollout_percent"`
	TTLSeconds       int             `json:"ttl_seconds"`
	Context          map[string]any  `json:"context"`
	Metadata         map[string]any  `json:"metadata"`
	State            string          `json:"state"`
	InstanceID       string          `json:"instance_id"`
	RegisteredAt     time.Time       `json:"registered_at"`
	LastHeartbeatAt  time.Time       `json:"last_heartbeat_at"`
	LeaseExpiresAt   time.Time       `json:"lease_expires_at"`
	StateChangedAt   time.Time       `json:"state_changed_at"`
	InFlight         int             `json:"in_flight"`
	Breaker          breakerResponse `json:"breaker"`
	Token            string          `json:"token,omitempty"`
	Recent           *recentResponse `json:"recent,omitempty"`
	HeartbeatEveryMS int64           `json:"heartbeat_interval_ms"`
	// HealthReport is what the agent's heartbeats last reported.
	HealthReport healthReportResponse `json:"health_report"`
	// Flap damping: re-registrations in the hour before the latest one, the
	// probes in a row it must pass, and the score it loses now.
	RecentRestarts int     `json:"recent_restarts"`
	ProbesNeeded   int     `json:"probes_needed"`
	FlapPenalty    float64 `json:"flap_penalty"`
	// Hold is an operator's hold: "drain" or "down".
	Hold string `json:"hold,omitempty"`
	// PausedUntil: the agent asked for no work until then (it answered a
	// delivery 429 or 503 with Retry-After); only while it lasts.
	PausedUntil *time.Time `json:"paused_until,omitempty"`
	// LastProbeError is why the agent's last probe failed, at
	// LastProbeAt; NextProbeAt is about when a PROBING agent is probed
	// again (domain.ProbeInterval: 1 s, 2 s, 4 s ... 30 s).
	LastProbeError string     `json:"last_probe_error,omitempty"`
	LastProbeAt    *time.Time `json:"last_probe_at,omitempty"`
	NextProbeAt    *time.Time `json:"next_probe_at,omitempty"`
	// InboxDepth is how many attempts wait in a pull agent's inbox,
	// unclaimed (pull agents only, in GET /v1/agents and /v1/agents/{id}).
	InboxDepth *int `json:"inbox_depth,omitempty"`
	// Recovery is its time to recover (GET /v1/agents/{id} only).
	Recovery *recoveryResponse `json:"recovery,omitempty"`
	// SelfPreservation is the agent's namespace's open episode, if any.
	SelfPreservation *preservationResponse `json:"self_preservation,omitempty"`
}

// recoveryResponse is how fast the agent came back from DOWN or
// HEALTH_DEGRADED to HEALTHY or HEALTH_RECOVERED.
type recoveryResponse struct {
	LastRecoveredAt *time.Time `json:"last_recovered_at"`
	LastMS          *float64   `json:"last_ms"`
	Mean24hMS       *float64   `json:"mean_24h_ms"`
	Recoveries24h   int        `json:"recoveries_24h"`
}

// healthReportResponse is an agent's own report of its health; a figure
// it never reported is null (a queue length, 0).
type healthReportResponse struct {
	// InFlight is what the agent reports holding; the agent's own
	// in_flight is the service's count of its slots, which routing uses.
	InFlight    int      `json:"in_flight"`
	QueueLength int      `json:"queue_length"`
	ErrorRate   *float64 `json:"error_rate"`
	PoolUsage   *float64 `json:"pool_usage"`
}

// preservationResponse is an open self-preservation episode: lapsed agents
// of the namespace are kept from going DOWN until it ends, at Until at the
// latest.
type preservationResponse struct {
	Namespace string    `json:"namespace"`
	Since     time.Time `json:"since"`
	Until     time.Time `json:"until"`
	Agents    int       `json:"agents"`
	Lapsing   int       `json:"lapsing"`
}

// openPreservations answers the open self-preservation episodes of the
// namespaces named, each once.
func (s *Server) openPreservations(ctx context.Context, namespaces ...string) ([]preservationResponse, error) {
	out := []preservationResponse{}
	seen := map[string]bool{}
	for _, ns := range namespaces {
		if seen[ns] {
			continue
		}
		seen[ns] = true
		p, err := s.deps.Routing.OpenPreservation(ctx, ns)
		if err != nil {
			return nil, err
		}
		if p != nil {
			out = append(out, preservationResponse{Namespace: p.Namespace, Since: p.Since.UTC(), Until: p.Until.UTC(), Agents: p.Total, Lapsing: p.Lapsing})
		}
	}
	return out, nil
}

func (s *Server) agentResponse(a *registry.Agent) agentResponse {
	snap := s.deps.Agents.Snapshot()
	b := snap.Breaker(a.Key())
	br := breakerResponse{State: string(b.State), ErrorRate: b.ErrorRate, Attempts: b.Attempts}
	if !b.OpenedAt.IsZero() {
		br.OpenedAt, br.RetryAt = &b.OpenedAt, &b.RetryAt
	}
	out := agentResponse{
		AgentID: a.AgentID, Namespace: a.Namespace, Capabilities: nonNil(a.Capabilities), Aliases: nonNil(a.Aliases),
		Endpoint: a.Endpoint, HealthURL: a.HealthURL, Protocol: a.Protocol, Mode: a.Mode, ProtocolVersion: a.ProtocolVersion, Weight: a.Weight,
		MaxConcurrent: a.MaxConcurrent, Version: a.Version, RolloutPercent: a.RolloutPercent, TTLSeconds: a.TTLSeconds,
		Context: nonNilMap(a.Context), Metadata: nonNilMap(a.Metadata), State: string(a.State), Hold: a.Hold, InstanceID: a.InstanceID,
		RecentRestarts: a.RecentRestarts, ProbesNeeded: domain.ProbesNeeded(a.RecentRestarts),
		FlapPenalty:  domain.FlapPenalty(a.RecentRestarts, a.RegisteredAt, time.Now()),
		HealthReport: healthReportResponse{InFlight: a.ReportedInFlight, QueueLength: a.ReportedQueueLength, ErrorRate: a.ReportedErrorRate, PoolUsage: a.ReportedPoolUsage},
		RegisteredAt: a.RegisteredAt.UTC(), LastHeartbeatAt: a.LastSeenAt.UTC(), LeaseExpiresAt: a.LeaseExpiresAt.UTC(),
		StateChangedAt: a.StateChangedAt.UTC(), InFlight: snap.InFlight(a.Key()), Breaker: br,
		HeartbeatEveryMS: int64(a.TTLSeconds) * 1000 / 3, PausedUntil: pausedNow(a.PausedUntil),
		NextProbeAt: nextProbe(a),
	}
	if a.State == domain.AgentProbing { // why it is still probing; an old error says nothing of another state
		out.LastProbeError, out.LastProbeAt = a.LastProbeError, a.LastProbeAt
	}
	return out
}

// nextProbe is about when a PROBING push agent that has not passed its
// probe is probed again (nil otherwise, or when none ran yet).
func nextProbe(a *registry.Agent) *time.Time {
	if a.State != domain.AgentProbing || a.ProbeOK || a.Pull() || a.LastProbeAt == nil {
		return nil
	}
	next := a.LastProbeAt.Add(domain.ProbeInterval(a.LastProbeAt.Sub(a.StateChangedAt))).UTC()
	return &next
}

// pausedNow is until while it is still ahead (a pause that ended shows no more).
func pausedNow(until *time.Time) *time.Time {
	if until == nil || !time.Now().Before(*until) {
		return nil
	}
	u := until.UTC()
	return &u
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// bindJSON decodes a JSON body strictly: unknown fields and trailing data
// are errors that name what is wrong.
func bindJSON(c *gin.Context, into any, required bool) error {
	if c.Request.Body == nil || c.Request.ContentLength == 0 && !required {
		if required {
			return Invalid("body", "a JSON body is required")
		}
		return nil
	}
	return decodeJSON(c.Request.Body, into, required)
}

// decodeJSON is the one decoder of request bodies: strict, and refusing
// text PostgreSQL cannot store (see unstorableJSON) before anything acts on it.
func decodeJSON(body io.Reader, into any, required bool) error {
	b, err := io.ReadAll(body) // bounded by bodyLimit
	if err != nil {
		return decodeError(err, required)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return decodeError(err, required)
	}
	if dec.More() {
		return Invalid("body", "unexpected data after the JSON object")
	}
	if at, bad := unstorableJSON(b); bad {
		return unstorableError(at)
	}
	return nil
}

// unstorableError names where text PostgreSQL cannot store stands.
func unstorableError(at string) *Error {
	if at == "" {
		at = "body"
	}
	return Invalid(at, "%s holds what PostgreSQL cannot store: a NUL character (\\u0000), a lone UTF-16 surrogate, bytes that are not UTF-8 or a number beyond its numeric range", at)
}

func decodeError(err error, required bool) error {
	var typeErr *json.UnmarshalTypeError
	var maxErr *http.MaxBytesError
	switch {
	case errors.As(err, &maxErr):
		return err
	case errors.As(err, &typeErr):
		field := jsonField(typeErr.Field)
		return Invalid(field, "%s must be a JSON %s", field, typeErr.Type.String())
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return Invalid(field, "unknown field %q", field)
	case err.Error() == "EOF":
		if !required {
			return nil
		}
		return Invalid("body", "a JSON body is required")
	}
	return Invalid("body", "body is not valid JSON: %v", err)
}

// DecodeRegistration turns a registration body into a checked
// registration for namespace ns (used when the body names none). Every
// error is a 4xx: *Error or *domain.FieldError.
func DecodeRegistration(body io.Reader, ns string) (domain.AgentRegistration, error) {
	var req registerRequest
	if err := decodeJSON(body, &req, true); err != nil {
		return domain.AgentRegistration{}, err
	}
	if req.Namespace == "" {
		req.Namespace = ns
	}
	reg := registration(req)
	return reg, reg.Normalize()
}

func registration(req registerRequest) domain.AgentRegistration {
	reg := domain.AgentRegistration{
		AgentID: req.AgentID, Namespace: req.Namespace, Capabilities: req.Capabilities, Aliases: req.Aliases,
		Endpoint: req.Endpoint, HealthURL: req.HealthURL, Protocol: req.Protocol, ProtocolVersion: req.ProtocolVersion,
		Mode: req.Mode, MaxConcurrent: req.MaxConcurrent,
		Version: req.Version, RolloutPercent: domain.DefaultRolloutPercent, TTLSeconds: req.TTLSeconds,
		Context: req.Context, Metadata: req.Metadata, Weight: domain.DefaultWeight,
		CapabilityInfo: capabilityDocs(req.CapabilityInfo),
	}
	if req.Weight != nil {
		reg.Weight = *req.Weight
		if reg.Weight == 0 {
			reg.Weight = -1 // an explicit 0 is out of range, not "default"
		}
	}
	if req.RolloutPercent != nil {
		reg.RolloutPercent = *req.RolloutPercent
	}
	return reg
}

func (s *Server) registerAgent(c *gin.Context) {
	var req registerRequest
	if err := bindJSON(c, &req, true); err != nil {
		_ = c.Error(err)
		return
	}
	ns, err := defaultNamespace(c, req.Namespace)
	if err != nil {
		_ = c.Error(err)
		return
	}
	// Each namespace has its own agent ids: registering one says nothing
	// of other namespaces.
	req.Namespace = ns
	reg := registration(req)
	var a *registry.Agent
	var token string
	if req.CardURL != "" && req.Mode == domain.ModePull {
		_ = c.Error(Invalid("mode", "mode pull takes no card_url: a pull agent has no endpoint for a card to name"))
		return
	}
	mcpish := req.Protocol == domain.ProtocolMCP || req.Protocol == "" && len(req.Server) > 0
	if (req.Headers != nil || len(req.Server) > 0) && !mcpish {
		_ = c.Error(Invalid("protocol", `headers and server are for MCP servers: say "protocol": "mcp"`))
		return
	}
	switch {
	case req.CardURL != "":
		a, token, err = s.deps.Agents.RegisterCard(c.Request.Context(), req.CardURL, reg, s.meta(c, principal(c).Actor()))
	case req.Protocol == domain.ProtocolMCP || len(req.Server) > 0:
		if err = mcpRegistration(&req, &reg); err == nil {
			a, token, err = s.deps.Agents.RegisterMCP(c.Request.Context(), reg, req.Headers, s.meta(c, principal(c).Actor()))
		}
	default:
		a, token, err = s.deps.Agents.Register(c.Request.Context(), reg, s.meta(c, principal(c).Actor()))
	}
	if err != nil {
		_ = c.Error(err)
		return
	}
	resp := s.agentResponse(a)
	resp.Token = token
	c.JSON(http.StatusCreated, resp)
}

// bearer is the credential of a request: "Authorization: Bearer <key>",
// the password of HTTP Basic auth (curl -u), or the dashboard's sign-in
// cookie (see credential).
func bearer(c *gin.Context) string {
	key, _ := credential(c)
	return key
}

type heartbeatRequest struct {
	InFlight    *int           `json:"in_flight"`
	QueueLength *int           `json:"queue_length"`
	ErrorRate   *float64       `json:"error_rate"`
	PoolUsage   *float64       `json:"pool_usage"`
	Context     map[string]any `json:"context"`
}

type heartbeatResponse struct {
	AgentID          string    `json:"agent_id"`
	State            string    `json:"state"`
	LeaseExpiresAt   time.Time `json:"lease_expires_at"`
	HeartbeatEveryMS int64     `json:"heartbeat_interval_ms"`
	// Cancelled are a pull agent's jobs cancelled within its TTL: it has
	// no endpoint for a cancel notice, so it learns of them here.
	Cancelled []domain.HeldAttempt `json:"cancelled,omitempty"`
}

func (s *Server) heartbeat(c *gin.Context) {
	var req heartbeatRequest
	if err := bindJSON(c, &req, false); err != nil {
		_ = c.Error(err)
		return
	}
	report := domain.HealthReport{InFlight: req.InFlight, QueueLength: req.QueueLength, ErrorRate: req.ErrorRate, PoolUsage: req.PoolUsage}
	if err := report.Validate(); err != nil {
		_ = c.Error(err)
		return
	}
	id := c.Param("agent_id")
	a, err := s.deps.Agents.HeartbeatReport(c.Request.Context(), id, bearer(c), report, req.Context, s.meta(c, "agent:"+id))
	if err != nil {
		_ = c.Error(err)
		return
	}
	resp := heartbeatResponse{AgentID: a.AgentID, State: string(a.State), LeaseExpiresAt: a.LeaseExpiresAt.UTC(),
		HeartbeatEveryMS: int64(a.TTLSeconds) * 1000 / 3}
	if a.Pull() {
		ttl := time.Duration(a.TTLSeconds) * time.Second
		if resp.Cancelled, err = s.deps.Inbox.CancelledOf(c.Request.Context(), a.Key(), time.Now().Add(-ttl)); err != nil {
			_ = c.Error(err)
			return
		}
	}
	c.JSON(http.StatusOK, resp)
}

type offlineRequest struct {
	Reason string `json:"reason"`
}

func (s *Server) offline(c *gin.Context) {
	var req offlineRequest
	if err := bindJSON(c, &req, false); err != nil {
		_ = c.Error(err)
		return
	}
	id := c.Param("agent_id")
	a, err := s.deps.Agents.Offline(c.Request.Context(), id, bearer(c), req.Reason, s.meta(c, "agent:"+id))
	if err != nil {
		_ = c.Error(err)
		return
	}
	if a.Pull() { // what waits in its inbox goes to other agents now
		if _, err := s.deps.Inbox.Release(c.Request.Context(), a, nil, ""); err != nil {
			_ = c.Error(err)
			return
		}
	}
	c.JSON(http.StatusOK, s.agentResponse(a))
}

func (s *Server) listAgents(c *gin.Context) {
	ns, err := scopeNamespace(c, c.Query("namespace"))
	if err != nil {
		_ = c.Error(err)
		return
	}
	f := registry.ListFilter{Namespace: ns, Capability: c.Query("capability"), State: domain.AgentState(strings.ToUpper(c.Query("state")))}
	switch f.State {
	case "", domain.AgentProbing, domain.AgentHealthy, domain.AgentSuspect, domain.AgentDown, domain.AgentDraining, domain.AgentOffline:
	default:
		_ = c.Error(Invalid("state", "state must be one of PROBING, HEALTHY, SUSPECT, DOWN, DRAINING, OFFLINE"))
		return
	}
	agents, err := s.deps.Agents.List(c.Request.Context(), f)
	if err != nil {
		_ = c.Error(err)
		return
	}
	depths, err := s.deps.Inbox.InboxDepths(c.Request.Context())
	if err != nil {
		_ = c.Error(err)
		return
	}
	out := make([]agentResponse, len(agents))
	namespaces := []string{}
	if ns != "" {
		namespaces = append(namespaces, ns)
	}
	for i, a := range agents {
		out[i] = s.agentResponse(a)
		if a.Pull() {
			out[i].InboxDepth = new(depths[a.Key()])
		}
		namespaces = append(namespaces, a.Namespace)
	}
	episodes, err := s.openPreservations(c.Request.Context(), namespaces...)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"agents": out, "self_preservation": episodes})
}

// loadAgent loads the agent of the path in the key's namespace (or the
// ?namespace= a key of every namespace names; without one, the only agent
// of that id): another namespace's agent is not found.
func (s *Server) loadAgent(c *gin.Context) (*registry.Agent, bool) {
	ns, err := scopeNamespace(c, c.Query("namespace"))
	if err != nil {
		_ = c.Error(err)
		return nil, false
	}
	a, err := s.deps.Agents.Find(c.Request.Context(), ns, c.Param("agent_id"))
	if err == nil && !principal(c).Sees(a.Namespace) {
		err = domain.ErrNotFound
	}
	if errors.Is(err, domain.ErrNotFound) {
		// An operator asks about an agent; "register it" is what the
		// agent's own routes answer, not advice for whoever asks here.
		err = NotFound("no agent %q in the namespaces of this key", c.Param("agent_id"))
	}
	if err != nil {
		_ = c.Error(err)
		return nil, false
	}
	return a, true
}

func (s *Server) getAgent(c *gin.Context) {
	a, ok := s.loadAgent(c)
	if !ok {
		return
	}
	recent, err := s.deps.Agents.RecentActivity(c.Request.Context(), a.Key(), time.Hour)
	if err != nil {
		_ = c.Error(err)
		return
	}
	resp := s.agentResponse(a)
	r := toRecent(recent)
	resp.Recent = &r
	if a.Pull() {
		depths, err := s.deps.Inbox.InboxDepths(c.Request.Context())
		if err != nil {
			_ = c.Error(err)
			return
		}
		resp.InboxDepth = new(depths[a.Key()])
	}
	episodes, err := s.openPreservations(c.Request.Context(), a.Namespace)
	if err != nil {
		_ = c.Error(err)
		return
	}
	if len(episodes) == 1 {
		resp.SelfPreservation = &episodes[0]
	}
	rec, err := health.RecoveryOf(c.Request.Context(), s.reads(), a.Namespace, a.AgentID)
	if err != nil {
		_ = c.Error(err)
		return
	}
	resp.Recovery = (*recoveryResponse)(&rec)
	c.JSON(http.StatusOK, resp)
}

func (s *Server) deleteAgent(c *gin.Context) {
	a, ok := s.loadAgent(c)
	if !ok {
		return
	}
	if err := s.deps.Agents.Deregister(c.Request.Context(), a.Key(), s.meta(c, principal(c).Actor())); err != nil {
		_ = c.Error(err)
		return
	}
	c.Status(http.StatusNoContent)
}

type routeResponse struct {
	Capability    string                  `json:"capability"`
	Namespace     string                  `json:"namespace"`
	Chosen        string                  `json:"chosen"`
	Candidates    []domain.RouteCandidate `json:"candidates"`
	Rejected      []domain.RouteRejection `json:"rejected"`
	AllAtCapacity bool                    `json:"all_at_capacity"`
	// ResumeAt, with no candidate: when the first paused agent takes work again.
	ResumeAt   *time.Time `json:"resume_at,omitempty"`
	SnapshotAt time.Time  `json:"snapshot_at"`
	// PolicyVersion is the namespace's routing policy version the route
	// used (0: the compiled-in one).
	PolicyVersion int  `json:"policy_version"`
	Canary        bool `json:"canary,omitempty"`
	// Intent is how ?intent= resolved to the capability.
	Intent *resolutionJSON `json:"intent,omitempty"`
}

func (s *Server) route(c *gin.Context) {
	ns, err := readNamespace(c, c.Query("namespace"))
	if err != nil {
		_ = c.Error(err)
		return
	}
	req := domain.RouteRequest{
		JobID: c.Query("job_id"), Namespace: ns,
		Capability: c.Query("capability"), Hint: c.Query("hint"), Version: c.Query("version"), Protocol: c.Query("protocol"),
	}
	if v := c.Query("protocol_versions"); v != "" {
		req.ProtocolVersions = strings.Split(v, ",")
	}
	if words, ok := c.GetQuery("intent"); ok { // resolved first, then routed as a job of that capability would be
		if req.Capability != "" {
			_ = c.Error(Invalid("intent", "give either capability or intent, not both"))
			return
		}
		res, err := s.deps.Intent.Resolve(c.Request.Context(), ns, words)
		if err != nil {
			_ = c.Error(err)
			return
		}
		req.Capability, req.Intent = res.Capability, &res
	}
	if !domain.ValidCapability(req.Capability) {
		_ = c.Error(Invalid("capability", "capability (or intent) is required; a capability must be well-formed, e.g. document:parse:ocr"))
		return
	}
	res := s.deps.Agents.Snapshot().Route(req)
	out := routeResponse{Capability: req.Capability, Namespace: req.Namespace, Chosen: res.Chosen,
		Candidates: nonNilSlice(res.Candidates), Rejected: nonNilSlice(res.Rejected), AllAtCapacity: res.AllAtCapacity,
		SnapshotAt: s.deps.Agents.Snapshot().LoadedAt(), PolicyVersion: res.PolicyVersion, Canary: res.Canary}
	if res.Intent != nil {
		out.Intent = toResolutionJSON(*res.Intent)
	}
	if !res.ResumeAt.IsZero() {
		t := res.ResumeAt.UTC()
		out.ResumeAt = &t
	}
	c.JSON(http.StatusOK, out)
}

func nonNilSlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (s *Server) rotateToken(c *gin.Context) {
	id := c.Param("agent_id")
	md := domain.Metadata{TraceID: traceID(c)}
	presented := ""
	var a *registry.Agent
	if t := bearer(c); isAgentToken(t) {
		var err error
		if a, err = s.deps.Agents.Authenticate(c.Request.Context(), id, t); err != nil {
			_ = c.Error(err)
			return
		}
		md.Actor, presented = "agent:"+id, t
	} else {
		var ok bool
		if a, ok = s.loadAgent(c); !ok {
			return
		}
		md.Actor = principal(c).Actor()
	}
	token, until, err := s.deps.Agents.RotateToken(c.Request.Context(), a.Key(), presented, md)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"agent_id": id, "token": token, "previous_valid_until": until})
}

// jsonField is a decoder's field path as the client wrote it: the names of
// embedded Go structs ("RoutingPolicy.weight_max") are not in the JSON.
func jsonField(path string) string {
	parts := strings.Split(path, ".")
	out := parts[:0]
	for _, p := range parts {
		if p != "" && unicode.IsUpper(rune(p[0])) {
			continue // an embedded struct's type name
		}
		out = append(out, p)
	}
	return strings.Join(out, ".")
}
