package jobs

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
)

// TestReportResultAnswersItsOwnFold: a result that ends a job calls its
// caller back at once, from a goroutine that records the acknowledgement;
// the fold ReportResult answers (what the result's HTTP answer is made of)
// is the job as the result left it, and nothing changes it afterwards.
func TestReportResultAnswersItsOwnFold(t *testing.T) {
	s := newService(t)
	ctx := context.Background()
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(cb.Close)
	reg := domain.AgentRegistration{AgentID: "async", Capabilities: []string{"doc:parse"}, Endpoint: "http://127.0.0.1:1/", TTLSeconds: 600}
	agent, token, err := s.registry.Register(ctx, reg, domain.Metadata{Actor: "test"})
	require.NoError(t, err)
	res, err := s.Submit(ctx, domain.Submitted{Capability: "doc:parse", Payload: json.RawMessage(`{}`), CallbackURL: cb.URL}, domain.Metadata{Actor: "test"})
	require.NoError(t, err)
	l, err := s.Load(ctx, nil, res.JobID)
	require.NoError(t, err)
	err = recordRouted(ctx, s, l, agent, routedEvent(l, agent.AgentID))
	require.NoError(t, err)

	_, got, err := s.ReportResult(ctx, res.JobID, token, domain.ResultReport{Status: domain.StatusSuccess, Result: json.RawMessage(`{}`)}, domain.Metadata{Actor: "test"})
	require.NoError(t, err)
	version := got.Version
	deadline := time.Now().Add(10 * time.Second)
	for {
		now, err := s.Load(ctx, nil, res.JobID)
		require.NoError(t, err)
		if now.CallbackAcked {
			break
		}
		require.True(t, time.Now().Before(deadline), "the callback was never acknowledged")
		time.Sleep(5 * time.Millisecond) // poll interval while waiting on the condition
	}
	require.Equal(t, domain.StatusSuccess, got.Status)
	require.False(t, got.CallbackAcked, "the answered fold is the result's")
	require.Equal(t, version, got.Version)
}
