package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/harness"
	arsql "github.com/agentreach/agentreach/sql"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qBenchCommits           = queries.Must("BenchCommits")
	qBenchProjectionsBehind = queries.Must("BenchProjectionsBehind")
	qBenchTableSizes        = queries.Must("BenchTableSizes")
	qBenchFillAgentFigures  = queries.Must("BenchFillAgentFigures")
)

// result is the bench's table: a row per measure.
type result struct {
	rows []row
}

type row struct{ metric, ours, baseline, ratio string }

func (b *result) add(metric, ours, baseline, ratio string) {
	b.rows = append(b.rows, row{metric, ours, baseline, ratio})
}

func (b *result) markdown(header string) string {
	var s strings.Builder
	s.WriteString(header)
	s.WriteString("\n| measure | Agent-Reach | baseline | ratio |\n|---|---|---|---|\n")
	for _, r := range b.rows {
		fmt.Fprintf(&s, "| %s | %s | %s | %s |\n", r.metric, r.ours, r.baseline, r.ratio)
	}
	return s.String()
}

func fmtRate(v float64) string {
	if v <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f", v)
}

// ms is the q quantile of the sorted latencies, in milliseconds.
func ms(lat []time.Duration, q float64) float64 {
	if len(lat) == 0 {
		return 0
	}
	return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds()) / 1000
}

// runPgbench runs pgbench -N with 8 and with 1 clients on a scratch
// database and returns their transactions per second.
func runPgbench(ctx context.Context, dsn, name string) (tps8, tps1 float64, err error) {
	bin, err := pgbenchBinary()
	if err != nil {
		return 0, 0, err
	}
	scratch, drop, err := harness.ScratchDatabase(ctx, dsn, name)
	if err != nil {
		return 0, 0, err
	}
	defer drop()
	if out, err := exec.CommandContext(ctx, bin, "-i", "-q", "-s", "1", scratch).CombinedOutput(); err != nil {
		return 0, 0, fmt.Errorf("pgbench -i: %w: %s", err, out)
	}
	run := func(clients int) (float64, error) {
		out, err := exec.CommandContext(ctx, bin, "-N", "-c", strconv.Itoa(clients), "-j", "2", "-T", "8", scratch).CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("pgbench -N: %w: %s", err, out)
		}
		return parseTPS(out)
	}
	if tps8, err = run(8); err != nil {
		return 0, 0, err
	}
	tps1, err = run(1)
	return tps8, tps1, err
}

// pgbenchBinary finds pgbench on PATH, else the newest under
// /usr/lib/postgresql.
func pgbenchBinary() (string, error) {
	if bin, err := exec.LookPath("pgbench"); err == nil {
		return bin, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
	if len(matches) == 0 {
		return "", errors.New("pgbench not found")
	}
	slices.Sort(matches)
	return matches[len(matches)-1], nil
}

var tpsLine = regexp.MustCompile(`tps = ([0-9.]+)`)

// parseTPS reads the transactions per second of pgbench's output.
func parseTPS(out []byte) (float64, error) {
	m := tpsLine.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no tps in pgbench output: %s", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

type noopArgs struct{}

func (noopArgs) Kind() string { return "bench_noop" }

// benchRiver inserts n no-op jobs and works them with a bare River client:
// the rate River reaches on this machine and database.
func benchRiver(ctx context.Context, dsn string, n int) (float64, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	if err := arsql.Migrate(ctx, pool, slog.New(slog.DiscardHandler)); err != nil {
		return 0, err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(context.Context, *river.Job[noopArgs]) error { return nil }))
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues: map[string]river.QueueConfig{"bench": {MaxWorkers: 200}}, Workers: workers,
		FetchCooldown: 2 * time.Millisecond, FetchPollInterval: 20 * time.Millisecond, TestOnly: true,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return 0, err
	}
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{ChanSize: n + 1000, Kinds: []river.EventKind{river.EventKindJobCompleted}})
	defer cancel()
	params := make([]river.InsertManyParams, n)
	for i := range params {
		params[i] = river.InsertManyParams{Args: noopArgs{}, InsertOpts: &river.InsertOpts{Queue: "bench"}}
	}
	start := time.Now()
	for i := 0; i < n; i += 5000 {
		if _, err := client.InsertManyFast(ctx, params[i:min(i+5000, n)]); err != nil {
			return 0, err
		}
	}
	if err := client.Start(ctx); err != nil {
		return 0, err
	}
	defer func() { _ = client.Stop(context.WithoutCancel(ctx)) }()
	for done := 0; done < n; {
		select {
		case <-events:
			done++
		case <-time.After(60 * time.Second):
			return 0, fmt.Errorf("bare River worked %d of %d jobs in a minute", done, n)
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// benchSubmits runs clients submit loops for d and returns submits/s and
// the sorted latencies.
func benchSubmits(ctx context.Context, base string, clients int, d time.Duration) (float64, []time.Duration, error) {
	transport := &http.Transport{MaxIdleConnsPerHost: clients + 1}
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}
	defer transport.CloseIdleConnections()
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	end := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			mine, err := submitUntil(ctx, client, base+"/v1/jobs", end)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				firstErr = err
				return
			}
			lat = append(lat, mine...)
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, nil, firstErr
	}
	slices.Sort(lat)
	return float64(len(lat)) / time.Since(start).Seconds(), lat, nil
}

