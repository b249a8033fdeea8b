package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/internal/pgtest"
	"github.com/agentreach/agentreach/webhook"
)

// wait_ms: a submit answers 200 with the ended job when it ends in time,
// else 202 with nothing about the job changed; a read of a job waits for
// its end; bad values are refused with nothing written; a key waits for
// at most --waits-per-key jobs at once.
func TestWaitMS(t *testing.T) {
	t.Parallel()
	base := waitService(t)
	newTestAgent(t, base, "quick", "t.quick", 50, answer("SUCCESS", ""))
	slow, release := slowAgent(t, base)

	code, body := call(t, http.MethodPost, base+"/v1/jobs", "", `{"capability":"t.quick","payload":{"n":1},"wait_ms":20000}`)
	require.Equal(t, http.StatusOK, code, body)
	var ended jobJSON
	require.NoError(t, json.Unmarshal([]byte(body), &ended))
	require.Equal(t, "SUCCESS", ended.Status, body)
	require.Contains(t, body, `"result"`)
	// Answered from the fold the ending commit handed over: the job as a
	// read of it answers it.
	var answered, read map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &answered))
	code, again := call(t, http.MethodGet, base+"/v1/jobs/"+ended.JobID, "", "")
	require.Equal(t, http.StatusOK, code, again)
	require.NoError(t, json.Unmarshal([]byte(again), &read))
	require.Equal(t, read, answered)
	// With an Idempotency-Key: the repeat waits for the job the first
	// made, not for the id it was given.
	keyed := `{"capability":"t.quick","payload":{"n":2},"wait_ms":20000}`
	code, first := submit(t, base, keyed, "Idempotency-Key", "wait-key")
	require.Equal(t, http.StatusOK, code, first)
	require.Equal(t, "SUCCESS", first["status"], first)
	code, repeat := submit(t, base, keyed, "Idempotency-Key", "wait-key")
	require.Equal(t, http.StatusOK, code, repeat)
	require.Equal(t, first, repeat, "the repeat answers the ended job the first made")

	code, body = call(t, http.MethodPost, base+"/v1/jobs", "", `{"capability":"t.slow","payload":{},"wait_ms":300,"timeout_ms":60000}`)
	require.Equal(t, http.StatusAccepted, code, "not ended within wait_ms: 202 as without it: %s", body)
	var accepted struct {
		JobID string `json:"job_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &accepted))
	deadline := time.Now().Add(20 * time.Second)
	for slow.hits.Load() == 0 {
		require.True(t, time.Now().Before(deadline), "no delivery within 20 s")
		time.Sleep(20 * time.Millisecond) // poll interval while waiting on the condition
	}
	require.Equal(t, []string{"SUBMITTED", "ROUTED"}, types(jobEvents(t, base, accepted.JobID)), "the wait changed nothing")

	// A read that waits: it holds the key's one wait, so another is
	// refused (429) until it ends.
	type answerOf struct {
		code int
		body string
		took time.Duration
	}
	got := make(chan answerOf, 1)
	go func() {
		code, body, took := waitingGet(base + "/v1/jobs/" + accepted.JobID + "?wait_ms=30000")
		got <- answerOf{code, body, took}
	}()
	deadline = time.Now().Add(20 * time.Second)
	for {
		code, body := call(t, http.MethodGet, base+"/v1/jobs/"+accepted.JobID+"?wait_ms=1", "", "")
		if code == http.StatusTooManyRequests {
			require.Contains(t, body, "wait_ms")
			break
		}
		require.Equal(t, http.StatusOK, code, body)
		require.True(t, time.Now().Before(deadline), "the first wait not held within 20 s")
		time.Sleep(20 * time.Millisecond) // poll interval while waiting on the condition
	}
	release()
	a := <-got
	require.Equal(t, http.StatusOK, a.code, a.body)
	require.Contains(t, a.body, `"status":"SUCCESS"`)
	require.Less(t, a.took, 25*time.Second, "woken by the job's end, not by wait_ms")
	require.Equal(t, int32(1), slow.hits.Load())

	// Bad values: 400 naming wait_ms, nothing written.
	before := len(listJobIDs(t, base))
	for _, b := range []string{`{"capability":"t.quick","payload":{},"wait_ms":60001}`, `{"capability":"t.quick","payload":{},"wait_ms":-1}`} {
		code, body := call(t, http.MethodPost, base+"/v1/jobs", "", b)
		require.Equal(t, http.StatusBadRequest, code, body)
		require.Contains(t, body, `"field":"wait_ms"`)
	}
	code, body = call(t, http.MethodGet, base+"/v1/jobs/"+accepted.JobID+"?wait_ms=soon", "", "")
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, `"field":"wait_ms"`)
	require.Len(t, listJobIDs(t, base), before, "a refused submit wrote nothing")
}

// A wait in one process wakes from the commit that ends the job in
// another: a pull agent claims and reports through process B while the
// read waits in process A.
func TestWaitWakesAcrossProcesses(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t, pgtest.Conns(2*7+2))
	_, a, _ := serveProcess(t, dsn, deadAddr(t), "--max-conns", "6", "--waits-per-key", "1")
	_, b, _ := serveProcess(t, dsn, deadAddr(t), "--max-conns", "6")
	agent := registerPull(t, a, "puller", "t.pulled", "")
	agent.base = b
	agent.mustClaim(t, 1, 0)
	id := submitOK(t, a, `{"capability":"t.pulled","payload":{},"timeout_ms":60000}`)
	env := agent.claimOne(t, 20*time.Second)
	require.Equal(t, id, env.JobID)

	type answerOf struct {
		code int
		body string
		took time.Duration
	}
	got := make(chan answerOf, 1)
	go func() {
		code, body, took := waitingGet(a + "/v1/jobs/" + id + "?wait_ms=30000")
		got <- answerOf{code, body, took}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for { // the wait is held in A once another is refused there
		code, _ := call(t, http.MethodGet, a+"/v1/jobs/"+id+"?wait_ms=1", "", "")
		if code == http.StatusTooManyRequests {
			break
		}
		require.True(t, time.Now().Before(deadline), "the wait in A not held within 20 s")
		time.Sleep(20 * time.Millisecond) // poll interval while waiting on the condition
	}
	require.True(t, strings.HasPrefix(env.ResultURL, b), "the result goes to B: %s", env.ResultURL)
	agent.report(t, env, "SUCCESS")
	r := <-got
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Contains(t, r.body, `"status":"SUCCESS"`)
	require.Less(t, r.took, 25*time.Second, "woken by B's commit, not by wait_ms")

	// A submit that waits in A (watching its job from before its commit,
	// reading nothing) wakes from the result reported to B.
	go func() {
		began := time.Now()
		resp, err := http.Post(a+"/v1/jobs", "application/json", strings.NewReader(`{"capability":"t.pulled","payload":{},"timeout_ms":60000,"wait_ms":30000}`))
		if err != nil {
			got <- answerOf{0, err.Error(), 0}
			return
		}
		defer resp.Body.Close()
		got <- answerOf{resp.StatusCode, readAll(resp), time.Since(began)}
	}()
	env = agent.claimOne(t, 20*time.Second)
	agent.report(t, env, "SUCCESS")
	r = <-got
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Contains(t, r.body, `"status":"SUCCESS"`)
	require.Contains(t, r.body, env.JobID)
	require.Less(t, r.took, 25*time.Second, "woken by B's commit, not by wait_ms")
}

// waitingGet reads u, again while it answers 429 (the key's one wait
// held a moment by the test's probe of it), and says how long the read
// that was answered took.
func waitingGet(u string) (int, string, time.Duration) {
	for {
		began := time.Now()
		resp, err := http.Get(u)
		if err != nil {
			return 0, err.Error(), 0
		}
		body := readAll(resp)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests {
			return resp.StatusCode, body, time.Since(began)
		}
		time.Sleep(10 * time.Millisecond) // pacing between tries
	}
}

// readAll reads a response's body as text.
func readAll(resp *http.Response) string {
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// listJobIDs is the first page of every job of the namespace.
func listJobIDs(t *testing.T, base string) []string {
	t.Helper()
	code, body := call(t, http.MethodGet, base+"/v1/jobs?limit=500", "", "")
	require.Equal(t, http.StatusOK, code, body)
	var out struct {
		Jobs []struct {
			JobID string `json:"job_id"`
		} `json:"jobs"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &out))
	ids := make([]string, len(out.Jobs))
	for i, j := range out.Jobs {
		ids[i] = j.JobID
	}
	return ids
}

