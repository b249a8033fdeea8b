package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/health"
	"github.com/agentreach/agentreach/internal/cli"
	"github.com/agentreach/agentreach/internal/pgtest"
)

func TestPrintHealth(t *testing.T) {
	t.Parallel()
	reach, score, p50 := 0.5, 0.875, 12.34
	var b bytes.Buffer
	require.NoError(t, printHealth(&b, []health.AgentHealth{
		{AgentID: "ocr-fast", Attempted: 4, Delivered: 2, Succeeded: 2, Failed: 1, TimedOut: 1, ReachRate: &reach, HealthScore: &score, LatencyP50MS: &p50},
	}))
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Len(t, lines, 2)
	require.Equal(t, []string{"AGENT", "ATTEMPTED", "DELIVERED", "SUCCEEDED", "FAILED", "TIMED", "OUT", "REACH", "SUCCESS", "HEALTH", "P50", "ms", "P95", "ms"}, strings.Fields(lines[0]))
	require.Equal(t, []string{"ocr-fast", "4", "2", "2", "1", "1", "50.0%", "–", "0.88", "12.3", "–"}, strings.Fields(lines[1]))
}

func deliver(t *testing.T, a *agent, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, a.srv.URL, strings.NewReader(body))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func testAgent(t *testing.T, behaviour string) *agent {
	t.Helper()
	a := newAgent(t.Context(), behaviour, &http.Client{Timeout: 5 * time.Second})
	t.Cleanup(a.srv.Close)
	return a
}

func TestAgentBehaviours(t *testing.T) {
	t.Parallel()
	status, body := deliver(t, testAgent(t, "fast"), `{}`)
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `{"status":"SUCCESS","result":{"ok":true}}`, body)

	start := time.Now()
	status, _ = deliver(t, testAgent(t, "slow"), `{}`)
	require.Equal(t, http.StatusOK, status)
	require.GreaterOrEqual(t, time.Since(start), 80*time.Millisecond)

	status, _ = deliver(t, testAgent(t, "dead"), `{}`)
	require.Equal(t, http.StatusServiceUnavailable, status)

	flaky := testAgent(t, "flaky")
	seen := map[int]bool{}
	for range 100 {
		status, _ := deliver(t, flaky, `{}`)
		seen[status] = true
	}
	require.Equal(t, map[int]bool{http.StatusOK: true, http.StatusServiceUnavailable: true}, seen)
}

func TestAgentAsyncReports(t *testing.T) {
	t.Parallel()
	got := make(chan string, 1)
	results := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r.Header.Get("Authorization") + " " + string(b)
	}))
	t.Cleanup(results.Close)
	a := testAgent(t, "async")
	a.tok.Store("tok")
	status, _ := deliver(t, a, fmt.Sprintf(`{"attempt":2,"result_url":%q}`, results.URL))
	require.Equal(t, http.StatusAccepted, status)
	select {
	case s := <-got:
		require.Equal(t, `Bearer tok {"status":"SUCCESS","result":{"translated":true},"attempt":2}`, s)
	case <-time.After(10 * time.Second):
		t.Fatal("no result posted")
	}
}

// The fleet registers each agent of fleetSpec at its own endpoint, keeps
// its token, and waits until the service lists them healthy.
func TestStartFleet(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	registered := map[string]string{}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Method == http.MethodPost {
			var reg struct {
				AgentID      string   `json:"agent_id"`
				Capabilities []string `json:"capabilities"`
				Endpoint     string   `json:"endpoint"`
			}
			require.NoError(t, json.NewDecoder(r.Body).Decode(&reg))
			registered[reg.AgentID] = reg.Capabilities[0] + " " + reg.Endpoint
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"token":"tok-%s"}`, reg.AgentID)
			return
		}
		agents := make([]map[string]string, len(registered))
		_ = json.NewEncoder(w).Encode(map[string]any{"agents": agents})
	}))
	t.Cleanup(api.Close)
	f, err := startFleet(t.Context(), api.URL)
	t.Cleanup(f.close)
	require.NoError(t, err)
	require.Len(t, registered, len(fleetSpec))
	for i, spec := range fleetSpec {
		require.Equal(t, spec.capability+" "+f.agents[i].srv.URL, registered[spec.id])
		require.Equal(t, "tok-"+spec.id, f.agents[i].tok.Load())
		require.Equal(t, spec.behaviour, f.agents[i].behaviour)
	}
}

// fakeService is a Service whose projections lag by a set amount.
type fakeService struct{ lag int64 }

func (f *fakeService) URL() string { return "" }
func (f *fakeService) Lag(context.Context) (map[string]int64, error) {
	return map[string]int64{"jobs": f.lag}, nil
}
func (f *fakeService) Stop() error { return nil }

// The demo waits until no job is open and no projection lags.
func TestWaitFinished(t *testing.T) {
	t.Parallel()
	var errOut bytes.Buffer
	svc := &fakeService{}
	r := &run{env: cli.Env{Stdout: io.Discard, Stderr: &errOut}, jobs: 3, svc: svc, pool: pgtest.NewPool(t)}
	require.NoError(t, r.waitFinished(t.Context(), time.Second))
	require.Contains(t, errOut.String(), "demo: finishing  100% 3/3 jobs\n", "off a terminal: plain lines, no bar redrawn")

	svc.lag = 1
	require.EqualError(t, r.waitFinished(t.Context(), 300*time.Millisecond), "0 jobs still open after 300ms")
}

func TestHelp(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	env := cli.Env{Stdout: &out, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	err := Main(t.Context(), env, []string{"-h"}, nil)
	require.Error(t, err)
	for _, want := range []string{"agentreach demo: a guided run on this machine", "-jobs", "-keep", "-addr"} {
		require.Contains(t, out.String(), want, "help asked for goes to stdout")
	}
}

// The agents that give the dashboard its outcomes and states: a picky one
// fails every third delivery on business grounds (from the first), a
// probing one's health URL answers 503, a holding one accepts and never
// reports.
func TestFleetOutcomeAgents(t *testing.T) {
	t.Parallel()
	picky := testAgent(t, "picky")
	var failed int
	for range 6 {
		status, body := deliver(t, picky, `{}`)
		require.Equal(t, http.StatusOK, status)
		if strings.Contains(body, `"FAILED"`) {
			failed++
			require.Contains(t, body, `"biz_code":"unreadable_input"`)
		}
	}
	require.Equal(t, 2, failed)

	probing := testAgent(t, "probing")
	resp, err := http.Get(probing.srv.URL + "/unhealthy")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)

	status, _ := deliver(t, testAgent(t, "hold"), `{}`)
	require.Equal(t, http.StatusAccepted, status)
	require.Less(t, healthy(), len(fleetSpec), "the probing agent never counts as healthy")
}
