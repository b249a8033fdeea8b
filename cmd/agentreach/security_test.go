package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/internal/cli"
	"github.com/agentreach/agentreach/webhook"
)

const testAdminKey = "ark_test_admin_0123456789abcdef"

// securedService runs serve with authentication on.
func securedService(t *testing.T, tune func(*Config)) *running {
	t.Helper()
	r := startTuned(t, map[string]string{"DATABASE_URL": newDatabase(t)}, func(c *Config) {
		fastSweeps(c)
		c.AuthFailRate = 0 // the matrices fail on purpose, many times a second
		if tune != nil {
			tune(c)
		}
	}, "serve", "--admin-key", testAdminKey, "--addr", "127.0.0.1:0", "--log-level", "warn")
	waitReady(t, r.m.URL())
	return r
}

// call makes a request with an Authorization header (if auth is set) and
// returns the status and body.
func call(t *testing.T, method, url, auth, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func createKey(t *testing.T, base, by, body string) (key, id string) {
	t.Helper()
	code, out := call(t, http.MethodPost, base+"/v1/keys", "Bearer "+by, body)
	require.Equal(t, http.StatusCreated, code, out)
	var r struct {
		Key     string `json:"key"`
		KeyInfo struct {
			KeyID string `json:"key_id"`
		} `json:"key_info"`
	}
	require.NoError(t, jsonUnmarshal(out, &r))
	return r.Key, r.KeyInfo.KeyID
}

func TestServeRefusesWithoutKeyStore(t *testing.T) {
	t.Parallel()
	out := &syncBuffer{}
	m := NewMain()
	m.Stdout, m.Stderr = out, out
	m.Getenv = func(string) string { return "" }
	err := m.Run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0"})
	require.ErrorIs(t, err, errUsage)
	require.ErrorContains(t, err, "AGENTREACH_ADMIN_KEY")
	require.ErrorContains(t, err, "--insecure")
}

// TestEveryEndpointEveryCredential walks every endpoint with every kind of
// credential and checks the documented status; after every refused call,
// nothing was written.
func TestEveryEndpointEveryCredential(t *testing.T) {
	t.Parallel()
	var clock atomicTime
	svc := securedService(t, nil)
	base := svc.m.URL()
	admin := "Bearer " + testAdminKey

	all := `"scopes":["agents:write","agents:read","jobs:read","jobs:approve","jobs:submit:*"]`
	keyA, _ := createKey(t, base, testAdminKey, `{"namespace":"a",`+all+`}`)
	adminA, _ := createKey(t, base, testAdminKey, `{"namespace":"a","scopes":["admin"]}`)
	keyB, _ := createKey(t, base, testAdminKey, `{"namespace":"b",`+all+`}`)
	adminB, _ := createKey(t, base, testAdminKey, `{"namespace":"b","scopes":["admin"]}`)
	noScope, _ := createKey(t, base, testAdminKey, `{"namespace":"a","scopes":["jobs:submit:nothing.here"]}`)
	revoked, revokedID := createKey(t, base, testAdminKey, `{"namespace":"a",`+all+`}`)
	expired, _ := createKey(t, base, testAdminKey, `{"namespace":"a",`+all+`,"ttl_seconds":3600}`)
	code, _ := call(t, http.MethodDelete, base+"/v1/keys/"+revokedID, admin, "")
	require.Equal(t, http.StatusNoContent, code)
	_, victimID := createKey(t, base, adminA, `{"namespace":"a","scopes":["jobs:read"]}`)
	// From here on the clock is two hours ahead: the 1 h key has expired.
	clock.set(time.Now().Add(2 * time.Hour))
	svc.m.app.auth.SetClock(clock.now)

	// Agents and jobs of namespace a.
	agentA := newSecuredAgent(t, base, keyA, "sec-a", "a", "sec.cap", http.StatusAccepted)
	agentA2 := newSecuredAgent(t, base, keyA, "sec-a2", "a", "sec.other", http.StatusOK)
	submitA := func(body string) string {
		code, out := call(t, http.MethodPost, base+"/v1/jobs", "Bearer "+keyA, body)
		require.Equal(t, http.StatusAccepted, code, out)
		var r struct {
			JobID string `json:"job_id"`
		}
		require.NoError(t, jsonUnmarshal(out, &r))
		return r.JobID
	}
	code, out := call(t, http.MethodPut, base+"/v1/policies/approvals", "Bearer "+adminA, `{"patterns":["sec.risky*"]}`)
	require.Equal(t, http.StatusOK, code, out)
	jobA := submitA(`{"capability":"sec.cap","payload":{}}`)
	env := <-agentA.envelopes
	jobCancel := submitA(`{"capability":"sec.none","payload":{},"max_attempts":3,"backoff_base_ms":600000}`)
	jobDead := submitA(`{"capability":"sec.none","payload":{},"max_attempts":1}`)
	jobApprove := submitA(`{"capability":"sec.risky.pay","payload":{}}`)
	jobReject := submitA(`{"capability":"sec.risky.pay","payload":{}}`)
	asKey := func(k string) string { return "Bearer " + k }
	waitJobAuth(t, base, asKey(keyA), jobA, "DELIVERED")
	waitJobAuth(t, base, asKey(keyA), jobDead, "DEAD_LETTER")
	waitJobAuth(t, base, asKey(keyA), jobApprove, "AWAITING_APPROVAL")

	counts := func() string {
		var s string
		require.NoError(t, svc.m.app.pool.QueryRow(context.Background(), `SELECT concat_ws(',',
			(SELECT count(*) FROM events), (SELECT count(*) FROM agents), (SELECT count(*) FROM api_keys WHERE revoked_at IS NULL),
			(SELECT count(*) FROM river_job WHERE kind IN ('dispatch_job', 'callback_job')),
			(SELECT count(*) FROM approval_policies), (SELECT count(*) FROM signing_secrets),
			(SELECT count(*) FROM idempotency_keys), (SELECT string_agg(coalesce(prev_token_hash::text, '-'), ',' ORDER BY namespace, agent_id) FROM agents))`).Scan(&s))
		return s
	}

	// Correct calls may start background work (a probe, a dispatch): let it
	// finish before the next refused call is checked for writes.
	settle := func() { settleWrites(t, counts) }
	// Replays and submits below wait for approval: no background dispatch.
	code, out = call(t, http.MethodPut, base+"/v1/policies/approvals", "Bearer "+adminA, `{"patterns":["sec.risky*","sec.none*","sec.cap"]}`)
	require.Equal(t, http.StatusOK, code, out)
	settle()

	type creds map[string]int // credential → expected status
	const (
		none, malformed, rev, exp, wrongNS, missing, otherAgent, ok = "none", "malformed", "revoked", "expired", "wrong namespace", "missing scope", "another agent's token", "correct"
	)
	keyed := func(wrong, correct int) creds {
		return creds{none: 401, malformed: 401, rev: 401, exp: 401, wrongNS: wrong, missing: 403, otherAgent: 401, ok: correct}
	}
	adminOnly := func(wrong, correct int) creds {
		return creds{none: 401, malformed: 401, rev: 401, exp: 401, wrongNS: wrong, missing: 403, otherAgent: 401, ok: correct}
	}
	agentOnly := func(other, correct int) creds {
		return creds{none: 401, malformed: 401, rev: 401, exp: 401, wrongNS: 401, missing: 401, otherAgent: other, ok: correct}
	}
	credential := func(kind string, ep endpointCase) string {
		switch kind {
		case none:
			return ""
		case malformed:
			return "Basic not-a-bearer"
		case rev:
			return asKey(revoked)
		case exp:
			return asKey(expired)
		case wrongNS:
			if ep.admin {
				return asKey(adminB)
			}
			return asKey(keyB)
		case missing:
			return asKey(noScope)
		case otherAgent:
			return asKey(agentA2.token)
		}
		if ep.agent {
			return asKey(agentA.token)
		}
		if ep.admin {
			return asKey(adminA)
		}
		return asKey(keyA)
	}
	endpoints := []endpointCase{
		{name: "list agents", method: "GET", path: "/v1/agents?namespace=a", want: keyed(404, 200)},
		{name: "get agent", method: "GET", path: "/v1/agents/sec-a", want: keyed(404, 200)},
		{name: "route", method: "GET", path: "/v1/route?capability=sec.cap&namespace=a", want: keyed(404, 200)},
		{name: "agent metrics", method: "GET", path: "/v1/metrics/agents?namespace=a", want: keyed(404, 200)},
		{name: "register", method: "POST", path: "/v1/agents", body: fmt.Sprintf(`{"agent_id":"sec-new","namespace":"a","capabilities":["sec.new"],"endpoint":%q,"health_url":"http://127.0.0.1:1/"}`, agentA.srv.URL), want: keyed(403, 201)},
		{name: "heartbeat", method: "PUT", path: "/v1/agents/sec-a/heartbeat", agent: true, want: agentOnly(401, 200)},
		// The agent itself, or a key with agents:write in its namespace.
		{name: "rotate token", method: "POST", path: "/v1/agents/sec-a/token:rotate", agent: true,
			want: creds{none: 401, malformed: 401, rev: 401, exp: 401, wrongNS: 404, missing: 403, otherAgent: 401, ok: 200}},
		{name: "submit", method: "POST", path: "/v1/jobs", body: `{"capability":"sec.cap","namespace":"a","payload":{}}`, want: keyed(403, 202)},
		{name: "list jobs", method: "GET", path: "/v1/jobs?namespace=a", want: keyed(404, 200)},
		{name: "get job", method: "GET", path: "/v1/jobs/" + jobA, want: keyed(404, 200)},
		{name: "job events", method: "GET", path: "/v1/jobs/" + jobA + "/events", want: keyed(404, 200)},
		{name: "result", method: "POST", path: "/v1/jobs/" + jobA + "/result", agent: true, body: fmt.Sprintf(`{"status":"SUCCESS","attempt":%d}`, env.Attempt), want: agentOnly(403, 200)},
		{name: "cancel", method: "POST", path: "/v1/jobs/" + jobCancel + "/cancel", want: keyed(404, 200)},
		{name: "replay", method: "POST", path: "/v1/jobs/" + jobDead + "/replay", want: keyed(404, 202)},
		{name: "approve", method: "POST", path: "/v1/jobs/" + jobApprove + "/approve", body: `{"reason":"ok"}`, want: keyed(404, 200)},
		{name: "reject", method: "POST", path: "/v1/jobs/" + jobReject + "/reject", body: `{"reason":"no"}`, want: keyed(404, 200)},
		{name: "callback secret", method: "GET", path: "/v1/callbacks/secret?namespace=a", admin: true, want: adminOnly(404, 200)},
		{name: "rotate callback secret", method: "POST", path: "/v1/callbacks/secret:rotate?namespace=a", admin: true, want: adminOnly(404, 200)},
		{name: "list keys", method: "GET", path: "/v1/keys", admin: true, want: adminOnly(200, 200)},
		{name: "create key", method: "POST", path: "/v1/keys", admin: true, body: `{"namespace":"a","scopes":["jobs:read"]}`, want: adminOnly(400, 201)},
		{name: "revoke key", method: "DELETE", path: "/v1/keys/" + victimID, admin: true, want: adminOnly(404, 204)},
		{name: "get policy", method: "GET", path: "/v1/policies/approvals?namespace=a", admin: true, want: adminOnly(404, 200)},
		{name: "set policy", method: "PUT", path: "/v1/policies/approvals", admin: true, body: `{"namespace":"a","patterns":["sec.risky*","x.*"]}`, want: adminOnly(403, 200)},
		{name: "global log", method: "GET", path: "/v1/events", admin: true, want: adminOnly(403, 403)},
		{name: "offline", method: "POST", path: "/v1/agents/sec-a2/offline", agent: true, want: agentOnly(401, 200)},
		{name: "deregister", method: "DELETE", path: "/v1/agents/sec-new", want: keyed(404, 204)},
	}
	for _, ep := range endpoints {
		if ep.name == "offline" {
			// sec-a2's own token is the correct one here, sec-a's is another agent's.
			agentA, agentA2 = agentA2, agentA
		}
		for _, kind := range []string{none, malformed, rev, exp, wrongNS, missing, otherAgent, ok} {
			want := ep.want[kind]
			before := counts()
			code, body := call(t, ep.method, base+ep.path, credential(kind, ep), ep.body)
			require.Equal(t, want, code, "%s with %s: %s", ep.name, kind, body)
			if code >= 400 {
				require.Contains(t, body, `"code":`, "%s with %s: the error body", ep.name, kind)
				require.Equal(t, before, counts(), "%s with %s wrote something", ep.name, kind)
			}
			if kind == wrongNS && code == 200 {
				require.NotContains(t, body, `"sec-a"`, "%s with a key of namespace b leaks namespace a", ep.name)
			}
		}
		settle()
	}
	// The global log is for keys of every namespace.
	code, _ = call(t, http.MethodGet, base+"/v1/events", admin, "")
	require.Equal(t, http.StatusOK, code)
}

// settleWrites waits until writes (a summary of what refused calls must
// leave alone) stays the same for a while: background work that a fixture
// or a success started (a probe, a dispatch) is over, so a refused call is
// judged alone.
func settleWrites(t *testing.T, writes func() string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	prev := writes()
	for {
		time.Sleep(250 * time.Millisecond) // the interval over which the database must stay quiet
		cur := writes()
		if cur == prev {
			return
		}
		require.True(t, time.Now().Before(deadline), "background work did not settle")
		prev = cur
	}
}

type endpointCase struct {
	name, method, path, body string
	agent, admin             bool
	want                     map[string]int
}

// newSecuredAgent registers an agent with an API key; it answers every
// delivery with status (202 or a 200 SUCCESS). Its lease is an hour, so it
// sends no heartbeats and stays HEALTHY through a long test.
func newSecuredAgent(t *testing.T, base, key, id, ns, capability string, status int) *testAgent {
	t.Helper()
	a := &testAgent{id: id, envelopes: make(chan webhook.Envelope, 100)}
	handle := answer("SUCCESS", "")
	if status == http.StatusAccepted {
		handle = statusOnly(http.StatusAccepted)
	}
	a.srv = newHTTPTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			return
		}
		var env webhook.Envelope
		_ = jsonDecode(r.Body, &env)
		a.envelopes <- env
		handle(w, env)
	}))
	code, out := call(t, http.MethodPost, base+"/v1/agents", "Bearer "+key,
		fmt.Sprintf(`{"agent_id":%q,"namespace":%q,"capabilities":[%q],"endpoint":%q,"ttl_seconds":3600}`, id, ns, capability, a.srv.URL))
	require.Equal(t, http.StatusCreated, code, out)
	var reg agentJSON
	require.NoError(t, jsonUnmarshal(out, &reg))
	a.token = reg.Token
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, out := call(t, http.MethodGet, base+"/v1/agents/"+id, "Bearer "+key, "")
		_, routed := call(t, http.MethodGet, base+"/v1/route?namespace="+ns+"&capability="+capability, "Bearer "+key, "")
		var route struct {
			Candidates []struct {
				AgentID string `json:"agent_id"`
			} `json:"candidates"`
		}
		_ = jsonUnmarshal(routed, &route)
		candidate := false // a candidate, not one of the rejected: the routing snapshot has it healthy
		for _, c := range route.Candidates {
			candidate = candidate || c.AgentID == id
		}
		if strings.Contains(out, `"state":"HEALTHY"`) && candidate {
			return a
		}
		require.True(t, time.Now().Before(deadline), "agent %s not healthy: %s", id, out)
		time.Sleep(20 * time.Millisecond) // poll interval while waiting on the condition
	}
}

