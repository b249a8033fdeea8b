package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/internal/cli"
	"github.com/agentreach/agentreach/webhook"
)

// testAgent is an agent written against the wire protocol, with a handler
// the test chooses. It answers probes (GET) and heartbeats on its own.
type testAgent struct {
	id, token string
	srv       *httptest.Server
	envelopes chan webhook.Envelope
	handle    func(w http.ResponseWriter, env webhook.Envelope)
	hits      atomic.Int32
}

func newTestAgent(t *testing.T, base, id, capability string, weight int, handle func(w http.ResponseWriter, env webhook.Envelope)) *testAgent {
	t.Helper()
	return newTestAgentFull(t, base, id, capability, weight, handle, nil)
}

// newTestAgentWithHeaders is a succeeding agent that shows the test the
// headers of each delivery.
func newTestAgentWithHeaders(t *testing.T, base, id, capability string, headers func(http.Header)) *testAgent {
	t.Helper()
	return newTestAgentFull(t, base, id, capability, 50, answer("SUCCESS", ""), headers)
}

func newTestAgentFull(t *testing.T, base, id, capability string, weight int, handle func(w http.ResponseWriter, env webhook.Envelope), headers func(http.Header)) *testAgent {
	t.Helper()
	a := &testAgent{id: id, envelopes: make(chan webhook.Envelope, 1000), handle: handle}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.WriteHeader(http.StatusOK)
			return
		}
		if headers != nil {
			headers(r.Header)
		}
		var env webhook.Envelope
		if err := json.NewDecoder(r.Body).Decode(&env); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		a.hits.Add(1)
		a.envelopes <- env
		a.handle(w, env)
	}))
	t.Cleanup(a.srv.Close)
	var reg agentJSON
	postJSON(t, base+"/v1/agents", fmt.Sprintf(`{"agent_id":%q,"capabilities":[%q],"endpoint":%q,"weight":%d,"ttl_seconds":20}`,
		id, capability, a.srv.URL+"/deliver", weight), http.StatusCreated, &reg)
	a.token = reg.Token
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { // heartbeat every 3 s, as the SDK would
		tk := time.NewTicker(3 * time.Second)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				req, _ := http.NewRequestWithContext(ctx, http.MethodPut, base+"/v1/agents/"+id+"/heartbeat", nil)
				req.Header.Set("Authorization", "Bearer "+a.token)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}
		}
	}()
	waitState(t, base, id, "HEALTHY", 20*time.Second)
	waitRoute(t, base, capability, func(rj routeJSON) bool { // the router's snapshot has it too
		for _, c := range rj.Candidates {
			if c.AgentID == id {
				return true
			}
		}
		return false
	})
	return a
}

func answer(status, bizCode string) func(http.ResponseWriter, webhook.Envelope) {
	return func(w http.ResponseWriter, env webhook.Envelope) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"status": status, "biz_code": bizCode,
			"result": map[string]any{"job_id": env.JobID, "attempt": env.Attempt}})
	}
}

func statusOnly(code int) func(http.ResponseWriter, webhook.Envelope) {
	return func(w http.ResponseWriter, _ webhook.Envelope) { w.WriteHeader(code) }
}

func hang(w http.ResponseWriter, env webhook.Envelope) {
	time.Sleep(time.Until(env.Deadline) + 500*time.Millisecond) // the agent's own hang, past the deadline
}

type jobJSON struct {
	JobID    string          `json:"job_id"`
	Status   string          `json:"status"`
	AgentID  string          `json:"agent_id"`
	Attempts int             `json:"attempts"`
	Result   json.RawMessage `json:"result"`
	BizCode  string          `json:"biz_code"`
	Error    string          `json:"error"`
	TraceID  string          `json:"trace_id"`
	ReplayOf string          `json:"replay_of"`
	Callback *struct {
		Acknowledged bool `json:"acknowledged"`
		Attempts     int  `json:"attempts"`
	} `json:"callback"`
}

type eventJSON struct {
	Version int             `json:"version"`
	Type    string          `json:"type"`
	Data    json.RawMessage `json:"data"`
}

