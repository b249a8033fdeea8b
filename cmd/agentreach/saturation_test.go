package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/internal/harness"
	"github.com/agentreach/agentreach/webhook"
)

// gatedAgent is an inline agent that answers each delivery only when the
// test lets one through, and records the order in which jobs came.
type gatedAgent struct {
	srv  *httptest.Server
	gate chan struct{}
	mu   sync.Mutex
	came []string
}

func newGatedAgent(t *testing.T) *gatedAgent {
	t.Helper()
	a := &gatedAgent{gate: make(chan struct{})}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.WriteHeader(http.StatusOK)
			return
		}
		var env webhook.Envelope
		_ = json.NewDecoder(r.Body).Decode(&env)
		a.mu.Lock()
		a.came = append(a.came, env.JobID)
		a.mu.Unlock()
		select {
		case <-a.gate:
		case <-r.Context().Done():
			return
		}
		answer("SUCCESS", "")(w, env)
	}))
	t.Cleanup(func() { close(a.gate); a.srv.Close() })
	return a
}

func (a *gatedAgent) order() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.came...)
}

// waitCame waits until the agent has been delivered n jobs.
func (a *gatedAgent) waitCame(t *testing.T, n int) []string {
	t.Helper()
	ok, err := harness.Until(t.Context(), 20*time.Second, 5*time.Millisecond, func() (bool, error) { return len(a.order()) >= n, nil })
	require.NoError(t, err)
	require.True(t, ok, "the agent got %d jobs, not %d", len(a.order()), n)
	return a.order()
}

// TestFreedSlotGoesToTheMostUrgentJob: jobs waiting for the one slot of an
// agent get it in priority order, high before normal before low, oldest
// first within a lane, whatever order they came in and whenever their own
// timers look again: each slot given back wakes the next one at once.
func TestFreedSlotGoesToTheMostUrgentJob(t *testing.T) {
	t.Parallel()
	r, dsn := service(t)
	base := r.m.URL()
	agent := newGatedAgent(t)
	postJSON(t, base+"/v1/agents", fmt.Sprintf(`{"agent_id":"one-slot","capabilities":["t.slot"],"endpoint":%q,"max_concurrent":1,"ttl_seconds":120}`,
		agent.srv.URL+"/deliver"), http.StatusCreated, nil)
	waitState(t, base, "one-slot", "HEALTHY", 20*time.Second)
	waitRoute(t, base, "t.slot", func(rj routeJSON) bool { return len(rj.Candidates) > 0 })

	job := func(priority string) string {
		return submitOK(t, base, fmt.Sprintf(`{"capability":"t.slot","payload":{},"priority":%q,"timeout_ms":60000,"route_wait_ms":120000}`, priority))
	}
	holder := job("normal")
	agent.waitCame(t, 1)

	pool := openDB(t, dsn)
	waiting := func(n int) {
		t.Helper()
		ok, err := harness.Until(t.Context(), 20*time.Second, 5*time.Millisecond, func() (bool, error) {
			var got int
			err := pool.QueryRow(t.Context(), `SELECT count(*) FROM job_timers WHERE capability = 't.slot'`).Scan(&got)
			return got == n, err
		})
		require.NoError(t, err)
		require.True(t, ok, "%d jobs never all waited for the slot", n)
	}
	low1 := job("low")
	waiting(1)
	low2 := job("low")
	waiting(2)
	normal := job("normal")
	waiting(3)
	high := job("high")
	waiting(4)

	want := []string{holder, high, normal, low1, low2}
	for i := 1; i < len(want); i++ {
		agent.gate <- struct{}{} // the slot's holder answers: the slot comes back
		got := agent.waitCame(t, i+1)
		require.Equal(t, want[:i+1], got, "after %d slots given back", i)
	}
	agent.gate <- struct{}{}
	for _, id := range want {
		j := waitTerminal(t, base, id, 30*time.Second)
		require.Equal(t, "SUCCESS", j.Status)
		require.Equal(t, 1, j.Attempts, "a wait for a slot spends no attempt")
	}
}