func waitJobAuth(t *testing.T, base, auth, id, status string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, out := call(t, http.MethodGet, base+"/v1/jobs/"+id, auth, "")
		if strings.Contains(out, `"status":"`+status+`"`) {
			return
		}
		require.True(t, time.Now().Before(deadline), "job %s not %s: %s", id, status, out)
		time.Sleep(20 * time.Millisecond) // poll interval while waiting on the condition
	}
}

// TestApprovals: a high-risk job waits; approve sends it on, reject ends it,
// and no decision before the timeout rejects it. Each decision is an event
// with its actor.
func TestApprovals(t *testing.T) {
	t.Parallel()
	svc := securedService(t, func(c *Config) { c.Jobs.ApprovalTimeout = 800 * time.Millisecond })
	base := svc.m.URL()
	admin := "Bearer " + testAdminKey
	approver, approverID := createKey(t, base, testAdminKey, `{"namespace":"default","scopes":["jobs:approve","jobs:read"]}`)
	caller, _ := createKey(t, base, testAdminKey, `{"namespace":"default","scopes":["jobs:submit:pay.*","jobs:read"]}`)
	newSecuredAgent(t, base, testAdminKey, "payer", "default", "pay.out", http.StatusOK)
	code, out := call(t, http.MethodPut, base+"/v1/policies/approvals", admin, `{"namespace":"default","patterns":["pay.*"]}`)
	require.Equal(t, http.StatusOK, code, out)

	submit := func() string {
		code, out := call(t, http.MethodPost, base+"/v1/jobs", "Bearer "+caller, `{"capability":"pay.out","payload":{"eur":10}}`)
		require.Equal(t, http.StatusAccepted, code, out)
		require.Contains(t, out, `"status":"AWAITING_APPROVAL"`)
		var r struct {
			JobID string `json:"job_id"`
		}
		require.NoError(t, jsonUnmarshal(out, &r))
		return r.JobID
	}
	eventsOf := func(id string) ([]string, []map[string]any) {
		_, out := call(t, http.MethodGet, base+"/v1/jobs/"+id+"/events", admin, "")
		var body struct {
			Events []struct {
				Type     string         `json:"type"`
				Metadata map[string]any `json:"metadata"`
			} `json:"events"`
		}
		require.NoError(t, jsonUnmarshal(out, &body))
		var ts []string
		var mds []map[string]any
		for _, e := range body.Events {
			ts = append(ts, e.Type)
			mds = append(mds, e.Metadata)
		}
		return ts, mds
	}

	approved, rejected, timedOut := submit(), submit(), submit()
	// The caller cannot approve its own job.
	code, _ = call(t, http.MethodPost, base+"/v1/jobs/"+approved+"/approve", "Bearer "+caller, `{}`)
	require.Equal(t, http.StatusForbidden, code)

	code, out = call(t, http.MethodPost, base+"/v1/jobs/"+approved+"/approve", "Bearer "+approver, `{"reason":"looks right"}`)
	require.Equal(t, http.StatusOK, code, out)
	code, out = call(t, http.MethodPost, base+"/v1/jobs/"+rejected+"/reject", "Bearer "+approver, `{"reason":"too much"}`)
	require.Equal(t, http.StatusOK, code, out)
	require.Contains(t, out, `"status":"REJECTED"`)
	code, _ = call(t, http.MethodPost, base+"/v1/jobs/"+rejected+"/approve", "Bearer "+approver, `{}`)
	require.Equal(t, http.StatusConflict, code, "a decided job is not decided again")

	waitJobAuth(t, base, admin, approved, "SUCCESS")
	waitJobAuth(t, base, admin, timedOut, "REJECTED")

	ts, mds := eventsOf(approved)
	require.Equal(t, []string{"SUBMITTED", "AWAITING_APPROVAL", "APPROVED", "ROUTED", "DELIVERED", "SUCCESS"}, ts)
	require.Equal(t, "key:"+approverID, mds[2]["actor"])
	ts, mds = eventsOf(rejected)
	require.Equal(t, []string{"SUBMITTED", "AWAITING_APPROVAL", "REJECTED"}, ts)
	require.Equal(t, "key:"+approverID, mds[2]["actor"])
	ts, mds = eventsOf(timedOut)
	require.Equal(t, []string{"SUBMITTED", "AWAITING_APPROVAL", "REJECTED"}, ts)
	require.Equal(t, "sweep:deadline", mds[2]["actor"])

	// The policy change is audited too. The global log shows a transaction
	// once every older one in the cluster has ended, so wait for it.
	waitFor(t, 20*time.Second, "the policy change and the key in the global log", func() bool {
		_, out = call(t, http.MethodGet, base+"/v1/events?limit=1000", admin, "")
		return strings.Contains(out, `"type":"POLICY_CHANGED"`) && strings.Contains(out, `"type":"KEY_CREATED"`)
	})
}

