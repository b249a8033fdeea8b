package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/internal/pgtest"
	"github.com/agentreach/agentreach/webhook"
)

// pullAgent is a pull agent driven by the test over the HTTP API.
type pullAgent struct {
	base, id, token string
}

func registerPull(t *testing.T, base, id, capability, extra string) *pullAgent {
	t.Helper()
	var reg agentJSON
	postJSON(t, base+"/v1/agents", fmt.Sprintf(`{"agent_id":%q,"capabilities":[%q],"mode":"pull","ttl_seconds":60%s}`, id, capability, extra),
		http.StatusCreated, &reg)
	require.Equal(t, "PROBING", reg.State, "a pull agent is not routable before its first claim")
	return &pullAgent{base: base, id: id, token: reg.Token}
}

// claim answers the deliveries of one claim, or an error for a status
// other than 200 (safe on any goroutine).
func (p *pullAgent) claim(max, waitMS int) ([]webhook.Envelope, error) {
	req, _ := http.NewRequest(http.MethodPost, p.base+"/v1/agents/"+p.id+"/claim",
		strings.NewReader(fmt.Sprintf(`{"max":%d,"wait_ms":%d}`, max, waitMS)))
	req.Header.Set("Authorization", "Bearer "+p.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Deliveries []webhook.Envelope `json:"deliveries"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("claim of %s answered %d (%v)", p.id, resp.StatusCode, err)
	}
	return out.Deliveries, nil
}

func (p *pullAgent) mustClaim(t *testing.T, max, waitMS int) []webhook.Envelope {
	t.Helper()
	out, err := p.claim(max, waitMS)
	require.NoError(t, err)
	require.NotNil(t, out, "an empty claim answers an empty list, not null")
	return out
}

// claimOne long-polls until a delivery comes, within a deadline.
func (p *pullAgent) claimOne(t *testing.T, within time.Duration) webhook.Envelope {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if got := p.mustClaim(t, 1, 2000); len(got) == 1 {
			return got[0]
		}
	}
	require.FailNow(t, "no delivery came", "agent %s within %s", p.id, within)
	return webhook.Envelope{}
}

func (p *pullAgent) report(t *testing.T, env webhook.Envelope, status string) {
	t.Helper()
	code, body := call(t, http.MethodPost, env.ResultURL, "Bearer "+p.token,
		fmt.Sprintf(`{"status":%q,"result":{"by":%q},"attempt":%d}`, status, p.id, env.Attempt))
	require.Equal(t, http.StatusOK, code, body)
}

func (p *pullAgent) release(t *testing.T, body string) []domain.HeldAttempt {
	t.Helper()
	code, resp := call(t, http.MethodPost, p.base+"/v1/agents/"+p.id+"/release", "Bearer "+p.token, body)
	require.Equal(t, http.StatusOK, code, resp)
	var out struct {
		Released []domain.HeldAttempt `json:"released"`
	}
	require.NoError(t, json.Unmarshal([]byte(resp), &out))
	return out.Released
}

// attemptFailures are the reasons of a job's ATTEMPT_FAILED events.
func attemptFailures(t *testing.T, evs []eventJSON) []string {
	t.Helper()
	var out []string
	for _, e := range evs {
		if e.Type == "ATTEMPT_FAILED" {
			var d struct {
				Reason string `json:"reason"`
			}
			require.NoError(t, json.Unmarshal(e.Data, &d))
			out = append(out, d.Reason)
		}
	}
	return out
}

type pullAgentJSON struct {
	AgentID    string `json:"agent_id"`
	Mode       string `json:"mode"`
	State      string `json:"state"`
	Endpoint   string `json:"endpoint"`
	InboxDepth *int   `json:"inbox_depth"`
}

func listPullAgents(t *testing.T, base string) map[string]pullAgentJSON {
	t.Helper()
	var out struct {
		Agents []pullAgentJSON `json:"agents"`
	}
	getJSON(t, base+"/v1/agents", http.StatusOK, &out)
	m := map[string]pullAgentJSON{}
	for _, a := range out.Agents {
		m[a.AgentID] = a
	}
	return m
}

// TestPullAgent: a pull agent registers with no endpoint, becomes HEALTHY
// at its first claim, and claims a job as push would deliver it: the same
// envelope, DELIVERED at the claim, its result through result_url. Bad
// registrations and claims get 4xx and write nothing.
func TestPullAgent(t *testing.T) {
	t.Parallel()
	r, dsn := service(t)
	base := r.m.URL()

	code, body := postJSONStatus(t, base+"/v1/agents", `{"agent_id":"p","capabilities":["p.cap"],"mode":"pull","endpoint":"http://127.0.0.1:9/"}`)
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, `"field":"endpoint"`)
	code, body = postJSONStatus(t, base+"/v1/agents", `{"agent_id":"p","capabilities":["p.cap"]}`)
	require.Equal(t, http.StatusBadRequest, code, "a push agent needs an endpoint: %s", body)
	code, body = postJSONStatus(t, base+"/v1/agents", `{"agent_id":"p","capabilities":["p.cap"],"mode":"poll"}`)
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, `"field":"mode"`)
	require.Empty(t, listPullAgents(t, base), "nothing was registered")

	p := registerPull(t, base, "puller", "p.cap", `,"max_concurrent":2`)
	for _, bad := range []string{`{"max":0}`, `{"max":101}`, `{"wait_ms":60001}`, `{"wait_ms":-1}`, `{"max":"two"}`} {
		code, body := call(t, http.MethodPost, base+"/v1/agents/puller/claim", "Bearer "+p.token, bad)
		require.Equal(t, http.StatusBadRequest, code, "%s: %s", bad, body)
	}
	code, _ = call(t, http.MethodPost, base+"/v1/agents/puller/claim", "Bearer art_wrong", `{}`)
	require.Equal(t, http.StatusNotFound, code, "no agent holds that token: register")
	code, _ = call(t, http.MethodPost, base+"/v1/agents/puller/claim", "", `{}`)
	require.Equal(t, http.StatusUnauthorized, code)
	pushAgent := newTestAgent(t, base, "pusher", "p.other", 50, answer("SUCCESS", ""))
	code, body = call(t, http.MethodPost, base+"/v1/agents/pusher/claim", "Bearer "+pushAgent.token, `{}`)
	require.Equal(t, http.StatusConflict, code, body)
	require.Contains(t, body, `"code":"not_pull"`)
	waitState(t, base, "puller", "PROBING", time.Second) // bad claims prove nothing

	require.Empty(t, p.mustClaim(t, 1, 0), "nothing waits yet")
	waitState(t, base, "puller", "HEALTHY", 5*time.Second)
	a := listPullAgents(t, base)["puller"]
	require.Equal(t, "pull", a.Mode)
	require.Empty(t, a.Endpoint)
	require.NotNil(t, a.InboxDepth)
	require.Zero(t, *a.InboxDepth)
	require.Equal(t, "push", listPullAgents(t, base)["pusher"].Mode)
	require.Nil(t, listPullAgents(t, base)["pusher"].InboxDepth, "a push agent has no inbox")

	// A claim waiting when the job comes gets it.
	got := make(chan []webhook.Envelope, 1)
	go func() {
		out, _ := p.claim(5, 30000)
		got <- out
	}()
	id := submitOK(t, base, `{"capability":"p.cap","payload":{"n":1},"timeout_ms":30000}`)
	var envs []webhook.Envelope
	select {
	case envs = <-got:
	case <-time.After(40 * time.Second):
		require.FailNow(t, "the waiting claim never answered")
	}
	require.Len(t, envs, 1)
	env := envs[0]
	job := getJob(t, base, id)
	require.Equal(t, id, env.JobID)
	require.Equal(t, 1, env.Attempt)
	require.Equal(t, "p.cap", env.Capability)
	require.JSONEq(t, `{"n":1}`, string(env.Payload))
	require.Equal(t, job.TraceID, env.TraceID)
	require.Equal(t, base+"/v1/jobs/"+id+"/result", env.ResultURL)
	require.WithinDuration(t, time.Now().Add(30*time.Second), env.Deadline, 10*time.Second, "the deadline runs from the claim")
	require.Equal(t, "DELIVERED", job.Status)
	require.Equal(t, []string{"SUBMITTED", "ROUTED", "DELIVERED"}, types(jobEvents(t, base, id)))

	p.report(t, env, "SUCCESS")
	j := waitTerminal(t, base, id, 10*time.Second)
	require.Equal(t, "SUCCESS", j.Status)
	require.JSONEq(t, `{"by":"puller"}`, string(j.Result))
	require.Equal(t, 0, countSlots(t, dsn), "the slot was given back")
}

// TestPullNotClaimedIsRoutedAgain: an attempt its agent does not claim
// within the claim timeout goes to another agent, reason not_claimed,
// without spending an attempt (max_attempts 1 still succeeds).
func TestPullNotClaimedIsRoutedAgain(t *testing.T) {
	t.Parallel()
	svc := startTuned(t, map[string]string{"DATABASE_URL": newDatabase(t)}, func(c *Config) {
		fastSweeps(c)
		c.Jobs.ClaimTimeout = 3 * time.Second
	}, "serve", "--insecure", "--addr", "127.0.0.1:0", "--log-level", "warn")
	base := svc.m.URL()
	waitReady(t, base)
	sleeper := registerPull(t, base, "sleeper", "n.cap", `,"weight":100`)
	sleeper.mustClaim(t, 1, 0) // HEALTHY, and never claims again
	worker := registerPull(t, base, "worker", "n.cap", `,"weight":1`)
	worker.mustClaim(t, 1, 0)
	waitRoute(t, base, "n.cap", func(rj routeJSON) bool { return rj.Chosen == "sleeper" && len(rj.Candidates) == 2 })
	id := submitOK(t, base, `{"capability":"n.cap","payload":{},"max_attempts":1}`)
	waitJob(t, base, id, func(j jobJSON) bool { return j.AgentID == "sleeper" }, 10*time.Second)

	env := worker.claimOne(t, 20*time.Second)
	require.Equal(t, id, env.JobID)
	require.Equal(t, 2, env.Attempt)
	worker.report(t, env, "SUCCESS")
	j := waitTerminal(t, base, id, 10*time.Second)
	require.Equal(t, "SUCCESS", j.Status, "the unclaimed attempt spent nothing: %s", j.Error)
	evs := jobEvents(t, base, id)
	require.Equal(t, []string{"sleeper", "worker"}, routedTo(t, evs))
	require.Equal(t, []string{"not_claimed"}, attemptFailures(t, evs))
	require.Zero(t, *listPullAgents(t, base)["sleeper"].InboxDepth)
}

// TestPullAgentDiesHoldingWork: a claimed job whose agent never answers
// times out at its deadline and is retried on another agent.
func TestPullAgentDiesHoldingWork(t *testing.T) {
	t.Parallel()
	r, _ := service(t)
	base := r.m.URL()
	dying := registerPull(t, base, "dying", "d.cap", "")
	dying.mustClaim(t, 1, 0)
	waitRoute(t, base, "d.cap", func(rj routeJSON) bool { return rj.Chosen == "dying" })
	id := submitOK(t, base, `{"capability":"d.cap","payload":{},"timeout_ms":1500,"backoff_base_ms":100}`)
	env := dying.claimOne(t, 10*time.Second)
	require.Equal(t, id, env.JobID) // and the agent dies with it

	healthy := registerPull(t, base, "healthy", "d.cap", "")
	env = healthy.claimOne(t, 20*time.Second)
	require.Equal(t, id, env.JobID)
	require.Equal(t, 2, env.Attempt)
	healthy.report(t, env, "SUCCESS")
	require.Equal(t, "SUCCESS", waitTerminal(t, base, id, 10*time.Second).Status)
	evs := types(jobEvents(t, base, id))
	require.Equal(t, []string{"SUBMITTED", "ROUTED", "DELIVERED", "TIMEOUT", "ROUTED", "DELIVERED", "SUCCESS"}, evs)
}

// TestPullAgentGoneHoldingWork: a pull agent that claimed a job and then
// went silent (no heartbeat, no claim) goes DOWN when its lease lapses, and
// the job it held is routed again then, not at its deadline ten minutes
// later: the attempt is spent as agent_gone, and another agent gets it.
func TestPullAgentGoneHoldingWork(t *testing.T) {
	t.Parallel()
	r, _ := service(t)
	base := r.m.URL()
	var reg agentJSON
	postJSON(t, base+"/v1/agents", `{"agent_id":"silent","capabilities":["g.cap"],"mode":"pull","ttl_seconds":5}`, http.StatusCreated, &reg)
	silent := &pullAgent{base: base, id: "silent", token: reg.Token}
	silent.mustClaim(t, 1, 0)
	waitRoute(t, base, "g.cap", func(rj routeJSON) bool { return rj.Chosen == "silent" })
	id := submitOK(t, base, `{"capability":"g.cap","payload":{},"timeout_ms":600000}`)
	env := silent.claimOne(t, 10*time.Second)
	require.Equal(t, id, env.JobID) // and nothing more is heard of it

	healthy := registerPull(t, base, "healthy", "g.cap", "")
	env = healthy.claimOne(t, 40*time.Second) // a 5 s lease, then a sweep: far sooner than the deadline
	require.Equal(t, id, env.JobID)
	require.Equal(t, 2, env.Attempt)
	healthy.report(t, env, "SUCCESS")
	require.Equal(t, "SUCCESS", waitTerminal(t, base, id, 10*time.Second).Status)
	var evs struct {
		Events []struct {
			Type string `json:"type"`
			Data struct {
				Reason  string `json:"reason"`
				AgentID string `json:"agent_id"`
			} `json:"data"`
		} `json:"events"`
	}
	getJSON(t, base+"/v1/jobs/"+id+"/events", http.StatusOK, &evs)
	var got []string
	for _, e := range evs.Events {
		got = append(got, e.Type)
		if e.Type == "ATTEMPT_FAILED" {
			require.Equal(t, "agent_gone", e.Data.Reason)
			require.Equal(t, "silent", e.Data.AgentID)
		}
	}
	require.Equal(t, []string{"SUBMITTED", "ROUTED", "DELIVERED", "ATTEMPT_FAILED", "ROUTED", "DELIVERED", "SUCCESS"}, got)
	waitState(t, base, "silent", "DOWN", 10*time.Second)
}

// TestPullRelease: an agent gives back a claimed job unstarted (it goes
// to another agent, spending nothing), fails one with an error (a spent
// attempt: with max_attempts 1, the dead letter), and going offline gives
// back its inbox.
func TestPullRelease(t *testing.T) {
	t.Parallel()
	r, _ := service(t)
	base := r.m.URL()
	first := registerPull(t, base, "first", "r.cap", "")
	first.mustClaim(t, 1, 0)
	waitRoute(t, base, "r.cap", func(rj routeJSON) bool { return rj.Chosen == "first" })

	given := submitOK(t, base, `{"capability":"r.cap","payload":{},"max_attempts":1}`)
	env := first.claimOne(t, 10*time.Second)
	require.Equal(t, given, env.JobID)
	second := registerPull(t, base, "second", "r.cap", "")
	second.mustClaim(t, 1, 0)
	waitRoute(t, base, "r.cap", func(rj routeJSON) bool { return len(rj.Candidates) == 2 })
	require.Equal(t, []domain.HeldAttempt{{JobID: given, Attempt: 1}},
		first.release(t, fmt.Sprintf(`{"jobs":[{"job_id":%q,"attempt":1}]}`, given)))
	require.Empty(t, first.release(t, fmt.Sprintf(`{"jobs":[{"job_id":%q,"attempt":1}]}`, given)), "given back once")
	env = second.claimOne(t, 20*time.Second)
	require.Equal(t, given, env.JobID)
	second.report(t, env, "SUCCESS")
	require.Equal(t, "SUCCESS", waitTerminal(t, base, given, 10*time.Second).Status)
	require.Equal(t, []string{"released"}, attemptFailures(t, jobEvents(t, base, given)))

	failed := submitOK(t, base, `{"capability":"r.cap","payload":{},"max_attempts":1}`)
	var holder *pullAgent
	for holder == nil {
		for _, p := range []*pullAgent{first, second} {
			if got := p.mustClaim(t, 1, 200); len(got) == 1 {
				require.Equal(t, failed, got[0].JobID)
				holder = p
			}
		}
	}
	code, body := call(t, http.MethodPost, base+"/v1/agents/"+holder.id+"/release", "Bearer "+holder.token, `{"error":"boom"}`)
	require.Equal(t, http.StatusBadRequest, code, "an error names its jobs: %s", body)
	holder.release(t, fmt.Sprintf(`{"jobs":[{"job_id":%q,"attempt":1}],"error":"out of memory"}`, failed))
	j := waitTerminal(t, base, failed, 10*time.Second)
	require.Equal(t, "DEAD_LETTER", j.Status, "a failed attempt is spent")
	require.Contains(t, j.Error, "agent_error")

	// Offline gives back the inbox: the job goes to the other agent.
	code, _ = call(t, http.MethodPost, base+"/v1/agents/second/down", "", "")
	require.Equal(t, http.StatusOK, code)
	waitRoute(t, base, "r.cap", func(rj routeJSON) bool { return rj.Chosen == "first" && len(rj.Candidates) == 1 })
	queued := submitOK(t, base, `{"capability":"r.cap","payload":{},"max_attempts":1}`)
	waitJob(t, base, queued, func(j jobJSON) bool { return j.AgentID == "first" }, 10*time.Second)
	code, _ = call(t, http.MethodPost, base+"/v1/agents/second/up", "", "")
	require.Equal(t, http.StatusOK, code)
	waitRoute(t, base, "r.cap", func(rj routeJSON) bool { return len(rj.Candidates) == 2 })
	code, body = call(t, http.MethodPost, base+"/v1/agents/first/offline", "Bearer "+first.token, `{"reason":"shutdown"}`)
	require.Equal(t, http.StatusOK, code, body)
	env = second.claimOne(t, 20*time.Second)
	require.Equal(t, queued, env.JobID)
	second.report(t, env, "SUCCESS")
	require.Equal(t, "SUCCESS", waitTerminal(t, base, queued, 10*time.Second).Status)
	require.Equal(t, []string{"released"}, attemptFailures(t, jobEvents(t, base, queued)))
	_, err := first.claim(1, 0)
	require.Error(t, err, "an offline agent must register again")
}

// TestPullClaimedOnceAcrossProcesses: three service processes on one
// database and four pull agents claiming through all of them at once;
// every attempt is claimed exactly once and every job succeeds once.
func TestPullClaimedOnceAcrossProcesses(t *testing.T) {
	t.Parallel()
	// Three processes of at most 6 connections, and each one's listener.
	dsn := pgtest.NewDatabase(t, pgtest.Conns(3*7+3))
	var bases []string
	for range 3 {
		_, base, _ := serveProcess(t, dsn, deadAddr(t), "--max-conns", "6")
		bases = append(bases, base)
	}
	var agents []*pullAgent
	for i := range 4 {
		p := registerPull(t, bases[i%3], fmt.Sprintf("claimer-%d", i), "x.cap", "")
		p.base = bases[(i+1)%3] // it claims through another process than it registered with
		p.mustClaim(t, 1, 0)
		agents = append(agents, p)
	}
	for _, base := range bases {
		waitRoute(t, base, "x.cap", func(rj routeJSON) bool { return len(rj.Candidates) == 4 })
	}

	const n = 120
	var (
		mu      sync.Mutex
		claimed = map[domain.HeldAttempt]int{}
		errs    []error
		wg      sync.WaitGroup
		done    = make(chan struct{})
	)
	for _, p := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				envs, err := p.claim(5, 500)
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				for _, env := range envs {
					mu.Lock()
					claimed[domain.HeldAttempt{JobID: env.JobID, Attempt: env.Attempt}]++
					mu.Unlock()
					req, _ := http.NewRequest(http.MethodPost, env.ResultURL,
						strings.NewReader(fmt.Sprintf(`{"status":"SUCCESS","attempt":%d}`, env.Attempt)))
					req.Header.Set("Authorization", "Bearer "+p.token)
					if resp, err := http.DefaultClient.Do(req); err == nil {
						resp.Body.Close()
					}
				}
			}
		}()
	}
	var ids []string
	for i := range n {
		ids = append(ids, submitOK(t, bases[i%3], fmt.Sprintf(`{"capability":"x.cap","payload":{"i":%d},"timeout_ms":30000}`, i)))
	}
	for _, id := range ids {
		j := waitTerminal(t, bases[0], id, 60*time.Second)
		require.Equal(t, "SUCCESS", j.Status, "job %s: %s", id, j.Error)
	}
	close(done)
	wg.Wait()
	require.Empty(t, errs)
	for h, times := range claimed {
		require.Equal(t, 1, times, "attempt %d of job %s was claimed %d times", h.Attempt, h.JobID, times)
	}
	for _, id := range ids {
		evs := types(jobEvents(t, bases[0], id))
		successes, delivered := 0, 0
		for _, e := range evs {
			switch e {
			case "SUCCESS":
				successes++
			case "DELIVERED":
				delivered++
			}
		}
		require.Equal(t, 1, successes, "job %s: %v", id, evs)
		require.Equal(t, delivered, countRouted(evs), "job %s: each attempt delivered once: %v", id, evs)
	}
	require.GreaterOrEqual(t, len(claimed), n)
	require.Equal(t, 0, countSlots(t, dsn), "every slot was given back")
}

func countRouted(evs []string) int {
	n := 0
	for _, e := range evs {
		if e == "ROUTED" {
			n++
		}
	}
	return n
}

// TestPullCancel: cancelling a job waiting in a pull agent's inbox takes it
// out; cancelling one it claimed reaches the agent in its heartbeats, and
// its late result changes nothing (decided first on the fold the claim
// kept, which the cancel moved past: the append conflicts, the report
// reloads and is a duplicate).
func TestPullCancel(t *testing.T) {
	t.Parallel()
	r, dsn := service(t)
	base := r.m.URL()
	p := registerPull(t, base, "canceller", "c.cap", "")
	p.mustClaim(t, 1, 0)
	waitRoute(t, base, "c.cap", func(rj routeJSON) bool { return rj.Chosen == "canceller" })

	queued := submitOK(t, base, `{"capability":"c.cap","payload":{}}`)
	waitJob(t, base, queued, func(j jobJSON) bool { return j.AgentID == "canceller" }, 10*time.Second)
	require.Equal(t, 1, *listPullAgents(t, base)["canceller"].InboxDepth)
	db := openDB(t, dsn)
	var txs int
	require.NoError(t, db.QueryRow(t.Context(), `SELECT count(DISTINCT tx_id) FROM events
		WHERE stream_id = 'job:'||$1 AND type IN ('SUBMITTED', 'ROUTED')`, queued).Scan(&txs))
	require.Equal(t, 1, txs, "an agent with no max_concurrent: the submit's own write puts the job in its inbox")
	var unclaimed int
	var rate *float64
	require.NoError(t, db.QueryRow(t.Context(), `SELECT unclaimed, reach_rate FROM reach_health
		WHERE "window" = '1h' AND agent_id = 'canceller'`).Scan(&unclaimed, &rate))
	if unclaimed == 1 { // the inbox holds it (and the projection may not count it yet)
		require.Nil(t, rate, "an attempt waiting in the inbox is no reach failure (yet)")
	}
	code, body := call(t, http.MethodPost, base+"/v1/jobs/"+queued+"/cancel", "", `{}`)
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, 0, *listPullAgents(t, base)["canceller"].InboxDepth, "a cancelled job leaves the inbox")
	require.Equal(t, 0, countSlots(t, dsn))
	require.Empty(t, p.mustClaim(t, 1, 0))

	held := submitOK(t, base, `{"capability":"c.cap","payload":{}}`)
	env := p.claimOne(t, 10*time.Second)
	require.Equal(t, held, env.JobID)
	code, body = call(t, http.MethodPost, base+"/v1/jobs/"+held+"/cancel", "", `{}`)
	require.Equal(t, http.StatusOK, code, body)
	waitFor(t, 10*time.Second, "the heartbeat names the cancelled job", func() bool {
		code, body := call(t, http.MethodPut, base+"/v1/agents/canceller/heartbeat", "Bearer "+p.token, `{}`)
		require.Equal(t, http.StatusOK, code, body)
		var hb struct {
			Cancelled []domain.HeldAttempt `json:"cancelled"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &hb))
		for _, h := range hb.Cancelled {
			if h == (domain.HeldAttempt{JobID: held, Attempt: 1}) {
				return true
			}
		}
		return false
	})
	p.report(t, env, "SUCCESS")
	require.Equal(t, "CANCELLED", getJob(t, base, held).Status)
	require.Equal(t, "RESULT_DUPLICATE", types(jobEvents(t, base, held))[len(jobEvents(t, base, held))-1])
}

