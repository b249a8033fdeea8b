package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/harness"
	"github.com/agentreach/agentreach/internal/pgtest"
	"github.com/agentreach/agentreach/webhook"
)

// concurrencyAgent is an inline agent that records how many deliveries it
// holds at once.
type concurrencyAgent struct {
	srv      *httptest.Server
	now, top atomic.Int32
	served   atomic.Int32
	probes   atomic.Int32
}

func newConcurrencyAgent(t *testing.T, work time.Duration) *concurrencyAgent {
	t.Helper()
	a := &concurrencyAgent{}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			a.probes.Add(1)
			w.WriteHeader(http.StatusOK)
			return
		}
		n := a.now.Add(1)
		for {
			top := a.top.Load()
			if n <= top || a.top.CompareAndSwap(top, n) {
				break
			}
		}
		time.Sleep(work) // the agent's simulated work, while it holds the slot
		a.now.Add(-1)
		a.served.Add(1)
		var env webhook.Envelope
		_ = json.NewDecoder(r.Body).Decode(&env)
		answer("SUCCESS", "")(w, env)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

// TestCapacityHoldsAcrossProcesses: three service processes on one
// database and an agent with two slots; a burst of 60 jobs, submitted to
// all three at once, never has the agent hold more than two.
func TestCapacityHoldsAcrossProcesses(t *testing.T) {
	t.Parallel()
	// Three processes of at most 6 connections, and each one's listener.
	dsn := pgtest.NewDatabase(t, pgtest.Conns(3*7+3))
	var bases []string
	for range 3 {
		// A small pool each: the suite shares the server's 100 connections.
		_, base, _ := serveProcess(t, dsn, deadAddr(t), "--max-conns", "6")
		bases = append(bases, base)
	}
	agent := newConcurrencyAgent(t, 50*time.Millisecond)
	var reg agentJSON
	postJSON(t, bases[0]+"/v1/agents", fmt.Sprintf(`{"agent_id":"two-slots","capabilities":["t.cap"],"endpoint":%q,"max_concurrent":2,"ttl_seconds":120}`,
		agent.srv.URL+"/deliver"), http.StatusCreated, &reg)
	for _, base := range bases {
		waitState(t, base, "two-slots", "HEALTHY", 20*time.Second)
		waitRoute(t, base, "t.cap", func(rj routeJSON) bool { return len(rj.Candidates) > 0 })
	}

	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		ids []string
	)
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := submitOK(t, bases[i%3], fmt.Sprintf(`{"capability":"t.cap","payload":{"i":%d},"timeout_ms":20000}`, i))
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, id := range ids {
		j := waitTerminal(t, bases[0], id, 90*time.Second)
		require.Equal(t, "SUCCESS", j.Status, "job %s: %s", id, j.Error)
		require.Equal(t, 1, j.Attempts, "a wait for a slot spends no attempt")
	}
	require.EqualValues(t, 60, agent.served.Load())
	require.LessOrEqual(t, agent.top.Load(), int32(2), "the agent held more than its max_concurrent")
	require.EqualValues(t, 2, agent.top.Load(), "the burst used both slots")
	require.Equal(t, 0, countSlots(t, dsn), "every slot was given back")
}

