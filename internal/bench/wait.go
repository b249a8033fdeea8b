package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"time"

	"github.com/agentreach/agentreach/internal/harness"
)

// waitJobWork is how long the wait phase's agent works on a job.
const waitJobWork = 1500 * time.Microsecond

// waitRoundTrips measures a caller's blocking call as the SDKs make it: one
// client submits jobs one at a time with wait_ms, each answered 200 with
// the ended job, to an agent that works 1.5 ms a job.
func (r *run) waitRoundTrips(ctx context.Context) error {
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		time.Sleep(waitJobWork)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"SUCCESS","result":{"ok":true}}`)
	}))
	r.agents = append(r.agents, agent)
	body := fmt.Sprintf(`{"agent_id":"bench-wait","capabilities":["bench.wait"],"endpoint":%q,"ttl_seconds":%d}`, agent.URL, agentTTLSeconds)
	if _, err := harness.Submit(ctx, r.base+"/v1/agents", body); err != nil {
		return err
	}
	if err := harness.WaitAgentsHealthy(ctx, r.base, len(r.agents), 30*time.Second); err != nil {
		return err
	}
	r.progress("a blocking call (submit with wait_ms) of a 1.5 ms job, one client …")
	client, done := newClient(1)
	defer done()
	lat, err := benchWait(ctx, client, r.base, "bench.wait", 300)
	if err != nil {
		return err
	}
	r.res.add("a blocking call: submit with wait_ms → 200 with the ended job, a 1.5 ms job, one client (p50 / p95 / p99 ms)",
		fmt.Sprintf("%.2f / %.2f / %.2f", ms(lat, 0.50), ms(lat, 0.95), ms(lat, 0.99)), "aim: p50 ≤ 5 ms", "")
	return nil
}

// benchWait submits n jobs of capability one at a time with wait_ms and
// answers the round trips, sorted; an answer that is not 200 with the job
// ended SUCCESS is an error.
func benchWait(ctx context.Context, client *http.Client, base, capability string, n int) ([]time.Duration, error) {
	body := fmt.Sprintf(`{"capability":%q,"payload":{"wait":true},"wait_ms":5000}`, capability)
	lat := make([]time.Duration, 0, n)
	for range n {
		req, err := harness.NewRequest(ctx, http.MethodPost, base+"/v1/jobs", body)
		if err != nil {
			return nil, err
		}
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(t0)
		var job struct {
			Status string `json:"status"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &job) != nil || job.Status != "SUCCESS" {
			return nil, fmt.Errorf("a submit with wait_ms answered %d %.200s", resp.StatusCode, b)
		}
		lat = append(lat, took)
	}
	slices.Sort(lat)
	return lat, nil
}
