package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/internal/pgtest"
	"github.com/agentreach/agentreach/sdk"
)

// TestMain lets the test binary stand in for the agentreach binary: a test
// starts a real agent process by re-executing itself with
// AGENTREACH_TEST_MAIN=1 and agentreach's arguments.
func TestMain(m *testing.M) {
	if os.Getenv("AGENTREACH_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	contract := newContractTransport(http.DefaultTransport)
	http.DefaultTransport = contract
	code := m.Run()
	report, ok := contract.report()
	fmt.Print(report)
	if !ok && code == 0 {
		code = 1
	}
	os.Exit(code)
}

// startProcess runs `agentreach args...` as a child process.
func startProcess(t *testing.T, args ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "AGENTREACH_TEST_MAIN=1")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
	})
	return cmd, out
}

// service starts Agent-Reach in process on a fresh database, with the
// sweeps tuned for tests.
func service(t *testing.T) (*running, string) {
	t.Helper()
	dsn := newDatabase(t)
	r := startTuned(t, map[string]string{"DATABASE_URL": dsn}, fastSweeps, "serve", "--insecure", "--addr", "127.0.0.1:0", "--log-level", "warn")
	waitReady(t, r.m.URL())
	return r, dsn
}

func newDatabase(t *testing.T) string { t.Helper(); return pgtest.NewDatabase(t) }

// fastSweeps shortens the compensation sweeps so tests see them act.
func fastSweeps(c *Config) {
	c.Jobs.RepairSweepInterval = time.Second
	c.Jobs.RepairAfter = 2 * time.Second
	c.Jobs.LostAfter = 2 * time.Second
	c.Jobs.DeadlineSweepInterval = 200 * time.Millisecond
	c.Jobs.CallbackGrace = time.Second
	c.TestOnly = true
}

type agentJSON struct {
	AgentID      string   `json:"agent_id"`
	State        string   `json:"state"`
	Token        string   `json:"token"`
	Capabilities []string `json:"capabilities"`
}

func agentState(t *testing.T, base, id string) string {
	t.Helper()
	resp, err := http.Get(base + "/v1/agents/" + id)
	require.NoError(t, err)
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return "NOT_FOUND"
	}
	var a agentJSON
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&a))
	return a.State
}

func waitState(t *testing.T, base, id, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := agentState(t, base, id)
		if got == want {
			return
		}
		require.True(t, time.Now().Before(deadline), "agent %s is %s, want %s within %s", id, got, want, within)
		time.Sleep(50 * time.Millisecond) // poll interval while waiting on the condition
	}
}

type routeJSON struct {
	Chosen     string `json:"chosen"`
	Candidates []struct {
		AgentID string  `json:"agent_id"`
		Score   float64 `json:"score"`
		Terms   []struct {
			Name  string  `json:"name"`
			Value float64 `json:"value"`
		} `json:"terms"`
	} `json:"candidates"`
	Rejected []struct {
		AgentID string `json:"agent_id"`
		Reason  string `json:"reason"`
	} `json:"rejected"`
}

func route(t *testing.T, base, capability string) routeJSON {
	t.Helper()
	var rj routeJSON
	getJSON(t, base+"/v1/route?capability="+capability, http.StatusOK, &rj)
	return rj
}

func rejection(rj routeJSON, id string) string {
	for _, r := range rj.Rejected {
		if r.AgentID == id {
			return r.Reason
		}
	}
	return ""
}