func countSlots(t *testing.T, dsn string) int {
	t.Helper()
	pool := openDB(t, dsn)
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM agent_slots`).Scan(&n))
	return n
}

// TestRouteWait: an attempt that finds no routable agent waits, spending
// nothing, for one to come (here: none is registered yet), and is spent
// only when its route_wait_ms is over.
func TestRouteWait(t *testing.T) {
	t.Parallel()
	r, _ := service(t)
	base := r.m.URL()

	// Nobody offers t.wait yet; the agent registers while the job waits.
	id := submitOK(t, base, `{"capability":"t.wait","payload":{},"route_wait_ms":60000}`)
	newTestAgent(t, base, "late", "t.wait", 50, answer("SUCCESS", ""))
	j := waitTerminal(t, base, id, 30*time.Second)
	require.Equal(t, "SUCCESS", j.Status)
	require.Equal(t, 1, j.Attempts)
	require.Equal(t, []string{"SUBMITTED", "ROUTED", "DELIVERED", "SUCCESS"}, types(jobEvents(t, base, id)))

	// No agent ever comes: the one attempt is spent after its wait.
	id = submitOK(t, base, `{"capability":"t.nobody","payload":{},"route_wait_ms":400,"max_attempts":1}`)
	j = waitTerminal(t, base, id, 30*time.Second)
	require.Equal(t, "DEAD_LETTER", j.Status)
	var evs struct {
		Events []struct {
			Type       string    `json:"type"`
			RecordedAt time.Time `json:"recorded_at"`
			Data       struct {
				Reason string `json:"reason"`
			} `json:"data"`
		} `json:"events"`
	}
	getJSON(t, base+"/v1/jobs/"+id+"/events", http.StatusOK, &evs)
	require.Equal(t, "SUBMITTED", evs.Events[0].Type)
	var failed time.Time
	for _, e := range evs.Events {
		if e.Type == "ATTEMPT_FAILED" {
			require.Equal(t, "no_agent", e.Data.Reason)
			failed = e.RecordedAt
		}
	}
	require.False(t, failed.IsZero(), "the attempt was spent: %+v", evs.Events)
	require.GreaterOrEqual(t, failed.Sub(evs.Events[0].RecordedAt), 400*time.Millisecond, "spent before its route_wait_ms")

	// A bad route_wait_ms is refused at the edge.
	code, body := submit(t, base, `{"capability":"t.wait","payload":{},"route_wait_ms":-5}`)
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, strings.ToLower(fmt.Sprint(body)), "route_wait_ms")
}

// An open self-preservation episode shows in GET /v1/agents, in the agent
// itself, and in `agentreach agents` and `dig`.
func TestSelfPreservationIsShown(t *testing.T) {
	t.Parallel()
	svc, dsn := service(t)
	base := svc.m.URL()
	newTestAgent(t, base, "kept", "t.sp", 50, answer("SUCCESS", ""))

	var list struct {
		SelfPreservation []json.RawMessage `json:"self_preservation"`
	}
	getJSON(t, base+"/v1/agents", http.StatusOK, &list)
	require.NotNil(t, list.SelfPreservation)
	require.Empty(t, list.SelfPreservation, "no episode is open")

	since := time.Now().UTC().Truncate(time.Second)
	store := eventstore.New(openDB(t, dsn))
	_, err := store.Append(t.Context(), domain.RegistryStream("default"), eventstore.Any, domain.NewEvent(domain.EventSelfPreservation,
		domain.SelfPreservationEntered{Namespace: "default", Total: 4, Lapsing: 3, Since: since}, domain.Metadata{Actor: "test"}))
	require.NoError(t, err)

	var episodes struct {
		SelfPreservation []struct {
			Namespace string    `json:"namespace"`
			Since     time.Time `json:"since"`
			Until     time.Time `json:"until"`
			Agents    int       `json:"agents"`
			Lapsing   int       `json:"lapsing"`
		} `json:"self_preservation"`
	}
	getJSON(t, base+"/v1/agents", http.StatusOK, &episodes)
	require.Len(t, episodes.SelfPreservation, 1)
	e := episodes.SelfPreservation[0]
	require.Equal(t, "default", e.Namespace)
	require.True(t, since.Equal(e.Since))
	require.True(t, since.Add(5*time.Minute).Equal(e.Until), "the default bound")
	require.Equal(t, 4, e.Agents)
	require.Equal(t, 3, e.Lapsing)

	var one struct {
		SelfPreservation *struct {
			Lapsing int `json:"lapsing"`
		} `json:"self_preservation"`
	}
	getJSON(t, base+"/v1/agents/kept", http.StatusOK, &one)
	require.NotNil(t, one.SelfPreservation)
	require.Equal(t, 3, one.SelfPreservation.Lapsing)

	run := func(args ...string) string {
		out := &syncBuffer{}
		m := NewMain()
		m.Stdout, m.Stderr = out, out
		m.Getenv = func(k string) string { return map[string]string{"AGENTREACH_URL": base}[k] }
		require.NoError(t, m.Run(t.Context(), args), out.String())
		return out.String()
	}
	require.Contains(t, run("agents"), "self-preservation in namespace default")
	dig := run("dig", "kept")
	require.Contains(t, dig, "3 of 4 agents lapsed")
	require.Contains(t, dig, "SUSPECT in ")
	require.NotContains(t, dig, "in -")
}

// An operator drains, confirms down, brings up and updates agents over the
// CLI (and so the API); each action is on the agent's stream.
func TestOperatorActionsOverTheCLI(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	run := func(args ...string) (string, error) {
		out := &syncBuffer{}
		m := NewMain()
		m.Stdout, m.Stderr = out, out
		m.Getenv = func(k string) string { return map[string]string{"AGENTREACH_URL": base}[k] }
		err := m.Run(t.Context(), args)
		return out.String(), err
	}
	a := newTestAgent(t, base, "ops-a", "t.ops", 50, answer("SUCCESS", ""))
	newTestAgent(t, base, "ops-b", "t.ops", 50, answer("SUCCESS", ""))

	out, err := run("agents", "update", "ops-a", "--weight", "90", "--max-concurrent", "3")
	require.NoError(t, err, out)
	require.Contains(t, out, "weight 90, max_concurrent 3")
	require.Equal(t, "HEALTHY", agentState(t, base, "ops-a"), "an update needs no restart")

	out, err = run("agents", "down", "ops-a", "--reason", "disk failed")
	require.NoError(t, err, out)
	require.Contains(t, out, "DOWN (operator hold: down)")
	req, _ := http.NewRequest(http.MethodPut, base+"/v1/agents/ops-a/heartbeat", nil)
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	rj := waitRoute(t, base, "t.ops", func(rj routeJSON) bool { return len(rj.Candidates) == 1 })
	require.Equal(t, "ops-b", rj.Candidates[0].AgentID, "no traffic to a confirmed-down agent, heartbeat or not")
	require.Equal(t, "DOWN", agentState(t, base, "ops-a"))

	out, err = run("agents", "up", "ops-a")
	require.NoError(t, err, out)
	require.Contains(t, out, "ops-a: HEALTHY")

	out, err = run("agents", "drain", "ops-b", "--reason", "maintenance")
	require.NoError(t, err, out)
	require.Contains(t, out, "DRAINING")
	waitState(t, base, "ops-b", "OFFLINE", 20*time.Second) // it held nothing

	_, err = run("agents", "up", "ops-a")
	require.ErrorContains(t, err, "does not allow", "a HEALTHY agent is up already")
	_, err = run("agents", "update", "ops-a", "--weight", "500")
	require.ErrorContains(t, err, "weight")

	// The global log shows a transaction once every older one in the
	// cluster has ended: on a busy server that may take a moment.
	want := []string{"updated", "confirm_down:disk failed", "up:"}
	var seen []string
	deadline := time.Now().Add(20 * time.Second)
	for {
		seen = opsSignals(t, base)
		if len(seen) >= len(want) || !time.Now().Before(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // poll interval while waiting on the condition
	}
	require.Equal(t, want, seen)
}

// opsSignals are the operator's signals on agent ops-a, as the global log
// shows them.
func opsSignals(t *testing.T, base string) []string {
	t.Helper()
	var evs struct {
		Events []struct {
			StreamID string `json:"stream_id"`
			Type     string `json:"type"`
			Metadata struct {
				Actor string `json:"actor"`
			} `json:"metadata"`
			Data struct {
				Signal string `json:"signal"`
				Reason string `json:"reason"`
			} `json:"data"`
		} `json:"events"`
	}
	getJSON(t, base+"/v1/events?limit=1000", http.StatusOK, &evs)
	var seen []string
	for _, e := range evs.Events {
		switch {
		case e.StreamID != "agent:default/ops-a":
		case e.Type == "AGENT_UPDATED":
			seen = append(seen, "updated")
		case e.Type == "AGENT_STATE_CHANGED" && (e.Data.Signal == "confirm_down" || e.Data.Signal == "up"):
			seen = append(seen, e.Data.Signal+":"+e.Data.Reason)
			require.NotEmpty(t, e.Metadata.Actor)
		}
	}
	return seen
}

// A heartbeat may report the agent's queue length, error rate and pool
// usage; they show on the agent, and the queue joins the load term.
func TestHeartbeatHealthReport(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	agent := newConcurrencyAgent(t, 0)
	var reg agentJSON
	postJSON(t, base+"/v1/agents", fmt.Sprintf(`{"agent_id":"reporter","capabilities":["t.hb"],"endpoint":%q,"max_concurrent":4,"ttl_seconds":60}`,
		agent.srv.URL+"/deliver"), http.StatusCreated, &reg)
	waitState(t, base, "reporter", "HEALTHY", 20*time.Second)
	beat := func(body string) (int, string) {
		return call(t, http.MethodPut, base+"/v1/agents/reporter/heartbeat", "Bearer "+reg.Token, body)
	}
	code, out := beat(`{"in_flight":1,"queue_length":2,"error_rate":0.25,"pool_usage":0.5}`)
	require.Equal(t, http.StatusOK, code, out)

	rj := waitRoute(t, base, "t.hb", func(rj routeJSON) bool {
		for _, c := range rj.Candidates {
			for _, term := range c.Terms {
				if term.Name == "load" && term.Value == -7.5 { // (0 slots held + 2 queued) / 4 of −15: the reported in_flight is not the load
					return true
				}
			}
		}
		return false
	})
	require.Len(t, rj.Candidates, 1)
	var a struct {
		InFlight     int `json:"in_flight"`
		HealthReport struct {
			InFlight    int      `json:"in_flight"`
			QueueLength int      `json:"queue_length"`
			ErrorRate   *float64 `json:"error_rate"`
			PoolUsage   *float64 `json:"pool_usage"`
		} `json:"health_report"`
	}
	getJSON(t, base+"/v1/agents/reporter", http.StatusOK, &a)
	require.Equal(t, 2, a.HealthReport.QueueLength)
	require.Equal(t, 1, a.HealthReport.InFlight, "the agent's report shows")
	require.Zero(t, a.InFlight, "beside the service's own count")
	require.NotNil(t, a.HealthReport.ErrorRate)
	require.InDelta(t, 0.25, *a.HealthReport.ErrorRate, 1e-9)
	require.InDelta(t, 0.5, *a.HealthReport.PoolUsage, 1e-9)

	// A heartbeat that reports nothing keeps the last figures.
	code, out = beat("")
	require.Equal(t, http.StatusOK, code, out)
	getJSON(t, base+"/v1/agents/reporter", http.StatusOK, &a)
	require.Equal(t, 2, a.HealthReport.QueueLength)
	require.Equal(t, 1, a.HealthReport.InFlight, "the agent's report shows")
	require.Zero(t, a.InFlight, "beside the service's own count")

	for field, body := range map[string]string{
		"queue_length": `{"queue_length":-1}`,
		"error_rate":   `{"error_rate":1.5}`,
		"pool_usage":   `{"pool_usage":-0.1}`,
		"in_flight":    `{"in_flight":-2}`,
	} {
		code, out := beat(body)
		require.Equal(t, http.StatusBadRequest, code, out)
		require.Contains(t, out, field)
	}
}

// A canary registered with rollout_percent 5 takes the jobs of its buckets,
// and only those: over 2,000 jobs it gets the share of the capability's
// traffic its percent says, not a share of a tie with the stable agent.
func TestCanaryShareEndToEnd(t *testing.T) {
	t.Parallel()
	svc := startTuned(t, map[string]string{"DATABASE_URL": newDatabase(t)}, func(c *Config) {
		fastSweeps(c)
		c.RateLimit = 0 // 2,000 submits at once from one caller
	}, "serve", "--insecure", "--addr", "127.0.0.1:0", "--log-level", "warn")
	base := svc.m.URL()
	waitReady(t, base)
	stable := newConcurrencyAgent(t, 0)
	canary := newConcurrencyAgent(t, 0)
	for id, body := range map[string]string{
		"stable": fmt.Sprintf(`{"agent_id":"stable","capabilities":["t.canary"],"endpoint":%q,"ttl_seconds":120}`, stable.srv.URL+"/d"),
		"canary": fmt.Sprintf(`{"agent_id":"canary","capabilities":["t.canary"],"endpoint":%q,"ttl_seconds":120,"rollout_percent":5}`, canary.srv.URL+"/d"),
	} {
		postJSON(t, base+"/v1/agents", body, http.StatusCreated, &agentJSON{})
		waitState(t, base, id, "HEALTHY", 20*time.Second)
	}
	waitRoute(t, base, "t.canary", func(rj routeJSON) bool {
		return len(rj.Candidates)+len(rj.Rejected) == 2 // both in the snapshot (the canary may be out of this bucket)
	})

	const jobs = 2000
	ids := make(chan string, jobs)
	errs := make(chan error, jobs)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < jobs; i += 16 {
				id, err := harness.Submit(t.Context(), base+"/v1/jobs", fmt.Sprintf(`{"capability":"t.canary","payload":{"i":%d}}`, i))
				if err != nil {
					errs <- err
					continue
				}
				ids <- id
			}
		}()
	}
	wg.Wait()
	close(ids)
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	inBuckets := 0
	var bucketed []string
	for id := range ids {
		if domain.CanaryBucket(id) < 5 {
			inBuckets++
			bucketed = append(bucketed, id)
		}
	}
	waitFor(t, 90*time.Second, "every job delivered", func() bool { return stable.served.Load()+canary.served.Load() >= jobs })
	if int32(inBuckets) != canary.served.Load() {
		for _, id := range bucketed { // what became of the canary's jobs it did not serve
			if evs := jobEvents(t, base, id); len(evs) != 4 || routedTo(t, evs)[0] != "canary" {
				t.Logf("job %s of the canary's buckets: %v", id, types(evs))
				for _, e := range evs {
					t.Logf("  %s %s", e.Type, e.Data)
				}
			}
		}
	}
	require.EqualValues(t, inBuckets, canary.served.Load(), "the canary takes exactly the jobs of its buckets")
	share := 100 * float64(canary.served.Load()) / jobs
	t.Logf("canary share %.2f %% of %d jobs", share, jobs)
	require.InDelta(t, 5, share, 3, "a 5 %% canary gets about 5 %% (binomial: 3 points is six standard deviations)")
}

// Agents register the protocol version they speak; a caller naming the
// versions it speaks gets only an agent speaking one of them.
func TestProtocolVersionConstraint(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	for _, v := range []string{"1.0", "0.3"} {
		agent := newConcurrencyAgent(t, 0)
		id := "speaks-" + v
		var a struct {
			ProtocolVersion string `json:"protocol_version"`
		}
		postJSON(t, base+"/v1/agents", fmt.Sprintf(`{"agent_id":%q,"capabilities":["t.pv"],"endpoint":%q,"protocol_version":%q}`,
			id, agent.srv.URL+"/d", v), http.StatusCreated, &a)
		require.Equal(t, v, a.ProtocolVersion)
		waitState(t, base, id, "HEALTHY", 20*time.Second)
	}
	waitRoute(t, base, "t.pv", func(rj routeJSON) bool { return len(rj.Candidates) == 2 })
	var rj routeJSON
	getJSON(t, base+"/v1/route?capability=t.pv&protocol_versions=0.3,0.4", http.StatusOK, &rj)
	require.Len(t, rj.Candidates, 1)
	require.Equal(t, "speaks-0.3", rj.Candidates[0].AgentID)
	require.Equal(t, "protocol_version_mismatch", rj.Rejected[0].Reason)

	for range 5 {
		id := submitOK(t, base, `{"capability":"t.pv","payload":{},"constraints":{"protocol_versions":["0.3"]}}`)
		j := waitTerminal(t, base, id, 20*time.Second)
		require.Equal(t, "SUCCESS", j.Status)
		require.Equal(t, "speaks-0.3", j.AgentID)
	}
	code, body := submit(t, base, `{"capability":"t.pv","payload":{},"constraints":{"protocol_versions":["bad version"]}}`)
	require.Equal(t, http.StatusBadRequest, code, body)
	code, out := postJSONStatus(t, base+"/v1/agents", `{"agent_id":"bad-pv","capabilities":["t.pv"],"endpoint":"http://127.0.0.1:9/","protocol_version":"x y"}`)
	require.Equal(t, http.StatusBadRequest, code, out)
}

func postJSONStatus(t *testing.T, url, body string) (int, string) {
	t.Helper()
	return call(t, http.MethodPost, url, "", body)
}

// Backpressure: above a lane's high watermark low work is held back and
// QUEUE_HIGH is raised once; at the hard limit submits get 429 overloaded
// with Retry-After and nothing is written; under the low watermark again
// QUEUE_NORMAL is raised and held work goes on.
func TestBackpressure(t *testing.T) {
	t.Parallel()
	svc := startTuned(t, map[string]string{"DATABASE_URL": newDatabase(t)}, func(c *Config) {
		fastSweeps(c)
		c.Jobs.Watermarks = domain.Watermarks{High: 3, Low: 2, Limit: 6}
	}, "serve", "--insecure", "--addr", "127.0.0.1:0", "--log-level", "warn")
	base := svc.m.URL()
	waitReady(t, base)
	newTestAgent(t, base, "bp-agent", "t.served", 50, answer("SUCCESS", ""))

	// Jobs nobody serves wait in the normal lane (a long backoff after
	// no_agent). Ten submits at once against a limit of six: exactly six
	// are accepted, whatever their interleaving (the lane's count is kept in
	// the submits' transactions).
	var (
		mu         sync.Mutex
		waiting    []string
		overloaded int
		sent       sync.WaitGroup
	)
	for range 10 {
		sent.Go(func() {
			code, out := call(t, http.MethodPost, base+"/v1/jobs", "", `{"capability":"t.nobody","payload":{},"max_attempts":5,"backoff_base_ms":600000}`)
			mu.Lock()
			defer mu.Unlock()
			switch code {
			case http.StatusAccepted:
				var r struct {
					JobID string `json:"job_id"`
				}
				if jsonUnmarshal(out, &r) == nil {
					waiting = append(waiting, r.JobID)
				}
			case http.StatusTooManyRequests:
				if strings.Contains(out, `"overloaded"`) {
					overloaded++
				}
			}
		})
	}
	sent.Wait()
	require.Len(t, waiting, 6, "the limit is 6")
	require.Equal(t, 4, overloaded, "the 7th and later: 429 overloaded")
	// A refused submit with an ordering key leaves nothing in its key's
	// queue: the key's next job, later, starts at once.
	code, out := call(t, http.MethodPost, base+"/v1/jobs", "", `{"capability":"t.served","payload":{},"ordering_key":"k"}`)
	require.Equal(t, http.StatusTooManyRequests, code, out)
	// A refused submit claims no Idempotency-Key: its retry, once there is
	// room, creates the job.
	keyedSubmit := func() (int, string) {
		code, out := submit(t, base, `{"capability":"t.nobody","payload":{},"max_attempts":5,"backoff_base_ms":600000}`,
			"Idempotency-Key", "refused-then-retried")
		id, _ := out["job_id"].(string)
		return code, id
	}
	code, _ = keyedSubmit()
	require.Equal(t, http.StatusTooManyRequests, code)
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/jobs", strings.NewReader(`{"capability":"t.nobody","payload":{}}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "5", resp.Header.Get("Retry-After"))
	submittedInLog := func() int { // the log itself, not a read model
		var log struct {
			Events []struct {
				Type string `json:"type"`
			} `json:"events"`
		}
		getJSON(t, base+"/v1/events?limit=1000", http.StatusOK, &log)
		n := 0
		for _, e := range log.Events {
			if e.Type == "SUBMITTED" {
				n++
			}
		}
		return n
	}
	// The global log shows a commit once every earlier one is visible too.
	waitFor(t, 10*time.Second, "every accepted submit in the log", func() bool { return submittedInLog() >= len(waiting) })
	require.Equal(t, len(waiting), submittedInLog(), "a refused submit writes nothing")

	queueEvents := func() []string {
		var evs struct {
			Events []struct {
				StreamID string `json:"stream_id"`
				Type     string `json:"type"`
			} `json:"events"`
		}
		getJSON(t, base+"/v1/events?limit=1000", http.StatusOK, &evs)
		var out []string
		for _, e := range evs.Events {
			if e.StreamID == "queue:default/normal" {
				out = append(out, e.Type)
			}
		}
		return out
	}
	waitFor(t, 20*time.Second, "QUEUE_HIGH", func() bool { return len(queueEvents()) == 1 })
	require.Equal(t, []string{"QUEUE_HIGH"}, queueEvents())

	// Low work is held back while the namespace is high; high work is not.
	low := submitOK(t, base, `{"capability":"t.served","payload":{},"priority":"low"}`)
	normal := submitOK(t, base, `{"capability":"t.served","payload":{},"priority":"high"}`)
	require.Equal(t, "SUCCESS", waitTerminal(t, base, normal, 20*time.Second).Status)
	require.Equal(t, 0, getJob(t, base, low).Attempts, "held back, spending nothing")

	// A job that leaves makes room at once, before any sweep counts again.
	code, out = call(t, http.MethodPost, base+"/v1/jobs/"+waiting[0]+"/cancel", "", "")
	require.Equal(t, http.StatusOK, code, out)
	code, waiting[0] = keyedSubmit()
	require.Equal(t, http.StatusAccepted, code, "the key a refused submit named is free")
	require.Equal(t, "SUBMITTED", getJob(t, base, waiting[0]).Status)
	again, id := keyedSubmit()
	require.Equal(t, http.StatusAccepted, again)
	require.Equal(t, waiting[0], id, "and now holds the job it created")
	for _, id := range waiting {
		code, out := call(t, http.MethodPost, base+"/v1/jobs/"+id+"/cancel", "", "")
		require.Equal(t, http.StatusOK, code, out)
	}
	require.Equal(t, "SUCCESS", waitTerminal(t, base, low, 30*time.Second).Status, "under the low watermark, held work goes on")
	keyed := submitOK(t, base, `{"capability":"t.served","payload":{},"ordering_key":"k"}`)
	require.Equal(t, "SUCCESS", waitTerminal(t, base, keyed, 20*time.Second).Status, "no refused job holds the key")
	waitFor(t, 20*time.Second, "QUEUE_NORMAL", func() bool { return len(queueEvents()) == 2 })
	require.Equal(t, []string{"QUEUE_HIGH", "QUEUE_NORMAL"}, queueEvents(), "once per crossing")
}

