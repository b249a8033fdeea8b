package httpapi

import (
	"encoding/json"
	"errors"
	"github.com/agentreach/agentreach/auth"
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/health"
	"github.com/agentreach/agentreach/projection"
)

// agentMetrics serves GET /v1/metrics/agents?window=5m&namespace=.
func (s *Server) agentMetrics(c *gin.Context) {
	window := c.DefaultQuery("window", "5m")
	ns, err := scopeNamespace(c, c.Query("namespace"))
	if err != nil {
		_ = c.Error(err)
		return
	}
	agents, err := health.Agents(c.Request.Context(), s.reads(), window, ns)
	if errors.Is(err, health.ErrUnknownWindow) {
		_ = c.Error(Invalid("window", "%v", err))
		return
	}
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"window": window, "agents": each(agents, toAgentHealth)})
}

// eventStream serves GET /v1/events/stream as Server-Sent Events: the global
// log from after= (or the Last-Event-ID header) on, then each new event as
// it commits, woken by LISTEN/NOTIFY. Each message's id is the event's
// position, so a reconnecting client resumes where it left off.
func (s *Server) eventStream(c *gin.Context) {
	cur, ok := s.streamFrom(c, false)
	if !ok {
		return
	}
	s.streamLog(c, cur, func(r eventstore.Record) (string, []byte, bool) {
		b, _ := json.Marshal(toEventResponse(r))
		return string(r.Type), b, true
	})
}

// agentSeries serves GET /v1/metrics/agents/series: per agent and minute,
// the last hour, for the dashboard's trend lines.
func (s *Server) agentSeries(c *gin.Context) {
	ns, err := scopeNamespace(c, c.Query("namespace"))
	if err != nil {
		_ = c.Error(err)
		return
	}
	points, err := health.Series(c.Request.Context(), s.reads(), ns)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"points": each(points, toPoint)})
}

// oneAgentSeries answers one agent's minutes over the last hour: GET
// /v1/agents/{agent_id}/series.
func (s *Server) oneAgentSeries(c *gin.Context) {
	a, ok := s.loadAgent(c)
	if !ok {
		return
	}
	minutes, err := health.AgentSeries(c.Request.Context(), s.reads(), a.Namespace, a.AgentID)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"namespace": a.Namespace, "agent_id": a.AgentID, "minutes": each(minutes, toMinute)})
}

// listAlerts answers the alerts of the key's namespaces, newest first: GET
// /v1/alerts?namespace=&kind=&subject=&before=&limit=.
func (s *Server) listAlerts(c *gin.Context) {
	ns, err := scopeNamespace(c, c.Query("namespace"))
	if err != nil {
		_ = c.Error(err)
		return
	}
	limit, err := queryInt(c, "limit", 100, 1, 500)
	if err != nil {
		_ = c.Error(err)
		return
	}
	before, err := queryInt(c, "before", 0, 0, 1<<62)
	if err != nil {
		_ = c.Error(err)
		return
	}
	kinds := splitKinds(c.Query("kind"))
	for _, k := range kinds {
		if !slices.Contains(projection.AlertKinds, domain.EventType(k)) {
			_ = c.Error(Invalid("kind", "kind must be one of %v", projection.AlertKinds))
			return
		}
	}
	alerts, err := health.ListAlerts(c.Request.Context(), s.reads(), health.AlertFilter{Namespace: ns, Kinds: kinds,
		Subject: c.Query("subject"), Before: before, Limit: int(limit)})
	if err != nil {
		_ = c.Error(err)
		return
	}
	var next int64
	if len(alerts) == int(limit) {
		next = alerts[len(alerts)-1].Position
	}
	c.JSON(http.StatusOK, gin.H{"alerts": each(alerts, toAlert), "next_before": next})
}

// splitKinds splits a comma-separated kind= query value.
func splitKinds(v string) []string {
	var out []string
	for _, k := range strings.Split(v, ",") {
		if k = strings.TrimSpace(k); k != "" {
			out = append(out, k)
		}
	}
	return out
}

// fleetSeries serves GET /v1/metrics/fleet: the fleet's throughput, error
// rate and latency per bucket of a window, for the dashboard's fleet chart.
func (s *Server) fleetSeries(c *gin.Context) {
	ns, err := scopeNamespace(c, c.Query("namespace"))
	if err != nil {
		_ = c.Error(err)
		return
	}
	window := c.DefaultQuery("window", "1h")
	w, ok := health.FleetWindows[window]
	if !ok {
		_ = c.Error(Invalid("window", "one of 1h, 24h, 7d"))
		return
	}
	points, err := health.Fleet(c.Request.Context(), s.reads(), ns, window)
	if err != nil {
		_ = c.Error(err)
		return
	}
	shown := ns
	if shown == "" {
		shown = auth.AllNamespaces
	}
	c.JSON(http.StatusOK, gin.H{"namespace": shown, "window": window, "bucket_seconds": int(w.Bucket.Seconds()), "points": points})
}
