package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/webhook"
)

func TestPick(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		alive      int64
		n, k, want int
	}{
		{"all alive, spread by caller", 0b111, 3, 4, 1},
		{"a dead one is passed over", 0b101, 3, 1, 2},
		{"wraps around", 0b001, 3, 2, 0},
		{"none alive: the first", 0, 3, 2, 0},
		{"one service", 0b1, 1, 7, 0},
	} {
		require.Equal(t, c.want, pick(c.alive, c.n, c.k), c.name)
	}
}

func TestServicesAlive(t *testing.T) {
	t.Parallel()
	s := &services{procs: []*process{{addr: "a:1"}, {addr: "b:2"}}}
	s.setAlive(0, true)
	s.setAlive(1, true)
	require.Equal(t, "http://b:2", s.pick(1))
	s.setAlive(1, false)
	require.Equal(t, "http://a:1", s.pick(1))
	s.setAlive(0, false)
	require.Equal(t, int64(0), s.alive.Load())
}

func TestTail(t *testing.T) {
	t.Parallel()
	require.Equal(t, "c\nd", tail("a\nb\nc\nd\n", 2))
	require.Equal(t, "a\nb", tail("a\nb", 5))
	require.Empty(t, tail("", 3))
}

func TestLockedBuffer(t *testing.T) {
	t.Parallel()
	var b lockedBuffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { _, _ = b.Write([]byte("x")) })
	}
	wg.Wait()
	require.Equal(t, "xxxxxxxx", b.String())
}

// deliver posts an envelope to the agent and returns the answer's status
// and body.
func deliver(t *testing.T, a *agent, env webhook.Envelope) (int, string, error) {
	t.Helper()
	b, err := json.Marshal(env)
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, a.srv.URL, strings.NewReader(string(b)))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), nil
}

func testAgent(t *testing.T, behaviour string) *agent {
	t.Helper()
	a := newAgent(t.Context(), "t-"+behaviour, behaviour, &http.Client{Timeout: 5 * time.Second})
	if a.srv != nil {
		t.Cleanup(a.srv.Close)
	}
	return a
}

func TestAgentBehaviours(t *testing.T) {
	t.Parallel()
	env := webhook.Envelope{JobID: "j", Attempt: 1, Deadline: time.Now().Add(200 * time.Millisecond)}

	status, body, err := deliver(t, testAgent(t, "inline"), env)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `{"status":"SUCCESS","result":{"ok":true}}`, body)

	status, _, err = deliver(t, testAgent(t, "refuse"), env)
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, status)

	flaky := testAgent(t, "flaky")
	seen := map[int]bool{}
	for range 64 {
		status, _, err := deliver(t, flaky, env)
		require.NoError(t, err)
		seen[status] = true
	}
	require.Equal(t, map[int]bool{http.StatusOK: true, http.StatusServiceUnavailable: true}, seen)

	start := time.Now()
	status, _, err = deliver(t, testAgent(t, "hang"), env)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	require.GreaterOrEqual(t, time.Since(start), time.Until(env.Deadline)+time.Second-100*time.Millisecond, "answers only past the deadline")

	dead := testAgent(t, "dies")
	dead.dead.Store(true)
	_, _, err = deliver(t, dead, env)
	require.Error(t, err, "a dead agent drops the connection")
}

// An asynchronous agent accepts, then posts the attempt's SUCCESS with its
// token, retrying while the service answers 5xx.
func TestAgentAsyncReports(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	got := make(chan string, 1)
	results := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		b, _ := io.ReadAll(r.Body)
		got <- r.Header.Get("Authorization") + " " + string(b)
	}))
	t.Cleanup(results.Close)
	a := testAgent(t, "async")
	a.tok.Store("tok")
	status, _, err := deliver(t, a, webhook.Envelope{Attempt: 3, Deadline: time.Now().Add(10 * time.Second), ResultURL: results.URL})
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, status)
	select {
	case s := <-got:
		require.Equal(t, `Bearer tok {"status":"SUCCESS","result":{"async":true},"attempt":3}`, s)
	case <-time.After(10 * time.Second):
		t.Fatal("no result posted")
	}
}

// An agent registers, heartbeats with its token, and registers again when
// the service answers 404 to a heartbeat.
func TestAgentKeepsRegistered(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var log []string
	registrations := 0
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		log = append(log, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		switch {
		case r.Method == http.MethodPost:
			registrations++
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"token":"tok%d"}`, registrations)
		case len(log) == 3: // the second heartbeat: forgotten
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(api.Close)
	a := testAgent(t, "inline")
	a.every = time.Millisecond
	done := make(chan struct{})
	go func() { defer close(done); a.keepRegistered(t.Context(), func(int) string { return api.URL }) }()
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(log) >= 5 }, 10*time.Second, time.Millisecond)
	a.dead.Store(true) // an agent that died stops
	<-done
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{
		"POST /v1/agents ",
		"PUT /v1/agents/t-inline/heartbeat Bearer tok1",
		"PUT /v1/agents/t-inline/heartbeat Bearer tok1",
		"POST /v1/agents ",
		"PUT /v1/agents/t-inline/heartbeat Bearer tok2",
	}, log[:5])
}

// The submitter retries a job with the same Idempotency-Key through the
// next service until one accepts it, and counts each job once.
func TestSubmitterRetriesWithTheSameKey(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	keys := map[string]int{}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		key := r.Header.Get("Idempotency-Key")
		keys[key]++
		if keys[key] == 1 {
			w.WriteHeader(http.StatusServiceUnavailable) // the first try of each job fails
			return
		}
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, `{"job_id":"job-%s"}`, key)
	}))
	t.Cleanup(api.Close)
	var picked sync.Map
	s := &submitter{pick: func(k int) string { picked.Store(k, true); return api.URL }, callback: "http://cb", jobs: 5}
	s.start(t.Context(), 2)
	s.waitFor(t.Context(), 5)
	s.wait()
	require.Equal(t, 5, s.accepted())
	require.Equal(t, int64(5), s.submitted.Load())
	for i := range 5 {
		require.Equal(t, 2, keys[fmt.Sprintf("chaos-%d", i)])
	}
	_, retriedElsewhere := picked.Load(1)
	require.True(t, retriedElsewhere, "a retry goes to the next service")
}