// An agent that re-registered three times within the hour is flapping: it
// must pass three probes in a row, and its routing score carries a penalty
// that decays; both show in the route and on the agent.
func TestFlapDamping(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	agent := newConcurrencyAgent(t, 0)
	body := fmt.Sprintf(`{"agent_id":"flappy","capabilities":["t.flap"],"endpoint":%q,"ttl_seconds":120}`, agent.srv.URL+"/d")
	for range 4 { // a registration and three restarts
		postJSON(t, base+"/v1/agents", body, http.StatusCreated, &agentJSON{})
	}
	var a struct {
		RecentRestarts int     `json:"recent_restarts"`
		ProbesNeeded   int     `json:"probes_needed"`
		FlapPenalty    float64 `json:"flap_penalty"`
	}
	getJSON(t, base+"/v1/agents/flappy", http.StatusOK, &a)
	require.Equal(t, 3, a.RecentRestarts)
	require.Equal(t, 3, a.ProbesNeeded)
	require.InDelta(t, 20, a.FlapPenalty, 0.5)

	waitState(t, base, "flappy", "HEALTHY", 30*time.Second)
	require.GreaterOrEqual(t, agent.probes.Load(), int32(3), "it was probed (three in a row: registry's TestFlappingAgentNeedsProbesInARow)")

	rj := waitRoute(t, base, "t.flap", func(rj routeJSON) bool { return len(rj.Candidates) == 1 })
	var flap float64
	for _, term := range rj.Candidates[0].Terms {
		if term.Name == "flapping" {
			flap = term.Value
		}
	}
	require.Less(t, flap, -15.0, "the penalty is in the route explanation")
}