// TestKilledAgentGoesDownLiveAgentKeepsRouting: a real agent process is
// SIGKILLed and becomes DOWN once its lease runs out, while a live agent of
// the same capability keeps first place in routing; a graceful shutdown
// takes the agent out at once.
func TestKilledAgentGoesDownLiveAgentKeepsRouting(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	const capability = "document:parse:ocr"

	live := sdk.New(sdk.Config{ServerURL: base, StartJitter: -1},
		sdk.Registration{AgentID: "live", Capabilities: []string{capability}, TTLSeconds: 5},
		func(context.Context, sdk.Delivery) (sdk.Result, error) { return sdk.Success("ok"), nil })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	liveDone := make(chan error, 1)
	go func() { liveDone <- live.Run(ctx) }()

	doomed, doomedOut := startProcess(t, "mock-agent", "--server", base, "--id", "doomed", "--capability", capability,
		"--ttl", "5", "--weight", "100")
	graceful, _ := startProcess(t, "mock-agent", "--server", base, "--id", "graceful", "--capability", capability, "--ttl", "5")

	for _, id := range []string{"live", "doomed", "graceful"} {
		waitState(t, base, id, "HEALTHY", 20*time.Second)
	}
	// The agent says so once it has read the registration's answer, which
	// may come a moment after the service shows it HEALTHY.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(doomedOut.String(), "mock-agent doomed registered") {
		require.True(t, time.Now().Before(deadline), "mock-agent did not say it registered within 10 s: %s", doomedOut.String())
		time.Sleep(20 * time.Millisecond) // poll interval while waiting on the condition
	}
	waitRoute(t, base, capability, func(rj routeJSON) bool { return len(rj.Candidates) == 3 })

	require.NoError(t, doomed.Process.Signal(syscall.SIGKILL))
	_, _ = doomed.Process.Wait()
	killedAt := time.Now()
	waitState(t, base, "doomed", "DOWN", 15*time.Second)
	require.GreaterOrEqual(t, time.Since(killedAt), 2*time.Second, "DOWN only after the lease ran out")
	// The lease sweep that did it ran in the leading process and left no
	// River job: River UI's list is for the work itself.
	var sweepJobs int
	require.NoError(t, svc.m.app.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind IN
		('agent_sweep', 'health_sweep', 'agent_card_refresh', 'deadline_sweep', 'repair_sweep', 'pressure_sweep')`).Scan(&sweepJobs))
	require.Zero(t, sweepJobs)
	require.True(t, svc.m.app.sweeper.Leading(), "the only process leads the sweeps")

	require.NoError(t, graceful.Process.Signal(syscall.SIGTERM))
	_, err := graceful.Process.Wait()
	require.NoError(t, err)
	require.Equal(t, "OFFLINE", agentState(t, base, "graceful"), "a graceful shutdown takes effect at once")

	rj := waitRoute(t, base, capability, func(rj routeJSON) bool { return len(rj.Candidates) == 1 })
	require.Equal(t, "live", rj.Chosen)
	require.Equal(t, "live", rj.Candidates[0].AgentID)
	require.Len(t, rj.Candidates, 1)
	require.Equal(t, "state_not_routable", rejection(rj, "doomed"))
	require.Equal(t, "state_not_routable", rejection(rj, "graceful"))
	require.Equal(t, "exact_capability", rj.Candidates[0].Terms[0].Name)

	cancel()
	require.NoError(t, <-liveDone)
	waitState(t, base, "live", "OFFLINE", 5*time.Second)
}

// TestReregisteredAgentWaitsForProbe: an agent that registers again is
// PROBING and gets no routing until its probe succeeds.
func TestReregisteredAgentWaitsForProbe(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	healthy := make(chan bool, 1)
	healthy <- false
	var probes atomic.Int32
	health := newSwitchServerCounting(t, healthy, &probes)

	body := fmt.Sprintf(`{"agent_id":"re-1","capabilities":["weather.forecast"],"endpoint":%q,"health_url":%q,"ttl_seconds":30}`,
		health.URL+"/work", health.URL+"/health")
	var a agentJSON
	postJSON(t, base+"/v1/agents", body, http.StatusCreated, &a)
	require.Equal(t, "PROBING", a.State)
	require.True(t, strings.HasPrefix(a.Token, "art_"))

	// Several probes fail meanwhile; the agent gets no traffic.
	deadline := time.Now().Add(20 * time.Second)
	for probes.Load() < 3 {
		rj := route(t, base, "weather.forecast")
		require.Empty(t, rj.Chosen)
		require.Equal(t, "state_not_routable", rejection(rj, "re-1"))
		require.True(t, time.Now().Before(deadline), "three probes did not come")
		time.Sleep(50 * time.Millisecond) // poll interval while waiting on the condition
	}
	<-healthy
	healthy <- true
	waitState(t, base, "re-1", "HEALTHY", 20*time.Second)
	waitChosen(t, base, "weather.forecast", "re-1")

	// A restart: PROBING again at once, no routing until the probe passes.
	<-healthy
	healthy <- false
	postJSON(t, base+"/v1/agents", body, http.StatusCreated, &a)
	require.Equal(t, "PROBING", a.State)
	require.Empty(t, route(t, base, "weather.forecast").Chosen)
	<-healthy
	healthy <- true
	waitState(t, base, "re-1", "HEALTHY", 20*time.Second)
	waitChosen(t, base, "weather.forecast", "re-1")
}

// waitRoute waits until the route answer satisfies ok (the router's
// snapshot follows the registry within about a second) and returns it.
func waitRoute(t *testing.T, base, capability string, ok func(routeJSON) bool) routeJSON {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second) // generous: the whole suite runs in parallel on two cores
	for {
		rj := route(t, base, capability)
		if ok(rj) {
			return rj
		}
		require.True(t, time.Now().Before(deadline), "route never settled: %+v", rj)
		time.Sleep(20 * time.Millisecond) // poll interval while waiting on the condition
	}
}

// waitChosen waits until routing picks agent: the snapshot the router
// reads is refreshed just after the state change commits.
func waitChosen(t *testing.T, base, capability, agent string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for route(t, base, capability).Chosen != agent {
		require.True(t, time.Now().Before(deadline), "routing never picked %s", agent)
		time.Sleep(20 * time.Millisecond) // poll interval while waiting on the condition
	}
}

// newSwitchServerCounting answers probes of /health as healthy says, and
// counts them in probes.
func newSwitchServerCounting(t *testing.T, healthy chan bool, probes *atomic.Int32) *httpTestServer {
	t.Helper()
	return newHTTPTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok := <-healthy
		healthy <- ok
		if r.URL.Path == "/health" {
			probes.Add(1)
		}
		if r.URL.Path == "/health" && ok {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
}

func postJSON(t *testing.T, url, body string, wantStatus int, into any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, wantStatus, resp.StatusCode, string(b))
	if into != nil {
		require.NoError(t, json.Unmarshal(b, into), string(b))
	}
}

// TestBadRegistrations: each bad registration gets 400 invalid_argument
// naming the field, and nothing is written.
func TestBadRegistrations(t *testing.T) {
	t.Parallel()
	svc, dsn := service(t)
	base := svc.m.URL()
	pool, err := pgxpool.New(context.Background(), dsn)
	require.NoError(t, err)
	defer pool.Close()
	counts := func() (events, agents, jobs int) {
		require.NoError(t, pool.QueryRow(context.Background(),
			`SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM agents), (SELECT count(*) FROM river_job WHERE kind = 'agent_probe')`).
			Scan(&events, &agents, &jobs))
		return
	}
	good := map[string]any{"agent_id": "ok-1", "capabilities": []string{"doc:parse"}, "endpoint": "http://127.0.0.1:9/x"}
	with := func(k string, v any) string {
		m := map[string]any{}
		for kk, vv := range good {
			m[kk] = vv
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	cases := []struct {
		name, body, field string
	}{
		{"no agent_id", with("agent_id", nil), "agent_id"},
		{"bad agent_id", with("agent_id", "has space"), "agent_id"},
		{"long agent_id", with("agent_id", strings.Repeat("a", 129)), "agent_id"},
		{"no capabilities", with("capabilities", nil), "capabilities"},
		{"empty capabilities", with("capabilities", []string{}), "capabilities"},
		{"bad capability", with("capabilities", []string{"doc parse"}), "capabilities"},
		{"capability wrong type", with("capabilities", "doc:parse"), "capabilities"},
		{"no endpoint", with("endpoint", nil), "endpoint"},
		{"endpoint not a URL", with("endpoint", "not a url"), "endpoint"},
		{"endpoint ftp", with("endpoint", "ftp://host/x"), "endpoint"},
		{"endpoint with credentials", with("endpoint", "http://u:p@host/x"), "endpoint"},
		{"bad health_url", with("health_url", "nope"), "health_url"},
		{"bad protocol", with("protocol", "grpc"), "protocol"},
		{"weight 0", with("weight", 0), "weight"},
		{"weight 101", with("weight", 101), "weight"},
		{"max_concurrent negative", with("max_concurrent", -1), "max_concurrent"},
		{"rollout 101", with("rollout_percent", 101), "rollout_percent"},
		{"ttl too small", with("ttl_seconds", 1), "ttl_seconds"},
		{"ttl too big", with("ttl_seconds", 999999), "ttl_seconds"},
		{"bad namespace", with("namespace", "Not OK"), "namespace"},
		{"unknown field", with("colour", "red"), "colour"},
		{"not JSON", `{"agent_id":`, "body"},
		{"empty body", ``, "body"},
		{"trailing data", with("agent_id", "x") + `{}`, "body"},
	}
	e0, a0, j0 := counts()
	for _, tc := range cases {
		var body struct {
			Error struct {
				Code, Field, Message string
			} `json:"error"`
		}
		postJSON(t, base+"/v1/agents", tc.body, http.StatusBadRequest, &body)
		require.Equal(t, "invalid_argument", body.Error.Code, tc.name)
		require.Equal(t, tc.field, body.Error.Field, tc.name+": "+body.Error.Message)
		require.NotEmpty(t, body.Error.Message, tc.name)
		e, a, j := counts()
		require.Equal(t, []int{e0, a0, j0}, []int{e, a, j}, "%s wrote something", tc.name)
	}

	// Too large a body is 413.
	resp, err := http.Post(base+"/v1/agents", "application/json", bytes.NewReader(bytes.Repeat([]byte(" "), 3<<20)))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)

	// And the good one is accepted.
	postJSON(t, base+"/v1/agents", with("agent_id", "ok-1"), http.StatusCreated, nil)
	e, a, j := counts()
	require.Equal(t, []int{e0 + 2, a0 + 1, j0 + 1}, []int{e, a, j})
}

// An agent whose probes fail says why it is PROBING (the last probe's
// error, when it was, about when the next comes), and its probes back
// off (1 s, 2 s, 4 s ...): a failed probe is a finished River job, not a
// discarded one that let the next in at once (it used to probe every
// second).
func TestFailingProbesBackOffAndSayWhy(t *testing.T) {
	t.Parallel()
	svc, dsn := service(t)
	base := svc.m.URL()
	healthy := make(chan bool, 1)
	healthy <- false
	var probes atomic.Int32
	health := newSwitchServerCounting(t, healthy, &probes)
	// A lease far longer than the test: it never heartbeats, and should
	// not go DOWN while it is probed.
	body := fmt.Sprintf(`{"agent_id":"mute","capabilities":["t.mute"],"endpoint":%q,"health_url":%q,"ttl_seconds":300}`,
		health.URL+"/work", health.URL+"/health")
	postJSON(t, base+"/v1/agents", body, http.StatusCreated, nil)
	registered := time.Now()

	type probeJSON struct {
		State          string     `json:"state"`
		LastProbeError string     `json:"last_probe_error"`
		LastProbeAt    *time.Time `json:"last_probe_at"`
		NextProbeAt    *time.Time `json:"next_probe_at"`
	}
	var a probeJSON
	waitFor(t, 20*time.Second, "the agent says why its probe failed", func() bool {
		code, b := call(t, http.MethodGet, base+"/v1/agents/mute", "", "")
		require.Equal(t, http.StatusOK, code, b)
		require.NoError(t, json.Unmarshal([]byte(b), &a))
		return a.LastProbeError != ""
	})
	require.Equal(t, "PROBING", a.State)
	require.Contains(t, a.LastProbeError, "503")
	require.NotNil(t, a.LastProbeAt)
	require.NotNil(t, a.NextProbeAt)
	require.False(t, a.NextProbeAt.Before(*a.LastProbeAt))

	// Twenty seconds of PROBING: a probe every second (one a sweep) would
	// be about twenty. Backing off 1, 2, 4, 8, 16 s, each period's probe
	// unique within a window aligned to the clock, it is at most twelve:
	// the registration's, then at most 3 windows of 1 s, and 2 of each
	// longer period (about seven as they fall).
	for time.Since(registered) < 20*time.Second {
		time.Sleep(100 * time.Millisecond) // the window measured
	}
	got := probes.Load()
	t.Logf("%d probes in 20 s of PROBING", got)
	require.GreaterOrEqual(t, got, int32(3), "it is still probed")
	require.LessOrEqual(t, got, int32(13), "probes back off")
	pool, err := pgxpool.New(t.Context(), dsn)
	require.NoError(t, err)
	defer pool.Close()
	var discarded int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM river_job WHERE kind = 'agent_probe' AND state = 'discarded'`).Scan(&discarded))
	require.Zero(t, discarded, "a failed probe completes: River UI stays readable")

	<-healthy
	healthy <- true
	waitState(t, base, "mute", "HEALTHY", 40*time.Second)
	code, b := call(t, http.MethodGet, base+"/v1/agents/mute", "", "")
	require.Equal(t, http.StatusOK, code)
	a = probeJSON{}
	require.NoError(t, json.Unmarshal([]byte(b), &a))
	require.Empty(t, a.LastProbeError, "a probe passed")
	require.Nil(t, a.NextProbeAt)
}

