package httpapi

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/agentreach/agentreach/domain"
)

// operateRequest is the optional body of drain, down and up.
type operateRequest struct {
	Reason string `json:"reason"`
}

// maxReason bounds an operator's reason.
const maxReason = 512

// operate answers POST /v1/agents/{id}/drain, /down and /up: the operator's
// action sig, recorded on the agent's stream with the key as actor and the
// reason given. The agent after it is the answer; a state that does not
// allow the action is 409 conflict.
func (s *Server) operate(sig domain.AgentSignal) gin.HandlerFunc {
	return func(c *gin.Context) {
		a, ok := s.loadAgent(c)
		if !ok {
			return
		}
		var req operateRequest
		if err := bindJSON(c, &req, false); err != nil {
			_ = c.Error(err)
			return
		}
		if len(req.Reason) > maxReason {
			_ = c.Error(Invalid("reason", "must be at most 512 bytes"))
			return
		}
		out, err := s.deps.Agents.Operate(c.Request.Context(), a.Key(), sig, req.Reason, s.meta(c, principal(c).Actor()))
		if err != nil {
			_ = c.Error(err)
			return
		}
		c.JSON(http.StatusOK, s.agentResponse(out))
	}
}

// patchAgent answers PATCH /v1/agents/{id}: weight, rollout_percent,
// max_concurrent, aliases, context and metadata change at once, with no
// restart and no probe window, recorded as AGENT_UPDATED.
func (s *Server) patchAgent(c *gin.Context) {
	a, ok := s.loadAgent(c)
	if !ok {
		return
	}
	var p domain.AgentPatch
	if err := bindJSON(c, &p, true); err != nil {
		_ = c.Error(err)
		return
	}
	out, err := s.deps.Agents.Update(c.Request.Context(), a.Key(), p, s.meta(c, principal(c).Actor()))
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, s.agentResponse(out))
}