// A submit with wait_ms that repeats an Idempotency-Key while the first
// submit's job still runs waits for that job (not for the id it was
// given, which is never written) and answers it when it ends.
func TestWaitMSRepeatedKeyWaitsForTheFirstJob(t *testing.T) {
	t.Parallel()
	base := waitService(t)
	slow, release := slowAgent(t, base)

	body := `{"capability":"t.slow","payload":{},"timeout_ms":60000,"wait_ms":%d}`
	code, first := submit(t, base, fmt.Sprintf(body, 200), "Idempotency-Key", "k-running")
	require.Equal(t, http.StatusAccepted, code, first)
	deadline := time.Now().Add(20 * time.Second)
	for slow.hits.Load() == 0 {
		require.True(t, time.Now().Before(deadline), "no delivery within 20 s")
		time.Sleep(20 * time.Millisecond) // poll interval while waiting on the condition
	}
	type answerOf struct {
		code int
		body map[string]any
	}
	got := make(chan answerOf, 1)
	go func() {
		for { // again while the test's probe holds the key's one wait (429)
			req, _ := http.NewRequest(http.MethodPost, base+"/v1/jobs", strings.NewReader(fmt.Sprintf(body, 30000)))
			req.Header.Set("Idempotency-Key", "k-running")
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				got <- answerOf{code: 0}
				return
			}
			var out map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&out)
			resp.Body.Close()
			if resp.StatusCode != http.StatusTooManyRequests {
				got <- answerOf{resp.StatusCode, out}
				return
			}
			time.Sleep(10 * time.Millisecond) // pacing between tries
		}
	}()
	deadline = time.Now().Add(20 * time.Second)
	for { // the repeat waits once the key's one wait is held
		code, _ := call(t, http.MethodGet, base+"/v1/jobs/"+first["job_id"].(string)+"?wait_ms=1", "", "")
		if code == http.StatusTooManyRequests {
			break
		}
		select {
		case a := <-got:
			t.Fatalf("the repeat answered %d before the job ended: %v", a.code, a.body)
		default:
		}
		require.True(t, time.Now().Before(deadline), "the repeat's wait not held within 20 s")
		time.Sleep(20 * time.Millisecond) // poll interval while waiting on the condition
	}
	release()
	a := <-got
	require.Equal(t, http.StatusOK, a.code, "woken by the first job's end: %v", a.body)
	require.Equal(t, first["job_id"], a.body["job_id"])
	require.Equal(t, "SUCCESS", a.body["status"])
	require.Equal(t, int32(1), slow.hits.Load())
}

// waitService is a service, authentication off, whose keys wait for one
// job at a time (--waits-per-key 1); it answers its URL.
func waitService(t *testing.T) string {
	t.Helper()
	svc := start(t, map[string]string{"DATABASE_URL": newDatabase(t)}, "serve", "--insecure", "--addr", "127.0.0.1:0",
		"--log-level", "warn", "--waits-per-key", "1")
	base := svc.m.URL()
	waitReady(t, base)
	return base
}

// slowAgent is an agent of t.slow that holds each delivery until release
// is called (once, or more: the first counts), and then succeeds.
func slowAgent(t *testing.T, base string) (*testAgent, func()) {
	t.Helper()
	held := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(held) }) }
	slow := newTestAgent(t, base, "slow", "t.slow", 50, func(w http.ResponseWriter, env webhook.Envelope) {
		<-held
		answer("SUCCESS", "")(w, env)
	})
	t.Cleanup(release) // before the agent's server closes
	return slow, release
}