// refusedSubmits counts the submits the service refused with 429 or 503
// (its queue or rate limit, a moment out of connections): each phase
// reports them, and they are tried again after Retry-After, never fatal to
// the run.
var refusedSubmits atomic.Int64

// refusedWait is how long to wait before trying a refused submit again:
// its Retry-After (at most 2 s), else 50 ms.
func refusedWait(resp *http.Response) time.Duration {
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		return min(time.Duration(s)*time.Second, 2*time.Second)
	}
	return 50 * time.Millisecond
}

// refused reports whether a submit's answer is a refusal to try again.
func refused(resp *http.Response) bool {
	return resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// submitUntil submits one job after another until end and returns each
// one's latency; a refusal (refused) is counted and waited out, any other
// answer but 202 stops it.
func submitUntil(ctx context.Context, client *http.Client, u string, end time.Time) ([]time.Duration, error) {
	body := []byte(`{"capability":"bench.echo","payload":{"doc":"lorem ipsum dolor sit amet"}}`)
	var lat []time.Duration
	for time.Now().Before(end) && ctx.Err() == nil {
		t0 := time.Now()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if refused(resp) {
			refusedSubmits.Add(1)
			sleepCtx(ctx, min(refusedWait(resp), time.Until(end)))
			continue
		}
		if resp.StatusCode != http.StatusAccepted {
			return nil, fmt.Errorf("submit answered %d", resp.StatusCode)
		}
		lat = append(lat, time.Since(t0))
	}
	return lat, nil
}

// benchEndToEnd submits n jobs of capability with callbacks from 32
// clients and returns jobs/s from the first submit to the last
// acknowledged callback, and the jobs' ids.
func benchEndToEnd(ctx context.Context, base, callback, capability string, n int, keyed bool, acked *atomic.Int64) (float64, []string, error) {
	const clients = 32
	client, done := newClient(clients)
	defer done()
	ids := make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	body := jobBody(capability, callback)
	run := uuid.NewString() // the keys of this run's submits, when keyed
	for range clients {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				key := ""
				if keyed {
					key = fmt.Sprintf("%s-%d", run, i)
				}
				id, err := submitKeyed(ctx, client, base, body, key)
				if err != nil {
					firstErr.Store(err)
					return
				}
				ids[i] = id
			}
		})
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return 0, nil, err
	}
	if err := waitAcked(ctx, acked, int64(n)); err != nil {
		return 0, nil, err
	}
	return float64(n) / time.Since(start).Seconds(), ids, nil
}

