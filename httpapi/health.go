package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/health"
)

// agentMetrics serves GET /v1/metrics/agents?window=5m&namespace=.
func (s *Server) agentMetrics(c *gin.Context) {
	window := c.DefaultQuery("window", "5m")
	ns, err := scopeNamespace(c, c.Query("namespace"))
	if err != nil {
		_ = c.Error(err)
		return
	}
	agents, err := health.Agents(c.Request.Context(), s.deps.Pool, window, ns)
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
	points, err := health.Series(c.Request.Context(), s.deps.Pool, ns)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"points": each(points, toPoint)})
}