// TestCallbackSecretRotation: during the overlap a callback carries a
// signature for the new and the old secret.
func TestCallbackSecretRotation(t *testing.T) {
	t.Parallel()
	svc := securedService(t, nil)
	base := svc.m.URL()
	admin := "Bearer " + testAdminKey
	var old, rotated struct {
		Secret string `json:"secret"`
	}
	_, out := call(t, http.MethodGet, base+"/v1/callbacks/secret?namespace=default", admin, "")
	require.NoError(t, jsonUnmarshal(out, &old))
	code, out := call(t, http.MethodPost, base+"/v1/callbacks/secret:rotate?namespace=default", admin, "")
	require.Equal(t, http.StatusOK, code, out)
	require.NoError(t, jsonUnmarshal(out, &rotated))
	require.NotEqual(t, old.Secret, rotated.Secret)

	got := make(chan receivedCallback, 1)
	receiver := newHTTPTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- receivedCallback{r.Header.Clone(), b}
	}))
	code, out = call(t, http.MethodPost, base+"/v1/jobs", admin, fmt.Sprintf(`{"capability":"t.none","payload":{},"max_attempts":1,"callback_url":%q}`, receiver.URL))
	require.Equal(t, http.StatusAccepted, code, out)
	cb := <-got
	require.NoError(t, verifyStandardWebhook(rotated.Secret, cb.header, cb.body))
	require.NoError(t, verifyStandardWebhook(old.Secret, cb.header, cb.body), "the old secret still verifies inside the overlap")
	require.Len(t, strings.Fields(cb.header.Get("webhook-signature")), 2)
}

