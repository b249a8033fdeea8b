package main

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
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/devdb"
	"github.com/agentreach/agentreach/jobs"
)

const benchHelp = `agentreach bench: measure Agent-Reach against the limits of this machine

In one run, on a fresh database (dropped afterwards), it measures side by side:
submit throughput and latency at 1, 16 and 64 concurrent clients over HTTP;
end-to-end throughput (submit → routed → delivered to inline agents →
SUCCESS → caller callback acknowledged) and submit-to-delivered latency;
routing decision latency over 1,000 agents; the machine's own pgbench -N
and a bare River insert-and-work rate; and the process's peak memory.
It prints a Markdown table with our figures as ratios of the baselines.

`

type benchResult struct {
	rows []benchRow
}

type benchRow struct{ metric, ours, baseline, ratio string }

func (b *benchResult) add(metric, ours, baseline, ratio string) {
	b.rows = append(b.rows, benchRow{metric, ours, baseline, ratio})
}

func (b *benchResult) markdown(header string) string {
	var s strings.Builder
	s.WriteString(header)
	s.WriteString("\n| measure | Agent-Reach | baseline | ratio |\n|---|---|---|---|\n")
	for _, r := range b.rows {
		fmt.Fprintf(&s, "| %s | %s | %s | %s |\n", r.metric, r.ours, r.baseline, r.ratio)
	}
	return s.String()
}