func submit(t *testing.T, base, body string, headers ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/v1/jobs", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

func submitOK(t *testing.T, base, body string, headers ...string) string {
	t.Helper()
	code, out := submit(t, base, body, headers...)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	require.Equal(t, "SUBMITTED", out["status"])
	require.Len(t, out["trace_id"], 32)
	return out["job_id"].(string)
}

func getJob(t *testing.T, base, id string) jobJSON {
	t.Helper()
	var j jobJSON
	getJSON(t, base+"/v1/jobs/"+id, http.StatusOK, &j)
	return j
}

func jobEvents(t *testing.T, base, id string) []eventJSON {
	t.Helper()
	var body struct {
		Events []eventJSON `json:"events"`
	}
	getJSON(t, base+"/v1/jobs/"+id+"/events", http.StatusOK, &body)
	for i, e := range body.Events {
		require.Equal(t, i+1, e.Version, "gap-free versions")
	}
	return body.Events
}

func types(evs []eventJSON) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

var terminal = map[string]bool{"SUCCESS": true, "FAILED": true, "DEAD_LETTER": true, "CANCELLED": true, "REJECTED": true}

func waitJob(t *testing.T, base, id string, done func(jobJSON) bool, within time.Duration) jobJSON {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		j := getJob(t, base, id)
		if done(j) {
			return j
		}
		if !time.Now().Before(deadline) {
			evs := jobEvents(t, base, id)
			last := json.RawMessage("none")
			if len(evs) > 0 {
				last = evs[len(evs)-1].Data
			}
			require.Fail(t, "job not done in time", "job %s still %s after %s: %v; its last event: %s", id, j.Status, within, types(evs), last)
		}
		time.Sleep(20 * time.Millisecond) // poll interval while waiting on the condition
	}
}

func waitTerminal(t *testing.T, base, id string, within time.Duration) jobJSON {
	t.Helper()
	return waitJob(t, base, id, func(j jobJSON) bool { return terminal[j.Status] }, within)
}

func routedTo(t *testing.T, evs []eventJSON) []string {
	t.Helper()
	var out []string
	for _, e := range evs {
		if e.Type == "ROUTED" {
			var d struct {
				AgentID string `json:"agent_id"`
			}
			require.NoError(t, json.Unmarshal(e.Data, &d))
			out = append(out, d.AgentID)
		}
	}
	return out
}