// TestRateLimit: a key over its rate gets 429 with Retry-After; another
// key is not affected.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	svc := securedService(t, func(c *Config) { c.RateLimit, c.RateBurst = 0.5, 3 })
	base := svc.m.URL()
	slow, _ := createKey(t, base, testAdminKey, `{"namespace":"default","scopes":["jobs:read"]}`)
	for range 3 {
		code, out := call(t, http.MethodGet, base+"/v1/jobs", "Bearer "+slow, "")
		require.Equal(t, http.StatusOK, code, out)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/jobs", nil)
	req.Header.Set("Authorization", "Bearer "+slow)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Contains(t, string(b), `"code":"rate_limited"`)
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	other, _ := createKey(t, base, testAdminKey, `{"namespace":"default","scopes":["jobs:read"]}`)
	code, _ := call(t, http.MethodGet, base+"/v1/jobs", "Bearer "+other, "")
	require.Equal(t, http.StatusOK, code)
}

// TestKeysCLI creates, lists and revokes a key with the CLI.
func TestKeysCLI(t *testing.T) {
	t.Parallel()
	svc := securedService(t, nil)
	base := svc.m.URL()
	run := func(args ...string) (string, error) {
		out := &syncBuffer{}
		m := NewMain()
		m.Stdout, m.Stderr = out, out
		m.Getenv = func(k string) string {
			return map[string]string{"AGENTREACH_URL": base, "AGENTREACH_KEY": testAdminKey}[k]
		}
		err := m.Run(context.Background(), args)
		return out.String(), err
	}
	out, err := run("keys", "create", "--namespace", "team-a", "--scopes", "jobs:read,jobs:submit:doc:*", "--name", "ci")
	require.NoError(t, err, out)
	key := strings.Fields(out)[0]
	require.True(t, strings.HasPrefix(key, "ark_"), out)
	code, _ := call(t, http.MethodGet, base+"/v1/jobs", "Bearer "+key, "")
	require.Equal(t, http.StatusOK, code)

	out, err = run("keys", "list")
	require.NoError(t, err, out)
	require.Contains(t, out, "team-a")
	require.Contains(t, out, "jobs:submit:doc:*")
	id := ""
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "team-a") {
			id = strings.Fields(line)[0]
		}
	}
	out, err = run("keys", "revoke", id)
	require.NoError(t, err, out)
	code, _ = call(t, http.MethodGet, base+"/v1/jobs", "Bearer "+key, "")
	require.Equal(t, http.StatusUnauthorized, code)

	_, err = run("keys", "create", "--namespace", "team-a", "--scopes", "root")
	var apiErr *cli.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, "invalid_argument", apiErr.Code)
}

