package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentreach/agentreach/health"
	"github.com/agentreach/agentreach/internal/cli"
	"github.com/agentreach/agentreach/internal/devdb"
	"github.com/agentreach/agentreach/internal/harness"
	"github.com/agentreach/agentreach/sql/queries"
)

const help = `agentreach demo: a guided run on this machine

It starts agentreach dev (authentication off), a fleet of agents with a mix
of behaviours (fast, slow, flaky, asynchronous, and one that refuses every
delivery), submits --jobs jobs with a progress bar, waits for every one to
finish, and prints the health of each agent as GET /v1/metrics/agents reports
it, with the dashboard's URL. With --keep it keeps serving afterwards.

`

var qCountOpenJobs = queries.Must("DemoCountOpenJobs")

// Service is Agent-Reach serving in this process with authentication off.
type Service interface {
	// URL is the base URL of its API.
	URL() string
	// Lag is how many events of the log each projection has not folded.
	Lag(ctx context.Context) (map[string]int64, error)
	// Stop stops the service and returns what it stopped with; a second
	// call returns the same.
	Stop() error
}

// Serve starts a Service on the database at dsn, listening on addr.
type Serve func(ctx context.Context, dsn, addr string) (Service, error)

// run is one demo: where it serves, and what it submitted.
type run struct {
	env  cli.Env
	jobs int
	svc  Service
	base string
	pool *pgxpool.Pool
}

// Main runs `agentreach demo` with args; serve starts the service it
// shows.
func Main(ctx context.Context, env cli.Env, args []string, serve Serve) error {
	fs := env.NewFlagSet("demo")
	fs.Usage = func() { fmt.Fprint(fs.Output(), help); fs.PrintDefaults() }
	jobsN := fs.Int("jobs", 2000, "jobs to submit")
	keep := fs.Bool("keep", false, "keep serving after the run (Ctrl-C to stop)")
	addr := fs.String("addr", "127.0.0.1:0", "where the service listens")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	// A fresh database on whatever PostgreSQL dev finds, dropped afterwards.
	db, err := devdb.Open(ctx, devdb.Options{DatabaseURL: env.Getenv("DATABASE_URL")})
	if err != nil {
		return err
	}
	defer db.Close()
	dsn, drop, err := harness.ScratchDatabase(ctx, db.DSN, "agentreach_demo_"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err != nil {
		return err
	}
	defer drop()
	r := &run{env: env, jobs: *jobsN}
	defer r.close()
	if err := r.start(ctx, serve, dsn, *addr); err != nil {
		return err
	}
	agents, err := startFleet(ctx, r.base)
	defer agents.close()
	if err != nil {
		return err
	}
	if err := r.submit(ctx); err != nil {
		return err
	}
	if err := r.waitFinished(ctx, 5*time.Minute); err != nil {
		return err
	}
	if err := r.report(ctx); err != nil {
		return err
	}
	if *keep {
		fmt.Fprintln(env.Stdout, "Still serving; Ctrl-C to stop.")
		<-ctx.Done()
	}
	if err := r.svc.Stop(); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(env.Stderr, "demo: the service stopped with:", err)
	}
	return nil
}

func (r *run) close() {
	if r.svc != nil {
		_ = r.svc.Stop()
	}
	if r.pool != nil {
		r.pool.Close()
	}
}

// start starts the service on dsn and waits until it is ready.
func (r *run) start(ctx context.Context, serve Serve, dsn, addr string) error {
	svc, err := serve(ctx, dsn, addr)
	if err != nil {
		return fmt.Errorf("start agentreach dev: %w", err)
	}
	r.svc, r.base = svc, svc.URL()
	if err := harness.WaitReady(ctx, r.base+"/readyz", 60*time.Second); err != nil {
		return err
	}
	fmt.Fprintf(r.env.Stderr, "demo: Agent-Reach at %s\n", r.base)
	r.pool, err = pgxpool.New(ctx, dsn)
	return err
}

