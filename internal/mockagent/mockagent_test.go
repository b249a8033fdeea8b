package mockagent

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/internal/cli"
	"github.com/agentreach/agentreach/sdk"
	"github.com/agentreach/agentreach/webhook"
)

func TestHandlers(t *testing.T) {
	t.Parallel()
	d := sdk.Delivery{Envelope: webhook.Envelope{JobID: "j1", Attempt: 2}}
	want := sdk.Success(map[string]any{"agent_id": "m", "job_id": "j1", "attempt": 2})
	for _, b := range []string{"success", "refuse", "async"} {
		h, err := mockHandler(b, false, 0, 0, "m")
		require.NoError(t, err)
		got, err := h(t.Context(), d)
		require.NoError(t, err, b)
		require.Equal(t, want, got, b)
	}

	h, err := mockHandler("fail", false, 0, 0, "m")
	require.NoError(t, err)
	got, err := h(t.Context(), d)
	require.NoError(t, err)
	require.Equal(t, sdk.Failure("mock_failure", map[string]any{"agent_id": "m"}), got)

	h, err = mockHandler("5xx", false, 0, 0, "m")
	require.NoError(t, err)
	_, err = h(t.Context(), d)
	require.ErrorIs(t, err, sdk.ErrRefused)

	for p, want := range map[float64]error{1: sdk.ErrRefused, 0: nil} {
		h, err := mockHandler("flaky", false, 0, p, "m")
		require.NoError(t, err)
		for range 20 {
			_, err := h(t.Context(), d)
			require.ErrorIs(t, err, want, "flaky-p %v", p)
		}
	}

	_, err = mockHandler("sulk", false, 0, 0, "m")
	require.EqualError(t, err, "unknown --behaviour sulk")
}

// In pull mode 5xx and flaky fail the attempt (the SDK releases it with an
// error) and refuse refuses it (released without one); the rest answer as
// in push mode.
func TestPullHandlers(t *testing.T) {
	t.Parallel()
	d := sdk.Delivery{Envelope: webhook.Envelope{JobID: "j1", Attempt: 2}}
	for b, want := range map[string]error{"5xx": errMock5xx, "refuse": sdk.ErrRefused, "success": nil, "async": nil} {
		h, err := mockHandler(b, true, 0, 0, "m")
		require.NoError(t, err)
		_, err = h(t.Context(), d)
		require.ErrorIs(t, err, want, b)
	}
	require.NotErrorIs(t, errMock5xx, sdk.ErrRefused, "a failed attempt, not a refusal")
	for p, want := range map[float64]error{1: errMock5xx, 0: nil} {
		h, err := mockHandler("flaky", true, 0, p, "m")
		require.NoError(t, err)
		for range 20 {
			_, err := h(t.Context(), d)
			require.ErrorIs(t, err, want, "flaky-p %v", p)
		}
	}
	h, err := mockHandler("fail", true, 0, 0, "m")
	require.NoError(t, err)
	got, err := h(t.Context(), d)
	require.NoError(t, err)
	require.Equal(t, "FAILED", got.Status)
}

// Hang answers only when the delivery's context ends; a delay is cut short
// the same way.
func TestHandlersWaitOnTheContext(t *testing.T) {
	t.Parallel()
	for _, b := range []string{"hang", "success", "fail"} {
		h, err := mockHandler(b, false, time.Hour, 0, "m")
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		_, err = h(ctx, sdk.Delivery{})
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, b)
	}
	h, err := mockHandler("success", false, 30*time.Millisecond, 0, "m")
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

	o, err = parseFlags(env, []string{"--id", "a", "--capability", "x", "--pull", "--max-concurrent", "4"})
	require.NoError(t, err)
	require.True(t, o.pull)
	require.Equal(t, 4, o.maxConc)

	_, err = parseFlags(env, []string{"--id", "a"})
	require.ErrorIs(t, err, cli.ErrUsage)
	require.Contains(t, errOut.String(), "agentreach mock-agent: a test agent with a chosen behaviour")

	err = Main(t.Context(), env, []string{"--id", "a", "--capability", "x", "--behaviour", "sulk"})
	require.ErrorIs(t, err, cli.ErrUsage)
	require.EqualError(t, err, "usage: unknown --behaviour sulk")
}

// lockedBuffer is a bytes.Buffer safe to write from the agent and read from
// the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// pullOutcome is what a pull agent sent back for its delivery: a result
// or a release.
type pullOutcome struct {
	kind string // "result" or "release"
	body map[string]any
}