// TestRiverUIBehindAdmin: River UI is mounted at /riverui and needs an
// admin key of every namespace; a browser without one is sent to the
// dashboard's sign-in, and no answer asks for Basic auth (which would open
// the browser's own login dialog).
func TestRiverUIBehindAdmin(t *testing.T) {
	t.Parallel()
	svc := securedService(t, nil)
	base := svc.m.URL()
	resp, err := http.Get(base + "/riverui/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Equal(t, `Bearer realm="agentreach"`, resp.Header.Get("WWW-Authenticate"))

	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest(http.MethodGet, base+"/riverui/jobs", nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml")
	resp, err = noRedirect.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode, "a browser without a key goes to the sign-in")
	require.Equal(t, "/dashboard/?next=%2Friverui%2Fjobs", resp.Header.Get("Location"))

	reader, _ := createKey(t, base, testAdminKey, `{"namespace":"default","scopes":["jobs:read"]}`)
	for key, want := range map[string]int{reader: http.StatusForbidden, testAdminKey: http.StatusOK} {
		req, _ := http.NewRequest(http.MethodGet, base+"/riverui/", nil)
		req.SetBasicAuth("operator", key)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, want, resp.StatusCode)
		if want == http.StatusOK {
			require.Contains(t, strings.ToLower(string(body)), "<html")
		}
	}
	req, _ = http.NewRequest(http.MethodGet, base+"/riverui/api/queues", nil)
	req.SetBasicAuth("operator", testAdminKey) // curl -u :KEY still works
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.True(t, json.Valid(body), "River UI's API answers JSON")
}

