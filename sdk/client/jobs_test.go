package client_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/sdk/client"
)

// jobsAPI is a fake of the jobs routes: job j1 is DELIVERED for its first
// polls and SUCCESS after; every request is recorded.
type jobsAPI struct {
	mu    sync.Mutex
	reqs  []recorded
	polls atomic.Int32
}

type recorded struct {
	method, uri, idempotency, body string
}

func (f *jobsAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, recorded{r.Method, r.URL.RequestURI(), r.Header.Get("Idempotency-Key"), string(b)})
	f.mu.Unlock()
	job := func(status string) string {
		return `{"job_id":"j/1","namespace":"default","status":"` + status + `","capability":"c","agent_id":"a1","attempts":1,
			"max_attempts":3,"result":{"ok":true},"trace_id":"t1","submitted_at":"2026-01-02T03:04:05Z",
			"updated_at":"2026-01-02T03:04:06Z","extra":"kept in Raw"}`
	}
	switch r.Method + " " + r.URL.EscapedPath() {
	case "POST /v1/jobs":
		writeJSON(w, http.StatusAccepted, map[string]string{"job_id": "j/1", "status": "SUBMITTED", "trace_id": "t1"})
	case "GET /v1/jobs/j%2F1":
		status := "DELIVERED"
		if f.polls.Add(1) > 2 {
			status = "SUCCESS"
		}
		_, _ = io.WriteString(w, job(status))
	case "GET /v1/jobs":
		_, _ = io.WriteString(w, `{"jobs":[`+job("SUCCESS")+`],"next_cursor":"cur2"}`)
	case "GET /v1/jobs/j%2F1/events":
		_, _ = io.WriteString(w, `{"events":[{"position":9,"stream_id":"job:j/1","version":1,"type":"SUBMITTED","data":{"x":1},"recorded_at":"2026-01-02T03:04:05Z"}]}`)
	case "POST /v1/jobs/j%2F1/cancel":
		_, _ = io.WriteString(w, job("CANCELLED"))
	case "POST /v1/jobs/j%2F1/replay":
		writeJSON(w, http.StatusAccepted, map[string]string{"job_id": "j2", "status": "SUBMITTED", "replay_of": "j/1"})
	default:
		writeError(w, http.StatusNotFound, "not_found", "no such job", "")
	}
}

func (f *jobsAPI) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

// TestJobs: every jobs call sends what the API expects and reads its
// answer, including fields it does not model (Raw).
func TestJobs(t *testing.T) {
	t.Parallel()
	api := &jobsAPI{}
	c := newClient(t, newServer(t, api.ServeHTTP), client.PollInterval(time.Millisecond, 5*time.Millisecond))
	ctx := t.Context()

	sub, err := c.Submit(ctx, client.SubmitRequest{Capability: "c", Payload: map[string]int{"x": 1}, Hint: "h", Priority: client.PriorityHigh,
		TimeoutMS: 5000, MaxAttempts: 2, CallbackURL: "http://127.0.0.1:9/cb", IdempotencyKey: "k1",
		Constraints: &client.Constraints{ProtocolVersions: []string{"1.*"}}})
	require.NoError(t, err)
	require.Equal(t, client.Submitted{JobID: "j/1", Status: client.StatusSubmitted, TraceID: "t1", Raw: sub.Raw}, sub)
	first := api.requests()[0]
	require.Equal(t, "k1", first.idempotency)
	require.JSONEq(t, `{"capability":"c","payload":{"x":1},"hint":"h","priority":"high","timeout_ms":5000,"max_attempts":2,
		"callback_url":"http://127.0.0.1:9/cb","constraints":{"protocol_versions":["1.*"]}}`, first.body)

	_, err = c.Submit(ctx, client.SubmitRequest{Capability: "c", Payload: json.RawMessage(`[1]`)})
	require.NoError(t, err)
	second := api.requests()[1]
	require.Empty(t, second.idempotency, "no key, no header")
	require.JSONEq(t, `{"capability":"c","payload":[1]}`, second.body, "zero fields left to the service's defaults")

	j, err := c.Wait(ctx, "j/1")
	require.NoError(t, err)
	require.Equal(t, client.StatusSuccess, j.Status)
	require.EqualValues(t, 3, api.polls.Load(), "polled until terminal")
	require.Equal(t, "a1", j.AgentID)
	require.JSONEq(t, `{"ok":true}`, string(j.Result))
	require.Contains(t, string(j.Raw), "kept in Raw")

	page, err := c.List(ctx, client.ListOptions{Status: client.StatusSuccess, AgentID: "a1", Limit: 10, Cursor: "cur1"})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 1)
	require.Equal(t, "cur2", page.NextCursor)
	require.Contains(t, string(page.Jobs[0].Raw), "kept in Raw")

	evs, err := c.Events(ctx, "j/1")
	require.NoError(t, err)
	require.Equal(t, []client.Event{{Position: 9, StreamID: "job:j/1", Version: 1, Type: "SUBMITTED", Data: json.RawMessage(`{"x":1}`),
		RecordedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}, evs)

	j, err = c.Cancel(ctx, "j/1", "changed my mind")
	require.NoError(t, err)
	require.Equal(t, client.StatusCancelled, j.Status)
	rep, err := c.Replay(ctx, "j/1")
	require.NoError(t, err)
	require.Equal(t, "j/1", rep.ReplayOf)

	_, err = c.Get(ctx, "nope")
	require.ErrorIs(t, err, client.ErrNotFound)
	var apiErr *client.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, "no such job", apiErr.Message)

	var uris []string
	for _, r := range api.requests()[2:] {
		uris = append(uris, r.method+" "+r.uri+" "+r.body)
	}
	require.Contains(t, uris, "GET /v1/jobs?agent_id=a1&cursor=cur1&limit=10&status=SUCCESS ")
	require.Contains(t, uris, `POST /v1/jobs/j%2F1/cancel {"reason":"changed my mind"}`)
	require.Contains(t, uris, "POST /v1/jobs/j%2F1/replay ")
}