// fakePullServer is an httptest fake of Agent-Reach for one pull agent: it
// registers it, hands it one delivery at its first claim, holds later
// claims until the agent gives up on them, and sends every outcome on the
// channel. The registration body is sent on regs.
func fakePullServer(t *testing.T) (url string, regs <-chan map[string]any, outcomes <-chan pullOutcome) {
	t.Helper()
	regc, outc := make(chan map[string]any, 4), make(chan pullOutcome, 4)
	var mu sync.Mutex
	claimed := false
	var srv *httptest.Server
	decode := func(r *http.Request) map[string]any {
		var m map[string]any
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			t.Errorf("decode %s: %v", r.URL.Path, err)
		}
		return m
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/agents", func(w http.ResponseWriter, r *http.Request) {
		regc <- decode(r)
		_ = json.NewEncoder(w).Encode(map[string]any{"token": "tok", "heartbeat_interval_ms": 60000})
	})
	mux.HandleFunc("PUT /v1/agents/{id}/heartbeat", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("POST /v1/agents/{id}/offline", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("POST /v1/agents/{id}/claim", func(w http.ResponseWriter, r *http.Request) {
		_ = decode(r) // read whole, so the server notices when the agent hangs up
		mu.Lock()
		first := !claimed
		claimed = true
		mu.Unlock()
		if !first {
			<-r.Context().Done()
			return
		}
		d := sdk.Delivery{Envelope: webhook.Envelope{JobID: "j1", Attempt: 1, Payload: json.RawMessage(`{}`), Deadline: time.Now().Add(time.Minute), ResultURL: srv.URL + "/results/j1"}}
		_ = json.NewEncoder(w).Encode(map[string]any{"deliveries": []sdk.Delivery{d}})
	})
	mux.HandleFunc("POST /results/{job}", func(w http.ResponseWriter, r *http.Request) {
		outc <- pullOutcome{"result", decode(r)}
	})
	mux.HandleFunc("POST /v1/agents/{id}/release", func(w http.ResponseWriter, r *http.Request) {
		outc <- pullOutcome{"release", decode(r)}
		_, _ = io.WriteString(w, `{"released":[]}`)
	})
	srv = httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL, regc, outc
}

// With --pull the mock registers in pull mode, claims, and sends back each
// behaviour's outcome: a result, or a release with or without an error.
func TestMainPull(t *testing.T) {
	t.Parallel()
	job := []any{map[string]any{"job_id": "j1", "attempt": 1.0}}
	for _, tc := range []struct {
		args []string
		want pullOutcome
	}{
		{[]string{"--behaviour", "success"}, pullOutcome{"result", map[string]any{"status": "SUCCESS", "attempt": 1.0,
			"result": map[string]any{"agent_id": "m", "job_id": "j1", "attempt": 1.0}}}},
		{[]string{"--behaviour", "async"}, pullOutcome{"result", map[string]any{"status": "SUCCESS", "attempt": 1.0,
			"result": map[string]any{"agent_id": "m", "job_id": "j1", "attempt": 1.0, "async": true}}}},
		{[]string{"--behaviour", "fail"}, pullOutcome{"result", map[string]any{"status": "FAILED", "attempt": 1.0,
			"biz_code": "mock_failure", "result": map[string]any{"agent_id": "m"}}}},
		{[]string{"--behaviour", "5xx"}, pullOutcome{"release", map[string]any{"jobs": job, "error": "mock 5xx: the attempt failed"}}},
		{[]string{"--behaviour", "flaky", "--flaky-p", "1"}, pullOutcome{"release", map[string]any{"jobs": job, "error": "mock 5xx: the attempt failed"}}},
		{[]string{"--behaviour", "refuse"}, pullOutcome{"release", map[string]any{"jobs": job}}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			url, regs, outcomes := fakePullServer(t)
			out := &lockedBuffer{}
			env := cli.Env{Stdout: out, Stderr: io.Discard, Getenv: func(string) string { return "" }}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				done <- Main(ctx, env, append([]string{"--server", url, "--id", "m", "--capability", "t.pull", "--pull"}, tc.args...))
			}()
			defer func() {
				cancel()
				require.NoError(t, <-done)
			}()
			var reg map[string]any
			select {
			case reg = <-regs:
			case <-time.After(5 * time.Second):
				t.Fatal("no registration")
			}
			require.Equal(t, "pull", reg["mode"])
			require.NotContains(t, reg, "endpoint")
			require.NotContains(t, reg, "health_url")
			require.Equal(t, 1.0, reg["max_concurrent"], "one worker when --max-concurrent is 0")
			select {
			case got := <-outcomes:
				require.Equal(t, tc.want, got)
			case <-time.After(5 * time.Second):
				t.Fatal("no outcome")
			}
			require.Eventually(t, func() bool { return strings.Contains(out.String(), ", pull) at "+url) }, 5*time.Second, time.Millisecond)
		})
	}
}
