package main

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/sdk"
	"github.com/agentreach/agentreach/webhook"
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
	newTestAgent(t, base, "slow", "t.slow", 50, func(w http.ResponseWriter, env webhook.Envelope) {
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

// TestSDKPullAgent: an SDK agent in pull mode, against the real service,
// serves jobs on its worker pool (never more at once than max_concurrent),
// reports them, gives back a refused one (which then succeeds elsewhere
// without spending an attempt) and goes offline on shutdown.
func TestSDKPullAgent(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	var running, top atomic.Int32
	agent := sdk.New(sdk.Config{ServerURL: base, StartJitter: -1, ClaimWait: 2 * time.Second},
		sdk.Registration{AgentID: "sdk-pull", Mode: sdk.ModePull, Capabilities: []string{"sdkp.work", "sdkp.refuse"}, MaxConcurrent: 2, TTLSeconds: 10},
		func(ctx context.Context, d sdk.Delivery) (sdk.Result, error) {
			if d.Capability == "sdkp.refuse" && d.Attempt == 1 {
				return sdk.Result{}, sdk.ErrRefused
			}
			n := running.Add(1)
			defer running.Add(-1)
			for old := top.Load(); n > old && !top.CompareAndSwap(old, n); old = top.Load() {
			}
			time.Sleep(20 * time.Millisecond) // the work, while the worker is held
			return sdk.Success(map[string]any{"attempt": d.Attempt}), nil
		})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx) }()
	waitState(t, base, "sdk-pull", "HEALTHY", 20*time.Second) // its first claim
	waitRoute(t, base, "sdkp.work", func(rj routeJSON) bool { return rj.Chosen == "sdk-pull" })

	var ids []string
	for range 10 {
		ids = append(ids, submitOK(t, base, `{"capability":"sdkp.work","payload":{}}`))
	}
	for _, id := range ids {
		require.Equal(t, "SUCCESS", waitTerminal(t, base, id, 30*time.Second).Status)
	}
	require.LessOrEqual(t, top.Load(), int32(2), "never more at once than max_concurrent")

	refused := submitOK(t, base, `{"capability":"sdkp.refuse","payload":{},"max_attempts":1}`)
	j := waitTerminal(t, base, refused, 30*time.Second)
	require.Equal(t, "SUCCESS", j.Status, "given back unstarted, it spent nothing: %s", j.Error)
	require.JSONEq(t, `{"attempt":2}`, string(j.Result))

	cancel()
	require.NoError(t, <-done)
	require.Equal(t, "OFFLINE", agentState(t, base, "sdk-pull"))
}

// TestSDKKeepsALongJob: a handler that runs past its job's timeout_ms is
// kept by the SDK by itself (progress reports extending the deadline):
// the job succeeds on its one attempt, and the caller sees PROGRESS.
func TestSDKKeepsALongJob(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	release := make(chan struct{})
	agent := sdk.New(sdk.Config{ServerURL: base, StartJitter: -1, ClaimWait: 2 * time.Second},
		sdk.Registration{AgentID: "sdk-long", Mode: sdk.ModePull, Capabilities: []string{"sdkl.work"}, MaxConcurrent: 1, TTLSeconds: 10},
		func(ctx context.Context, d sdk.Delivery) (sdk.Result, error) {
			select {
			case <-release:
				return sdk.Success(map[string]any{"done": true}), nil
			case <-ctx.Done():
				return sdk.Result{}, context.Cause(ctx)
			}
		})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx) }()
	waitRoute(t, base, "sdkl.work", func(rj routeJSON) bool { return rj.Chosen == "sdk-long" })

	id := submitOK(t, base, `{"capability":"sdkl.work","payload":{},"timeout_ms":1500,"max_attempts":1}`)
	// The handler holds the job until its deadline was extended twice: far
	// past its 1.5 s.
	waitFor(t, 20*time.Second, "two progress reports", func() bool {
		n := 0
		for _, e := range jobEventsFull(t, base, id) {
			if e.Type == "PROGRESS" {
				n++
			}
		}
		return n >= 2
	})
	close(release)
	j := waitTerminal(t, base, id, 20*time.Second)
	require.Equal(t, "SUCCESS", j.Status, eventsText(t, base, id))
	require.Equal(t, 1, j.Attempts)
	cancel()
	require.NoError(t, <-done)
}