// benchOpenLoop offers jobs of capability (with callbacks) at a constant
// rate for d, each submit at its own time whatever the earlier ones are
// doing (an open loop, not a burst), waits until every callback is
// acknowledged and returns the jobs' ids.
func benchOpenLoop(ctx context.Context, base, callback, capability string, rate float64, d time.Duration, acked *atomic.Int64) ([]string, error) {
	n := max(int(rate*d.Seconds()), 1)
	client, done := newClient(256)
	defer done()
	ids := make([]string, n)
	errs := make([]error, n)
	body := jobBody(capability, callback)
	if err := paced(ctx, rate, n, func(i int) { ids[i], errs[i] = submitJob(ctx, client, base, body) }); err != nil {
		return nil, err
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return ids, waitAcked(ctx, acked, int64(n))
}

// paced runs send(0) … send(n-1), each on a goroutine of its own, the
// i-th i/rate seconds after the first (an open loop: arrivals do not wait
// for answers), and waits for them all; ctx ending stops the arrivals.
func paced(ctx context.Context, rate float64, n int, send func(i int)) error {
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range n {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
		}
		wg.Go(func() { send(i) })
	}
	return nil
}

// waitAcked waits up to 5 minutes until n callbacks were acknowledged.
func waitAcked(ctx context.Context, acked *atomic.Int64, n int64) error {
	ok, err := harness.Until(ctx, 5*time.Minute, 10*time.Millisecond, func() (bool, error) { return acked.Load() >= n, nil })
	if err == nil && !ok {
		err = fmt.Errorf("%d of %d callbacks acknowledged in 5 minutes", acked.Load(), n)
	}
	return err
}

// newClient is an HTTP client that keeps up to conns connections open to
// the service, so that the load generator does not measure TCP set-up;
// done closes them.
func newClient(conns int) (*http.Client, func()) {
	transport := &http.Transport{MaxIdleConnsPerHost: conns, MaxIdleConns: conns}
	return &http.Client{Transport: transport, Timeout: 30 * time.Second}, transport.CloseIdleConnections
}

// jobBody is a bench job of capability whose callback goes to callback.
func jobBody(capability, callback string) string {
	return fmt.Sprintf(`{"capability":%q,"payload":{"e2e":true},"callback_url":%q}`, capability, callback)
}

// submitJob POSTs a job to base and returns its id; any answer but 202 is
// an error.
func submitJob(ctx context.Context, client *http.Client, base, body string) (string, error) {
	return submitKeyed(ctx, client, base, body, "")
}

// submitKeyed is submitJob with an Idempotency-Key (none when empty). A
// refusal (refused) is counted and tried again after its Retry-After, for
// as long as ctx lasts.
func submitKeyed(ctx context.Context, client *http.Client, base, body, key string) (string, error) {
	for {
		id, wait, err := submitOnce(ctx, client, base, body, key)
		if wait == 0 || ctx.Err() != nil {
			return id, err
		}
		refusedSubmits.Add(1)
		sleepCtx(ctx, wait)
	}
}