func TestDeliveryOutcomes(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	newTestAgent(t, base, "inline", "t.inline", 50, answer("SUCCESS", ""))
	newTestAgent(t, base, "failing", "t.fail", 50, answer("FAILED", "bad_input"))
	var asyncAgent *testAgent
	asyncAgent = newTestAgent(t, base, "async", "t.async", 50, func(w http.ResponseWriter, env webhook.Envelope) {
		w.WriteHeader(http.StatusAccepted)
		go func() {
			body := fmt.Sprintf(`{"status":"SUCCESS","result":{"later":true},"attempt":%d}`, env.Attempt)
			req, _ := http.NewRequest(http.MethodPost, env.ResultURL, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+asyncAgent.token)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	})

	t.Run("inline success", func(t *testing.T) {
		id := submitOK(t, base, `{"capability":"t.inline","payload":{"n":1}}`)
		j := waitTerminal(t, base, id, 10*time.Second)
		require.Equal(t, "SUCCESS", j.Status)
		require.Equal(t, "inline", j.AgentID)
		require.JSONEq(t, fmt.Sprintf(`{"job_id":%q,"attempt":1}`, id), string(j.Result))
		require.Equal(t, []string{"SUBMITTED", "ROUTED", "DELIVERED", "SUCCESS"}, types(jobEvents(t, base, id)))
	})
	t.Run("async 202 then result", func(t *testing.T) {
		id := submitOK(t, base, `{"capability":"t.async","payload":{"n":2}}`)
		j := waitTerminal(t, base, id, 10*time.Second)
		require.Equal(t, "SUCCESS", j.Status)
		require.JSONEq(t, `{"later":true}`, string(j.Result))
		require.Equal(t, []string{"SUBMITTED", "ROUTED", "DELIVERED", "SUCCESS"}, types(jobEvents(t, base, id)))
	})
	t.Run("business failure", func(t *testing.T) {
		id := submitOK(t, base, `{"capability":"t.fail","payload":{"n":3}}`)
		j := waitTerminal(t, base, id, 10*time.Second)
		require.Equal(t, "FAILED", j.Status)
		require.Equal(t, "bad_input", j.BizCode)
		require.Equal(t, []string{"SUBMITTED", "ROUTED", "DELIVERED", "FAILED"}, types(jobEvents(t, base, id)))
	})
	t.Run("business failure retried on request", func(t *testing.T) {
		id := submitOK(t, base, `{"capability":"t.fail","payload":{},"retry_on_failed":true,"max_attempts":2,"backoff_base_ms":100}`)
		j := waitTerminal(t, base, id, 10*time.Second)
		require.Equal(t, "FAILED", j.Status)
		require.Equal(t, []string{"SUBMITTED", "ROUTED", "DELIVERED", "ATTEMPT_FAILED", "ROUTED", "DELIVERED", "FAILED"},
			types(jobEvents(t, base, id)))
	})
}

// TestDeliveryRecordsTheAnswer: each delivery attempt's events say what the
// agent answered, for the timeline: the HTTP status and round trip of an
// inline answer, and of a failed one also the first bytes of its body.
func TestDeliveryRecordsTheAnswer(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	newTestAgent(t, base, "says-503", "t.503", 50, func(w http.ResponseWriter, _ webhook.Envelope) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "upstream is gone "+strings.Repeat("x", 400))
	})
	newTestAgent(t, base, "says-nonsense", "t.nonsense", 50, func(w http.ResponseWriter, _ webhook.Envelope) {
		_, _ = io.WriteString(w, "<html>not a result</html>")
	})
	newTestAgent(t, base, "says-ok", "t.ok", 50, answer("SUCCESS", ""))
	data := func(id, typ string) map[string]any {
		for _, e := range jobEvents(t, base, id) {
			if e.Type == typ {
				var d map[string]any
				require.NoError(t, json.Unmarshal(e.Data, &d))
				return d
			}
		}
		t.Fatalf("no %s in job %s", typ, id)
		return nil
	}

	id := submitOK(t, base, `{"capability":"t.503","payload":{},"max_attempts":1}`)
	waitTerminal(t, base, id, 10*time.Second)
	failed := data(id, "ATTEMPT_FAILED")
	require.EqualValues(t, 503, failed["http_status"])
	require.Greater(t, failed["latency_ms"], 0.0)
	require.True(t, strings.HasPrefix(failed["error"].(string), "upstream is gone xxx"), failed["error"])
	require.LessOrEqual(t, len(failed["error"].(string)), 260, "only the first bytes")

	id = submitOK(t, base, `{"capability":"t.nonsense","payload":{},"max_attempts":1}`)
	waitTerminal(t, base, id, 10*time.Second)
	failed = data(id, "ATTEMPT_FAILED")
	require.Equal(t, "bad_response", failed["reason"])
	require.EqualValues(t, 200, failed["http_status"])
	require.Equal(t, "<html>not a result</html>", failed["body"])

	id = submitOK(t, base, `{"capability":"t.ok","payload":{}}`)
	waitTerminal(t, base, id, 10*time.Second)
	delivered := data(id, "DELIVERED")
	require.EqualValues(t, 200, delivered["http_status"])
	require.Greater(t, delivered["latency_ms"], 0.0)
}

// TestFlakyAgentIsRoutedAround: the attempt that failed at one agent is
// routed to another agent and succeeds there.
func TestFlakyAgentIsRoutedAround(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	flaky := newTestAgent(t, base, "flaky", "t.work", 100, statusOnly(http.StatusServiceUnavailable))
	good := newTestAgent(t, base, "good", "t.work", 1, answer("SUCCESS", ""))

	id := submitOK(t, base, `{"capability":"t.work","payload":{},"max_attempts":3,"backoff_base_ms":100}`)
	j := waitTerminal(t, base, id, 10*time.Second)
	require.Equal(t, "SUCCESS", j.Status)
	require.Equal(t, "good", j.AgentID)
	evs := jobEvents(t, base, id)
	require.Equal(t, []string{"SUBMITTED", "ROUTED", "ATTEMPT_FAILED", "ROUTED", "DELIVERED", "SUCCESS"}, types(evs))
	require.Equal(t, []string{"flaky", "good"}, routedTo(t, evs))
	require.Contains(t, string(evs[2].Data), `"reason":"http_503"`)
	require.EqualValues(t, 1, flaky.hits.Load())
	require.EqualValues(t, 1, good.hits.Load())
}

