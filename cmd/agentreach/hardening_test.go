package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/webhook"
)

// TestUnstorableTextIsRefused: NUL, lone surrogates and bytes that are not
// UTF-8, in bodies, path segments and query values, get 400
// invalid_argument naming the field, and nothing is written.
func TestUnstorableTextIsRefused(t *testing.T) {
	t.Parallel()
	svc := securedService(t, nil)
	base := svc.m.URL()
	admin := "Bearer " + testAdminKey
	newSecuredAgent(t, base, testAdminKey, "txt-agent", "default", "txt.cap", http.StatusAccepted)
	code, out := call(t, http.MethodPost, base+"/v1/jobs", admin, `{"capability":"txt.cap","payload":{}}`)
	require.Equal(t, http.StatusAccepted, code, out)
	var job struct {
		JobID string `json:"job_id"`
	}
	require.NoError(t, jsonUnmarshal(out, &job))
	waitJobAuth(t, base, admin, job.JobID, "DELIVERED")
	events := func() int {
		var n int
		require.NoError(t, svc.m.app.pool.QueryRow(context.Background(), `SELECT count(*) FROM events`).Scan(&n))
		return n
	}

	cases := []struct {
		method, path, body, field string
	}{
		{"POST", "/v1/jobs", `{"capability":"txt.cap","payload":{"k":"a\u0000b"}}`, "payload.k"},
		{"POST", "/v1/jobs", `{"capability":"txt.cap","payload":{"k":"\ud800"}}`, "payload.k"},
		{"POST", "/v1/jobs", `{"capability":"txt.cap","payload":{"k":"\udc00x"}}`, "payload.k"},
		{"POST", "/v1/jobs", `{"capability":"txt.cap","payload":{"a\u0000":1}}`, `payload.a\u0000`},
		{"POST", "/v1/jobs", `{"capability":"txt.cap","payload":[1,{"x":["\u0000"]}]}`, "payload[1].x[0]"},
		{"POST", "/v1/jobs", "{\"capability\":\"txt.cap\",\"payload\":{\"k\":\"\xff\xfe\"}}", "payload.k"},
		{"POST", "/v1/jobs", `{"capability":"txt.cap","payload":{},"hint":"\u0000"}`, "hint"},
		{"POST", "/v1/jobs", `{"capability":"txt.cap","payload":{},"constraints":{"version":"\ud800"}}`, "constraints.version"},
		{"POST", "/v1/agents", `{"agent_id":"txt-2","capabilities":["txt.cap"],"endpoint":"http://127.0.0.1:9/","aliases":["\u0000"]}`, "aliases[0]"},
		{"POST", "/v1/agents", `{"agent_id":"txt-2","capabilities":["txt.cap"],"endpoint":"http://127.0.0.1:9/","metadata":{"m":"\ud83d"}}`, "metadata.m"},
		{"POST", "/v1/keys", `{"namespace":"default","scopes":["jobs:read"],"name":"\u0000"}`, "name"},
		{"POST", "/v1/jobs/" + job.JobID + "/cancel", `{"reason":"\u0000"}`, "reason"},
		{"GET", "/v1/agents/%00", "", "agent_id"},
		{"DELETE", "/v1/keys/%ff%fe", "", "key_id"},
		{"GET", "/v1/jobs?capability=%00", "", "capability"},
		{"GET", "/v1/jobs?namespace=%c3%28", "", "namespace"},
		{"POST", "/v1/agents/%00/offline", "", "agent_id"},
		{"GET", "/v1/jobs/%00/events", "", "job_id"},
	}
	for _, tc := range cases {
		before := events()
		code, out := call(t, tc.method, base+tc.path, admin, tc.body)
		require.Equal(t, http.StatusBadRequest, code, "%s %s %s: %s", tc.method, tc.path, tc.body, out)
		var e struct {
			Error struct{ Code, Field string } `json:"error"`
		}
		require.NoError(t, jsonUnmarshal(out, &e), out)
		require.Equal(t, "invalid_argument", e.Error.Code, out)
		require.Equal(t, tc.field, e.Error.Field, "%s %s %s", tc.method, tc.path, tc.body)
		require.Equal(t, before, events(), "%s %s wrote an event", tc.method, tc.path)
	}
	// A surrogate pair is a real character, and is stored.
	code, out = call(t, http.MethodPost, base+"/v1/jobs", admin, `{"capability":"txt.cap","payload":{"k":"\ud83d\ude00"}}`)
	require.Equal(t, http.StatusAccepted, code, out)

	// The A2A face refuses the same text, as JSON-RPC invalid params.
	code, out = call(t, http.MethodPost, base+"/a2a/default", admin, `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m\u0000","parts":[{"kind":"text","text":"x"}]},"metadata":{"skill":"txt.cap"}}}`)
	require.Equal(t, http.StatusOK, code, out)
	require.Contains(t, out, `"code":-32602`)
	require.Contains(t, out, `params.message.messageId`)
	// Trailing data and unknown members are refused like REST refuses them.
	code, out = call(t, http.MethodPost, base+"/a2a/default", admin, `{"jsonrpc":"2.0","id":8,"method":"tasks/get","params":{"id":"x"}} {"more":1}`)
	require.Equal(t, http.StatusOK, code, out)
	require.Contains(t, out, `"code":-32700`)
	_, out = call(t, http.MethodPost, base+"/a2a/default", admin, `{"jsonrpc":"2.0","id":9,"method":"tasks/get","params":{"id":"x"},"extra":true}`)
	require.Contains(t, out, `"code":-32600`)
	require.Contains(t, out, `"id":9`)
	_, out = call(t, http.MethodPost, base+"/a2a/default", admin, `{"jsonrpc":"2.0","id":10,"method":"tasks/get","params":{"id":"x","sneaky":1}}`)
	require.Contains(t, out, `"code":-32602`)
}