// submitOnce is one try of submitKeyed: the job's id, or how long to wait
// before the next try of a refused one, or an error.
func submitOnce(ctx context.Context, client *http.Client, base, body, key string) (string, time.Duration, error) {
	req, err := harness.NewRequest(ctx, http.MethodPost, base+"/v1/jobs", body)
	if err != nil {
		return "", 0, err
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if refused(resp) {
		return "", refusedWait(resp), fmt.Errorf("submit answered %d %s", resp.StatusCode, b)
	}
	if resp.StatusCode != http.StatusAccepted {
		return "", 0, fmt.Errorf("submit answered %d %s", resp.StatusCode, b)
	}
	var out struct {
		JobID string `json:"job_id"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.JobID == "" {
		return "", 0, fmt.Errorf("submit answered 202 without a job id: %s", b)
	}
	return out.JobID, 0, nil
}

// commitCount is how many transactions the database of pool has
// committed.
func commitCount(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var n int64
	if err := pool.QueryRow(ctx, qBenchCommits).Scan(&n); err != nil {
		return 0, fmt.Errorf("count commits: %w", err)
	}
	return n, nil
}

// waitDelivered waits until every job of ids has been delivered once.
func waitDelivered(ctx context.Context, pool *pgxpool.Pool, ids []string, within time.Duration) error {
	streams := jobStreams(ids)
	ok, err := harness.Until(ctx, within, 20*time.Millisecond, func() (bool, error) {
		delivered, err := eventstore.FirstOfType(ctx, pool, streams, domain.EventDelivered)
		return len(delivered) >= len(ids), err
	})
	if err == nil && !ok {
		err = fmt.Errorf("jobs not delivered within %s", within)
	}
	return err
}

func jobStreams(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = domain.JobStream(id)
	}
	return out
}

// submitToDelivered reads p50/p95/p99 of DELIVERED − SUBMITTED (the first
// delivery of each job) from the log.
func submitToDelivered(ctx context.Context, pool *pgxpool.Pool, ids []string) ([3]float64, error) {
	var out [3]float64
	streams := jobStreams(ids)
	submitted, err := eventstore.FirstOfType(ctx, pool, streams, domain.EventSubmitted)
	if err != nil {
		return out, err
	}
	delivered, err := eventstore.FirstOfType(ctx, pool, streams, domain.EventDelivered)
	if err != nil {
		return out, err
	}
	lat := firstDeliveries(submitted, delivered)
	return [3]float64{ms(lat, 0.50), ms(lat, 0.95), ms(lat, 0.99)}, nil
}

// firstDeliveries pairs each stream's delivery with its submit and returns
// the sorted times between them.
func firstDeliveries(submitted, delivered map[string]eventstore.Record) []time.Duration {
	var lat []time.Duration
	for stream, d := range delivered {
		if s, ok := submitted[stream]; ok {
			lat = append(lat, d.RecordedAt.Sub(s.RecordedAt))
		}
	}
	slices.Sort(lat)
	return lat
}

// benchRouting times single routing decisions over 1,000 agents.
func benchRouting() (p50, p99 float64) {
	agents := make([]domain.RouteAgent, 1000)
	for i := range agents {
		agents[i] = domain.RouteAgent{ID: fmt.Sprintf("agent-%04d", i), Namespace: "default",
			Capabilities: []string{fmt.Sprintf("cap.%02d", i%50)}, Aliases: []string{"pdf", "scan", fmt.Sprintf("alias%d", i%7)},
			Weight: 1 + i%100, MaxConcurrent: 10, InFlight: i % 10, RolloutPercent: 100, State: domain.AgentHealthy}
	}
	ix := domain.NewRouteIndex(agents)
	cfg := domain.DefaultRouteConfig()
	times := make([]time.Duration, 100000)
	for i := range times {
		req := domain.RouteRequest{JobID: strconv.Itoa(i), Namespace: "default", Capability: fmt.Sprintf("cap.%02d", i%50), Hint: "a scanned pdf"}
		t0 := time.Now()
		ix.Route(req, cfg, rand.IntN)
		times[i] = time.Since(t0)
	}
	slices.Sort(times)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }
	return us(times[len(times)/2]), us(times[len(times)*99/100])
}

// peakRSSMB is the process's peak resident set (VmHWM).
func peakRSSMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	return parseVmHWM(b)
}

var vmHWM = regexp.MustCompile(`VmHWM:\s+(\d+) kB`)

// parseVmHWM reads the peak resident set of /proc/PID/status, in MB.
func parseVmHWM(status []byte) float64 {
	m := vmHWM.FindSubmatch(status)
	if m == nil {
		return 0
	}
	kb, _ := strconv.ParseFloat(string(m[1]), 64)
	return kb / 1024
}

func hostDescription() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return cpuModel(b, runtime.GOOS+"/"+runtime.GOARCH)
}

var modelName = regexp.MustCompile(`model name\s*:\s*(.+)`)

// cpuModel is the first model name of /proc/cpuinfo, or def.
func cpuModel(cpuinfo []byte, def string) string {
	if m := modelName.FindSubmatch(cpuinfo); m != nil {
		return strings.TrimSpace(string(m[1]))
	}
	return def
}
