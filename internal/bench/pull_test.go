package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/cli"
	"github.com/agentreach/agentreach/internal/pgtest"
)

// pullAPI is a fake service for the bench's pull agents: it registers
// them, answers each claim with the deliveries queued for it (an empty list
// after 20 ms when none is, as a long poll would), and records the rest.
type pullAPI struct {
	srv      *httptest.Server
	queued   chan []envelope
	resultOK bool

	mu     sync.Mutex
	regs   []string // bodies
	claims []string // "authorization body"
	result []string // "path authorization body"
}

func newPullAPI(t *testing.T) *pullAPI {
	t.Helper()
	p := &pullAPI{queued: make(chan []envelope, 16), resultOK: true}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *pullAPI) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	auth := r.Header.Get("Authorization")
	p.mu.Lock()
	switch {
	case r.URL.Path == "/v1/agents":
		p.regs = append(p.regs, string(b))
		n := len(p.regs)
		p.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"token":"tok%d"}`, n)
	case strings.HasSuffix(r.URL.Path, "/claim"):
		p.claims = append(p.claims, auth+" "+string(b))
		p.mu.Unlock()
		select {
		case envs := <-p.queued:
			_ = json.NewEncoder(w).Encode(map[string]any{"deliveries": envs})
		case <-time.After(20 * time.Millisecond):
			_, _ = io.WriteString(w, `{"deliveries":[]}`)
		case <-r.Context().Done():
		}
	default:
		p.result = append(p.result, r.URL.Path+" "+auth+" "+string(b))
		ok := p.resultOK
		p.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"error":"no"}`)
		}
	}
}

func (p *pullAPI) seen() (regs, claims, results []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.regs...), append([]string(nil), p.claims...), append([]string(nil), p.result...)
}

// The bench's pull agents register in pull mode with their own capability,
// claim up to 32 waiting up to a second, and report each delivery SUCCESS
// with its attempt and their token; a report that fails ends the context
// they run under, with the failure as its cause.
func TestPullers(t *testing.T) {
	t.Parallel()
	api := newPullAPI(t)
	ctx, stop, err := startPullers(t.Context(), api.srv.URL, 2)
	require.NoError(t, err)
	defer stop()
	regs, _, _ := api.seen()
	require.Equal(t, []string{
		`{"agent_id":"bench-pull-0","capabilities":["bench.pull"],"mode":"pull","ttl_seconds":3600}`,
		`{"agent_id":"bench-pull-1","capabilities":["bench.pull"],"mode":"pull","ttl_seconds":3600}`,
	}, regs)
	api.queued <- []envelope{{JobID: "a", Attempt: 1, ResultURL: api.srv.URL + "/v1/jobs/a/result"},
		{JobID: "b", Attempt: 2, ResultURL: api.srv.URL + "/v1/jobs/b/result"}}
	require.Eventually(t, func() bool { _, _, res := api.seen(); return len(res) == 2 }, 10*time.Second, 5*time.Millisecond)
	_, claims, results := api.seen()
	tok := strings.Fields(results[0])[2] // the token of the agent that claimed them
	require.Contains(t, []string{"tok1", "tok2"}, tok)
	require.ElementsMatch(t, []string{
		`/v1/jobs/a/result Bearer ` + tok + ` {"status":"SUCCESS","result":{"ok":true},"attempt":1}`,
		`/v1/jobs/b/result Bearer ` + tok + ` {"status":"SUCCESS","result":{"ok":true},"attempt":2}`,
	}, results, "one agent claimed both and reported each")
	for _, c := range claims {
		require.Contains(t, []string{`Bearer tok1 {"max":32,"wait_ms":1000}`, `Bearer tok2 {"max":32,"wait_ms":1000}`}, c)
	}
	require.NoError(t, ctx.Err())

	api.mu.Lock()
	api.resultOK = false
	api.mu.Unlock()
	api.queued <- []envelope{{JobID: "c", Attempt: 1, ResultURL: api.srv.URL + "/v1/jobs/c/result"}}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a failed report did not end the pull agents' context")
	}
	require.ErrorContains(t, context.Cause(ctx), "/v1/jobs/c/result: 409")
	require.ErrorContains(t, causeOf(ctx, context.Canceled), "pull agent bench-pull-")
	stop()
	stop() // a second stop does nothing more
}

func TestCauseOf(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	require.Equal(t, boom, causeOf(t.Context(), boom), "a context that lives: the error itself")
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(nil)
	require.Equal(t, boom, causeOf(ctx, boom), "a plain cancel is no cause")
	ctx, cancel = context.WithCancelCause(t.Context())
	cancel(errors.New("agent failed"))
	require.EqualError(t, causeOf(ctx, context.Canceled), "agent failed")
}

// childService is `agentreach serve` in a child process: the bench's
// service for tests of the steps that do not pause dispatch.
type childService struct {
	url  string
	cmd  *exec.Cmd
	once sync.Once
	err  error
}

func (c *childService) URL() string { return c.url }

func (c *childService) SetDispatchPaused(context.Context, bool) error {
	return errors.New("a child service cannot pause dispatch")
}

func (c *childService) DropDispatchBacklog(context.Context) error {
	return errors.New("a child service cannot drop the backlog")
}

func (c *childService) Stop() error {
	c.once.Do(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		c.err = c.cmd.Wait()
	})
	return c.err
}