// TestSessionCookie: the dashboard's key form sets the key as an HttpOnly,
// SameSite=Strict cookie; with it, every route demands what it demands of
// the header (the same statuses as the header gives), River UI opens, an
// unsafe request another site makes the browser send does not count, and
// DELETE /v1/session forgets it. No 401 asks for Basic auth.
func TestSessionCookie(t *testing.T) {
	t.Parallel()
	svc := securedService(t, nil)
	base := svc.m.URL()
	reader, _ := createKey(t, base, testAdminKey, `{"namespace":"default","scopes":["jobs:read"]}`)
	u, err := url.Parse(base)
	require.NoError(t, err)
	port := u.Port()

	code, out := call(t, http.MethodGet, base+"/v1/session", "", "")
	require.Equal(t, http.StatusUnauthorized, code, out)
	code, out = call(t, http.MethodPost, base+"/v1/session", "Bearer ark_never_made_0000000000", "")
	require.Equal(t, http.StatusUnauthorized, code, out)
	require.Contains(t, out, "API key not recognised")

	signIn := func(key string) *http.Cookie {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/session", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		require.NotContains(t, string(body), key, "the answer never shows the key")
		var ck *http.Cookie
		for _, c := range resp.Cookies() {
			if c.Name == "agentreach_session_"+port { // named by port: two local servers keep their own
				ck = c
			}
		}
		require.NotNil(t, ck)
		require.True(t, ck.HttpOnly)
		require.Equal(t, http.SameSiteStrictMode, ck.SameSite)
		require.Equal(t, "/", ck.Path)
		require.Positive(t, ck.MaxAge)
		return ck
	}
	withCookie := func(ck *http.Cookie, method, path string, header map[string]string) (int, string) {
		req, _ := http.NewRequest(method, base+path, nil)
		req.AddCookie(ck)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusUnauthorized {
			require.NotContains(t, resp.Header.Get("WWW-Authenticate"), "Basic")
		}
		return resp.StatusCode, string(body)
	}

	admin := signIn(testAdminKey)
	code, out = withCookie(admin, http.MethodGet, "/v1/session", nil)
	require.Equal(t, http.StatusOK, code, out)
	require.JSONEq(t, `{"key_id":"bootstrap","namespace":"*","scopes":["admin"],"authentication":"on","river_ui":true}`, out)
	readerCk := signIn(reader)
	other := *admin // the sign-in of a server on another port of the same host
	other.Name = "agentreach_session_1"
	code, _ = withCookie(&other, http.MethodGet, "/v1/session", nil)
	require.Equal(t, http.StatusUnauthorized, code, "another port's sign-in is not this server's")
	code, out = withCookie(readerCk, http.MethodGet, "/v1/session", nil)
	require.Equal(t, http.StatusOK, code, out)
	require.Contains(t, out, `"river_ui":false`)

	// The cookie and the header meet the same checks.
	for _, path := range []string{"/v1/jobs", "/v1/agents", "/v1/keys", "/v1/events", "/riverui/", "/riverui/api/queues"} {
		for _, key := range []string{testAdminKey, reader} {
			ck := admin
			if key == reader {
				ck = readerCk
			}
			byHeader, _ := call(t, http.MethodGet, base+path, "Bearer "+key, "")
			byCookie, body := withCookie(ck, http.MethodGet, path, nil)
			require.Equal(t, byHeader, byCookie, "GET %s: %s", path, body)
		}
	}
	code, _ = withCookie(admin, http.MethodGet, "/riverui/", nil)
	require.Equal(t, http.StatusOK, code, "River UI opens with the sign-in cookie")

	// An unsafe request counts the cookie only from this origin. (River
	// records its queues a moment after it starts: wait for the one paused.)
	waitFor(t, 20*time.Second, "River's a2a_poll queue", func() bool {
		code, _ := withCookie(admin, http.MethodGet, "/riverui/api/queues/a2a_poll", nil)
		return code == http.StatusOK
	})
	pause := "/riverui/api/queues/a2a_poll/pause"
	code, _ = withCookie(admin, http.MethodPut, pause, map[string]string{"Sec-Fetch-Site": "cross-site"})
	require.Equal(t, http.StatusUnauthorized, code, "another site's request")
	code, _ = withCookie(admin, http.MethodPut, pause, map[string]string{"Origin": "http://evil.example"})
	require.Equal(t, http.StatusUnauthorized, code, "another origin")
	code, _ = withCookie(admin, http.MethodPut, pause, nil)
	require.Equal(t, http.StatusUnauthorized, code, "no word of where it comes from")
	code, out = withCookie(admin, http.MethodPut, pause, map[string]string{"Sec-Fetch-Site": "same-origin"})
	require.Equal(t, http.StatusOK, code, out)
	code, out = withCookie(admin, http.MethodPut, "/riverui/api/queues/a2a_poll/resume", map[string]string{"Origin": base})
	require.Equal(t, http.StatusOK, code, out)
	code, _ = withCookie(readerCk, http.MethodPost, "/v1/agents/nosuch/drain", map[string]string{"Sec-Fetch-Site": "same-origin"})
	require.Equal(t, http.StatusForbidden, code, "the reader's cookie holds the reader's scopes")

	// Sign-out clears the cookie; a revoked key's cookie stops at once.
	req, _ := http.NewRequest(http.MethodDelete, base+"/v1/session", nil)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.Len(t, resp.Cookies(), 1)
	require.Negative(t, resp.Cookies()[0].MaxAge)
}

// Under --insecure River UI opens without a key: there is no sign-in to
// send a browser to (it used to redirect to the dashboard, which never
// sent it back).
func TestRiverUIOpensUnderInsecure(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	req, err := http.NewRequest(http.MethodGet, svc.m.URL()+"/riverui/", nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/html,application/xhtml+xml")
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "location %q", resp.Header.Get("Location"))
	require.Contains(t, strings.ToLower(string(body)), "<html")
}
