package sdk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/sdk"
	"github.com/agentreach/agentreach/webhook"
)

// fakeReach is an httptest fake of Agent-Reach's HTTP API for one pull
// agent: registration, heartbeats, claims (long-polled from a queue),
// results, releases and offline. Every claim checks that the agent asks
// for no more than its free workers: the deliveries handed out and not yet
// reported or released, plus max, stay within maxConcurrent.
type fakeReach struct {
	t             *testing.T
	srv           *httptest.Server
	maxConcurrent int
	heartbeatMS   int

	mu          sync.Mutex
	token       string
	regs        []map[string]any
	queue       []sdk.Delivery
	added       chan struct{}   // closed when deliveries are queued
	outstanding map[string]bool // "job/attempt" handed out, not yet reported, released or cancelled
	claim404    int             // answer this many claims with 404
	claims      []claimSeen
	waiting     int // claims waiting for deliveries now
	abandoned   int // claims the agent gave up waiting on
	results     []resultSeen
	releases    []releaseSeen
	heartbeats  []int
	cancelled   []map[string]any // the heartbeats' answer names these cancelled attempts
	events      []string         // "result j1", "release j2", "offline", in order
}

type claimSeen struct {
	Token             string
	Max, WaitMS, Gave int
}

type resultSeen struct {
	JobID, Auth, Traceparent string
	Body                     map[string]any
}

type releaseSeen struct {
	Auth string
	Body map[string]any
}

func newFakeReach(t *testing.T, maxConcurrent int) *fakeReach {
	t.Helper()
	f := &fakeReach{t: t, maxConcurrent: maxConcurrent, heartbeatMS: 20, added: make(chan struct{}), outstanding: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/agents", f.register)
	mux.HandleFunc("PUT /v1/agents/{id}/heartbeat", f.heartbeat)
	mux.HandleFunc("POST /v1/agents/{id}/claim", f.claim)
	mux.HandleFunc("POST /v1/agents/{id}/release", f.release)
	mux.HandleFunc("POST /v1/agents/{id}/offline", f.offline)
	mux.HandleFunc("POST /results/{job}", f.result)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// delivery is a delivery of job id, attempt 1, due in a minute.
func (f *fakeReach) delivery(id string) sdk.Delivery {
	return sdk.Delivery{Envelope: webhook.Envelope{JobID: id, Attempt: 1, Capability: "t.pull", Payload: json.RawMessage(`{}`),
		Deadline: time.Now().Add(time.Minute).UTC(), ResultURL: f.srv.URL + "/results/" + id}}
}

func (f *fakeReach) enqueue(ds ...sdk.Delivery) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queue = append(f.queue, ds...)
	close(f.added)
	f.added = make(chan struct{})
}

func decode(t *testing.T, r *http.Request) map[string]any {
	var m map[string]any
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		t.Errorf("decode %s %s: %v", r.Method, r.URL.Path, err)
	}
	return m
}

func (f *fakeReach) authorized(w http.ResponseWriter, r *http.Request) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+f.token || f.token == "" {
		http.Error(w, `{"error":{"code":"unauthenticated"}}`, http.StatusUnauthorized)
		return false
	}
	return true
}

func (f *fakeReach) register(w http.ResponseWriter, r *http.Request) {
	m := decode(f.t, r)
	f.mu.Lock()
	f.regs = append(f.regs, m)
	f.token = fmt.Sprintf("tok-%d", len(f.regs))
	resp := map[string]any{"token": f.token, "heartbeat_interval_ms": f.heartbeatMS}
	f.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(resp)
}

func (f *fakeReach) heartbeat(w http.ResponseWriter, r *http.Request) {
	if !f.authorized(w, r) {
		return
	}
	var body struct {
		InFlight int `json:"in_flight"`
	}
	_ = json.NewDecoder(r.Body).Decode(&body)
	f.mu.Lock()
	f.heartbeats = append(f.heartbeats, body.InFlight)
	for _, c := range f.cancelled { // the agent lets a cancelled job go
		delete(f.outstanding, fmt.Sprint(c["job_id"], "/", c["attempt"]))
	}
	resp := map[string]any{"heartbeat_interval_ms": f.heartbeatMS, "cancelled": f.cancelled}
	f.mu.Unlock()
	_ = json.NewEncoder(w).Encode(resp)
}