// TestDeadAgentDeadLetters: an agent that refuses every connection gets
// exactly max_attempts attempts, then the job is dead-lettered.
func TestDeadAgentDeadLetters(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	dead := newTestAgent(t, base, "dead", "t.dead", 50, nil)
	// Deliveries go to a port where nothing listens; probes still pass.
	l := httptest.NewServer(http.NotFoundHandler())
	deadURL := l.URL + "/deliver"
	l.Close()
	_, err := svc.m.app.pool.Exec(context.Background(), `UPDATE agents SET endpoint = $1 WHERE agent_id = 'dead'`, deadURL)
	require.NoError(t, err)
	require.NoError(t, svc.m.app.registry.Snapshot().Refresh(context.Background()))

	id := submitOK(t, base, `{"capability":"t.dead","payload":{},"max_attempts":3,"backoff_base_ms":100}`)
	j := waitTerminal(t, base, id, 15*time.Second)
	require.Equal(t, "DEAD_LETTER", j.Status)
	require.Equal(t, 3, j.Attempts)
	evs := jobEvents(t, base, id)
	require.Equal(t, []string{"SUBMITTED", "ROUTED", "ATTEMPT_FAILED", "ROUTED", "ATTEMPT_FAILED", "ROUTED", "ATTEMPT_FAILED", "DEAD_LETTER"}, types(evs))
	require.Equal(t, []string{"dead", "dead", "dead"}, routedTo(t, evs), "with no other agent the excluded one is tried again")
	require.Contains(t, string(evs[2].Data), `"reason":"connection_refused"`)
	require.Zero(t, dead.hits.Load())

	// No agent at all is a failed attempt too.
	id = submitOK(t, base, `{"capability":"t.nobody","payload":{},"max_attempts":2,"backoff_base_ms":100}`)
	j = waitTerminal(t, base, id, 15*time.Second)
	require.Equal(t, "DEAD_LETTER", j.Status)
	require.Equal(t, []string{"SUBMITTED", "ROUTED", "ATTEMPT_FAILED", "ROUTED", "ATTEMPT_FAILED", "DEAD_LETTER"}, types(jobEvents(t, base, id)))

	// A dead-lettered job can be replayed as a new job.
	var replay map[string]any
	postJSON(t, base+"/v1/jobs/"+id+"/replay", ``, http.StatusAccepted, &replay)
	newID := replay["job_id"].(string)
	require.NotEqual(t, id, newID)
	require.Equal(t, id, getJob(t, base, newID).ReplayOf)
	require.Equal(t, "DEAD_LETTER", getJob(t, base, id).Status, "the old job's status never changes")
	postJSON(t, base+"/v1/jobs/"+newID+"/replay", ``, http.StatusConflict, nil)
}

// TestHangingAgentTimesOut: an agent that takes the delivery and never
// answers gets TIMEOUT, then a retry, then the dead letter; an agent that
// answers 202 and never reports is timed out by the deadline sweep.
func TestHangingAgentTimesOut(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	newTestAgent(t, base, "hanger", "t.hang", 50, hang)
	newTestAgent(t, base, "silent", "t.silent", 50, statusOnly(http.StatusAccepted))

	id := submitOK(t, base, `{"capability":"t.hang","payload":{},"timeout_ms":300,"max_attempts":2,"backoff_base_ms":100}`)
	j := waitTerminal(t, base, id, 15*time.Second)
	require.Equal(t, "DEAD_LETTER", j.Status)
	require.Equal(t, []string{"SUBMITTED", "ROUTED", "DELIVERED", "TIMEOUT", "ROUTED", "DELIVERED", "TIMEOUT", "DEAD_LETTER"},
		types(jobEvents(t, base, id)))

	id = submitOK(t, base, `{"capability":"t.silent","payload":{},"timeout_ms":300,"max_attempts":2,"backoff_base_ms":100}`)
	j = waitTerminal(t, base, id, 15*time.Second)
	require.Equal(t, "DEAD_LETTER", j.Status)
	require.Equal(t, []string{"SUBMITTED", "ROUTED", "DELIVERED", "TIMEOUT", "ROUTED", "DELIVERED", "TIMEOUT", "DEAD_LETTER"},
		types(jobEvents(t, base, id)))
}