// TestProgressExtendsTheClaim: an agent working past its job's timeout
// keeps it by reporting progress (PROGRESS, which the caller reads, moves
// the deadline); a report for an attempt that no longer runs is a
// conflict, another agent's is forbidden, a bad extension a 400.
func TestProgressExtendsTheClaim(t *testing.T) {
	t.Parallel()
	r, _ := service(t)
	base := r.m.URL()
	worker := registerPull(t, base, "worker", "p.cap", "")
	other := registerPull(t, base, "other", "p.other", "")
	worker.mustClaim(t, 1, 0)
	waitRoute(t, base, "p.cap", func(rj routeJSON) bool { return rj.Chosen == "worker" })
	id := submitOK(t, base, `{"capability":"p.cap","payload":{},"timeout_ms":1500,"max_attempts":1}`)
	env := worker.claimOne(t, 10*time.Second)
	require.Equal(t, id, env.JobID)

	progress := func(token, body string) (int, string) {
		return call(t, http.MethodPost, base+"/v1/jobs/"+id+"/progress", "Bearer "+token, body)
	}
	code, out := progress(worker.token, `{"attempt":1,"extend_ms":-1}`)
	require.Equal(t, http.StatusBadRequest, code, out)
	require.Contains(t, out, "extend_ms")
	code, out = progress(other.token, `{"attempt":1,"extend_ms":5000}`)
	require.Equal(t, http.StatusForbidden, code, out)

	// Three reports, each 1 s apart, keep the 1.5 s attempt alive for 3 s and more.
	first := time.Now()
	for i := range 3 {
		code, out = progress(worker.token, fmt.Sprintf(`{"attempt":1,"extend_ms":2500,"progress":{"step":%d}}`, i+1))
		require.Equal(t, http.StatusOK, code, out)
		var j struct {
			Status   string          `json:"status"`
			Progress json.RawMessage `json:"progress"`
			Deadline time.Time       `json:"deadline"`
		}
		getJSON(t, base+"/v1/jobs/"+id, http.StatusOK, &j)
		require.Equal(t, "DELIVERED", j.Status, "report %d: still held", i+1)
		require.JSONEq(t, fmt.Sprintf(`{"step":%d}`, i+1), string(j.Progress))
		require.True(t, j.Deadline.After(time.Now().Add(time.Second)), "the deadline moved on")
		time.Sleep(time.Second) // the agent's work between reports: the time that must pass
	}
	require.Greater(t, time.Since(first), 2500*time.Millisecond)
	worker.report(t, env, "SUCCESS")
	require.Equal(t, "SUCCESS", waitTerminal(t, base, id, 10*time.Second).Status)
	code, out = progress(worker.token, `{"attempt":1,"extend_ms":1000}`)
	require.Equal(t, http.StatusConflict, code, out)

	var n int
	for _, e := range jobEventsFull(t, base, id) {
		if e.Type == "PROGRESS" {
			n++
		}
		require.NotEqual(t, "TIMEOUT", e.Type)
	}
	require.Equal(t, 3, n, "each report is an event the caller reads")
}