// TestWaitEndsWithItsContext: a job that never ends is waited for until
// the context ends, answering the last state seen.
func TestWaitEndsWithItsContext(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"job_id":"j","status":"DELIVERED"}`)
	})
	c := newClient(t, srv, client.PollInterval(time.Millisecond, 2*time.Millisecond))
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	j, err := c.Wait(ctx, "j")
	require.ErrorIs(t, err, ctx.Err())
	require.Equal(t, client.StatusDelivered, j.Status)
}

// TestUnauthenticatedIsNotRetried: a 401 (and a 403) is answered at once,
// as an *APIError of its kind, after one request.
func TestUnauthenticatedIsNotRetried(t *testing.T) {
	t.Parallel()
	for status, kind := range map[int]error{http.StatusUnauthorized: client.ErrUnauthenticated, http.StatusForbidden: client.ErrPermissionDenied} {
		var calls atomic.Int32
		srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
			calls.Add(1)
			w.Header().Set("Retry-After", "0")
			code := map[int]string{401: "unauthenticated", 403: "permission_denied"}[status]
			writeError(w, status, code, "no", "")
		})
		c := newClient(t, srv)
		_, err := c.Submit(t.Context(), client.SubmitRequest{Capability: "c", Payload: 1})
		require.ErrorIs(t, err, kind)
		var apiErr *client.APIError
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, status, apiErr.Status)
		require.EqualValues(t, 1, calls.Load(), "HTTP %d is not retried", status)
		_, err = c.Lookup(t.Context(), "c", client.LookupOptions{})
		require.ErrorIs(t, err, kind, "nor is it a reason to serve a stale list")
		require.EqualValues(t, 2, calls.Load())
	}
}

// TestRateLimitedIsRetriedAfterRetryAfter: a 429 is retried once its
// Retry-After has passed; one asking for longer than the bound is
// answered at once; 503s are retried a bounded number of times.
func TestRateLimitedIsRetriedAfterRetryAfter(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		switch {
		case r.URL.Path == "/v1/jobs/slow":
			w.Header().Set("Retry-After", "30")
			writeError(w, http.StatusTooManyRequests, "rate_limited", "slow down", "")
		case r.URL.Path == "/v1/jobs/down":
			writeError(w, http.StatusServiceUnavailable, "unavailable", "database down", "")
		case n == 1:
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusTooManyRequests, "rate_limited", "slow down", "")
		default:
			_, _ = io.WriteString(w, `{"job_id":"j","status":"SUCCESS"}`)
		}
	})
	c := newClient(t, srv, client.Retry(2, 5*time.Second))

	start := time.Now()
	j, err := c.Get(t.Context(), "j")
	require.NoError(t, err)
	require.Equal(t, client.StatusSuccess, j.Status)
	require.EqualValues(t, 2, calls.Load())
	require.GreaterOrEqual(t, time.Since(start), time.Second, "Retry-After honoured")

	_, err = c.Get(t.Context(), "slow")
	require.ErrorIs(t, err, client.ErrRateLimited)
	var apiErr *client.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 30*time.Second, apiErr.RetryAfter)
	require.EqualValues(t, 3, calls.Load(), "30 s is past the 5 s bound: not retried")

	_, err = c.Get(t.Context(), "down")
	require.ErrorIs(t, err, client.ErrUnavailable)
	require.EqualValues(t, 6, calls.Load(), "one request and two retries")
}

// TestErrorAnswers: an error body is read into an *APIError; another
// answer is an http_error with the body as message; no answer is
// ErrUnreachable.
func TestErrorAnswers(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/jobs" {
			writeError(w, http.StatusBadRequest, "invalid_argument", "timeout_ms must be between 100 and 3600000", "timeout_ms")
			return
		}
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, "  upstream down\n")
	})
	c := newClient(t, srv, client.Retry(0, 0))
	_, err := c.Submit(t.Context(), client.SubmitRequest{Capability: "c", Payload: 1, TimeoutMS: 1})
	var apiErr *client.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, client.APIError{Status: 400, Code: "invalid_argument", Message: "timeout_ms must be between 100 and 3600000", Field: "timeout_ms"}, *apiErr)
	require.ErrorIs(t, err, client.ErrInvalidArgument)
	require.Equal(t, "invalid_argument (HTTP 400): timeout_ms must be between 100 and 3600000 [field timeout_ms]", apiErr.Error())

	err = c.Do(t.Context(), http.MethodGet, "/v1/other", nil, nil)
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, "http_error (HTTP 502): upstream down", err.Error())

	dead, err := client.New(deadURL(t), "k")
	require.NoError(t, err)
	t.Cleanup(func() { _ = dead.Close() })
	_, err = dead.Get(t.Context(), "j")
	require.ErrorIs(t, err, client.ErrUnreachable)

	_, err = client.New("127.0.0.1:8080", "k")
	require.ErrorIs(t, err, client.ErrInvalidArgument, "no scheme")
}

// TestDo: the generic call sends the key, a JSON body as it is or
// encoded, and decodes or keeps the answer.
func TestDo(t *testing.T) {
	t.Parallel()
	var seen http.Header
	var body string
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
		b, _ := io.ReadAll(r.Body)
		body = string(b)
		assert.Equal(t, "a=1", r.URL.RawQuery)
		_, _ = io.WriteString(w, `{"x":1}`)
	})
	c := newClient(t, srv+"/")
	var out struct{ X int }
	require.NoError(t, c.Do(t.Context(), http.MethodGet, "/v1/ok?a=1", nil, &out))
	require.Equal(t, 1, out.X)
	require.Equal(t, "Bearer ark_test", seen.Get("Authorization"))
	require.Empty(t, seen.Get("Content-Type"), "no body, no content type")

	var raw json.RawMessage
	require.NoError(t, c.Do(t.Context(), http.MethodPost, "/v1/ok?a=1", json.RawMessage(`{"n":2}`), &raw))
	require.Equal(t, `{"x":1}`, string(raw))
	require.Equal(t, "application/json", seen.Get("Content-Type"))
	require.Equal(t, `{"n":2}`, body)
	require.NoError(t, c.Do(t.Context(), http.MethodPatch, "/v1/ok?a=1", map[string]int{"w": 3}, nil))
	require.JSONEq(t, `{"w":3}`, body)
}

// oldJobsAPI is jobsAPI as a service older than wait_ms sees it: a
// submit naming wait_ms is refused (unknown field), and reads ignore it.
type oldJobsAPI struct{ jobsAPI }

func (f *oldJobsAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Path == "/v1/jobs" {
		b, _ := io.ReadAll(r.Body)
		if json.Valid(b) && strings.Contains(string(b), `"wait_ms"`) {
			f.mu.Lock()
			f.reqs = append(f.reqs, recorded{r.Method, r.URL.RequestURI(), r.Header.Get("Idempotency-Key"), string(b)})
			f.mu.Unlock()
			writeError(w, http.StatusBadRequest, "invalid_argument", `json: unknown field "wait_ms"`, "wait_ms")
			return
		}
		r.Body = io.NopCloser(strings.NewReader(string(b)))
	}
	f.jobsAPI.ServeHTTP(w, r)
}

// TestRunAgainstAServiceWithoutWaitMS: Run falls back to a submit under
// the same Idempotency-Key (one it made), then waits by polling.
func TestRunAgainstAServiceWithoutWaitMS(t *testing.T) {
	t.Parallel()
	api := &oldJobsAPI{}
	c := newClient(t, newServer(t, api.ServeHTTP), client.PollInterval(time.Millisecond, 5*time.Millisecond))
	j, err := c.Run(t.Context(), client.SubmitRequest{Capability: "c", Payload: map[string]int{}})
	require.NoError(t, err)
	require.Equal(t, client.StatusSuccess, j.Status)
	api.mu.Lock()
	defer api.mu.Unlock()
	require.GreaterOrEqual(t, len(api.reqs), 3)
	require.Contains(t, api.reqs[0].body, `"wait_ms"`)
	require.NotContains(t, api.reqs[1].body, `"wait_ms"`)
	require.NotEmpty(t, api.reqs[0].idempotency, "Run makes an Idempotency-Key")
	require.Equal(t, api.reqs[0].idempotency, api.reqs[1].idempotency, "the fallback submit is the same submit")
}