func (f *fakeReach) claim(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Max    int `json:"max"`
		WaitMS int `json:"wait_ms"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Max < 1 || body.Max > 100 || body.WaitMS < 0 || body.WaitMS > 60000 {
		f.t.Errorf("bad claim %+v: %v", body, err)
		http.Error(w, "bad claim", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	seen := claimSeen{Token: strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), Max: body.Max, WaitMS: body.WaitMS}
	if len(f.outstanding)+body.Max > f.maxConcurrent {
		f.t.Errorf("claim of %d while %d are held: more than %d at once", body.Max, len(f.outstanding), f.maxConcurrent)
	}
	if f.claim404 > 0 {
		f.claim404--
		f.claims = append(f.claims, seen)
		f.mu.Unlock()
		http.Error(w, `{"error":{"code":"not_found"}}`, http.StatusNotFound)
		return
	}
	f.mu.Unlock()
	if !f.authorized(w, r) {
		return
	}
	timeout := time.NewTimer(time.Duration(body.WaitMS) * time.Millisecond)
	defer timeout.Stop()
	waited := false
	for {
		f.mu.Lock()
		if len(f.queue) > 0 || waited {
			n := min(body.Max, len(f.queue))
			ds := f.queue[:n:n]
			f.queue = f.queue[n:]
			for _, d := range ds {
				f.outstanding[fmt.Sprint(d.JobID, "/", d.Attempt)] = true
			}
			seen.Gave = n
			f.claims = append(f.claims, seen)
			f.mu.Unlock()
			_ = json.NewEncoder(w).Encode(map[string]any{"deliveries": ds})
			return
		}
		added := f.added
		f.waiting++
		f.mu.Unlock()
		select {
		case <-added:
		case <-timeout.C:
			waited = true
		case <-r.Context().Done():
		}
		f.mu.Lock()
		f.waiting--
		if r.Context().Err() != nil {
			f.abandoned++
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
	}
}

func (f *fakeReach) result(w http.ResponseWriter, r *http.Request) {
	m := decode(f.t, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.outstanding, fmt.Sprint(r.PathValue("job"), "/", m["attempt"]))
	f.results = append(f.results, resultSeen{JobID: r.PathValue("job"), Auth: r.Header.Get("Authorization"), Traceparent: r.Header.Get("traceparent"), Body: m})
	f.events = append(f.events, "result "+r.PathValue("job"))
}

func (f *fakeReach) release(w http.ResponseWriter, r *http.Request) {
	m := decode(f.t, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	jobs, _ := m["jobs"].([]any)
	for _, j := range jobs {
		j := j.(map[string]any)
		delete(f.outstanding, fmt.Sprint(j["job_id"], "/", j["attempt"]))
	}
	f.releases = append(f.releases, releaseSeen{Auth: r.Header.Get("Authorization"), Body: m})
	for _, j := range jobs {
		f.events = append(f.events, fmt.Sprint("release ", j.(map[string]any)["job_id"]))
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"released": jobs})
}

func (f *fakeReach) offline(w http.ResponseWriter, r *http.Request) {
	if !f.authorized(w, r) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, "offline")
}

// eventually waits up to five seconds for cond, read under the fake's lock.
func (f *fakeReach) eventually(cond func() bool, msg string) {
	f.t.Helper()
	require.Eventually(f.t, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return cond()
	}, 5*time.Second, 2*time.Millisecond, msg)
}

// recv receives from ch, failing the test after five seconds.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("nothing came")
		var zero T
		return zero
	}
}

// gate blocks a handler until proceed gives way or its context ends.
func gate(ctx context.Context, proceed <-chan struct{}) {
	select {
	case <-proceed:
	case <-ctx.Done():
	}
}

// running is a pull agent started by startPull.
type running struct {
	agent *sdk.Agent
	stop  context.CancelFunc
	done  chan struct{} // closed when Run returned err
	err   error
}

// wait stops the agent and returns what Run returned.
func (r *running) wait(t *testing.T) error {
	t.Helper()
	r.stop()
	select {
	case <-r.done:
		return r.err
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

// startPull runs a pull agent against f, with f's maxConcurrent workers,
// until ctx ends or the test stops it.
func startPull(t *testing.T, ctx context.Context, f *fakeReach, cfg sdk.Config, h sdk.Handler) *running {
	t.Helper()
	cfg.ServerURL = f.srv.URL
	cfg.StartJitter = -1
	if cfg.ClaimWait == 0 {
		cfg.ClaimWait = 2 * time.Second
	}
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = 2 * time.Second // a failed test stops soon
	}
	agent := sdk.New(cfg, sdk.Registration{AgentID: "puller", Capabilities: []string{"t.pull"}, Mode: sdk.ModePull, MaxConcurrent: f.maxConcurrent}, h)
	ctx, cancel := context.WithCancel(ctx)
	r := &running{agent: agent, stop: cancel, done: make(chan struct{})}
	go func() { defer close(r.done); r.err = agent.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

func TestPullReportsAResultWithTheToken(t *testing.T) {
	t.Parallel()
	f := newFakeReach(t, 1)
	d := f.delivery("j1")
	d.Attempt, d.TraceID = 2, "4bf92f3577b34da6a3ce929d0e0e4736"
	f.enqueue(d)
	type seen struct {
		deadline    time.Time
		traceparent string
	}
	handled := make(chan seen, 1)
	r := startPull(t, t.Context(), f, sdk.Config{}, func(ctx context.Context, got sdk.Delivery) (sdk.Result, error) {
		deadline, _ := ctx.Deadline()
		handled <- seen{deadline, got.Traceparent}
		return sdk.Success(map[string]any{"n": 1}), nil
	})
	f.eventually(func() bool { return len(f.results) == 1 }, "the result is reported")
	h := recv(t, handled)
	require.True(t, h.deadline.Equal(d.Deadline), "the job's context ends at the deadline: %v", h.deadline)
	require.NoError(t, r.wait(t))
	f.mu.Lock()
	defer f.mu.Unlock()

	res := f.results[0]
	require.Equal(t, "j1", res.JobID)
	require.Equal(t, "Bearer tok-1", res.Auth)
	require.Equal(t, map[string]any{"status": "SUCCESS", "result": map[string]any{"n": 1.0}, "attempt": 2.0}, res.Body)
	require.Regexp(t, `^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$`, res.Traceparent)
	require.Equal(t, h.traceparent, res.Traceparent, "the handler and the report share the span")

	reg := f.regs[0]
	require.Equal(t, "pull", reg["mode"])
	require.Equal(t, 1.0, reg["max_concurrent"])
	for _, k := range []string{"endpoint", "health_url"} {
		require.NotContains(t, reg, k, "a pull agent sends no %s", k)
	}
	metadata, _ := reg["metadata"].(map[string]any)
	require.NotContains(t, metadata, sdk.CancelNotices, "no endpoint to send cancel notices to")
	require.Equal(t, 2000, f.claims[0].WaitMS)
	require.Empty(t, f.releases)
	require.Equal(t, []string{"result j1", "offline"}, f.events)
}

// The agent asks for its free workers, no more: three at first, then one
// as one worker is freed; never more than three handlers run at once.
func TestPullClaimsNoMoreThanFreeWorkers(t *testing.T) {
	t.Parallel()
	f := newFakeReach(t, 3)
	for i := range 8 {
		f.enqueue(f.delivery(fmt.Sprintf("j%d", i)))
	}
	proceed := make(chan struct{})
	var mu sync.Mutex
	busy, most := 0, 0
	r := startPull(t, t.Context(), f, sdk.Config{}, func(ctx context.Context, d sdk.Delivery) (sdk.Result, error) {
		mu.Lock()
		busy++
		most = max(most, busy)
		mu.Unlock()
		defer func() { mu.Lock(); busy--; mu.Unlock() }()
		gate(ctx, proceed)
		return sdk.Success(nil), nil
	})
	f.eventually(func() bool { return len(f.claims) == 1 && len(f.outstanding) == 3 }, "three claimed at once")
	require.Equal(t, 3, f.claims[0].Max)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return busy == 3 }, 5*time.Second, time.Millisecond, "three handlers run")
	require.Equal(t, 3, r.agent.InFlight())

	proceed <- struct{}{} // one worker finishes
	f.eventually(func() bool { return len(f.claims) == 2 && len(f.outstanding) == 3 }, "a claim for the one free worker")
	require.Equal(t, claimSeen{Token: "tok-1", Max: 1, WaitMS: 2000, Gave: 1}, f.claims[1])

	close(proceed)
	f.eventually(func() bool { return len(f.results) == 8 }, "all eight reported")
	require.NoError(t, r.wait(t))
	mu.Lock()
	require.Equal(t, 3, most)
	mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.claims {
		require.GreaterOrEqual(t, c.Max, 1)
	}
}

// ErrRefused gives the attempt back without an error; any other handler
// error releases it with the error's text (a failed attempt).
func TestPullReleasesRefusedAndFailedAttempts(t *testing.T) {
	t.Parallel()
	f := newFakeReach(t, 2)
	f.enqueue(f.delivery("refused"), f.delivery("failed"))
	r := startPull(t, t.Context(), f, sdk.Config{}, func(ctx context.Context, d sdk.Delivery) (sdk.Result, error) {
		if d.JobID == "refused" {
			return sdk.Result{}, sdk.ErrRefused
		}
		return sdk.Result{}, errors.New("disk full")
	})
	f.eventually(func() bool { return len(f.releases) == 2 }, "both released")
	require.NoError(t, r.wait(t))
	f.mu.Lock()
	defer f.mu.Unlock()
	bodies := map[string]map[string]any{}
	for _, rel := range f.releases {
		require.Equal(t, "Bearer tok-1", rel.Auth)
		job := rel.Body["jobs"].([]any)[0].(map[string]any)
		bodies[job["job_id"].(string)] = rel.Body
	}
	require.Equal(t, map[string]any{"jobs": []any{map[string]any{"job_id": "refused", "attempt": 1.0}}}, bodies["refused"])
	require.Equal(t, map[string]any{"jobs": []any{map[string]any{"job_id": "failed", "attempt": 1.0}}, "error": "disk full"}, bodies["failed"])
	require.Empty(t, f.results)
}

// A release's error is cut to the 4096 bytes Agent-Reach takes, at a rune
// boundary.
func TestPullReleaseErrorIsClipped(t *testing.T) {
	t.Parallel()
	f := newFakeReach(t, 1)
	f.enqueue(f.delivery("long"))
	long := "é" + strings.Repeat("ü", 3000) // 6002 bytes
	r := startPull(t, t.Context(), f, sdk.Config{}, func(ctx context.Context, d sdk.Delivery) (sdk.Result, error) {
		return sdk.Result{}, errors.New(long)
	})
	f.eventually(func() bool { return len(f.releases) == 1 }, "released")
	require.NoError(t, r.wait(t))
	f.mu.Lock()
	defer f.mu.Unlock()
	got := f.releases[0].Body["error"].(string)
	require.Len(t, got, 4096)
	require.True(t, strings.HasPrefix(long, got))
}

// A cancelled attempt named in a heartbeat's answer ends its job's context
// with ErrJobCancelled and nothing is sent for it; another attempt of a
// held job is left alone.
func TestPullHeartbeatCancelsAJob(t *testing.T) {
	t.Parallel()
	f := newFakeReach(t, 2)
	f.heartbeatMS = 5
	f.enqueue(f.delivery("kept"), f.delivery("cancelled"))
	f.cancelled = []map[string]any{{"job_id": "kept", "attempt": 9}, {"job_id": "cancelled", "attempt": 1}}
	proceed := make(chan struct{})
	causes := make(chan error, 1)
	r := startPull(t, t.Context(), f, sdk.Config{}, func(ctx context.Context, d sdk.Delivery) (sdk.Result, error) {
		if d.JobID == "cancelled" {
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return sdk.Result{}, ctx.Err()
		}
		gate(ctx, proceed)
		return sdk.Success(nil), ctx.Err()
	})
	require.ErrorIs(t, recv(t, causes), sdk.ErrJobCancelled)
	f.eventually(func() bool { return len(f.heartbeats) > 0 && f.heartbeats[len(f.heartbeats)-1] == 1 }, "the cancelled job is let go")
	close(proceed)
	f.eventually(func() bool { return len(f.results) == 1 }, "the other job is reported")
	require.NoError(t, r.wait(t))
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Equal(t, "kept", f.results[0].JobID)
	require.Empty(t, f.releases, "nothing is sent for a cancelled job")
}

// A handler's panic is a handler error: the attempt is released as failed
// and the agent goes on.
func TestPullHandlerPanicReleasesWithAnError(t *testing.T) {
	t.Parallel()
	f := newFakeReach(t, 1)
	f.enqueue(f.delivery("boom"), f.delivery("fine"))
	r := startPull(t, t.Context(), f, sdk.Config{}, func(ctx context.Context, d sdk.Delivery) (sdk.Result, error) {
		if d.JobID == "boom" {
			panic("oops")
		}
		return sdk.Success(nil), nil
	})
	f.eventually(func() bool { return len(f.releases) == 1 && len(f.results) == 1 }, "released, then the next one reported")
	require.NoError(t, r.wait(t))
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Equal(t, "sdk: handler panicked: oops", f.releases[0].Body["error"])
	require.Equal(t, "fine", f.results[0].JobID)
}

// A 404 on claim (the registry forgot the agent) registers again and claims
// with the new token.
func TestPullRegistersAgainOn404(t *testing.T) {
	t.Parallel()
	f := newFakeReach(t, 1)
	f.heartbeatMS = 60000 // the claim loop, not the heartbeat, notices
	f.claim404 = 1
	f.enqueue(f.delivery("j1"))
	r := startPull(t, t.Context(), f, sdk.Config{}, func(ctx context.Context, d sdk.Delivery) (sdk.Result, error) {
		return sdk.Success(nil), nil
	})
	f.eventually(func() bool { return len(f.results) == 1 }, "reported after registering again")
	require.NoError(t, r.wait(t))
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Len(t, f.regs, 2)
	require.Equal(t, "tok-1", f.claims[0].Token)
	require.Equal(t, "tok-2", f.claims[1].Token)
	require.Equal(t, "Bearer tok-2", f.results[0].Auth)
}

// Heartbeats carry the number of deliveries held.
func TestPullHeartbeatsCarryInFlight(t *testing.T) {
	t.Parallel()
	f := newFakeReach(t, 2)
	f.heartbeatMS = 5
	f.enqueue(f.delivery("j1"), f.delivery("j2"))
	proceed := make(chan struct{})
	r := startPull(t, t.Context(), f, sdk.Config{}, func(ctx context.Context, d sdk.Delivery) (sdk.Result, error) {
		gate(ctx, proceed)
		return sdk.Success(nil), nil
	})
	last := func() int { return f.heartbeats[len(f.heartbeats)-1] }
	f.eventually(func() bool { return len(f.heartbeats) > 0 && last() == 2 }, "a heartbeat says two in flight")
	close(proceed)
	f.eventually(func() bool { return len(f.results) == 2 && len(f.heartbeats) > 0 && last() == 0 }, "then none")
	require.NoError(t, r.wait(t))
}

// An accepted delivery holds its worker until Report: heartbeats say so,
// and the agent claims no more meanwhile (the fake checks every claim).
func TestPullAcceptedHoldsItsWorkerUntilReport(t *testing.T) {
	t.Parallel()
	f := newFakeReach(t, 1)
	f.heartbeatMS = 5
	f.enqueue(f.delivery("async"), f.delivery("next"))
	accepted := make(chan sdk.Delivery, 1)
	r := startPull(t, t.Context(), f, sdk.Config{}, func(ctx context.Context, d sdk.Delivery) (sdk.Result, error) {
		if d.JobID == "async" {
			accepted <- d
			return sdk.Result{}, sdk.ErrAccepted
		}
		return sdk.Success(nil), nil
	})
	d := recv(t, accepted)
	f.mu.Lock()
	from := len(f.heartbeats)
	f.mu.Unlock()
	f.eventually(func() bool { return len(f.heartbeats) >= from+4 }, "heartbeats after the handler returned")
	f.mu.Lock()
	later, claims := slices.Clone(f.heartbeats[from+2:from+4]), len(f.claims)
	f.mu.Unlock()
	require.Equal(t, []int{1, 1}, later, "still held after the handler returned")
	require.Equal(t, 1, claims)

	require.NoError(t, r.agent.Report(context.Background(), d, sdk.Success("later")))
	f.eventually(func() bool { return len(f.results) == 2 }, "the next one is claimed and reported")
	require.NoError(t, r.wait(t))
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Equal(t, "async", f.results[0].JobID)
	require.Equal(t, "next", f.results[1].JobID)
}

// cancelOnClaim is a transport that, when a claim brings deliveries, reads
// the answer whole and then cancels the agent's context: the deliveries
// arrive as the agent stops.
type cancelOnClaim struct {
	cancel func()
}

func (c *cancelOnClaim) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || !strings.HasSuffix(req.URL.Path, "/claim") {
		return resp, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	if bytes.Contains(b, []byte(`"job_id"`)) {
		c.cancel()
	}
	return resp, nil
}

// Deliveries claimed as the agent stops are given back unstarted, before
// it goes offline.
func TestPullShutdownReleasesUnstartedAndGoesOffline(t *testing.T) {
	t.Parallel()
	f := newFakeReach(t, 2)
	ctx, cancel := context.WithCancel(t.Context())
	cfg := sdk.Config{HTTPClient: &http.Client{Transport: &cancelOnClaim{cancel: cancel}}}
	r := startPull(t, ctx, f, cfg, func(ctx context.Context, d sdk.Delivery) (sdk.Result, error) {
		t.Errorf("delivery %s started after the agent stopped", d.JobID)
		return sdk.Success(nil), nil
	})
	f.enqueue(f.delivery("j1"), f.delivery("j2"))
	select {
	case <-r.done:
		require.NoError(t, r.err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Len(t, f.releases, 1)
	require.Equal(t, map[string]any{"jobs": []any{
		map[string]any{"job_id": "j1", "attempt": 1.0},
		map[string]any{"job_id": "j2", "attempt": 1.0},
	}}, f.releases[0].Body, "given back without an error")
	require.Equal(t, []string{"release j1", "release j2", "offline"}, f.events)
	require.Empty(t, f.results)
}

// On shutdown the agent stops claiming, heartbeats while a running handler
// finishes, reports it, and then goes offline.
func TestPullShutdownWaitsForRunningHandlers(t *testing.T) {
	t.Parallel()
	f := newFakeReach(t, 2)
	f.heartbeatMS = 5
	f.enqueue(f.delivery("j1"))
	started, proceed := make(chan struct{}), make(chan struct{})
	r := startPull(t, t.Context(), f, sdk.Config{}, func(ctx context.Context, d sdk.Delivery) (sdk.Result, error) {
		close(started)
		gate(ctx, proceed)
		return sdk.Success(nil), ctx.Err()
	})
	recv(t, started)
	f.eventually(func() bool { return f.waiting == 1 }, "a claim waits for the free worker")
	r.stop()
	f.eventually(func() bool { return f.abandoned == 1 }, "the waiting claim is given up")
	f.mu.Lock()
	beats := len(f.heartbeats)
	f.mu.Unlock()
	f.eventually(func() bool { return len(f.heartbeats) >= beats+2 && f.heartbeats[len(f.heartbeats)-1] == 1 }, "heartbeats go on")
	close(proceed)
	require.NoError(t, r.wait(t))
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Equal(t, []string{"result j1", "offline"}, f.events)
}

// Once the grace is over, the jobs still running are cancelled with
// ErrShutdown and released with their error before the agent goes offline.
func TestPullShutdownGraceCancelsRunningJobs(t *testing.T) {
	t.Parallel()
	f := newFakeReach(t, 1)
	f.enqueue(f.delivery("j1"))
	started := make(chan struct{})
	cause := make(chan error, 1)
	r := startPull(t, t.Context(), f, sdk.Config{ShutdownGrace: 20 * time.Millisecond}, func(ctx context.Context, d sdk.Delivery) (sdk.Result, error) {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return sdk.Result{}, ctx.Err()
	})
	recv(t, started)
	require.NoError(t, r.wait(t))
	f.mu.Lock()
	defer f.mu.Unlock()
	require.ErrorIs(t, recv(t, cause), sdk.ErrShutdown)
	require.Equal(t, []string{"release j1", "offline"}, f.events)
	require.Equal(t, "context canceled", f.releases[0].Body["error"])
}

func TestPullRegistrationIsChecked(t *testing.T) {
	t.Parallel()
	for name, reg := range map[string]sdk.Registration{
		"an endpoint":    {AgentID: "a", Mode: sdk.ModePull, Endpoint: "http://127.0.0.1:9/"},
		"a health url":   {AgentID: "a", Mode: sdk.ModePull, HealthURL: "http://127.0.0.1:9/"},
		"another proto":  {AgentID: "a", Mode: sdk.ModePull, Protocol: "a2a"},
		"an unknown one": {AgentID: "a", Mode: "poll"},
	} {
		err := sdk.New(sdk.Config{ServerURL: "http://127.0.0.1:9", StartJitter: -1}, reg, nil).Run(t.Context())
		require.Error(t, err, name)
	}
}