// A submit says in its 202 why the job will wait: no registered agent
// offers the capability (no_agent), or every one that does is
// unavailable (all_unavailable, a PROBING agent here); a routable agent
// gets no warning. The job is accepted each time.
func TestSubmitWarnsWhyTheJobWillWait(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	warnings := func() []any {
		t.Helper()
		code, out := submit(t, base, `{"capability":"t.warned","payload":{},"route_wait_ms":60000}`)
		require.Equal(t, http.StatusAccepted, code, "%v", out)
		w, _ := out["warnings"].([]any)
		return w
	}
	code := func(w []any) string {
		t.Helper()
		require.Len(t, w, 1)
		m := w[0].(map[string]any)
		require.NotEmpty(t, m["message"])
		return m["code"].(string)
	}
	require.Equal(t, "no_agent", code(warnings()))
	// The job says so too, while it waits.
	_, out := submit(t, base, `{"capability":"t.warned","payload":{},"route_wait_ms":60000}`)
	var job struct {
		Status  string `json:"status"`
		Waiting *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"waiting"`
	}
	getJSON(t, base+"/v1/jobs/"+out["job_id"].(string), http.StatusOK, &job)
	require.Equal(t, "SUBMITTED", job.Status)
	require.NotNil(t, job.Waiting)
	require.Equal(t, "no_agent", job.Waiting.Code)
	require.Contains(t, job.Waiting.Message, "t.warned")
	var cliOut bytes.Buffer
	m := NewMain()
	m.Stdout, m.Stderr = &cliOut, &cliOut
	m.Getenv = func(k string) string { return map[string]string{"AGENTREACH_URL": base}[k] }
	require.NoError(t, m.Run(t.Context(), []string{"jobs", "get", out["job_id"].(string)}))
	require.Regexp(t, `waiting +no_agent: no registered agent`, cliOut.String(), "jobs get says why it waits")

	healthy := make(chan bool, 1)
	healthy <- false
	var probes atomic.Int32
	health := newSwitchServerCounting(t, healthy, &probes)
	postJSON(t, base+"/v1/agents", fmt.Sprintf(`{"agent_id":"warned","capabilities":["t.warned"],"endpoint":%q,"health_url":%q,"ttl_seconds":30}`,
		health.URL+"/work", health.URL+"/health"), http.StatusCreated, nil)
	waitFor(t, 10*time.Second, "the router sees the PROBING agent", func() bool {
		w := warnings()
		return len(w) == 1 && w[0].(map[string]any)["code"] == "all_unavailable"
	})
	<-healthy
	healthy <- true
	waitState(t, base, "warned", "HEALTHY", 30*time.Second)
	waitFor(t, 10*time.Second, "no warning once the agent is routable", func() bool { return len(warnings()) == 0 })
}
