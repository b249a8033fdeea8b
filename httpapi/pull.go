package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/registry"
	"github.com/agentreach/agentreach/webhook"
)

// claimRequest is the body of POST /v1/agents/{id}/claim.
type claimRequest struct {
	Max    *int `json:"max"`
	WaitMS int  `json:"wait_ms"`
}

// claim serves a pull agent's claim (agent token): up to max deliveries
// from its inbox, waiting up to wait_ms for the first. Its first claim
// makes the agent HEALTHY.
func (s *Server) claim(c *gin.Context) {
	var req claimRequest
	if err := bindJSON(c, &req, false); err != nil {
		_ = c.Error(err)
		return
	}
	max := 1
	if req.Max != nil {
		max = *req.Max
	}
	if max < 1 || max > domain.MaxClaim {
		_ = c.Error(Invalid("max", "max must be between 1 and %d", domain.MaxClaim))
		return
	}
	if req.WaitMS < 0 || req.WaitMS > domain.MaxClaimWaitMS {
		_ = c.Error(Invalid("wait_ms", "wait_ms must be between 0 and %d (60 s)", domain.MaxClaimWaitMS))
		return
	}
	ctx := c.Request.Context()
	id := c.Param("agent_id")
	a, err := s.deps.Agents.PullAgent(ctx, id, bearer(c))
	if err != nil {
		_ = c.Error(err)
		return
	}
	if a, err = s.deps.Agents.Claimed(ctx, a, s.meta(c, "agent:"+id)); err != nil {
		_ = c.Error(err)
		return
	}
	out, err := s.deps.Inbox.Claim(ctx, a, max, time.Duration(req.WaitMS)*time.Millisecond)
	if err != nil {
		_ = c.Error(err)
		return
	}
	if ctx.Err() != nil && len(out) > 0 {
		// The agent went away while its claim was being answered: give the
		// deliveries back at once rather than let them time out.
		s.releaseTo(ctx, a, out)
		return
	}
	c.JSON(http.StatusOK, gin.H{"deliveries": out})
}

// releaseRequest is the body of POST /v1/agents/{id}/release.
type releaseRequest struct {
	Jobs  []domain.HeldAttempt `json:"jobs"`
	Error string               `json:"error"`
}

// release serves a pull agent giving back what it holds (agent token):
// the listed attempts, unstarted or (with error) failed; with none listed,
// everything waiting in its inbox.
func (s *Server) release(c *gin.Context) {
	var req releaseRequest
	if err := bindJSON(c, &req, false); err != nil {
		_ = c.Error(err)
		return
	}
	if len(req.Jobs) > domain.MaxClaim {
		_ = c.Error(Invalid("jobs", "at most %d jobs at once", domain.MaxClaim))
		return
	}
	for _, h := range req.Jobs {
		if h.JobID == "" || h.Attempt < 1 {
			_ = c.Error(Invalid("jobs", "each job needs its job_id and attempt (from 1)"))
			return
		}
	}
	if len(req.Error) > 4096 {
		_ = c.Error(Invalid("error", "error must be at most 4096 characters"))
		return
	}
	if req.Error != "" && len(req.Jobs) == 0 {
		_ = c.Error(Invalid("error", "error needs the jobs it is about: the inbox is only ever given back unstarted"))
		return
	}
	ctx := c.Request.Context()
	a, err := s.deps.Agents.PullAgent(ctx, c.Param("agent_id"), bearer(c))
	if err != nil {
		_ = c.Error(err)
		return
	}
	out, err := s.deps.Inbox.Release(ctx, a, req.Jobs, req.Error)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"released": out})
}

// releaseTo gives back to agent a the deliveries out, claimed for it but
// never answered (it went away meanwhile).
func (s *Server) releaseTo(ctx context.Context, a *registry.Agent, out []webhook.Envelope) {
	held := make([]domain.HeldAttempt, len(out))
	for i, e := range out {
		held[i] = domain.HeldAttempt{JobID: e.JobID, Attempt: e.Attempt}
	}
	_, _ = s.deps.Inbox.Release(context.WithoutCancel(ctx), a, held, "")
}
