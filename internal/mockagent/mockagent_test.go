package mockagent

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/internal/cli"
	"github.com/agentreach/agentreach/sdk"
)

func TestHandlers(t *testing.T) {
	t.Parallel()
	d := sdk.Delivery{JobID: "j1", Attempt: 2}
	want := sdk.Success(map[string]any{"agent_id": "m", "job_id": "j1", "attempt": 2})
	for _, b := range []string{"success", "refuse", "async"} {
		h, err := mockHandler(b, 0, 0, "m")
		require.NoError(t, err)
		got, err := h(t.Context(), d)
		require.NoError(t, err, b)
		require.Equal(t, want, got, b)
	}

	h, err := mockHandler("fail", 0, 0, "m")
	require.NoError(t, err)
	got, err := h(t.Context(), d)
	require.NoError(t, err)
	require.Equal(t, sdk.Failure("mock_failure", map[string]any{"agent_id": "m"}), got)

	h, err = mockHandler("5xx", 0, 0, "m")
	require.NoError(t, err)
	_, err = h(t.Context(), d)
	require.ErrorIs(t, err, sdk.ErrRefused)

	for p, want := range map[float64]error{1: sdk.ErrRefused, 0: nil} {
		h, err := mockHandler("flaky", 0, p, "m")
		require.NoError(t, err)
		for range 20 {
			_, err := h(t.Context(), d)
			require.ErrorIs(t, err, want, "flaky-p %v", p)
		}
	}

	_, err = mockHandler("sulk", 0, 0, "m")
	require.EqualError(t, err, "unknown --behaviour sulk")
}

// Hang answers only when the delivery's context ends; a delay is cut short
// the same way.
func TestHandlersWaitOnTheContext(t *testing.T) {
	t.Parallel()
	for _, b := range []string{"hang", "success", "fail"} {
		h, err := mockHandler(b, time.Hour, 0, "m")
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		_, err = h(ctx, sdk.Delivery{})
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, b)
	}
	h, err := mockHandler("success", 30*time.Millisecond, 0, "m")
	require.NoError(t, err)
	start := time.Now()
	_, err = h(t.Context(), sdk.Delivery{})
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)
}

func TestAsyncHandlerAccepts(t *testing.T) {
	t.Parallel()
	var agent *sdk.Agent // never reached: the report runs after an hour
	_, err := asyncHandler(&agent, time.Hour, "m")(t.Context(), sdk.Delivery{})
	require.ErrorIs(t, err, sdk.ErrAccepted)
}

func TestRefuseDeliveries(t *testing.T) {
	t.Parallel()
	cfg := sdk.Config{Addr: "127.0.0.1:0"}
	var reg sdk.Registration
	require.NoError(t, refuseDeliveries(t.Context(), &cfg, &reg))
	require.NotEqual(t, "127.0.0.1:0", cfg.Addr)
	require.Equal(t, "http://"+cfg.Addr+"/", reg.HealthURL, "probes reach the agent")
	require.True(t, strings.HasPrefix(cfg.AdvertiseURL, "http://127.0.0.1:"))
	require.NotEqual(t, reg.HealthURL, cfg.AdvertiseURL, "deliveries go where nothing listens")
}

func TestFlags(t *testing.T) {
	t.Parallel()
	var errOut bytes.Buffer
	env := cli.Env{Stdout: io.Discard, Stderr: &errOut, Getenv: func(k string) string { return map[string]string{"AGENTREACH_URL": "http://127.0.0.1:9"}[k] }}
	o, err := parseFlags(env, []string{"--id", "a", "--capability", "x,y", "--behaviour", "flaky", "--flaky-p", "0.25"})
	require.NoError(t, err)
	require.Equal(t, options{server: "http://127.0.0.1:9", id: "a", ns: "default", caps: "x,y", behaviour: "flaky",
		addr: "127.0.0.1:0", ttl: 30, weight: 50, jitter: -1, flakyP: 0.25}, o)

	_, err = parseFlags(env, []string{"--id", "a"})
	require.ErrorIs(t, err, cli.ErrUsage)
	require.Contains(t, errOut.String(), "agentreach mock-agent: a test agent with a chosen behaviour")

	err = Main(t.Context(), env, []string{"--id", "a", "--capability", "x", "--behaviour", "sulk"})
	require.ErrorIs(t, err, cli.ErrUsage)
	require.EqualError(t, err, "usage: unknown --behaviour sulk")
}
