package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/devdb"
	"github.com/agentreach/agentreach/jobs"
	"github.com/agentreach/agentreach/projection"
	arsql "github.com/agentreach/agentreach/sql"
)

const chaosHelp = `agentreach chaos: a run that tries to lose jobs, then proves it did not

It starts a private PostgreSQL cluster and --processes agentreach serve
processes on it, a fleet of 12 agents of which a third misbehave (refuse,
hang, flaky, die mid-run), and submits --jobs jobs with callbacks through
all processes. During the run it SIGKILLs one service process (restarting
it when it is the only one) and restarts PostgreSQL once. Then the
invariant checker (agentreach verify) proves: every job terminal, every
stream valid with gap-free versions, no job with two successes,
DEAD_LETTER only after max_attempts, every callback acknowledged, and
projections equal to a rebuild.

`

type chaosOptions struct {
	Processes int
	Jobs      int
	// Exe and Env start the service processes (default: this binary).
	Exe string
	Env []string
	Log func(format string, args ...any)
}

func (m *Main) runChaos(ctx context.Context, args []string) error {
	fs := m.newFlagSet("chaos")
	fs.Usage = func() { fmt.Fprint(fs.Output(), chaosHelp); fs.PrintDefaults() }
	opts := chaosOptions{}
	fs.IntVar(&opts.Processes, "processes", 1, "service processes on the one database")
	fs.IntVar(&opts.Jobs, "jobs", 2000, "jobs to submit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts.Log = func(format string, a ...any) { fmt.Fprintf(m.Stderr, "chaos: "+format+"\n", a...) }
	rep, err := runChaos(ctx, opts)
	if err != nil {
		return err
	}
	return m.printVerify(rep)
}

// printVerify prints a verification report and fails when it found any
// violation.
func (m *Main) printVerify(rep jobs.VerifyReport) error {
	fmt.Fprint(m.Stdout, formatVerify(rep))
	if !rep.OK() {
		return fmt.Errorf("%d invariant violations", len(rep.Violations))
	}
	return nil
}

func formatVerify(rep jobs.VerifyReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "jobs: %d, terminal: %d, by status: %v\n", rep.Jobs, rep.Terminal, rep.Statuses)
	if rep.OK() {
		b.WriteString("all invariants hold\n")
	}
	for _, v := range rep.Violations {
		fmt.Fprintf(&b, "VIOLATION: %s\n", v)
	}
	return b.String()
}

