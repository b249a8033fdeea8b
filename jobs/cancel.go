package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/agentreach/agentreach/jobs/jobstore"
	"github.com/agentreach/agentreach/registry"
	"github.com/agentreach/agentreach/webhook"
)

// CancelNoticesKey is the registration metadata key by which an HTTP agent
// says it takes cancel notices (the Go SDK sets it).
const CancelNoticesKey = "cancel_notices"

// cancelNotice tells an HTTP agent that takes cancel notices that a job it
// holds was cancelled: a POST to its endpoint with X-Reach-Cancel: 1 and
// the job's id and attempt, signed as deliveries are. A courtesy, in the
// background: the job is CANCELLED already, and a late result is recorded
// as a duplicate.
func (s *Service) cancelNotice(ctx context.Context, a *registry.Agent, l *jobstore.Loaded) {
	if on, _ := a.Metadata[CancelNoticesKey].(bool); !on || a.Pull() {
		return
	}
	body, _ := json.Marshal(map[string]any{"job_id": l.JobID, "attempt": l.Attempts, "capability": l.Capability, "cancelled": true})
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	go func() {
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.Endpoint, bytes.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Reach-Cancel", "1")
		req.Header.Set("X-Reach-Job-Id", l.JobID)
		webhook.SetHeaders(req.Header, l.JobID+"."+strconv.Itoa(l.Attempts)+".cancel", s.now(), body, a.SigningKeys(s.now())...)
		resp, err := s.http.Do(req)
		if err != nil {
			s.logger.InfoContext(ctx, "cancel notice to the agent", "job_id", l.JobID, "agent_id", a.AgentID, "err", err)
			return
		}
		resp.Body.Close()
	}()
}