// A namespace's routing policy is kept in the database, validated and
// versioned; the router applies a change within a second, and /v1/route and
// ROUTED name the version they used.
func TestRoutingPolicyAtRunTime(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	newTestAgent(t, base, "pol-agent", "t.pol", 50, answer("SUCCESS", ""))
	var p struct {
		Version   int     `json:"version"`
		WeightMax float64 `json:"weight_max"`
		Exact     float64 `json:"exact_capability"`
	}
	getJSON(t, base+"/v1/policies/routing?namespace=default", http.StatusOK, &p)
	require.Equal(t, 0, p.Version, "the compiled-in policy")
	require.EqualValues(t, 20, p.WeightMax)

	code, out := call(t, http.MethodPut, base+"/v1/policies/routing", "", `{"namespace":"default","exact_capability":40,"weight_max":0}`)
	require.Equal(t, http.StatusOK, code, out)
	require.NoError(t, jsonUnmarshal(out, &p))
	require.Equal(t, 1, p.Version)

	var rj struct {
		PolicyVersion int `json:"policy_version"`
		Candidates    []struct {
			Score float64 `json:"score"`
		} `json:"candidates"`
	}
	waitFor(t, 5*time.Second, "the new policy in the router", func() bool {
		getJSON(t, base+"/v1/route?capability=t.pol", http.StatusOK, &rj)
		return rj.PolicyVersion == 1
	})
	require.Len(t, rj.Candidates, 1)
	require.InDelta(t, 40, rj.Candidates[0].Score, 1e-9, "exact 40, no weight term")

	id := submitOK(t, base, `{"capability":"t.pol","payload":{}}`)
	require.Equal(t, "SUCCESS", waitTerminal(t, base, id, 20*time.Second).Status)
	var routed struct {
		Route struct {
			PolicyVersion int `json:"policy_version"`
		} `json:"route"`
	}
	for _, e := range jobEvents(t, base, id) {
		if e.Type == "ROUTED" {
			require.NoError(t, json.Unmarshal(e.Data, &routed))
		}
	}
	require.Equal(t, 1, routed.Route.PolicyVersion, "ROUTED names the policy version")

	for _, bad := range []string{`{"namespace":"default","failure_threshold":2}`, `{"namespace":"default","weight_max":-1}`, `{"namespace":"default","nonsense":1}`} {
		code, out := call(t, http.MethodPut, base+"/v1/policies/routing", "", bad)
		require.Equal(t, http.StatusBadRequest, code, out)
	}
	getJSON(t, base+"/v1/policies/routing?namespace=default", http.StatusOK, &p)
	require.Equal(t, 1, p.Version, "a refused policy changes nothing")
}