// An agent whose registration the service refuses for good (a wrong key,
// push or pull) stops: Run returns the refusal instead of retrying in
// silence.
func TestSDKRegistrationRefusedEndsRun(t *testing.T) {
	t.Parallel()
	base := securedService(t, nil).m.URL()
	for _, mode := range []string{sdk.ModePush, sdk.ModePull} {
		agent := sdk.New(sdk.Config{ServerURL: base, APIKey: "ark_not_a_key", StartJitter: -1, Logger: slog.New(slog.DiscardHandler)},
			sdk.Registration{AgentID: "refused-" + mode, Mode: mode, Capabilities: []string{"t.refused"}},
			func(context.Context, sdk.Delivery) (sdk.Result, error) { return sdk.Success("ok"), nil })
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		err := agent.Run(ctx)
		ended := ctx.Err()
		cancel()
		require.Error(t, err, "mode %s", mode)
		require.Contains(t, err.Error(), "refused", "mode %s", mode)
		require.Contains(t, err.Error(), "401", "mode %s", mode)
		require.NoError(t, ended, "Run ended by the refusal, not by its context (mode %s)", mode)
	}
}

// An operator's drain holds: the SDK agent is not registered again by its
// heartbeats, a restart (a new registration) finds it drained, and only
// up brings it back; up on a HEALTHY agent is a 409.
func TestDrainHoldsThroughARestart(t *testing.T) {
	t.Parallel()
	r, _ := service(t)
	base := r.m.URL()
	run := func() (*sdk.Agent, context.CancelFunc, chan error) {
		a := sdk.New(sdk.Config{ServerURL: base, StartJitter: -1, Logger: slog.New(slog.DiscardHandler)},
			sdk.Registration{AgentID: "held", Capabilities: []string{"t.held"}, TTLSeconds: 5},
			func(context.Context, sdk.Delivery) (sdk.Result, error) { return sdk.Success("ok"), nil })
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		select {
		case <-a.Registered():
		case err := <-done:
			t.Fatalf("the agent stopped before it registered: %v", err)
		}
		return a, cancel, done
	}
	_, stop, done := run()
	waitState(t, base, "held", "HEALTHY", 20*time.Second)
	code, body := call(t, http.MethodPost, base+"/v1/agents/held/up", "", `{}`)
	require.Equal(t, http.StatusConflict, code, "up on a HEALTHY agent: %s", body)

	code, body = call(t, http.MethodPost, base+"/v1/agents/held/drain", "", `{"reason":"maintenance"}`)
	require.Equal(t, http.StatusOK, code, body)
	waitState(t, base, "held", "OFFLINE", 20*time.Second)
	// Several heartbeats (one about every 1.7 s at a 5 s TTL): still
	// OFFLINE, not registered again.
	waitHeartbeats := time.Now().Add(6 * time.Second)
	for time.Now().Before(waitHeartbeats) {
		require.Equal(t, "OFFLINE", agentState(t, base, "held"), "the drain holds through heartbeats")
		time.Sleep(100 * time.Millisecond) // poll interval over the window
	}
	stop()
	require.NoError(t, <-done)

	_, stop, done = run() // a restart: a new registration
	defer func() { stop(); <-done }()
	require.Contains(t, []string{"DRAINING", "OFFLINE"}, agentState(t, base, "held"), "registered again, still drained")
	waitState(t, base, "held", "OFFLINE", 20*time.Second)
	code, body = call(t, http.MethodPost, base+"/v1/agents/held/up", "", `{"reason":"done"}`)
	require.Equal(t, http.StatusOK, code, "up after a finished drain: %s", body)
	waitState(t, base, "held", "HEALTHY", 20*time.Second)
}

// A drained pull agent keeps claiming (answered with nothing) and stays
// the same instance, OFFLINE: it does not register again and again while
// the drain holds.
func TestDrainedPullAgentStaysPut(t *testing.T) {
	t.Parallel()
	r, _ := service(t)
	base := r.m.URL()
	a := sdk.New(sdk.Config{ServerURL: base, StartJitter: -1, ClaimWait: time.Second, Logger: slog.New(slog.DiscardHandler)},
		sdk.Registration{AgentID: "held-pull", Mode: sdk.ModePull, Capabilities: []string{"t.heldpull"}, TTLSeconds: 5},
		func(context.Context, sdk.Delivery) (sdk.Result, error) { return sdk.Success("ok"), nil })
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitState(t, base, "held-pull", "HEALTHY", 20*time.Second)
	code, body := call(t, http.MethodPost, base+"/v1/agents/held-pull/drain", "", `{"reason":"maintenance"}`)
	require.Equal(t, http.StatusOK, code, body)
	waitState(t, base, "held-pull", "OFFLINE", 20*time.Second)
	instance := func() string {
		var x struct {
			State      string `json:"state"`
			InstanceID string `json:"instance_id"`
		}
		getJSON(t, base+"/v1/agents/held-pull", http.StatusOK, &x)
		require.Equal(t, "OFFLINE", x.State, "the drain holds")
		return x.InstanceID
	}
	first := instance()
	until := time.Now().Add(6 * time.Second) // several claims of 1 s and sweeps
	for time.Now().Before(until) {
		require.Equal(t, first, instance(), "not registered again")
		time.Sleep(200 * time.Millisecond) // poll interval over the window
	}
}