// submit submits the jobs from 16 clients, the capabilities in turn, with
// a progress bar.
func (r *run) submit(ctx context.Context) error {
	caps := []string{"document.ocr", "document.ocr", "text.translate", "text.summarize"}
	var next, finished atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	bar := cli.ProgressBar{W: r.env.Stderr, Label: "demo: submitting", Unit: "jobs"}
	for range 16 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < r.jobs; i = int(next.Add(1)) - 1 {
				body := fmt.Sprintf(`{"capability":%q,"payload":{"n":%d},"max_attempts":3,"backoff_base_ms":200,"timeout_ms":5000}`, caps[i%len(caps)], i)
				if _, err := harness.Submit(ctx, r.base+"/v1/jobs", body); err != nil {
					firstErr.Store(err)
					return
				}
				if n := finished.Add(1); n%50 == 0 || n == int64(r.jobs) {
					bar.Update(n, int64(r.jobs))
				}
			}
		})
	}
	wg.Wait()
	bar.Done()
	if err, ok := firstErr.Load().(error); ok {
		return err
	}
	return nil
}

// waitFinished waits, with a progress bar, until every job is finished and
// every projection has folded the whole log.
func (r *run) waitFinished(ctx context.Context, within time.Duration) error {
	bar := cli.ProgressBar{W: r.env.Stderr, Label: "demo: finishing ", Unit: "jobs"}
	var open int
	ok, err := harness.Until(ctx, within, 200*time.Millisecond, func() (bool, error) {
		if err := r.pool.QueryRow(ctx, qCountOpenJobs).Scan(&open); err != nil {
			return false, err
		}
		lag, err := r.svc.Lag(ctx)
		if err != nil {
			return false, err
		}
		var behind int64
		for _, n := range lag {
			behind += n
		}
		bar.Update(int64(r.jobs-open), int64(r.jobs))
		return open == 0 && behind == 0, nil
	})
	if err != nil {
		return err
	}
	if !ok {
		after := within.String()
		if within%time.Minute == 0 {
			after = fmt.Sprintf("%d minutes", within/time.Minute)
		}
		return fmt.Errorf("%d jobs still open after %s", open, after)
	}
	bar.Done()
	return nil
}

// report prints the health table GET /v1/metrics/agents gives, checks that
// a second read agrees, and says where the dashboard is.
func (r *run) report(ctx context.Context) error {
	u := r.base + "/v1/metrics/agents?window=1h"
	raw, err := harness.Get(ctx, u)
	if err != nil {
		return err
	}
	var metrics struct {
		Agents []health.AgentHealth `json:"agents"`
	}
	if err := json.Unmarshal(raw, &metrics); err != nil {
		return err
	}
	_ = printHealth(r.env.Stdout, metrics.Agents)
	// The table is GET /v1/metrics/agents; a second read must agree, now
	// that every job is finished and every projection caught up.
	again, err := harness.Get(ctx, u)
	if err != nil {
		return err
	}
	if string(again) != string(raw) {
		return fmt.Errorf("the health table changed after the run: %s", again)
	}
	fmt.Fprintf(r.env.Stdout, "\n%d jobs done. The table above is GET %s/v1/metrics/agents?window=1h.\nDashboard: %s/dashboard/\n",
		r.jobs, r.base, r.base)
	return nil
}

// printHealth writes a row per agent; a figure without data is "–".
func printHealth(w io.Writer, agents []health.AgentHealth) error {
	f := func(v *float64, scale float64, format string) string {
		if v == nil {
			return "–"
		}
		return fmt.Sprintf(format, *v*scale)
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tATTEMPTED\tDELIVERED\tSUCCEEDED\tFAILED\tTIMED OUT\tREACH\tSUCCESS\tHEALTH\tP50 ms\tP95 ms")
	for _, a := range agents {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", a.AgentID, a.Attempted, a.Delivered, a.Succeeded, a.Failed, a.TimedOut,
			f(a.ReachRate, 100, "%.1f%%"), f(a.SuccessRate, 100, "%.1f%%"), f(a.HealthScore, 1, "%.2f"), f(a.LatencyP50MS, 1, "%.1f"), f(a.LatencyP95MS, 1, "%.1f"))
	}
	return tw.Flush()
}
