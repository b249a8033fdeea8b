package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/agentreach/agentreach/auth"
	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
)

// lookupRequest is the body of POST /v1/lookup.
type lookupRequest struct {
	Capability  string             `json:"capability"`
	Hint        string             `json:"hint"`
	Namespace   string             `json:"namespace"`
	Constraints domain.Constraints `json:"constraints"`
	Limit       int                `json:"limit"`
}

// lookupScope refuses a key that holds no lookup scope of any kind: one
// limited to a capability pattern passes, and the handler checks the
// capability asked.
func lookupScope(c *gin.Context) {
	if !principal(c).LooksUp() {
		_ = c.Error(&Error{Code: CodePermissionDenied, Message: "this key lacks the scope agents:lookup (or agents:lookup:<capability pattern>)"})
		c.Abort()
	}
}

// lookup serves POST /v1/lookup (agents:lookup): the ranked candidates of a
// capability, filtered and scored as brokered routing, each with an
// invocation grant, and the log position to watch for changes from.
func (s *Server) lookup(c *gin.Context) {
	var req lookupRequest
	if err := bindJSON(c, &req, true); err != nil {
		_ = c.Error(err)
		return
	}
	ns, err := defaultNamespace(c, req.Namespace)
	if err != nil {
		_ = c.Error(err)
		return
	}
	switch {
	case !domain.ValidCapability(req.Capability):
		_ = c.Error(Invalid("capability", "capability is required and must be well-formed, e.g. document:parse:ocr"))
		return
	case len(req.Hint) > 1024:
		_ = c.Error(Invalid("hint", "hint must be at most 1024 characters"))
		return
	case req.Limit < 0 || req.Limit > domain.MaxLookupLimit:
		_ = c.Error(Invalid("limit", "limit must be between 1 and %d", domain.MaxLookupLimit))
		return
	}
	if !principal(c).CanLookup(req.Capability) {
		_ = c.Error(&Error{Code: CodePermissionDenied, Field: "capability", Message: "this key may not look up agents of " + req.Capability})
		return
	}
	if req.Limit == 0 {
		req.Limit = domain.DefaultLookupLimit
	}
	ctx := c.Request.Context()
	position, err := eventstore.LastPosition(ctx, s.deps.Pool)
	if err != nil {
		_ = c.Error(err)
		return
	}
	out, err := s.deps.Routing.Lookup(ctx, principal(c).KeyID, domain.RouteRequest{Namespace: ns, Capability: req.Capability, Hint: req.Hint,
		Version: req.Constraints.Version, Protocol: req.Constraints.Protocol, ProtocolVersions: req.Constraints.ProtocolVersions}, req.Limit)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"capability": req.Capability, "namespace": ns, "candidates": out,
		"ttl_ms": domain.LookupTTL.Milliseconds(), "watch_from": position})
}

// reportsRequest is the body of POST /v1/reports.
type reportsRequest struct {
	Namespace string                `json:"namespace"`
	Reports   []domain.DirectReport `json:"reports"`
}

// reports serves POST /v1/reports (agents:lookup): a caller's outcomes of
// its direct calls, all or nothing.
func (s *Server) reports(c *gin.Context) {
	var req reportsRequest
	if err := bindJSON(c, &req, true); err != nil {
		_ = c.Error(err)
		return
	}
	if len(req.Reports) == 0 || len(req.Reports) > domain.MaxReports {
		_ = c.Error(Invalid("reports", "reports must hold 1 to %d reports", domain.MaxReports))
		return
	}
	ns, err := defaultNamespace(c, req.Namespace)
	if err != nil {
		_ = c.Error(err)
		return
	}
	p := principal(c)
	for i, r := range req.Reports {
		if !p.CanLookup(r.Capability) {
			_ = c.Error(&Error{Code: CodePermissionDenied, Field: fmt.Sprintf("reports[%d].capability", i),
				Message: "this key may not report on calls of " + r.Capability})
			return
		}
	}
	if err := s.deps.Routing.Report(c.Request.Context(), p.KeyID, ns, req.Reports, s.meta(c, p.Actor())); err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusAccepted, gin.H{"accepted": len(req.Reports)})
}

// agentChange is one message of GET /v1/agents/watch.
type agentChange struct {
	Type       domain.EventType `json:"type"`
	Namespace  string           `json:"namespace"`
	AgentID    string           `json:"agent_id"`
	State      string           `json:"state,omitempty"`
	Position   int64            `json:"position"`
	RecordedAt time.Time        `json:"recorded_at"`
	Data       json.RawMessage  `json:"data"`
}

// watchTypes are the agent events a watch sends.
var watchTypes = map[domain.EventType]bool{
	domain.EventAgentRegistered: true, domain.EventAgentStateChanged: true, domain.EventAgentDeregistered: true,
	domain.EventAgentUpdated: true, domain.EventAgentCardUpdated: true, domain.EventAgentContextChanged: true,
	domain.EventAgentTokenRotated: true,
}

// toAgentChange reads an agent event of the log, or false for any other.
func toAgentChange(r eventstore.Record, ns string) (agentChange, bool) {
	key, ok := strings.CutPrefix(r.StreamID, domain.AgentStreamPrefix)
	if !ok || !watchTypes[r.Type] {
		return agentChange{}, false
	}
	evNS, id, _ := strings.Cut(key, "/")
	if ns != "" && evNS != ns {
		return agentChange{}, false
	}
	ch := agentChange{Type: r.Type, Namespace: evNS, AgentID: id, Position: r.Position, RecordedAt: r.RecordedAt.UTC(), Data: r.Data}
	switch r.Type {
	case domain.EventAgentStateChanged:
		var d domain.AgentStateChanged
		_ = json.Unmarshal(r.Data, &d)
		ch.State = string(d.To)
	case domain.EventAgentRegistered:
		ch.State = string(domain.AgentProbing)
	case domain.EventAgentDeregistered:
		ch.State = string(domain.AgentOffline)
	}
	return ch, true
}

// watchAgents serves GET /v1/agents/watch (agents:read or agents:lookup)
// as Server-Sent Events: the agent changes of the key's namespace (or the
// one asked for) after= (or the Last-Event-ID header; without either, from
// now on), so a client's cache drops a candidate when its agent changes.
// Each message's id is the event's position, to resume from.
func (s *Server) watchAgents(c *gin.Context) {
	p := principal(c)
	// Not a key limited to a capability pattern: the changes show every
	// agent of the namespace, their registrations whole.
	if !p.Has(auth.ScopeAgentsRead) && !p.Has(auth.ScopeAgentsLookup) {
		_ = c.Error(&Error{Code: CodePermissionDenied, Message: "watching agents needs the agents:read or the unlimited agents:lookup scope"})
		return
	}
	ns, err := scopeNamespace(c, c.Query("namespace"))
	if err != nil {
		_ = c.Error(err)
		return
	}
	cur, ok := s.streamFrom(c, true)
	if !ok {
		return
	}
	s.streamLog(c, cur, func(r eventstore.Record) (string, []byte, bool) {
		ch, ok := toAgentChange(r, ns)
		if !ok {
			return "", nil, false
		}
		b, _ := json.Marshal(ch)
		return "agent", b, true
	})
}
