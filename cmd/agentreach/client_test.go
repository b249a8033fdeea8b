package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/sdk"
	"github.com/agentreach/agentreach/sdk/client"
	"github.com/agentreach/agentreach/webhook"
)

// TestGoClientEndToEnd drives sdk/client against the real service: a
// brokered job submitted and waited for; Invoke in lookup mode failing
// over from an agent answering 503 to one that answers, with the grant the
// registry signed for it; the reports landing in the agents' direct
// figures; a cached lookup losing an agent the moment an operator takes it
// DOWN (the watch feed); and, with the service stopped, a new client
// starting from the cache file and still reaching the agents.
func TestGoClientEndToEnd(t *testing.T) {
	t.Parallel()
	r, _ := service(t)
	base := r.m.URL()
	grants := make(chan string, 10)
	busy := newTestAgent(t, base, "e2e-busy", "e2e.cap", 90, statusOnly(http.StatusServiceUnavailable))
	good := newTestAgentFull(t, base, "e2e-good", "e2e.cap", 10, answer("SUCCESS", "fine"), func(h http.Header) {
		if g := h.Get("X-Reach-Grant"); g != "" {
			grants <- g
		}
	})
	file := filepath.Join(t.TempDir(), "candidates.json")
	changes := make(chan client.AgentChange, 100)
	c, err := client.New(base, "" /* the service runs --insecure */, client.CacheFile(file), client.WatchAgents(),
		client.ReportBatch(100, time.Hour), client.OnAgentChange(func(ch client.AgentChange) { changes <- ch }))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx := t.Context()

	// Brokered: the service routes to the best agent that answers.
	submit := client.SubmitRequest{Capability: "e2e.cap", Payload: map[string]int{"n": 1}, IdempotencyKey: "e2e-1", BackoffBaseMS: 100}
	sub, err := c.Submit(ctx, submit)
	require.NoError(t, err)
	again, err := c.Submit(ctx, submit)
	require.NoError(t, err)
	require.Equal(t, sub.JobID, again.JobID, "the same idempotency key, the same job")
	job, err := c.Wait(ctx, sub.JobID)
	require.NoError(t, err)
	require.Equal(t, client.StatusSuccess, job.Status)
	require.Equal(t, "e2e-good", job.AgentID)
	require.Empty(t, grants, "a brokered delivery carries no grant")
	// Run: submitted and answered ended in one round trip (wait_ms).
	ran, err := c.Run(ctx, client.SubmitRequest{Capability: "e2e.cap", Payload: map[string]int{"n": 3}, BackoffBaseMS: 100})
	require.NoError(t, err)
	require.Equal(t, client.StatusSuccess, ran.Status)
	require.NotEmpty(t, ran.JobID)

	// Lookup mode: the client calls the agents itself.
	busyBefore := busy.hits.Load()
	res, err := c.Invoke(ctx, "e2e.cap", map[string]int{"n": 2}, client.InvokeOptions{})
	require.NoError(t, err)
	require.Equal(t, "e2e-good", res.AgentID)
	require.Equal(t, client.StatusSuccess, res.Status)
	require.Equal(t, "fine", res.BizCode)
	require.Len(t, res.Attempts, 2)
	require.Equal(t, "e2e-busy", res.Attempts[0].AgentID)
	require.Equal(t, http.StatusServiceUnavailable, res.Attempts[0].StatusCode)
	env := envelopeOf(t, good, res.InvocationID)
	require.Equal(t, 2, env.Attempt)
	require.Empty(t, env.ResultURL)
	key := sha256.Sum256([]byte(good.token))
	g, err := domain.VerifyGrant(<-grants, key[:], "e2e-good", "e2e.cap", time.Now())
	require.NoError(t, err, "the agent can verify the grant the client sent")
	require.Equal(t, "default", g.Namespace)
	require.EqualValues(t, 1, busy.hits.Load()-busyBefore, "the busy agent was called once, directly")

	require.NoError(t, c.Flush(ctx), "the service accepts the client's reports")
	waitFor(t, 15*time.Second, "the direct calls show in the metrics", func() bool {
		var m metricsJSON
		getJSON(t, base+"/v1/metrics/agents?window=5m", http.StatusOK, &m)
		seen := 0
		for _, a := range m.Agents {
			switch {
			case a.AgentID == "e2e-busy" && a.Direct.Attempted == 1 && a.Direct.Delivered == 0:
				seen++
			case a.AgentID == "e2e-good" && a.Direct.Attempted == 1 && a.Direct.Succeeded == 1:
				seen++
			}
		}
		return seen == 2
	})

	// The cache answers without the registry, until the watch feed says an
	// agent changed.
	httpOnly := client.LookupOptions{Constraints: client.Constraints{Protocol: "http"}}
	cached, err := c.Lookup(ctx, "e2e.cap", httpOnly)
	require.NoError(t, err)
	require.True(t, cached.Cached)
	require.Equal(t, []string{"e2e-busy", "e2e-good"}, []string{cached.Candidates[0].AgentID, cached.Candidates[1].AgentID})
	code, body := call(t, http.MethodPost, base+"/v1/agents/e2e-busy/down", "", `{"reason":"e2e"}`)
	require.Equal(t, http.StatusOK, code, body)
	waitFor(t, 10*time.Second, "the watch feed says e2e-busy is DOWN", func() bool {
		for {
			select {
			case ch := <-changes:
				if ch.AgentID == "e2e-busy" && ch.State == "DOWN" {
					return true
				}
			default:
				return false
			}
		}
	})
	after, err := c.Lookup(ctx, "e2e.cap", httpOnly)
	require.NoError(t, err)
	require.True(t, after.Cached)
	require.Len(t, after.Candidates, 1)
	require.Equal(t, "e2e-good", after.Candidates[0].AgentID, "dropped at once, without asking")

	// Without Agent-Reach: a new client starts from the cache file.
	require.NoError(t, c.Close())
	r.stop(t)
	cold, err := client.New(base, "", client.CacheFile(file), client.Retry(0, 0))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cold.Close() })
	stale, err := cold.Lookup(ctx, "e2e.cap", httpOnly)
	require.NoError(t, err)
	require.True(t, stale.Stale)
	require.Len(t, stale.Candidates, 1, "the file was written again when e2e-busy went DOWN")
	out, err := cold.Invoke(ctx, "e2e.cap", json.RawMessage(`{"n":3}`), client.InvokeOptions{})
	require.NoError(t, err)
	require.True(t, out.Stale)
	require.Equal(t, "e2e-good", out.AgentID, "the grants of the file are still good")
	require.Equal(t, out.InvocationID, envelopeOf(t, good, out.InvocationID).JobID)
}

