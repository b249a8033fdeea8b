package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/jobs"
	"github.com/agentreach/agentreach/sdk"
)

// TestSDKAgent: an agent built on the SDK verifies the delivery signature,
// answers inline or asynchronously through Report, and refuses a forged
// delivery.
func TestSDKAgent(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	var agent *sdk.Agent
	agent = sdk.New(sdk.Config{ServerURL: base, StartJitter: -1},
		sdk.Registration{AgentID: "sdk-1", Capabilities: []string{"sdk.inline", "sdk.async"}, TTLSeconds: 10},
		func(ctx context.Context, d sdk.Delivery) (sdk.Result, error) {
			if d.Capability == "sdk.async" {
				go func() { _ = agent.Report(context.Background(), d, sdk.Success(map[string]any{"async": true})) }()
				return sdk.Result{}, sdk.ErrAccepted
			}
			return sdk.Success(map[string]any{"payload": d.Payload}), nil
		})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx) }()
	waitState(t, base, "sdk-1", "HEALTHY", 20*time.Second)

	id := submitOK(t, base, `{"capability":"sdk.inline","payload":{"hello":"world"}}`)
	j := waitTerminal(t, base, id, 10*time.Second)
	require.Equal(t, "SUCCESS", j.Status)
	require.JSONEq(t, `{"payload":{"hello":"world"}}`, string(j.Result))

	id = submitOK(t, base, `{"capability":"sdk.async","payload":{}}`)
	j = waitTerminal(t, base, id, 10*time.Second)
	require.Equal(t, "SUCCESS", j.Status)
	require.JSONEq(t, `{"async":true}`, string(j.Result))
	require.Equal(t, []string{"SUBMITTED", "ROUTED", "DELIVERED", "SUCCESS"}, types(jobEvents(t, base, id)))

	forged, err := http.Post(agent.Endpoint(), "application/json", strings.NewReader(`{"job_id":"x","payload":{}}`))
	require.NoError(t, err)
	forged.Body.Close()
	require.Equal(t, http.StatusUnauthorized, forged.StatusCode)

	cancel()
	require.NoError(t, <-done)
	require.Equal(t, "OFFLINE", agentState(t, base, "sdk-1"))
}

// TestPriorityLanes: a flood of low-priority jobs that keeps every low
// worker busy does not delay a high-priority job.
func TestPriorityLanes(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	release := make(chan struct{})
	newTestAgent(t, base, "slow", "t.slow", 50, func(w http.ResponseWriter, env jobs.Envelope) {
		<-release // the low flood holds its workers until the test ends
		answer("SUCCESS", "")(w, env)
	})
	newTestAgent(t, base, "fast", "t.fast", 50, answer("SUCCESS", ""))
	defer close(release)
	for range 60 { // more than the low lane's 20 workers
		submitOK(t, base, `{"capability":"t.slow","payload":{},"priority":"low","timeout_ms":60000}`)
	}
	high := submitOK(t, base, `{"capability":"t.fast","payload":{},"priority":"high"}`)
	require.Equal(t, "SUCCESS", waitTerminal(t, base, high, 10*time.Second).Status)
	normal := submitOK(t, base, `{"capability":"t.fast","payload":{}}`)
	require.Equal(t, "SUCCESS", waitTerminal(t, base, normal, 10*time.Second).Status)
}

// TestSDKCancelNotice: a job an SDK agent is working on inline is
// cancelled; Agent-Reach sends a signed cancel notice and the SDK cancels
// the handler's context with sdk.ErrJobCancelled.
func TestSDKCancelNotice(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	started := make(chan string, 1)
	causes := make(chan error, 1)
	agent := sdk.New(sdk.Config{ServerURL: base, StartJitter: -1},
		sdk.Registration{AgentID: "sdk-cancel", Capabilities: []string{"sdk.long"}, TTLSeconds: 30},
		func(ctx context.Context, d sdk.Delivery) (sdk.Result, error) {
			started <- d.JobID
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return sdk.Result{}, ctx.Err()
		})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = agent.Run(ctx) }()
	waitState(t, base, "sdk-cancel", "HEALTHY", 20*time.Second)

	id := submitOK(t, base, `{"capability":"sdk.long","payload":{},"timeout_ms":60000}`)
	select {
	case got := <-started:
		require.Equal(t, id, got)
	case <-time.After(20 * time.Second):
		t.Fatal("the job never reached the agent")
	}
	code, out := call(t, http.MethodPost, base+"/v1/jobs/"+id+"/cancel", "", `{"reason":"changed my mind"}`)
	require.Equal(t, http.StatusOK, code, out)
	select {
	case cause := <-causes:
		require.ErrorIs(t, cause, sdk.ErrJobCancelled)
	case <-time.After(20 * time.Second):
		t.Fatal("the handler's context was not cancelled")
	}
	require.Equal(t, "CANCELLED", getJob(t, base, id).Status)
}
