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

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/webhook"
)

// claimAnswer is what the fake service answers one claim.
type claimAnswer struct {
	status int
	envs   []webhook.Envelope
}

// pullAPI is a fake service for one pull agent: it registers it (a new
// token each time), answers its claims from claims (an empty list after
// 20 ms when none is queued, as a long poll would) and records the other
// calls.
type pullAPI struct {
	srv    *httptest.Server
	claims chan claimAnswer

	mu    sync.Mutex
	regs  int
	calls []string // "METHOD path authorization body", claims left out
	seen  []string // "authorization body" of every claim
}

func newPullAPI(t *testing.T) *pullAPI {
	t.Helper()
	p := &pullAPI{claims: make(chan claimAnswer, 64)}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *pullAPI) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	auth := r.Header.Get("Authorization")
	if strings.HasSuffix(r.URL.Path, "/claim") {
		p.mu.Lock()
		p.seen = append(p.seen, auth+" "+string(b))
		p.mu.Unlock()
		select {
		case a := <-p.claims:
			if a.status != http.StatusOK {
				w.WriteHeader(a.status)
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"deliveries": a.envs})
		case <-time.After(20 * time.Millisecond): // a long poll that found nothing
			_, _ = io.WriteString(w, `{"deliveries":[]}`)
		case <-r.Context().Done():
		}
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, r.Method+" "+r.URL.Path+" "+auth+" "+string(b))
	if r.Method == http.MethodPost && r.URL.Path == "/v1/agents" {
		p.regs++
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"token":"tok%d"}`, p.regs)
	}
}

// callsLike are the recorded calls that start with prefix.
func (p *pullAPI) callsLike(prefix string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, c := range p.calls {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	return out
}

func (p *pullAPI) claimsSeen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

// envelope is attempt of job id, its result URL on a host that answers
// nothing: a pull agent reports through a live service instead.
func envelope(id string, attempt int) webhook.Envelope {
	return webhook.Envelope{JobID: id, Attempt: attempt, Deadline: time.Now().Add(10 * time.Second),
		ResultURL: "http://127.0.0.1:1/v1/jobs/" + id + "/result"}
}

// startPuller starts the claim loop of a pull agent of behaviour b: the
// first service it is given is dead, the others are api; done closes when
// the loop returns.
func startPuller(t *testing.T, b string, api *pullAPI) (a *agent, done chan struct{}) {
	t.Helper()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	a = testAgent(t, b)
	require.Nil(t, a.srv, "a pull agent serves nothing")
	var picked atomic.Bool
	done = make(chan struct{})
	go func() {
		defer close(done)
		a.claimLoop(t.Context(), func(int) string {
			if !picked.Swap(true) {
				return dead.URL
			}
			return api.srv.URL
		})
	}()
	t.Cleanup(func() { a.dead.Store(true); <-done })
	return a, done
}

// A pull agent registers with no endpoint through the first service that
// answers, claims with its token, reports each SUCCESS at once through the
// live service (not its result URL's host), and registers again when a
// claim answers 404 or 401.
func TestPullAgentClaimsAndReports(t *testing.T) {
	t.Parallel()
	api := newPullAPI(t)
	api.claims <- claimAnswer{status: http.StatusOK, envs: []webhook.Envelope{envelope("j1", 1), envelope("j2", 3)}}
	api.claims <- claimAnswer{status: http.StatusNotFound}
	api.claims <- claimAnswer{status: http.StatusOK, envs: []webhook.Envelope{envelope("j3", 1)}}
	api.claims <- claimAnswer{status: http.StatusUnauthorized}
	startPuller(t, pullInline, api)
	require.Eventually(t, func() bool { return len(api.callsLike("POST /v1/agents ")) == 3 && len(api.claimsSeen()) >= 5 },
		10*time.Second, 5*time.Millisecond)

	regs := api.callsLike("POST /v1/agents ")
	require.Equal(t, `POST /v1/agents  {"agent_id":"t-pull-inline","capabilities":["chaos.work"],"mode":"pull","max_concurrent":8,"ttl_seconds":10}`, regs[0])
	require.Equal(t, []string{
		`POST /v1/jobs/j1/result Bearer tok1 {"status":"SUCCESS","result":{"by":"t-pull-inline"},"attempt":1}`,
		`POST /v1/jobs/j2/result Bearer tok1 {"status":"SUCCESS","result":{"by":"t-pull-inline"},"attempt":3}`,
		`POST /v1/jobs/j3/result Bearer tok2 {"status":"SUCCESS","result":{"by":"t-pull-inline"},"attempt":1}`,
	}, api.callsLike("POST /v1/jobs/"))
	require.Equal(t, []string{
		`Bearer tok1 {"max":4,"wait_ms":1000}`,
		`Bearer tok1 {"max":4,"wait_ms":1000}`, // 404: registers again
		`Bearer tok2 {"max":4,"wait_ms":1000}`,
		`Bearer tok2 {"max":4,"wait_ms":1000}`, // 401: registers again
		`Bearer tok3 {"max":4,"wait_ms":1000}`,
	}, api.claimsSeen()[:5])
}

// A flaky pull agent reports some attempts SUCCESS and gives the others
// back, failed or unstarted; each attempt is answered once.
func TestPullFlakyAgent(t *testing.T) {
	t.Parallel()
	api := newPullAPI(t)
	const claims = 16
	for c := range claims {
		var envs []webhook.Envelope
		for i := range pullClaim {
			envs = append(envs, envelope(fmt.Sprintf("j%d-%d", c, i), 1))
		}
		api.claims <- claimAnswer{status: http.StatusOK, envs: envs}
	}
	startPuller(t, pullFlaky, api)
	answered := func() map[string]string {
		out := map[string]string{}
		for _, c := range api.callsLike("POST /v1/jobs/") {
			out[strings.Split(c, "/")[3]] += "success "
		}
		for _, c := range api.callsLike("POST /v1/agents/t-pull-flaky/release ") {
			var body struct {
				Jobs  []domain.HeldAttempt `json:"jobs"`
				Error string               `json:"error"`
			}
			require.NoError(t, json.Unmarshal([]byte(c[strings.Index(c, "{"):]), &body))
			how := "unstarted "
			if body.Error != "" {
				how = "failed "
			}
			for _, h := range body.Jobs {
				require.Equal(t, 1, h.Attempt)
				out[h.JobID] += how
			}
		}
		return out
	}
	require.Eventually(t, func() bool { return len(answered()) == claims*pullClaim }, 10*time.Second, 5*time.Millisecond)
	ways := map[string]int{}
	for id, how := range answered() {
		require.Contains(t, []string{"success ", "failed ", "unstarted "}, how, "job %s answered once", id)
		ways[how]++
	}
	require.Len(t, ways, 3, "each way at least once in %d attempts: %v", claims*pullClaim, ways)
}

// An asynchronous pull agent claims on while it works, and reports every
// attempt SUCCESS in the end.
func TestPullAsyncAgent(t *testing.T) {
	t.Parallel()
	api := newPullAPI(t)
	api.claims <- claimAnswer{status: http.StatusOK, envs: []webhook.Envelope{envelope("a", 1), envelope("b", 1), envelope("c", 2)}}
	startPuller(t, pullAsync, api)
	require.Eventually(t, func() bool { return len(api.callsLike("POST /v1/jobs/")) == 3 }, 10*time.Second, 5*time.Millisecond)
	require.ElementsMatch(t, []string{
		`POST /v1/jobs/a/result Bearer tok1 {"status":"SUCCESS","result":{"by":"t-pull-async"},"attempt":1}`,
		`POST /v1/jobs/b/result Bearer tok1 {"status":"SUCCESS","result":{"by":"t-pull-async"},"attempt":1}`,
		`POST /v1/jobs/c/result Bearer tok1 {"status":"SUCCESS","result":{"by":"t-pull-async"},"attempt":2}`,
	}, api.callsLike("POST /v1/jobs/"))
}

// A dying pull agent works as an inline one until told to die; then, at
// its next claim that brings work, it keeps that work unanswered and stops
// claiming: what it held is what it claimed last.
func TestPullAgentDiesHoldingWork(t *testing.T) {
	t.Parallel()
	api := newPullAPI(t)
	api.claims <- claimAnswer{status: http.StatusOK, envs: []webhook.Envelope{envelope("before", 1)}}
	a, done := startPuller(t, pullDies, api)
	require.Eventually(t, func() bool { return len(api.callsLike("POST /v1/jobs/before/result")) == 1 }, 10*time.Second, 5*time.Millisecond)
	require.Empty(t, a.heldAtDeath())

	a.dying.Store(true)
	n := len(api.claimsSeen())
	require.Eventually(t, func() bool { return len(api.claimsSeen()) > n+1 }, 10*time.Second, 5*time.Millisecond,
		"a claim that brings nothing does not kill it")
	require.False(t, a.dead.Load())
	api.claims <- claimAnswer{status: http.StatusOK, envs: []webhook.Envelope{envelope("x", 2), envelope("y", 1)}}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the dying agent claimed on")
	}
	require.True(t, a.dead.Load())
	require.Equal(t, []domain.HeldAttempt{{JobID: "x", Attempt: 2}, {JobID: "y", Attempt: 1}}, a.heldAtDeath())
	require.Len(t, api.callsLike("POST /v1/jobs/"), 1, "nothing it held was reported")
}

// A 404 to a stale token does not clear the token registered since.
func TestForgottenKeepsANewerToken(t *testing.T) {
	t.Parallel()
	a := testAgent(t, pullInline)
	a.tok.Store("new")
	require.True(t, a.forgotten(http.StatusNotFound, "old"))
	require.Equal(t, "new", a.token())
	require.False(t, a.forgotten(http.StatusOK, "new"))
	require.Equal(t, "new", a.token())
	require.True(t, a.forgotten(http.StatusUnauthorized, "new"))
	require.Empty(t, a.token())
}

func TestDescribeFleet(t *testing.T) {
	t.Parallel()
	require.Equal(t, "12 agents: 8 push (inline, inline, inline, async, async, refuse, hang, dies), 4 pull (inline, async, flaky, dies)",
		describeFleet(behaviours))
	pull := 0
	for _, b := range behaviours {
		if mode(b) == modePull {
			pull++
		}
	}
	require.Equal(t, len(behaviours)/3, pull, "a third of the fleet pulls")
}