func (m *Main) runBench(ctx context.Context, args []string) error {
	var cfg Config
	fs := m.newFlagSet("bench")
	fs.Usage = func() { fmt.Fprint(fs.Output(), benchHelp); fs.PrintDefaults() }
	fs.StringVar(&cfg.DatabaseURL, "database-url", m.Getenv("DATABASE_URL"), "a PostgreSQL server to create the bench databases on (default: as dev finds one)")
	duration := fs.Duration("duration", 5*time.Second, "how long each submit measurement runs")
	e2eJobs := fs.Int("jobs", 3000, "jobs in the end-to-end measurement")
	out := fs.String("out", "", "also write the Markdown table to this file")
	chart := fs.String("png", "", "also draw the rates as a PNG chart in this file")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the end-to-end phase to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	progress := func(format string, a ...any) { fmt.Fprintf(m.Stderr, "bench: "+format+"\n", a...) }

	db, err := devdb.Open(ctx, devdb.Options{DatabaseURL: cfg.DatabaseURL, Logger: nil})
	if err != nil {
		return err
	}
	defer db.Close()
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	benchDSN, dropBench, err := scratchDatabase(ctx, db.DSN, "agentreach_bench_"+suffix)
	if err != nil {
		return err
	}
	defer dropBench()
	res := &benchResult{}

	// The baselines first, on a quiet machine.
	progress("pgbench -N (8 clients, then 1) …")
	tps8, tps1, pgbenchErr := runPgbench(ctx, db.DSN, "agentreach_pgbench_"+suffix)
	if pgbenchErr != nil {
		progress("pgbench not measured: %v", pgbenchErr)
	}
	progress("bare River insert-and-work rate …")
	riverRate, err := benchRiver(ctx, benchDSN, 20000)
	if err != nil {
		return fmt.Errorf("river baseline: %w", err)
	}
	progress("River: %.0f jobs/s", riverRate)

	// Agent-Reach in this process, authentication off, agents answering inline.
	m2 := NewMain()
	m2.Stdout, m2.Stderr, m2.Getenv = io.Discard, io.Discard, func(string) string { return "" }
	m2.Tune = func(c *Config) {
		c.Jobs.RepairAfter = time.Hour // the submit phase leaves jobs behind on purpose
		c.RateLimit = 0
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	serveDone := make(chan error, 1)
	go func() {
		serveDone <- m2.Run(sctx, []string{"serve", "--insecure", "--addr", "127.0.0.1:0", "--database-url", benchDSN, "--log-level", "error"})
	}()
	select {
	case <-m2.Started():
	case err := <-serveDone:
		return fmt.Errorf("start the service: %w", err)
	}
	base := m2.URL()
	if err := waitHTTP(ctx, base+"/readyz", 60*time.Second); err != nil {
		return err
	}
	app := m2.app
	var acked atomic.Int64
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		acked.Add(1)
	}))
	defer receiver.Close()
	for i := range 4 {
		agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet {
				return
			}
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"status":"SUCCESS","result":{"ok":true}}`)
		}))
		defer agent.Close()
		body := fmt.Sprintf(`{"agent_id":"bench-%d","capabilities":["bench.echo"],"endpoint":%q,"ttl_seconds":60}`, i, agent.URL)
		if _, err := benchPost(base+"/v1/agents", body); err != nil {
			return err
		}
	}
	if err := waitAgentsHealthy(ctx, base, 4, 30*time.Second); err != nil {
		return err
	}

	// Submits alone: dispatch paused, so that only the submit path is measured.
	for _, q := range []string{jobs.QueueDispatchHigh, jobs.QueueDispatchNormal, jobs.QueueDispatchLow} {
		if err := app.river.QueuePause(ctx, q, nil); err != nil {
			return err
		}
	}
	var bars []chartBar
	var best float64
	for _, clients := range []int{1, 16, 64} {
		progress("submit throughput, %d clients, %s …", clients, *duration)
		rate, lat, err := benchSubmits(ctx, base, clients, *duration)
		if err != nil {
			return err
		}
		best = max(best, rate)
		bars = append(bars, chartBar{label: fmt.Sprintf("durable submits, %d clients", clients), value: rate})
		ratio := "n/a"
		if tps8 > 0 {
			ratio = fmt.Sprintf("%.2f × pgbench", rate/tps8)
		}
		res.add(fmt.Sprintf("durable submits/s, %d clients (p50 / p95 / p99 ms)", clients),
			fmt.Sprintf("%.0f (%.2f / %.2f / %.2f)", rate, ms(lat, 0.50), ms(lat, 0.95), ms(lat, 0.99)),
			fmt.Sprintf("pgbench -N %s tps", fmtRate(tps8)), ratio)
	}
	// Clear the submit phase's backlog, then let dispatch run.
	if err := app.jobs.DropDispatchBacklog(ctx); err != nil {
		return err
	}
	for _, q := range []string{jobs.QueueDispatchHigh, jobs.QueueDispatchNormal, jobs.QueueDispatchLow} {
		if err := app.river.QueueResume(ctx, q, nil); err != nil {
			return err
		}
	}

	progress("end to end, %d jobs with callbacks …", *e2eJobs)
	acked.Store(0)
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer f.Close()
	}
	e2eRate, ids, err := benchEndToEnd(ctx, base, receiver.URL, *e2eJobs, &acked)
	if *cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return err
	}
	bars = append(bars, chartBar{label: "end to end, with callbacks", value: e2eRate})
	res.add("end-to-end jobs/s (submit → delivered → SUCCESS → callback acknowledged)", fmt.Sprintf("%.0f", e2eRate),
		fmt.Sprintf("bare River %.0f jobs/s", riverRate), fmt.Sprintf("%.2f × River", e2eRate/riverRate))
	loaded, err := submitToDelivered(ctx, app.pool, ids)
	if err != nil {
		return err
	}
	res.add("submit → delivered under that load (p50 / p95 / p99 ms)", fmt.Sprintf("%.2f / %.2f / %.2f", loaded[0], loaded[1], loaded[2]), "", "")

	progress("submit → delivered, lightly loaded …")
	var light []string
	for range 200 {
		id, err := benchPost(base+"/v1/jobs", `{"capability":"bench.echo","payload":{"light":true}}`)
		if err != nil {
			return err
		}
		light = append(light, id)
		time.Sleep(5 * time.Millisecond) // a light, steady load: one submit every 5 ms
	}
	if err := waitDelivered(ctx, app.pool, light, 60*time.Second); err != nil {
		return err
	}
	lightLat, err := submitToDelivered(ctx, app.pool, light)
	if err != nil {
		return err
	}
	res.add("submit → delivered, lightly loaded (p50 / p95 / p99 ms)", fmt.Sprintf("%.2f / %.2f / %.2f", lightLat[0], lightLat[1], lightLat[2]),
		"seed design: 3 ms submit→enqueue, 5.8 ms forwarding", "")

	progress("routing decisions over 1,000 agents …")
	p50, p99 := benchRouting()
	res.add("routing decision, 1,000 agents / 50 capabilities (p50 / p99 µs)", fmt.Sprintf("%.1f / %.1f", p50, p99), "aim: p99 ≤ 100 µs", "")
	if pgbenchErr == nil {
		res.add("pgbench -N, 1 client", fmtRate(tps1)+" tps", "", "")
	}
	res.add("peak RSS of the process (service, agents and load generator)", fmt.Sprintf("%.0f MB", peakRSSMB()), "aim: ≤ 200 MB", "")

	stop()
	if err := <-serveDone; err != nil && !errors.Is(err, context.Canceled) {
		progress("the service stopped with: %v", err)
	}
	header := fmt.Sprintf("Measured %s on %s (%d cores, %s), PostgreSQL on the same host.\n",
		time.Now().UTC().Format("2006-01-02"), hostDescription(), runtime.NumCPU(), runtime.Version())
	table := res.markdown(header)
	fmt.Fprint(m.Stdout, table)
	if *out != "" {
		if err := os.WriteFile(*out, []byte(table), 0o644); err != nil {
			return err
		}
	}
	if *chart != "" {
		if tps8 > 0 {
			bars = append(bars, chartBar{label: "pgbench -N, 8 clients (tps)", value: tps8, base: true})
		}
		bars = append(bars, chartBar{label: "bare River insert-and-work", value: riverRate, base: true})
		title := fmt.Sprintf("Agent-Reach vs this machine (%s, %d cores, %s)", hostDescription(), runtime.NumCPU(), time.Now().UTC().Format("2006-01-02"))
		if err := writeBenchChart(*chart, title, bars); err != nil {
			return err
		}
	}
	return nil
}

func fmtRate(v float64) string {
	if v <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f", v)
}

func ms(lat []time.Duration, q float64) float64 {
	if len(lat) == 0 {
		return 0
	}
	return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds()) / 1000
}

// scratchDatabase creates a database next to dsn's and returns its URL and
// a function that drops it.
func scratchDatabase(ctx context.Context, dsn, name string) (string, func(), error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", nil, fmt.Errorf("create %s: %w", name, err)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", nil, err
	}
	u.Path = "/" + name
	drop := func() {
		c, err := pgx.Connect(context.Background(), dsn)
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
			c.Close(context.Background())
		}
	}
	return u.String(), drop, nil
}

// runPgbench runs pgbench -N with 8 and with 1 clients on a scratch
// database and returns their transactions per second.
func runPgbench(ctx context.Context, dsn, name string) (tps8, tps1 float64, err error) {
	bin, err := exec.LookPath("pgbench")
	if err != nil {
		matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
		if len(matches) == 0 {
			return 0, 0, fmt.Errorf("pgbench not found")
		}
		slices.Sort(matches)
		bin = matches[len(matches)-1]
	}
	scratch, drop, err := scratchDatabase(ctx, dsn, name)
	if err != nil {
		return 0, 0, err
	}
	defer drop()
	if out, err := exec.CommandContext(ctx, bin, "-i", "-q", "-s", "1", scratch).CombinedOutput(); err != nil {
		return 0, 0, fmt.Errorf("pgbench -i: %v: %s", err, out)
	}
	run := func(clients int) (float64, error) {
		out, err := exec.CommandContext(ctx, bin, "-N", "-c", strconv.Itoa(clients), "-j", "2", "-T", "8", scratch).CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("pgbench -N: %v: %s", err, out)
		}
		m := regexp.MustCompile(`tps = ([0-9.]+)`).FindSubmatch(out)
		if m == nil {
			return 0, fmt.Errorf("no tps in pgbench output: %s", out)
		}
		return strconv.ParseFloat(string(m[1]), 64)
	}
	if tps8, err = run(8); err != nil {
		return 0, 0, err
	}
	tps1, err = run(1)
	return tps8, tps1, err
}

type benchNoop struct{}

func (benchNoop) Kind() string { return "bench_noop" }

// benchRiver inserts n no-op jobs and works them with a bare River client:
// the rate River reaches on this machine and database.
func benchRiver(ctx context.Context, dsn string, n int) (float64, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	if err := migrateAll(ctx, pool); err != nil {
		return 0, err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(context.Context, *river.Job[benchNoop]) error { return nil }))
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
		params[i] = river.InsertManyParams{Args: benchNoop{}, InsertOpts: &river.InsertOpts{Queue: "bench"}}
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

func benchPost(u, body string) (string, error) {
	resp, err := http.Post(u, "application/json", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("POST %s: %d %s", u, resp.StatusCode, b)
	}
	var out struct {
		JobID string `json:"job_id"`
	}
	_ = json.Unmarshal(b, &out)
	return out.JobID, nil
}

func waitHTTP(ctx context.Context, u string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(u); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond) // poll interval while waiting on the condition
	}
	return fmt.Errorf("%s not ready within %s", u, within)
}

func waitAgentsHealthy(ctx context.Context, base string, n int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + "/v1/agents?state=HEALTHY")
		if err == nil {
			var out struct {
				Agents []json.RawMessage `json:"agents"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&out)
			resp.Body.Close()
			if len(out.Agents) >= n {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond) // poll interval while waiting on the condition
	}
	return fmt.Errorf("agents not healthy within %s", within)
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
	body := []byte(`{"capability":"bench.echo","payload":{"doc":"lorem ipsum dolor sit amet"}}`)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for time.Now().Before(end) && ctx.Err() == nil {
				t0 := time.Now()
				resp, err := client.Post(base+"/v1/jobs", "application/json", bytes.NewReader(body))
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusAccepted {
						err = fmt.Errorf("submit answered %d", resp.StatusCode)
					}
				}
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, nil, firstErr
	}
	slices.Sort(lat)
	return float64(len(lat)) / time.Since(start).Seconds(), lat, nil
}