// serveChild is a Serve that runs the binary exe on a port of 127.0.0.1
// with a small pool.
func serveChild(t *testing.T, exe string) Serve {
	return func(ctx context.Context, dsn string, args ...string) (Service, error) {
		var lc net.ListenConfig
		l, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		addr := l.Addr().String()
		l.Close()
		cmd := exec.CommandContext(ctx, exe, append([]string{"serve", "--insecure", "--addr", addr, "--database-url", dsn,
			"--log-level", "error", "--rate-limit", "0", "--max-conns", "8"}, args...)...)
		cmd.Stdout, cmd.Stderr = t.Output(), t.Output()
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		return &childService{url: "http://" + addr, cmd: cmd}, nil
	}
}

// The end-to-end rows, push and pull, and the open loop's, from a short
// run against a real service: each rate beside River's, each latency row
// ordered, the open loop at half the push peak, and every
// job delivered only to agents of its mode (pull agents claimed every
// bench.pull job; push agents got every bench.echo one), and called back.
func TestEndToEndPushAndPull(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a service and 2 × 60 jobs")
	}
	exe := buildAgentreach(t)
	dsn := pgtest.NewDatabase(t)
	r := &run{env: cli.Env{Stdout: io.Discard, Stderr: t.Output()}, o: options{jobs: 60}, riverRate: 1000}
	t.Cleanup(r.close)
	require.NoError(t, r.start(t.Context(), serveChild(t, exe), dsn))
	require.NoError(t, r.endToEnd(t.Context()))
	r.o.openFor = time.Second
	require.NoError(t, r.openLoop(t.Context()))
	require.NoError(t, r.endToEndPull(t.Context()))
	t.Logf("%s", r.res.markdown(""))

	require.Len(t, r.res.rows, 6)
	open := fmt.Sprintf("submit → delivered at an open-loop load of %.0f jobs/s, half the end-to-end peak (p50 / p95 / p99 ms)", r.peak/2)
	for i, want := range []string{
		"end-to-end jobs/s, 4 push agents (submit → delivered → SUCCESS → callback acknowledged)",
		"end-to-end jobs/s, each submit with an Idempotency-Key",
		open,
		"end-to-end jobs/s, 4 pull agents (submit → claimed → SUCCESS → callback acknowledged)",
		"submit → claimed under that load (p50 / p95 / p99 ms)",
	} {
		require.Equal(t, want, r.res.rows[i].metric)
	}
	require.Regexp(t, `^submit → claimed at an open-loop load of \d+ jobs/s, half the pull peak \(p50 / p95 / p99 ms\)$`, r.res.rows[5].metric)
	keyed := r.res.rows[1]
	require.Equal(t, "plain "+r.res.rows[0].ours+" jobs/s", keyed.baseline, "keyed submits beside plain ones")
	require.Regexp(t, `^\d+\.\d\d × plain$`, keyed.ratio)
	offered := max(int(r.peak/2), 1) // jobs in the open loop's second
	for _, i := range []int{0, 3} {
		rate, err := strconv.ParseFloat(r.res.rows[i].ours, 64)
		require.NoError(t, err)
		require.Positive(t, rate, r.res.rows[i].metric)
		require.Equal(t, "bare River 1000 jobs/s", r.res.rows[i].baseline)
		var ratio float64
		_, err = fmt.Sscanf(r.res.rows[i].ratio, "%f × River", &ratio)
		require.NoError(t, err, r.res.rows[i].ratio)
		require.InDelta(t, rate/1000, ratio, 0.006, "the ratio, of the unrounded rate")
	}
	for _, i := range []int{2, 4, 5} {
		var p50, p95, p99 float64
		_, err := fmt.Sscanf(r.res.rows[i].ours, "%f / %f / %f", &p50, &p95, &p99)
		require.NoError(t, err, r.res.rows[i].ours)
		require.Positive(t, p50, r.res.rows[i].metric)
		require.LessOrEqual(t, p50, p95)
		require.LessOrEqual(t, p95, p99)
	}
	require.Equal(t, []string{"end to end, push agents", "end to end, pull agents"}, []string{r.bars[0].label, r.bars[1].label})

	capability := map[string]string{}
	delivered := map[string][]string{} // by capability: the agents delivered to
	require.NoError(t, eventstore.New(r.pool).ReadStreams(t.Context(), nil, domain.JobStreamPrefix, func(rec eventstore.Record) error {
		var d struct {
			Capability string `json:"capability"`
			AgentID    string `json:"agent_id"`
		}
		if err := json.Unmarshal(rec.Data, &d); err != nil {
			return err
		}
		switch rec.Type {
		case domain.EventSubmitted:
			capability[rec.StreamID] = d.Capability
		case domain.EventDelivered:
			delivered[capability[rec.StreamID]] = append(delivered[capability[rec.StreamID]], d.AgentID)
		}
		return nil
	}))
	require.Len(t, delivered["bench.echo"], 2*60+offered) // plain, keyed, then the open loop
	pullOffered := len(delivered[pullCapability]) - 60    // the pull open loop's jobs
	require.Positive(t, pullOffered)
	for _, a := range delivered["bench.echo"] {
		require.Regexp(t, `^bench-[0-3]$`, a)
	}
	for _, a := range delivered[pullCapability] {
		require.Regexp(t, `^bench-pull-[0-3]$`, a)
	}
	require.Equal(t, int64(pullOffered), r.acked.Load(), "the pull open loop's callbacks (counted afresh for them)")
}

// buildAgentreach builds the binary the test serves with.
func buildAgentreach(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build agentreach: %v", err)
	}
	exe := filepath.Join(t.TempDir(), "agentreach")
	out, err := exec.CommandContext(t.Context(), gobin, "build", "-o", exe, "github.com/agentreach/agentreach/cmd/agentreach").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return exe
}