// TestResultClaimsTheNextDelivery: a pull agent reporting a result with
// claim_next gets its next delivery in the answer, claimed in the
// report's own transaction (the job that waited for the slot it gave
// back: routed and delivered there); a bad claim_next, or a push
// agent's, writes nothing, and a duplicate report claims nothing.
func TestResultClaimsTheNextDelivery(t *testing.T) {
	t.Parallel()
	r, dsn := service(t)
	base := r.m.URL()
	pool := openDB(t, dsn)
	p := registerPull(t, base, "next", "n.cap", `,"max_concurrent":1`)
	require.Empty(t, p.mustClaim(t, 1, 0))
	waitState(t, base, "next", "HEALTHY", 5*time.Second)

	first := submitOK(t, base, `{"capability":"n.cap","payload":{"n":1},"timeout_ms":30000}`)
	env := p.claimOne(t, 10*time.Second)
	require.Equal(t, first, env.JobID)
	second := submitOK(t, base, `{"capability":"n.cap","payload":{"n":2},"timeout_ms":30000}`)
	waitingTimers(t, pool, 1) // the agent's one slot is taken: it waits

	for _, bad := range []string{`-1`, `11`, `"one"`} {
		code, body := call(t, http.MethodPost, env.ResultURL, "Bearer "+p.token,
			fmt.Sprintf(`{"status":"SUCCESS","attempt":%d,"claim_next":%s}`, env.Attempt, bad))
		require.Equal(t, http.StatusBadRequest, code, "%s: %s", bad, body)
		require.Contains(t, body, `"field":"claim_next"`)
	}
	require.Equal(t, "DELIVERED", getJob(t, base, first).Status, "a bad claim_next writes nothing")

	code, body := call(t, http.MethodPost, env.ResultURL, "Bearer "+p.token,
		fmt.Sprintf(`{"status":"SUCCESS","result":{"by":"next"},"attempt":%d,"claim_next":2}`, env.Attempt))
	require.Equal(t, http.StatusOK, code, body)
	var out struct {
		Recorded   string             `json:"recorded"`
		Job        jobJSON            `json:"job"`
		Deliveries []webhook.Envelope `json:"deliveries"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &out))
	require.Equal(t, "SUCCESS", out.Job.Status)
	require.Len(t, out.Deliveries, 1, "the waiting job, and nothing more: %s", body)
	next := out.Deliveries[0]
	require.Equal(t, second, next.JobID)
	require.Equal(t, 1, next.Attempt)
	require.JSONEq(t, `{"n":2}`, string(next.Payload))
	require.Equal(t, base+"/v1/jobs/"+second+"/result", next.ResultURL)
	evs := jobEvents(t, base, second)
	require.Equal(t, []string{"SUBMITTED", "ROUTED", "DELIVERED"}, types(evs))
	var delivered domain.Delivered
	require.NoError(t, json.Unmarshal(evs[2].Data, &delivered))
	require.True(t, delivered.Claimed)
	require.Zero(t, delivered.LatencyMS, "claimed by the write that routed it: no time in the inbox")
	var txs int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(DISTINCT tx_id) FROM events
		WHERE (stream_id = 'job:'||$1 AND type = 'SUCCESS') OR (stream_id = 'job:'||$2 AND type IN ('ROUTED', 'DELIVERED'))`,
		first, second).Scan(&txs))
	require.Equal(t, 1, txs, "the result, the next job's route and its claim: one transaction")
	require.Empty(t, p.mustClaim(t, 1, 0), "claimed once")

	third := submitOK(t, base, `{"capability":"n.cap","payload":{"n":3},"timeout_ms":30000}`)
	waitingTimers(t, pool, 1)
	code, body = call(t, http.MethodPost, env.ResultURL, "Bearer "+p.token,
		fmt.Sprintf(`{"status":"SUCCESS","attempt":%d,"claim_next":1}`, env.Attempt))
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"recorded":"duplicate"`)
	require.Contains(t, body, `"deliveries":[]`, "a report sent again claims nothing")
	require.Equal(t, "SUBMITTED", getJob(t, base, third).Status)

	code, body = call(t, http.MethodPost, next.ResultURL, "Bearer "+p.token,
		fmt.Sprintf(`{"status":"SUCCESS","attempt":%d,"claim_next":1}`, next.Attempt))
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"job_id":"`+third+`"`, "the next waiting job: %s", body)
	code, body = call(t, http.MethodPost, base+"/v1/jobs/"+third+"/result", "Bearer "+p.token, `{"status":"SUCCESS","attempt":1,"claim_next":1}`)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"deliveries":[]`, "nothing waits: an empty list")
	require.Equal(t, 0, countSlots(t, dsn), "every slot given back")

	// A push agent's report may not claim: 400, nothing written.
	push := newTestAgent(t, base, "pusher", "n.push", 50, statusOnly(http.StatusAccepted))
	id := submitOK(t, base, `{"capability":"n.push","payload":{}}`)
	penv := <-push.envelopes
	waitJob(t, base, id, func(j jobJSON) bool { return j.Status == "DELIVERED" }, 10*time.Second)
	code, body = call(t, http.MethodPost, penv.ResultURL, "Bearer "+push.token, `{"status":"SUCCESS","attempt":1,"claim_next":1}`)
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, `"field":"claim_next"`)
	require.Equal(t, []string{"SUBMITTED", "ROUTED", "DELIVERED"}, types(jobEvents(t, base, id)), "nothing written")
}