// TestGroupCommitIsolatesTenants: a submit that fails inside a shared
// transaction (here one the edge would have refused, given to the service
// directly) fails alone; every other tenant's submit of the batch commits.
func TestGroupCommitIsolatesTenants(t *testing.T) {
	t.Parallel()
	svc := securedService(t, nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 200)
	var bad error
	wg.Add(len(errs) + 1)
	go func() {
		defer wg.Done()
		_, bad = svc.m.app.jobs.Submit(ctx, domain.Submitted{Namespace: "a", Capability: "x:y",
			Payload: json.RawMessage(`{"k":"a\u0000b"}`)}, domain.Metadata{Actor: "test"})
	}()
	for i := range errs {
		go func() {
			defer wg.Done()
			_, errs[i] = svc.m.app.jobs.Submit(ctx, domain.Submitted{Namespace: "b", Capability: "x:y",
				Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}, domain.Metadata{Actor: "test"})
		}()
	}
	wg.Wait()
	require.Error(t, bad, "the offender fails")
	for i, err := range errs {
		require.NoError(t, err, "submit %d of namespace b", i)
	}
	var n int
	require.NoError(t, svc.m.app.pool.QueryRow(ctx, `SELECT count(DISTINCT stream_id) FROM events WHERE type = 'SUBMITTED'`).Scan(&n))
	require.Equal(t, len(errs), n, "every good submit committed, the bad one did not")
}

// TestRiverUIOnlyForEveryNamespace: an admin key of one namespace cannot
// see River UI nor pause a queue for everyone.
func TestRiverUIOnlyForEveryNamespace(t *testing.T) {
	t.Parallel()
	svc := securedService(t, nil)
	base := svc.m.URL()
	adminA, _ := createKey(t, base, testAdminKey, `{"namespace":"a","scopes":["admin"]}`)
	for _, path := range []string{"/riverui/", "/riverui/api/jobs?state=available", "/riverui/api/queues"} {
		code, out := call(t, http.MethodGet, base+path, "Bearer "+adminA, "")
		require.Equal(t, http.StatusForbidden, code, "%s: %s", path, out)
	}
	code, out := call(t, http.MethodPut, base+"/riverui/api/queues/a2a_poll/pause", "Bearer "+adminA, "")
	require.Equal(t, http.StatusForbidden, code, out)
	var paused int
	require.NoError(t, svc.m.app.pool.QueryRow(context.Background(), `SELECT count(*) FROM river_queue WHERE paused_at IS NOT NULL`).Scan(&paused))
	require.Zero(t, paused)
	code, out = call(t, http.MethodGet, base+"/metrics", "Bearer "+adminA, "")
	require.Equal(t, http.StatusForbidden, code, out)
	code, out = call(t, http.MethodGet, base+"/metrics", "Bearer "+testAdminKey, "")
	require.Equal(t, http.StatusOK, code, out)
	code, _ = call(t, http.MethodGet, base+"/metrics", "", "")
	require.Equal(t, http.StatusUnauthorized, code, "/metrics names every namespace: not public")
}