func postResult(t *testing.T, a *testAgent, env webhook.Envelope, status string) (int, string) {
	t.Helper()
	body := fmt.Sprintf(`{"status":%q,"result":{"from":"test"},"attempt":%d}`, status, env.Attempt)
	req, _ := http.NewRequest(http.MethodPost, env.ResultURL, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out struct {
		Recorded string `json:"recorded"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out.Recorded
}

// TestDuplicateAndLateResultsChangeNothing.
func TestDuplicateAndLateResultsChangeNothing(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	a := newTestAgent(t, base, "reporter", "t.report", 50, statusOnly(http.StatusAccepted))
	other := newTestAgent(t, base, "other", "t.other", 50, answer("SUCCESS", ""))

	id := submitOK(t, base, `{"capability":"t.report","payload":{}}`)
	env := <-a.envelopes
	waitJob(t, base, id, func(j jobJSON) bool { return j.Status == "DELIVERED" }, 10*time.Second)
	code, rec := postResult(t, a, env, "SUCCESS")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "outcome", rec)
	code, rec = postResult(t, a, env, "FAILED")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "duplicate", rec)
	j := getJob(t, base, id)
	require.Equal(t, "SUCCESS", j.Status)
	require.JSONEq(t, `{"from":"test"}`, string(j.Result))
	require.Equal(t, []string{"SUBMITTED", "ROUTED", "DELIVERED", "SUCCESS", "RESULT_DUPLICATE"}, types(jobEvents(t, base, id)))

	// Another agent's token may not report on this attempt.
	req, _ := http.NewRequest(http.MethodPost, env.ResultURL, strings.NewReader(`{"status":"SUCCESS"}`))
	req.Header.Set("Authorization", "Bearer "+other.token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	// A late result after the timeout is recorded and changes nothing.
	id = submitOK(t, base, `{"capability":"t.report","payload":{},"timeout_ms":200,"max_attempts":1}`)
	env = <-a.envelopes
	waitTerminal(t, base, id, 10*time.Second)
	code, rec = postResult(t, a, env, "SUCCESS")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "duplicate", rec)
	require.Equal(t, "DEAD_LETTER", getJob(t, base, id).Status)
	require.Equal(t, []string{"SUBMITTED", "ROUTED", "DELIVERED", "TIMEOUT", "DEAD_LETTER", "RESULT_DUPLICATE"}, types(jobEvents(t, base, id)))
}

func TestIdempotentSubmit(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	body := `{"capability":"t.none","payload":{"k":1},"max_attempts":1}`
	first := submitOK(t, base, body, "Idempotency-Key", "key-1")
	// The repeat returns the same job whatever its status by then: with no
	// agent for t.none it may already be DEAD_LETTER.
	code, out := submit(t, base, body, "Idempotency-Key", "key-1")
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	require.Equal(t, first, out["job_id"])

	code, out = submit(t, base, `{"capability":"t.none","payload":{"k":2},"max_attempts":1}`, "Idempotency-Key", "key-1")
	require.Equal(t, http.StatusConflict, code, "%v", out)
	require.Equal(t, "conflict", out["error"].(map[string]any)["code"])

	// Concurrent retries of one submit create one job.
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, out := submit(t, base, body, "Idempotency-Key", "key-2")
			ids[i], _ = out["job_id"].(string)
		}()
	}
	wg.Wait()
	for _, id := range ids {
		require.Equal(t, ids[0], id)
	}
	require.NotEmpty(t, ids[0])
}

func TestSubmitValidation(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	for _, tc := range []struct{ body, field string }{
		{`{"payload":{}}`, "capability"},
		{`{"capability":"a b","payload":{}}`, "capability"},
		{`{"capability":"x"}`, "payload"},
		{`{"capability":"x","payload":null}`, "payload"},
		{`{"capability":"x","payload":{},"timeout_ms":5}`, "timeout_ms"},
		{`{"capability":"x","payload":{},"max_attempts":99}`, "max_attempts"},
		{`{"capability":"x","payload":{},"priority":"urgent"}`, "priority"},
		{`{"capability":"x","payload":{},"callback_url":"ftp://x"}`, "callback_url"},
		{`{"capability":"x","payload":{},"parent_job_id":"nope"}`, "parent_job_id"},
		{`{"capability":"x","payload":{},"backoff_base_ms":1}`, "backoff_base_ms"},
		{`{"capability":"x","payload":{},"extra":1}`, "extra"},
	} {
		code, out := submit(t, base, tc.body)
		require.Equal(t, http.StatusBadRequest, code, tc.body)
		e := out["error"].(map[string]any)
		require.Equal(t, "invalid_argument", e["code"], tc.body)
		require.Equal(t, tc.field, e["field"], tc.body)
	}
	big := `{"capability":"x","payload":"` + strings.Repeat("a", 1<<20) + `"}`
	code, out := submit(t, base, big)
	require.Equal(t, http.StatusRequestEntityTooLarge, code)
	require.Equal(t, "payload_too_large", out["error"].(map[string]any)["code"])
	require.Equal(t, "payload", out["error"].(map[string]any)["field"])
}

// TestFanoutGuard: a root may have 15 descendants; the 16th is refused.
func TestFanoutGuard(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	root := submitOK(t, base, `{"capability":"t.none","payload":{},"max_attempts":1}`)
	child := submitOK(t, base, fmt.Sprintf(`{"capability":"t.none","payload":{},"max_attempts":1,"parent_job_id":%q}`, root))
	for range 14 { // grandchildren count against the root too
		submitOK(t, base, fmt.Sprintf(`{"capability":"t.none","payload":{},"max_attempts":1,"parent_job_id":%q}`, child))
	}
	code, out := submit(t, base, fmt.Sprintf(`{"capability":"t.none","payload":{},"parent_job_id":%q}`, child))
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Equal(t, "fanout_exceeded", out["error"].(map[string]any)["code"])
}

// verifyStandardWebhook checks a signature as the Standard Webhooks spec
// describes it, written here from the spec and not from our code: the
// secret is base64 after "whsec_"; the signed content is
// "{webhook-id}.{webhook-timestamp}.{body}"; webhook-signature holds
// space-separated "v1,{base64 HMAC-SHA256}" entries; the timestamp must be
// within five minutes.
func verifyStandardWebhook(secret string, h http.Header, body []byte) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return err
	}
	id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || id == "" {
		return fmt.Errorf("missing id or timestamp")
	}
	if d := time.Since(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("timestamp out of tolerance")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "." + string(body)))
	want := mac.Sum(nil)
	for _, sig := range strings.Fields(h.Get("webhook-signature")) {
		v, b64, ok := strings.Cut(sig, ",")
		got, err := base64.StdEncoding.DecodeString(b64)
		if ok && v == "v1" && err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return fmt.Errorf("no valid v1 signature")
}

type receivedCallback struct {
	header http.Header
	body   []byte
}

// TestCallbacks: the caller's callback arrives with a valid Standard
// Webhooks signature, is retried when the receiver first answers 500, and
// is acknowledged once per terminal job.
func TestCallbacks(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	newTestAgent(t, base, "cb-agent", "t.cb", 50, answer("SUCCESS", ""))
	var secret struct {
		Secret string `json:"secret"`
	}
	getJSON(t, base+"/v1/callbacks/secret", http.StatusOK, &secret)
	require.True(t, strings.HasPrefix(secret.Secret, "whsec_"))

	var mu sync.Mutex
	got := map[string][]receivedCallback{}
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var cb struct {
			JobID string `json:"job_id"`
		}
		_ = json.Unmarshal(body, &cb)
		mu.Lock()
		defer mu.Unlock()
		got[cb.JobID] = append(got[cb.JobID], receivedCallback{r.Header.Clone(), body})
		if r.URL.Path == "/cb-fail-first" && len(got[cb.JobID]) == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()

	ok := submitOK(t, base, fmt.Sprintf(`{"capability":"t.cb","payload":{},"callback_url":%q}`, receiver.URL+"/cb"))
	dead := submitOK(t, base, fmt.Sprintf(`{"capability":"t.nobody","payload":{},"max_attempts":1,"callback_url":%q}`, receiver.URL+"/cb"))
	flaky := submitOK(t, base, fmt.Sprintf(`{"capability":"t.cb","payload":{},"callback_url":%q}`, receiver.URL+"/cb-fail-first"))

	for _, id := range []string{ok, dead, flaky} {
		waitJob(t, base, id, func(j jobJSON) bool { return j.Callback != nil && j.Callback.Acknowledged }, 20*time.Second)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range []string{ok, dead} {
		require.Len(t, got[id], 1, "one callback per terminal job")
	}
	require.Len(t, got[flaky], 2, "the 500 is retried, then acknowledged")
	for id, cbs := range got {
		for _, cb := range cbs {
			require.NoError(t, verifyStandardWebhook(secret.Secret, cb.header, cb.body), "job %s", id)
			var body map[string]any
			require.NoError(t, json.Unmarshal(cb.body, &body))
			require.Equal(t, id, body["job_id"])
			for _, k := range []string{"status", "attempts", "finished_at"} {
				require.Contains(t, body, k)
			}
		}
	}
	var okBody map[string]any
	require.NoError(t, json.Unmarshal(got[ok][0].body, &okBody))
	require.Equal(t, "SUCCESS", okBody["status"])
	require.Equal(t, "cb-agent", okBody["agent_id"])
	require.Equal(t, []string{"SUBMITTED", "ROUTED", "DELIVERED", "SUCCESS", "CALLBACK_FAILED", "CALLBACK_DELIVERED"}, types(jobEvents(t, base, flaky)))
	require.Equal(t, []string{"SUBMITTED", "ROUTED", "ATTEMPT_FAILED", "DEAD_LETTER", "CALLBACK_DELIVERED"}, types(jobEvents(t, base, dead)))

	// A tampered body fails the verifier.
	cb := got[ok][0]
	require.Error(t, verifyStandardWebhook(secret.Secret, cb.header, bytes.Replace(cb.body, []byte("SUCCESS"), []byte("FAILED"), 1)))
}

// TestCancel ends a job that waits for a retry.
func TestCancel(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	id := submitOK(t, base, `{"capability":"t.nobody","payload":{},"max_attempts":3,"backoff_base_ms":60000}`)
	waitJob(t, base, id, func(j jobJSON) bool { return j.Attempts == 1 && j.Error != "" }, 10*time.Second)
	var j jobJSON
	postJSON(t, base+"/v1/jobs/"+id+"/cancel", `{"reason":"changed my mind"}`, http.StatusOK, &j)
	require.Equal(t, "CANCELLED", j.Status)
	require.Equal(t, "changed my mind", j.Error)
	postJSON(t, base+"/v1/jobs/"+id+"/cancel", ``, http.StatusConflict, nil)
	postJSON(t, base+"/v1/jobs/01a22909-80ec-7753-814f-87cf5cff8314/cancel", ``, http.StatusNotFound, nil)
	require.Equal(t, []string{"SUBMITTED", "ROUTED", "ATTEMPT_FAILED", "CANCELLED"}, types(jobEvents(t, base, id)))
}

func TestMockAgentHelpDocumentsBehaviours(t *testing.T) {
	t.Parallel()
	out := &syncBuffer{}
	m := NewMain()
	m.Stdout, m.Stderr = out, out
	_ = m.Run(context.Background(), []string{"mock-agent", "--help"})
	for _, b := range []string{"success", "async", "fail", "5xx", "refuse", "hang", "flaky", "--flaky-p", "--delay"} {
		require.Contains(t, out.String(), b)
	}
}

// TestJobsCLI submits, waits, lists, shows events, and replays with the CLI.
func TestJobsCLI(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	newTestAgent(t, base, "cli-agent", "t.cli", 50, answer("SUCCESS", ""))
	run := func(args ...string) (string, error) {
		out := &syncBuffer{}
		m := NewMain()
		m.Stdout, m.Stderr = out, out
		m.Getenv = func(k string) string { return map[string]string{"AGENTREACH_URL": base}[k] }
		err := m.Run(context.Background(), args)
		return out.String(), err
	}
	out, err := run("jobs", "submit", "--capability", "t.cli", "--payload", `{"x":1}`, "--wait")
	require.NoError(t, err, out)
	require.Contains(t, out, "SUCCESS")
	require.Contains(t, out, "cli-agent")
	out, err = run("jobs", "submit", "--capability", "t.nobody", "--max-attempts", "1", "--json")
	require.NoError(t, err, out)
	var sub struct {
		JobID string `json:"job_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &sub))
	waitTerminal(t, base, sub.JobID, 10*time.Second)
	out, err = run("jobs", "events", sub.JobID)
	require.NoError(t, err, out)
	require.Contains(t, out, "DEAD_LETTER")
	out, err = run("jobs", "replay", sub.JobID)
	require.NoError(t, err, out)
	require.Contains(t, out, "SUBMITTED")
	out, err = run("jobs", "list", "--status", "DEAD_LETTER")
	require.NoError(t, err, out)
	require.Contains(t, out, "JOB")
	// Search and paging: a job id prefix; pages followed past one page,
	// and the cursor to go on printed.
	waitFor(t, 10*time.Second, "the jobs read model has the job", func() bool {
		out, err = run("jobs", "list", "--q", sub.JobID[:23], "--since", "1h")
		require.NoError(t, err, out)
		return strings.Contains(out, sub.JobID)
	})
	for range 3 {
		_, err = run("jobs", "submit", "--capability", "t.cli", "--payload", `{}`)
		require.NoError(t, err)
	}
	var page struct {
		Jobs       []map[string]any `json:"jobs"`
		NextCursor string           `json:"next_cursor"`
	}
	waitFor(t, 10*time.Second, "the read model has them all", func() bool {
		out, err = run("jobs", "list", "--limit", "100", "--json")
		require.NoError(t, err, out)
		require.NoError(t, json.Unmarshal([]byte(out), &page), out)
		return len(page.Jobs) >= 6 // the dead, its replay, the first and three more
	})
	out, err = run("jobs", "list", "--limit", "2", "--json")
	require.NoError(t, err, out)
	require.NoError(t, json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &page), out)
	require.Len(t, page.Jobs, 2)
	require.NotEmpty(t, page.NextCursor)
	out, err = run("jobs", "list", "--cursor", page.NextCursor, "--limit", "100", "--json")
	require.NoError(t, err, out)
	var rest struct {
		Jobs []map[string]any `json:"jobs"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rest), out)
	require.GreaterOrEqual(t, len(rest.Jobs), 3, "the jobs after the cursor")
	for _, j := range rest.Jobs {
		require.NotEqual(t, page.Jobs[0]["job_id"], j["job_id"])
	}
	_, err = run("jobs", "list", "--since", "yesterday")
	require.ErrorIs(t, err, cli.ErrUsage)
	_, err = run("jobs", "get", "01a22909-80ec-7753-814f-87cf5cff8314")
	var apiErr *cli.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, "not_found", apiErr.Code)
}

// GET /v1/jobs searches: by a job id prefix (q), by a trace id or its
// prefix (trace_id, or q), by text of the error within a time range (q
// with since; without since it is a 400), and within since/until.
func TestSearchJobs(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	_, out := submit(t, base, `{"capability":"t.search","payload":{},"route_wait_ms":1,"max_attempts":1}`)
	dead, trace := out["job_id"].(string), out["trace_id"].(string)
	other := submitOK(t, base, `{"capability":"t.other","payload":{},"route_wait_ms":600000}`)
	require.Equal(t, "DEAD_LETTER", waitTerminal(t, base, dead, 30*time.Second).Status)
	require.Equal(t, "no_agent", getJob(t, base, dead).Error)

	ids := func(query string) []string {
		t.Helper()
		var page struct {
			Jobs []struct {
				JobID string `json:"job_id"`
			} `json:"jobs"`
		}
		waitFor(t, 10*time.Second, "the read model has both jobs, the dead one dead-lettered", func() bool {
			var all struct{ Jobs []any }
			getJSON(t, base+"/v1/jobs", http.StatusOK, &all)
			var dl struct{ Jobs []any }
			getJSON(t, base+"/v1/jobs?status=DEAD_LETTER", http.StatusOK, &dl)
			return len(all.Jobs) >= 2 && len(dl.Jobs) == 1
		})
		getJSON(t, base+"/v1/jobs?"+query, http.StatusOK, &page)
		var out []string
		for _, j := range page.Jobs {
			out = append(out, j.JobID)
		}
		return out
	}
	hour := url.QueryEscape(time.Now().UTC().Add(-time.Hour).Format(time.RFC3339))
	later := url.QueryEscape(time.Now().UTC().Add(time.Hour).Format(time.RFC3339))
	require.Equal(t, []string{dead}, ids("q="+dead), "a whole job id")
	require.Contains(t, ids("q="+dead[:23]), dead, "a job id prefix, dashes and all")
	require.NotContains(t, ids("q="+dead[:23]), other)
	require.Equal(t, []string{dead}, ids("trace_id="+trace[:12]), "a trace id prefix")
	require.Equal(t, []string{dead}, ids("trace_id="+trace[:4]+"-"+trace[4:12]), "dashes in it are ignored")
	require.Equal(t, []string{dead}, ids("q="+trace), "a trace id in q")
	require.Equal(t, []string{dead}, ids("q=NO_AGENT&since="+hour), "text of the error, in any case")
	require.Empty(t, ids("q=no+such+words&since="+hour))
	require.ElementsMatch(t, []string{dead, other}, ids("since="+hour+"&until="+later))
	require.Empty(t, ids("since="+later), "none submitted after since")
	require.Empty(t, ids("until="+hour), "none submitted before until")

	code, body := call(t, http.MethodGet, base+"/v1/jobs?q=no_agent", "", "")
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, `"field":"since"`, "a text search needs a time range")
	code, body = call(t, http.MethodGet, base+"/v1/jobs?since=yesterday", "", "")
	require.Equal(t, http.StatusBadRequest, code, body)
	code, body = call(t, http.MethodGet, base+"/v1/jobs?trace_id=not-hex!", "", "")
	require.Equal(t, http.StatusBadRequest, code, body)
}