// benchEndToEnd submits n jobs with callbacks from 32 clients and returns
// jobs/s from the first submit to the last acknowledged callback.
func benchEndToEnd(ctx context.Context, base, callback string, n int, acked *atomic.Int64) (float64, []string, error) {
	ids := make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	body := fmt.Sprintf(`{"capability":"bench.echo","payload":{"e2e":true},"callback_url":%q}`, callback)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				id, err := benchPost(base+"/v1/jobs", body)
				if err != nil {
					firstErr.Store(err)
					return
				}
				ids[i] = id
			}
		}()
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return 0, nil, err
	}
	deadline := time.Now().Add(5 * time.Minute)
	for acked.Load() < int64(n) {
		if time.Now().After(deadline) {
			return 0, nil, fmt.Errorf("%d of %d callbacks acknowledged in 5 minutes", acked.Load(), n)
		}
		time.Sleep(10 * time.Millisecond) // poll interval while waiting on the condition
	}
	return float64(n) / time.Since(start).Seconds(), ids, nil
}

func waitDelivered(ctx context.Context, pool *pgxpool.Pool, ids []string, within time.Duration) error {
	streams := jobStreams(ids)
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		delivered, err := eventstore.FirstOfType(ctx, pool, streams, domain.EventDelivered)
		if err != nil {
			return err
		}
		if len(delivered) >= len(ids) {
			return nil
		}
		time.Sleep(20 * time.Millisecond) // poll interval while waiting on the condition
	}
	return fmt.Errorf("jobs not delivered within %s", within)
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
	var lat []time.Duration
	for stream, d := range delivered {
		if s, ok := submitted[stream]; ok {
			lat = append(lat, d.RecordedAt.Sub(s.RecordedAt))
		}
	}
	slices.Sort(lat)
	return [3]float64{ms(lat, 0.50), ms(lat, 0.95), ms(lat, 0.99)}, nil
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
	m := regexp.MustCompile(`VmHWM:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	kb, _ := strconv.ParseFloat(string(m[1]), 64)
	return kb / 1024
}

func hostDescription() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		if m := regexp.MustCompile(`model name\s*:\s*(.+)`).FindSubmatch(b); m != nil {
			return strings.TrimSpace(string(m[1]))
		}
	}
	return runtime.GOOS + "/" + runtime.GOARCH
}