// TestA2AScopes: over A2A, a key may do exactly what its REST twin may: a
// jobs:read key cannot touch push configs of another caller's job, a
// submit-only key cannot read tasks.
func TestA2AScopes(t *testing.T) {
	t.Parallel()
	svc := securedService(t, nil)
	base := svc.m.URL()
	reader, _ := createKey(t, base, testAdminKey, `{"namespace":"default","scopes":["jobs:read"]}`)
	submitter, _ := createKey(t, base, testAdminKey, `{"namespace":"default","scopes":["jobs:submit:sc.*"]}`)
	receiver := newHTTPTestServer(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	// An agent offers the skill (a message naming one nobody offers is
	// refused) and holds its job: the task runs.
	newSecuredAgent(t, base, testAdminKey, "sc-held", "default", "sc.none", http.StatusAccepted)
	rpc := func(key, method, params string) string {
		code, out := call(t, http.MethodPost, base+"/a2a/default", "Bearer "+key,
			fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":%s}`, method, params))
		require.Equal(t, http.StatusOK, code, out)
		return out
	}
	out := rpc(submitter, "message/send", fmt.Sprintf(`{"message":{"kind":"message","role":"user","messageId":"m1","parts":[{"kind":"data","data":{}}]},
		"metadata":{"skill":"sc.none","max_attempts":1},"configuration":{"blocking":false,"pushNotificationConfig":{"id":"cfg","url":%q}}}`, receiver.URL))
	var sent struct {
		Result struct {
			ID string `json:"id"`
		} `json:"result"`
	}
	require.NoError(t, jsonUnmarshal(out, &sent), out)
	task := sent.Result.ID
	require.NotEmpty(t, task, out)

	out = rpc(reader, "message/send", `{"message":{"kind":"message","role":"user","messageId":"m2","parts":[{"kind":"data","data":{}}]},"metadata":{"skill":"sc.none"}}`)
	require.Contains(t, out, `"code":-32600`, "sending needs jobs:submit:<skill>")
	for _, m := range []struct{ method, params string }{
		{"tasks/pushNotificationConfig/set", fmt.Sprintf(`{"taskId":%q,"pushNotificationConfig":{"id":"evil","url":"http://127.0.0.1:9/steal"}}`, task)},
		{"tasks/pushNotificationConfig/list", fmt.Sprintf(`{"id":%q}`, task)},
		{"tasks/pushNotificationConfig/get", fmt.Sprintf(`{"id":%q,"pushNotificationConfigId":"cfg"}`, task)},
		{"tasks/pushNotificationConfig/delete", fmt.Sprintf(`{"id":%q,"pushNotificationConfigId":"cfg"}`, task)},
		{"tasks/cancel", fmt.Sprintf(`{"id":%q}`, task)},
	} {
		out := rpc(reader, m.method, m.params)
		require.Contains(t, out, `"code":-32600`, "%s with a jobs:read key: %s", m.method, out)
		require.Contains(t, out, "permission denied")
	}
	var configs int
	require.NoError(t, svc.m.app.pool.QueryRow(context.Background(), `SELECT count(*) FROM a2a_push_configs`).Scan(&configs))
	require.Equal(t, 1, configs, "the reader's set and delete changed nothing")

	out = rpc(submitter, "tasks/get", fmt.Sprintf(`{"id":%q}`, task))
	require.Contains(t, out, `"code":-32600`, "reading needs jobs:read, as GET /v1/jobs/{id}")
	out = rpc(reader, "tasks/get", fmt.Sprintf(`{"id":%q}`, task))
	require.Contains(t, out, `"result"`)
	out = rpc(submitter, "tasks/pushNotificationConfig/list", fmt.Sprintf(`{"id":%q}`, task))
	require.Contains(t, out, `"result"`, "the submitter of the job's capability may")
}

// TestFailedAuthenticationIsLimitedPerAddress: unknown keys from one
// address are answered 429 once its budget is spent, without a lookup;
// a valid key from the same address still gets its own rate.
func TestFailedAuthenticationIsLimitedPerAddress(t *testing.T) {
	t.Parallel()
	svc := securedService(t, func(c *Config) { c.AuthFailRate, c.AuthFailBurst = 0.01, 5 })
	base := svc.m.URL()
	used, _ := createKey(t, base, testAdminKey, `{"namespace":"default","scopes":["jobs:read"]}`)
	unused, _ := createKey(t, base, testAdminKey, `{"namespace":"default","scopes":["jobs:read"]}`)
	code, out := call(t, http.MethodGet, base+"/v1/jobs", "Bearer "+used, "")
	require.Equal(t, http.StatusOK, code, out)
	for i := range 5 {
		code, out := call(t, http.MethodGet, base+"/v1/jobs", fmt.Sprintf("Bearer ark_nope_%d", i), "")
		require.Equal(t, http.StatusUnauthorized, code, out)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/jobs", nil)
	req.Header.Set("Authorization", "Bearer ark_nope_again")
	req.Header.Set("X-Forwarded-For", "198.51.100.7") // not believed: the peer's address counts
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	// Keys this process already knows to be good still work from there (an
	// office behind one address is not locked out by one bad client); any
	// other key waits until the budget refills, as an unknown one does.
	code, out = call(t, http.MethodGet, base+"/v1/jobs", "Bearer "+used, "")
	require.Equal(t, http.StatusOK, code, out)
	code, out = call(t, http.MethodGet, base+"/v1/jobs", "Bearer "+unused, "")
	require.Equal(t, http.StatusTooManyRequests, code, out)
}

// TestAgentRoutesAreLimitedPerAgent: heartbeats beyond an agent's rate get
// 429, and another agent is not affected.
func TestAgentRoutesAreLimitedPerAgent(t *testing.T) {
	t.Parallel()
	svc := securedService(t, func(c *Config) { c.RateLimit, c.RateBurst = 0.01, 3 })
	base := svc.m.URL()
	register := func(id string) string {
		code, out := call(t, http.MethodPost, base+"/v1/agents", "Bearer "+testAdminKey,
			fmt.Sprintf(`{"agent_id":%q,"capabilities":["rl.cap"],"endpoint":"http://127.0.0.1:9/"}`, id))
		require.Equal(t, http.StatusCreated, code, out)
		var reg agentJSON
		require.NoError(t, jsonUnmarshal(out, &reg))
		return reg.Token
	}
	one, two := register("rl-1"), register("rl-2")
	codes := []int{}
	for range 4 {
		code, _ := call(t, http.MethodPut, base+"/v1/agents/rl-1/heartbeat", "Bearer "+one, "")
		codes = append(codes, code)
	}
	require.Equal(t, []int{200, 200, 200, 429}, codes)
	code, out := call(t, http.MethodPut, base+"/v1/agents/rl-2/heartbeat", "Bearer "+two, "")
	require.Equal(t, http.StatusOK, code, out)
}

// TestOversizedHeadersGetTheErrorBody: 431 with the documented body.
func TestOversizedHeadersGetTheErrorBody(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	req, _ := http.NewRequest(http.MethodGet, svc.m.URL()+"/v1/jobs", nil)
	req.Header.Set("X-Big", strings.Repeat("x", 100<<10))
	resp, code := errorCodeOf(t, req)
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
	require.Equal(t, "headers_too_large", code)
}

// errorCodeOf makes a request and answers its response and error code.
func errorCodeOf(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	require.NoError(t, jsonDecode(resp.Body, &e))
	return resp, e.Error.Code
}

// TestDatabaseOutageIs503: with the database unreachable, a request that
// needs it answers 503 unavailable with Retry-After, not 500.
func TestDatabaseOutageIs503(t *testing.T) {
	t.Parallel()
	r := start(t, map[string]string{"DATABASE_URL": "postgres://postgres@" + deadAddr(t) + "/x?sslmode=disable&connect_timeout=1"},
		"serve", "--admin-key", testAdminKey, "--addr", "127.0.0.1:0", "--log-level", "error")
	req, _ := http.NewRequest(http.MethodGet, r.m.URL()+"/v1/jobs", nil)
	req.Header.Set("Authorization", "Bearer "+testAdminKey)
	resp, code := errorCodeOf(t, req)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "unavailable", code)
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
}

// TestAgentIDsPerNamespace: each namespace has its own agent ids. An id
// taken in another namespace registers like a free one, and the two agents
// live apart: tokens, reads, deregistration and routing.
func TestAgentIDsPerNamespace(t *testing.T) {
	t.Parallel()
	svc := securedService(t, nil)
	base := svc.m.URL()
	adminA, _ := createKey(t, base, testAdminKey, `{"namespace":"a","scopes":["admin"]}`)
	adminB, _ := createKey(t, base, testAdminKey, `{"namespace":"b","scopes":["admin"]}`)
	agentA := newSecuredAgent(t, base, adminA, "twin", "a", "twin.cap", http.StatusOK)
	code, out := call(t, http.MethodPost, base+"/v1/agents", "Bearer "+adminB,
		`{"agent_id":"twin","capabilities":["twin.other"],"endpoint":"http://127.0.0.1:9/"}`)
	require.Equal(t, http.StatusCreated, code, "an id taken in another namespace answers as a free one: %s", out)
	var twinB agentJSON
	require.NoError(t, jsonUnmarshal(out, &twinB))
	require.NotEqual(t, agentA.token, twinB.Token)

	get := func(key, path string) agentJSON {
		code, out := call(t, http.MethodGet, base+path, "Bearer "+key, "")
		require.Equal(t, http.StatusOK, code, out)
		var a agentJSON
		require.NoError(t, jsonUnmarshal(out, &a))
		return a
	}
	require.Equal(t, []string{"twin.cap"}, get(adminA, "/v1/agents/twin").Capabilities)
	require.Equal(t, []string{"twin.other"}, get(adminB, "/v1/agents/twin").Capabilities)
	require.Equal(t, []string{"twin.other"}, get(testAdminKey, "/v1/agents/twin?namespace=b").Capabilities)
	code, out = call(t, http.MethodGet, base+"/v1/agents/twin", "Bearer "+testAdminKey, "")
	require.Equal(t, http.StatusConflict, code, "a key of every namespace must say which twin: %s", out)

	// Each token speaks for its own agent only.
	code, out = call(t, http.MethodPut, base+"/v1/agents/twin/heartbeat", "Bearer "+twinB.Token, "")
	require.Equal(t, http.StatusOK, code, out)
	require.Contains(t, out, `"state":"PROBING"`, "b's twin, whose endpoint never answers a probe")
	code, out = call(t, http.MethodPut, base+"/v1/agents/twin/heartbeat", "Bearer "+agentA.token, "")
	require.Equal(t, http.StatusOK, code, out)
	require.Contains(t, out, `"state":"HEALTHY"`, "a's twin")

	// Deregistering b's twin leaves a's routed.
	code, out = call(t, http.MethodDelete, base+"/v1/agents/twin", "Bearer "+adminB, "")
	require.Equal(t, http.StatusNoContent, code, out)
	code, out = call(t, http.MethodPost, base+"/v1/jobs", "Bearer "+adminA, `{"capability":"twin.cap","payload":{}}`)
	require.Equal(t, http.StatusAccepted, code, out)
	var job struct {
		JobID string `json:"job_id"`
	}
	require.NoError(t, jsonUnmarshal(out, &job))
	waitJobAuth(t, base, "Bearer "+adminA, job.JobID, "SUCCESS")
	require.Equal(t, []string{"twin.cap"}, get(adminA, "/v1/agents/twin").Capabilities)
	code, _ = call(t, http.MethodGet, base+"/v1/agents/twin", "Bearer "+adminB, "")
	require.Equal(t, http.StatusNotFound, code)
}

// TestCallbackSecretNeedsAdmin: the secret that signs callbacks can forge
// them, so a key that may only read jobs cannot read it.
func TestCallbackSecretNeedsAdmin(t *testing.T) {
	t.Parallel()
	svc := securedService(t, nil)
	base := svc.m.URL()
	reader, _ := createKey(t, base, testAdminKey, `{"namespace":"default","scopes":["jobs:read","jobs:submit:*","agents:read"]}`)
	code, out := call(t, http.MethodGet, base+"/v1/callbacks/secret", "Bearer "+reader, "")
	require.Equal(t, http.StatusForbidden, code, out)
	require.NotContains(t, out, "whsec_")
	adminD, _ := createKey(t, base, testAdminKey, `{"namespace":"default","scopes":["admin"]}`)
	code, out = call(t, http.MethodGet, base+"/v1/callbacks/secret", "Bearer "+adminD, "")
	require.Equal(t, http.StatusOK, code, out)
	require.Contains(t, out, "whsec_")
}

// TestAgentAnswersThatCannotBeStored: an agent's answer holding a NUL or a
// number beyond PostgreSQL's numeric is a bad response (the attempt fails
// and the job moves on), never an outcome that cannot be recorded.
func TestAgentAnswersThatCannotBeStored(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	newTestAgent(t, base, "nul-agent", "t.nul", 50, func(w http.ResponseWriter, env webhook.Envelope) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"SUCCESS","result":{"k":"a\u0000b","n":1e200000}}`))
	})
	id := submitOK(t, base, `{"capability":"t.nul","payload":{},"max_attempts":1}`)
	j := waitTerminal(t, base, id, 20*time.Second)
	require.Equal(t, "DEAD_LETTER", j.Status)
	var reasons []string
	for _, e := range jobEvents(t, base, id) {
		if e.Type == "ATTEMPT_FAILED" {
			var d struct{ Reason string }
			require.NoError(t, json.Unmarshal(e.Data, &d))
			reasons = append(reasons, d.Reason)
		}
	}
	require.Equal(t, []string{"bad_response"}, reasons)
}

// TestResultRouteSaysNothingWithoutAToken: a result without a token is 401
// whether or not the job exists, and another namespace's agent is told the
// job is not found.
func TestResultRouteSaysNothingWithoutAToken(t *testing.T) {
	t.Parallel()
	svc := securedService(t, nil)
	base := svc.m.URL()
	adminA, _ := createKey(t, base, testAdminKey, `{"namespace":"a","scopes":["admin"]}`)
	adminB, _ := createKey(t, base, testAdminKey, `{"namespace":"b","scopes":["admin"]}`)
	holder := newSecuredAgent(t, base, adminA, "res-a", "a", "res.cap", http.StatusAccepted)
	other := newSecuredAgent(t, base, adminB, "res-b", "b", "res.cap", http.StatusAccepted)
	code, out := call(t, http.MethodPost, base+"/v1/jobs", "Bearer "+adminA, `{"capability":"res.cap","payload":{}}`)
	require.Equal(t, http.StatusAccepted, code, out)
	var job struct {
		JobID string `json:"job_id"`
	}
	require.NoError(t, jsonUnmarshal(out, &job))
	env := <-holder.envelopes
	body := fmt.Sprintf(`{"status":"SUCCESS","attempt":%d}`, env.Attempt)
	for _, id := range []string{job.JobID, "0190f1c2-0000-7000-8000-000000000000"} {
		code, out = call(t, http.MethodPost, base+"/v1/jobs/"+id+"/result", "", body)
		require.Equal(t, http.StatusUnauthorized, code, out)
	}
	code, out = call(t, http.MethodPost, base+"/v1/jobs/"+job.JobID+"/result", "Bearer "+other.token, body)
	require.Equal(t, http.StatusNotFound, code, "another namespace's agent: %s", out)
	require.NotContains(t, out, "res-a")
	code, out = call(t, http.MethodPost, base+"/v1/jobs/"+job.JobID+"/result", "Bearer "+holder.token, body)
	require.Equal(t, http.StatusOK, code, out)

	req, _ := http.NewRequest(http.MethodPost, base+"/v1/jobs", strings.NewReader(`{"capability":"res.cap","payload":{}}`))
	req.Header.Set("Authorization", "Bearer "+adminA)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "a\xff\xfeb")
	resp, code2 := errorCodeOf(t, req)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, "invalid_argument", code2)
}

// A payload over the 1 MiB limit (in a body under the 2 MiB one) is
// 413 payload_too_large naming the field, as docs/api.md says, and
// nothing is written.
func TestPayloadOverItsLimitIs413(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	big := strings.Repeat("x", 1<<20+10)
	code, out := call(t, http.MethodPost, base+"/v1/jobs", "", `{"capability":"t.big","payload":"`+big+`"}`)
	require.Equal(t, http.StatusRequestEntityTooLarge, code, out)
	var e struct {
		Error struct {
			Code  string `json:"code"`
			Field string `json:"field"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &e))
	require.Equal(t, "payload_too_large", e.Error.Code)
	require.Equal(t, "payload", e.Error.Field)
	code, out = call(t, http.MethodGet, base+"/v1/jobs?capability=t.big", "", "")
	require.Equal(t, http.StatusOK, code, out)
	require.NotContains(t, out, "job_id", "nothing written")
}