// envelopeOf answers the envelope of job id that agent a received.
func envelopeOf(t *testing.T, a *testAgent, id string) webhook.Envelope {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case env := <-a.envelopes:
			if env.JobID == id {
				return env
			}
		case <-timeout:
			t.Fatalf("agent %s did not receive %s", a.id, id)
		}
	}
}

// TestGoClientInvokesSDKAgents: Invoke reaches agents built on the agent
// SDK, which verify the grant the client sends and answer inline, and the
// service accepts the reports.
func TestGoClientInvokesSDKAgents(t *testing.T) {
	t.Parallel()
	r, _ := service(t)
	base := r.m.URL()
	for _, id := range []string{"gc-a", "gc-b"} {
		a := sdk.New(sdk.Config{ServerURL: base, StartJitter: -1}, sdk.Registration{AgentID: id, Capabilities: []string{"gc.cap"}, TTLSeconds: 10},
			func(_ context.Context, d sdk.Delivery) (sdk.Result, error) {
				return sdk.Success(map[string]any{"by": id, "direct": d.Direct, "job_id": d.JobID}), nil
			})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		waitState(t, base, id, "HEALTHY", 20*time.Second)
	}
	waitRoute(t, base, "gc.cap", func(rj routeJSON) bool { return len(rj.Candidates) == 2 })
	c, err := client.New(base, "", client.ReportBatch(100, time.Hour))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	res, err := c.Invoke(t.Context(), "gc.cap", map[string]int{"n": 1}, client.InvokeOptions{Limit: 2})
	require.NoError(t, err)
	require.Equal(t, client.StatusSuccess, res.Status)
	require.Len(t, res.Attempts, 1, "the best candidate took it")
	var out struct {
		By     string `json:"by"`
		Direct bool   `json:"direct"`
		JobID  string `json:"job_id"`
	}
	require.NoError(t, json.Unmarshal(res.Result, &out))
	require.Equal(t, res.AgentID, out.By)
	require.True(t, out.Direct, "the SDK took it as a direct call, on the grant")
	require.Equal(t, res.InvocationID, out.JobID)
	require.NoError(t, c.Flush(t.Context()))
}

// Intent through the Go SDKs: an agent publishes what its capability does
// at registration (CapabilityInfo), a caller resolves an intent to it with
// the explanation, and runs a job by intent; an intent nothing matches is
// ErrAmbiguousIntent.
func TestGoSDKsIntent(t *testing.T) {
	t.Parallel()
	r, _ := service(t)
	base := r.m.URL()
	agent := sdk.New(sdk.Config{ServerURL: base, StartJitter: -1, Logger: slog.New(slog.DiscardHandler)},
		sdk.Registration{AgentID: "tracker", Capabilities: []string{"parcel.track"},
			CapabilityInfo: map[string]sdk.CapabilityDoc{"parcel.track": {Title: "Track a parcel",
				Description: "Says where a parcel is and when it arrives.", Examples: []string{"where is my parcel", "我的包裹在哪里"}}}},
		func(_ context.Context, d sdk.Delivery) (sdk.Result, error) { return sdk.Success(d.Capability), nil })
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-agent.Registered()

	c, err := client.New(base, "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	var res client.Resolution
	deadline := time.Now().Add(20 * time.Second)
	for { // the catalogue takes the registration's words in
		res, err = c.Resolve(ctx, "", "where is my parcel?")
		if err == nil {
			break
		}
		require.ErrorIs(t, err, client.ErrAmbiguousIntent)
		require.True(t, time.Now().Before(deadline), "not resolved within 20 s: %v", err)
		time.Sleep(50 * time.Millisecond) // poll interval while waiting on the condition
	}
	require.Equal(t, "parcel.track", res.Capability)
	require.NotEmpty(t, res.Resolver)
	require.NotEmpty(t, res.Reason)
	require.NotEmpty(t, res.Candidates)

	job, err := c.Run(ctx, client.SubmitRequest{Intent: "我的包裹在哪里", Payload: map[string]int{"n": 1}})
	require.NoError(t, err)
	require.Equal(t, client.StatusSuccess, job.Status)
	require.Equal(t, "tracker", job.AgentID)
	require.JSONEq(t, `"parcel.track"`, string(job.Result))

	_, err = c.Resolve(ctx, "", "bake a chocolate cake")
	require.ErrorIs(t, err, client.ErrAmbiguousIntent)
}