// chaosService is one `agentreach serve` child process.
type chaosService struct {
	addr string
	cmd  *exec.Cmd
	out  *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func runChaos(ctx context.Context, o chaosOptions) (jobs.VerifyReport, error) {
	var rep jobs.VerifyReport
	if o.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return rep, err
		}
		o.Exe = exe
	}
	o.Processes = max(o.Processes, 1)
	db, err := devdb.Open(ctx, devdb.Options{LocalAddr: "127.0.0.1:1", NoDefaultBinSearch: false})
	if err != nil {
		return rep, fmt.Errorf("a private PostgreSQL for the chaos run: %w", err)
	}
	defer db.Close()
	o.Log("private PostgreSQL at %s (%s)", db.DataDir(), db.DSN)
	pool, err := pgxpool.New(ctx, db.DSN)
	if err != nil {
		return rep, err
	}
	defer pool.Close()
	if err := migrateAll(ctx, pool); err != nil {
		return rep, err
	}

	services := make([]*chaosService, o.Processes)
	start := func(i int) error {
		addr := services[i].addr
		cmd := exec.Command(o.Exe, "serve", "--insecure", "--addr", addr, "--database-url", db.DSN, "--log-level", "warn",
			"--deadline-sweep-interval", "250ms", "--lost-after", "2s", "--max-conns", "30")
		cmd.Env = append(os.Environ(), o.Env...)
		out := &lockedBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			return err
		}
		services[i].cmd, services[i].out = cmd, out
		return waitHTTP(ctx, "http://"+addr+"/readyz", 60*time.Second)
	}
	for i := range services {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return rep, err
		}
		services[i] = &chaosService{addr: l.Addr().String()}
		l.Close()
		if err := start(i); err != nil {
			return rep, fmt.Errorf("start service %d: %w", i, err)
		}
	}
	defer func() {
		for _, s := range services {
			if s.cmd != nil && s.cmd.Process != nil {
				_ = s.cmd.Process.Signal(syscall.SIGTERM)
				_ = s.cmd.Wait()
			}
		}
	}()
	var alive atomic.Int64 // bit i set: service i may be called
	alive.Store(1<<o.Processes - 1)
	pick := func(k int) string {
		for j := range o.Processes {
			i := (k + j) % o.Processes
			if alive.Load()&(1<<i) != 0 {
				return "http://" + services[i].addr
			}
		}
		return "http://" + services[0].addr
	}
	o.Log("%d service processes up", o.Processes)

	// The fleet: two thirds behave, one third does not.
	var acked sync.Map // job id → acknowledgements
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var cb struct {
			JobID string `json:"job_id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&cb)
		n, _ := acked.LoadOrStore(cb.JobID, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
	}))
	defer receiver.Close()
	fleet, stopFleet := startChaosFleet(ctx, pick, o.Log)
	defer stopFleet()
	if err := waitAgentsHealthy(ctx, pick(0), len(fleet)-1, 60*time.Second); err != nil {
		return rep, err
	}

	// Submit, with the chaos in the middle.
	var accepted sync.Map
	var submitted atomic.Int64
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Timeout: 10 * time.Second}
			for {
				i := int(next.Add(1)) - 1
				if i >= o.Jobs {
					return
				}
				body := fmt.Sprintf(`{"capability":"chaos.work","payload":{"i":%d},"timeout_ms":2000,"max_attempts":5,"backoff_base_ms":200,"callback_url":%q}`, i, receiver.URL)
				key := fmt.Sprintf("chaos-%d", i)
				for try := 0; ; try++ { // retry with the same key until accepted
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, pick(w+try)+"/v1/jobs", strings.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Idempotency-Key", key)
					resp, err := client.Do(req)
					if err == nil {
						var out struct {
							JobID string `json:"job_id"`
						}
						_ = json.NewDecoder(resp.Body).Decode(&out)
						resp.Body.Close()
						if resp.StatusCode == http.StatusAccepted && out.JobID != "" {
							accepted.Store(out.JobID, true)
							submitted.Add(1)
							break
						}
					}
					if ctx.Err() != nil || try > 200 {
						return
					}
					time.Sleep(100 * time.Millisecond) // the service or database is down: a caller retries later
				}
			}
		}()
	}
	waitFor := func(n int64) {
		for submitted.Load() < n && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond) // poll interval while waiting on the condition
		}
	}
	waitFor(int64(o.Jobs) * 3 / 10)
	victim := o.Processes - 1
	o.Log("SIGKILL service %d after %d submits", victim, submitted.Load())
	alive.Store(alive.Load() &^ (1 << victim))
	_ = services[victim].cmd.Process.Signal(syscall.SIGKILL)
	_ = services[victim].cmd.Wait()
	services[victim].cmd = nil
	if o.Processes == 1 {
		if err := start(victim); err != nil {
			return rep, fmt.Errorf("restart service: %w", err)
		}
		alive.Store(alive.Load() | 1<<victim)
		o.Log("service restarted")
	}
	waitFor(int64(o.Jobs) * 6 / 10)
	o.Log("restarting PostgreSQL after %d submits", submitted.Load())
	if err := db.Restart(ctx); err != nil {
		return rep, fmt.Errorf("restart PostgreSQL: %w", err)
	}
	wg.Wait()
	total := 0
	accepted.Range(func(any, any) bool { total++; return true })
	o.Log("%d jobs accepted; waiting for every one to finish and call back", total)

	deadline := time.Now().Add(3 * time.Minute)
	for {
		var open, unacked int
		err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status NOT IN ('SUCCESS','FAILED','DEAD_LETTER','CANCELLED','REJECTED')),
			count(*) FILTER (WHERE NOT callback_done) FROM jobs`).Scan(&open, &unacked)
		if err == nil && open == 0 && unacked == 0 {
			var n int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM jobs`).Scan(&n); err == nil && n >= total {
				break
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			var checkpoints string
			inLog, _ := eventstore.CountStreams(ctx, pool, domain.JobStream(""))
			_ = pool.QueryRow(ctx, `SELECT string_agg(name || '@' || tx_id::text || '/' || position, ' ') FROM projection_checkpoints`).Scan(&checkpoints)
			o.Log("still %d open and %d callbacks unacknowledged; %d of %d jobs in the log; checkpoints %s", open, unacked, inLog, total, checkpoints)
			for i, s := range services {
				if s.out != nil {
					o.Log("log of service %d:\n%s", i, tail(s.out.String(), 15))
				}
			}
			break
		}
		time.Sleep(200 * time.Millisecond) // poll interval while waiting on the condition
	}
	for i, s := range services {
		if s.cmd != nil {
			_ = s.cmd.Process.Signal(syscall.SIGTERM)
			_ = s.cmd.Wait()
			services[i].cmd = nil
		}
	}
	o.Log("verifying")
	rep, err = verifyDatabase(ctx, pool)
	if err != nil {
		return rep, err
	}
	if rep.Jobs < total {
		rep.Violations = append(rep.Violations, fmt.Sprintf("%d jobs accepted but %d in the log", total, rep.Jobs))
	}
	return rep, nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// startChaosFleet runs 12 agents in this process: 8 good (inline or
// asynchronous) and 4 bad (refuse with 503, hang past the deadline, flaky,
// and one that dies mid-run). They register and heartbeat through
// whichever service process answers.
func startChaosFleet(ctx context.Context, server func(int) string, logf func(string, ...any)) ([]*httptest.Server, func()) {
	behaviours := []string{"inline", "inline", "inline", "inline", "inline", "async", "async", "async", "refuse", "hang", "flaky", "dies"}
	fctx, cancel := context.WithCancel(ctx)
	var servers []*httptest.Server
	client := &http.Client{Timeout: 5 * time.Second}
	for i, b := range behaviours {
		id := fmt.Sprintf("chaos-%02d-%s", i, b)
		var token atomic.Value
		token.Store("")
		var dead atomic.Bool
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if dead.Load() {
				hj, ok := w.(http.Hijacker)
				if ok {
					if c, _, err := hj.Hijack(); err == nil {
						_ = c.Close() // the agent dies mid-answer
					}
				}
				return
			}
			if r.Method == http.MethodGet {
				return
			}
			var env jobs.Envelope
			_ = json.NewDecoder(r.Body).Decode(&env)
			switch b {
			case "refuse":
				w.WriteHeader(http.StatusServiceUnavailable)
			case "hang":
				select {
				case <-time.After(time.Until(env.Deadline) + time.Second):
				case <-r.Context().Done():
				}
			case "flaky":
				if rand.IntN(2) == 0 {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				_, _ = io.WriteString(w, `{"status":"SUCCESS","result":{"flaky":true}}`)
			case "async":
				w.WriteHeader(http.StatusAccepted)
				go func() {
					for try := 0; try < 50 && time.Now().Before(env.Deadline); try++ {
						req, _ := http.NewRequest(http.MethodPost, env.ResultURL, strings.NewReader(
							fmt.Sprintf(`{"status":"SUCCESS","result":{"async":true},"attempt":%d}`, env.Attempt)))
						req.Header.Set("Authorization", "Bearer "+token.Load().(string))
						if resp, err := client.Do(req); err == nil {
							resp.Body.Close()
							if resp.StatusCode < 500 {
								return
							}
						}
						time.Sleep(100 * time.Millisecond) // the service is down: retry soon
					}
				}()
			default:
				_, _ = io.WriteString(w, `{"status":"SUCCESS","result":{"ok":true}}`)
			}
		}))
		servers = append(servers, srv)
		if b == "dies" {
			go func() {
				select {
				case <-fctx.Done():
				case <-time.After(3 * time.Second):
					logf("agent %s dies", id)
					dead.Store(true)
				}
			}()
		}
		go func(k int) { // register, then heartbeat through any live service
			body := fmt.Sprintf(`{"agent_id":%q,"capabilities":["chaos.work"],"endpoint":%q,"ttl_seconds":10}`, id, srv.URL)
			for try := 0; fctx.Err() == nil; try++ {
				if dead.Load() {
					return
				}
				if token.Load().(string) == "" {
					resp, err := client.Post(server(k+try)+"/v1/agents", "application/json", strings.NewReader(body))
					if err == nil {
						var out struct {
							Token string `json:"token"`
						}
						_ = json.NewDecoder(resp.Body).Decode(&out)
						resp.Body.Close()
						if resp.StatusCode == http.StatusCreated {
							token.Store(out.Token)
						}
					}
				} else {
					req, _ := http.NewRequest(http.MethodPut, server(k+try)+"/v1/agents/"+id+"/heartbeat", nil)
					req.Header.Set("Authorization", "Bearer "+token.Load().(string))
					if resp, err := client.Do(req); err == nil {
						resp.Body.Close()
						if resp.StatusCode == http.StatusNotFound {
							token.Store("")
						}
					}
				}
				select {
				case <-fctx.Done():
				case <-time.After(2 * time.Second):
				}
			}
		}(i)
	}
	return servers, func() {
		cancel()
		for _, s := range servers {
			s.Close()
		}
	}
}

func (m *Main) runVerify(ctx context.Context, args []string) error {
	var cfg Config
	fs := m.newFlagSet("verify")
	m.commonFlags(fs, &cfg, "")
	if _, err := m.parseService(fs, &cfg, args); err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := arsql.Check(ctx, pool); err != nil {
		return err
	}
	rep, err := verifyDatabase(ctx, pool)
	if err != nil {
		return err
	}
	return m.printVerify(rep)
}

// verifyDatabase runs jobs.Verify over every projection of a database.
func verifyDatabase(ctx context.Context, pool *pgxpool.Pool) (jobs.VerifyReport, error) {
	store := eventstore.New(pool)
	tables := map[string][]string{}
	for _, p := range projection.All() {
		tables[p.Name()] = projection.Tables(p.Name())
	}
	return jobs.Verify(ctx, store, eventstore.NewProjector(store, discardLogger(), projection.All()...), tables)
}