// TestInFlightIsPendingNeverFailed: a slow agent holding six inline calls
// it has not answered yet shows them pending, with no reach or success
// rate against it, and the router's failure term does not count them
// (it would take 50 points off a busy, healthy agent).
func TestInFlightIsPendingNeverFailed(t *testing.T) {
	t.Parallel()
	r, _ := service(t)
	base := r.m.URL()
	agent := newGatedAgent(t)
	postJSON(t, base+"/v1/agents", fmt.Sprintf(`{"agent_id":"slow","capabilities":["t.slow"],"endpoint":%q,"ttl_seconds":120}`,
		agent.srv.URL+"/deliver"), http.StatusCreated, nil)
	waitState(t, base, "slow", "HEALTHY", 20*time.Second)
	waitRoute(t, base, "t.slow", func(rj routeJSON) bool { return len(rj.Candidates) > 0 })
	var ids []string
	for range 6 {
		ids = append(ids, submitOK(t, base, `{"capability":"t.slow","payload":{},"timeout_ms":120000}`))
	}
	agent.waitCame(t, 6)

	type metrics struct {
		Agents []struct {
			AgentID     string   `json:"agent_id"`
			Attempted   int      `json:"attempted"`
			Pending     int      `json:"pending"`
			ReachRate   *float64 `json:"reach_rate"`
			SuccessRate *float64 `json:"success_rate"`
		} `json:"agents"`
	}
	var seen time.Time
	ok, err := harness.Until(t.Context(), 20*time.Second, 20*time.Millisecond, func() (bool, error) {
		var m metrics
		getJSON(t, base+"/v1/metrics/agents?window=5m", http.StatusOK, &m)
		for _, a := range m.Agents {
			if a.AgentID == "slow" && a.Attempted == 6 {
				require.Equal(t, 6, a.Pending, "under way is pending")
				require.Nil(t, a.ReachRate, "nothing settled: no rate")
				require.Nil(t, a.SuccessRate)
				seen = time.Now()
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err)
	require.True(t, ok, "the six attempts never showed in the agent's figures")

	// A snapshot taken after the figures showed them: no failure term.
	rj := waitRouteAfter(t, base, "t.slow", seen)
	require.Len(t, rj.Candidates, 1)
	for _, term := range rj.Candidates[0].Terms {
		if term.Name == "failure_rate" {
			require.Zero(t, term.Value, "calls under way are no failures")
		}
	}
	for range ids {
		agent.gate <- struct{}{}
	}
	for _, id := range ids {
		require.Equal(t, "SUCCESS", waitTerminal(t, base, id, 30*time.Second).Status)
	}
}

// waitRouteAfter answers the route of capability from a snapshot taken
// after at.
func waitRouteAfter(t *testing.T, base, capability string, at time.Time) routeJSON {
	t.Helper()
	var rj struct {
		routeJSON
		SnapshotAt time.Time `json:"snapshot_at"`
	}
	ok, err := harness.Until(t.Context(), 20*time.Second, 20*time.Millisecond, func() (bool, error) {
		getJSON(t, base+"/v1/route?capability="+capability, http.StatusOK, &rj)
		return rj.SnapshotAt.After(at), nil
	})
	require.NoError(t, err)
	require.True(t, ok, "no snapshot after %s", at)
	return rj.routeJSON
}

// An agent that answers "not now" (429 or 503 with Retry-After) is paused,
// not punished: it gets no work until then (the route says so, and the
// agent shows until when), the attempt spends nothing (one attempt allowed,
// and the job still succeeds on the same agent after the pause) and no
// failure is counted against it (its breaker saw none).
func TestAgentPausedNotPunished(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	var deliveries atomic.Int32
	newTestAgent(t, base, "moody", "t.moody", 50, func(w http.ResponseWriter, env webhook.Envelope) {
		if deliveries.Add(1) == 1 {
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		answer("SUCCESS", "")(w, env)
	})
	id := submitOK(t, base, `{"capability":"t.moody","payload":{},"max_attempts":1}`)

	// While paused: the route rejects it as paused, and the agent says until when.
	rj := waitRoute(t, base, "t.moody", func(rj routeJSON) bool { return len(rj.Rejected) == 1 })
	require.Equal(t, "paused", rj.Rejected[0].Reason)
	var resume struct {
		ResumeAt *time.Time `json:"resume_at"`
	}
	getJSON(t, base+"/v1/route?capability=t.moody", http.StatusOK, &resume)
	require.NotNil(t, resume.ResumeAt, "the route says when the pause ends")
	var a struct {
		PausedUntil *time.Time `json:"paused_until"`
	}
	getJSON(t, base+"/v1/agents/moody", http.StatusOK, &a)
	require.NotNil(t, a.PausedUntil, "the pause shows on the agent")

	j := waitTerminal(t, base, id, 30*time.Second)
	require.Equal(t, "SUCCESS", j.Status, "the pause spent no attempt: %s", eventsText(t, base, id))
	require.Equal(t, int32(2), deliveries.Load())
	var paused struct {
		Reason      string    `json:"reason"`
		PausedUntil time.Time `json:"paused_until"`
		HTTPStatus  int       `json:"http_status"`
	}
	var deliveredAt []time.Time
	for _, e := range jobEventsFull(t, base, id) {
		switch e.Type {
		case "ATTEMPT_FAILED":
			require.NoError(t, json.Unmarshal(e.Data, &paused))
		case "DELIVERED":
			deliveredAt = append(deliveredAt, e.RecordedAt)
		}
	}
	require.Equal(t, "agent_paused", paused.Reason)
	require.Equal(t, 503, paused.HTTPStatus)
	require.Len(t, deliveredAt, 1, "the refused delivery was not delivered")
	require.False(t, deliveredAt[0].Before(paused.PausedUntil.Add(-50*time.Millisecond)), "no work before the pause ended")

	var after struct {
		PausedUntil *time.Time `json:"paused_until"`
		Breaker     struct {
			ErrorRate float64 `json:"error_rate"`
		} `json:"breaker"`
	}
	getJSON(t, base+"/v1/agents/moody", http.StatusOK, &after)
	require.Nil(t, after.PausedUntil, "the pause is over")
	require.Zero(t, after.Breaker.ErrorRate, "a pause is no failure")
}

// eventsText is a job's events, for a failure's message.
func eventsText(t *testing.T, base, id string) string {
	t.Helper()
	var b strings.Builder
	for _, e := range jobEventsFull(t, base, id) {
		fmt.Fprintf(&b, "%s %s %s\n", e.RecordedAt.Format("15:04:05.000"), e.Type, e.Data)
	}
	return b.String()
}

// TestOrderingKey: jobs of one ordering key are delivered one at a time,
// in submit order, the next when the one before ended, while other keys
// go on beside them; a job of the key that dead-letters ends its turn.
func TestOrderingKey(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	type span struct {
		key        string
		n          int
		start, end time.Time
	}
	var (
		mu      sync.Mutex
		spans   []span
		running int
		peak    int
	)
	newTestAgent(t, base, "ord", "t.ord", 50, func(w http.ResponseWriter, env webhook.Envelope) {
		var p struct {
			Key string `json:"key"`
			N   int    `json:"n"`
		}
		_ = json.Unmarshal(env.Payload, &p)
		mu.Lock()
		running++
		peak = max(peak, running)
		start := time.Now()
		mu.Unlock()
		time.Sleep(150 * time.Millisecond) // the work: jobs of a key must not overlap it
		mu.Lock()
		running--
		spans = append(spans, span{p.Key, p.N, start, time.Now()})
		mu.Unlock()
		answer("SUCCESS", "")(w, env)
	})
	waitRoute(t, base, "t.ord", func(rj routeJSON) bool { return rj.Chosen == "ord" })

	first := submitOK(t, base, `{"capability":"t.nobody","payload":{},"ordering_key":"c","max_attempts":1,"route_wait_ms":100}`)
	var ids []string
	for n := range 4 {
		for _, key := range []string{"a", "b"} {
			ids = append(ids, submitOK(t, base, fmt.Sprintf(`{"capability":"t.ord","payload":{"key":%q,"n":%d},"ordering_key":%q}`, key, n, key)))
		}
	}
	after := submitOK(t, base, `{"capability":"t.ord","payload":{"key":"c","n":0},"ordering_key":"c"}`)
	for _, id := range append(ids, after) {
		require.Equal(t, "SUCCESS", waitTerminal(t, base, id, 60*time.Second).Status, eventsText(t, base, id))
	}
	require.Equal(t, "DEAD_LETTER", waitTerminal(t, base, first, 10*time.Second).Status)

	mu.Lock()
	defer mu.Unlock()
	byKey := map[string][]span{}
	for _, s := range spans {
		byKey[s.key] = append(byKey[s.key], s)
	}
	for _, key := range []string{"a", "b"} {
		got := byKey[key]
		slices.SortFunc(got, func(x, y span) int { return x.start.Compare(y.start) })
		require.Len(t, got, 4, key)
		for i, s := range got {
			require.Equal(t, i, s.n, "key %s: delivered in submit order", key)
			if i > 0 {
				require.False(t, s.start.Before(got[i-1].end), "key %s: job %d started before job %d ended", key, i, i-1)
			}
		}
	}
	require.GreaterOrEqual(t, peak, 2, "other keys go on beside each other")
	var deadAt, routedAt time.Time
	for _, e := range jobEventsFull(t, base, first) {
		if e.Type == "DEAD_LETTER" {
			deadAt = e.RecordedAt
		}
	}
	for _, e := range jobEventsFull(t, base, after) {
		if e.Type == "ROUTED" && routedAt.IsZero() {
			routedAt = e.RecordedAt
		}
	}
	require.False(t, routedAt.Before(deadAt), "the next job of key c started only once the first dead-lettered")
}

// TestOrderingKeyAndApproval: a job of a key that needed approval keeps
// the place it took at submit; approved while the job before it runs, it
// waits for that job's end before it is routed.
func TestOrderingKeyAndApproval(t *testing.T) {
	t.Parallel()
	svc, dsn := service(t)
	base := svc.m.URL()
	agent := newGatedAgent(t)
	postJSON(t, base+"/v1/agents", fmt.Sprintf(`{"agent_id":"gate","capabilities":["t.first","t.risky"],"endpoint":%q,"ttl_seconds":120}`,
		agent.srv.URL+"/deliver"), http.StatusCreated, nil)
	waitRoute(t, base, "t.first", func(rj routeJSON) bool { return rj.Chosen == "gate" })
	code, out := call(t, http.MethodPut, base+"/v1/policies/approvals", "", `{"patterns":["t.risky"]}`)
	require.Equal(t, http.StatusOK, code, out)

	first := submitOK(t, base, `{"capability":"t.first","payload":{},"ordering_key":"q"}`)
	agent.waitCame(t, 1) // held at the agent
	code, sub := submit(t, base, `{"capability":"t.risky","payload":{},"ordering_key":"q"}`)
	require.Equal(t, http.StatusAccepted, code, "%v", sub)
	require.Equal(t, "AWAITING_APPROVAL", sub["status"])
	risky := sub["job_id"].(string)
	code, out = call(t, http.MethodPost, base+"/v1/jobs/"+risky+"/approve", "", `{}`)
	require.Equal(t, http.StatusOK, code, out)
	var phase string // written by the approval's own transaction
	require.NoError(t, openDB(t, dsn).QueryRow(t.Context(), `SELECT phase FROM job_timers WHERE job_id = $1`, risky).Scan(&phase))
	require.Equal(t, "ordered", phase, "approved, it still waits for the job before it")
	agent.gate <- struct{}{} // the first job ends
	require.Equal(t, "SUCCESS", waitTerminal(t, base, first, 20*time.Second).Status)
	agent.waitCame(t, 2)
	agent.gate <- struct{}{}
	require.Equal(t, "SUCCESS", waitTerminal(t, base, risky, 20*time.Second).Status)
	require.Equal(t, []string{first, risky}, agent.order())
}
