package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentreach/agentreach/internal/cli"
	"github.com/agentreach/agentreach/internal/devdb"
	"github.com/agentreach/agentreach/internal/harness"
)

const help = `agentreach bench: measure Agent-Reach against the limits of this machine

In one run, on a fresh database (dropped afterwards), it measures side by side:
submit throughput and latency at 1, 16 and 64 concurrent clients over HTTP;
end-to-end throughput (submit → routed → delivered to inline agents →
SUCCESS → caller callback acknowledged), beside a no-durability relay that
makes the same three HTTP exchanges a job and writes nothing (the floor
of any durable design here); submit-to-delivered latency
under an open-loop load (a constant arrival rate, by default half the
end-to-end peak) and lightly loaded; the same through pull agents that claim their work (submit → claimed →
SUCCESS → callback acknowledged) and submit-to-claimed latency, under that
load and at half its peak; a caller's blocking call (submit with wait_ms)
of a 1.5 ms job; saturated fleets of slow agents with few slots,
push and pull, offered 1.5 times their capacity (slot utilisation, and how
long high jobs wait against low ones); routing decision latency over 1,000 agents; the machine's own pgbench -N
and a bare River insert-and-work rate; and the process's peak memory.
It prints a Markdown table with our figures as ratios of the baselines.

`

// Service is Agent-Reach serving in this process with authentication off,
// for the bench to load.
type Service interface {
	// URL is the base URL of its API.
	URL() string
	// SetDispatchPaused pauses or resumes the dispatch queues, so that
	// submits can be measured alone.
	SetDispatchPaused(ctx context.Context, paused bool) error
	// DropDispatchBacklog drops the dispatches and timers left waiting.
	DropDispatchBacklog(ctx context.Context) error
	// Stop stops the service and returns what it stopped with; a second
	// call returns the same.
	Stop() error
}

// Serve starts a Service on the database at dsn.
type Serve func(ctx context.Context, dsn string, args ...string) (Service, error)

type options struct {
	databaseURL string
	duration    time.Duration
	jobs        int
	out, chart  string
	cpuProfile  string
	// mutexProfile and blockProfile, like cpuProfile, profile the
	// end-to-end phase.
	mutexProfile, blockProfile string
	// memProfile is where the allocations up to the end of the
	// end-to-end phase are written.
	memProfile string
	// only names the measurements to run (phaseNames); empty runs all.
	only string
	// rate is the open loop's offered load in jobs/s; 0 is half the
	// measured end-to-end peak. openFor is how long it is offered.
	rate    float64
	openFor time.Duration
	// satFor is how long the saturated fleet is offered more work than
	// it can take.
	satFor time.Duration
	// grow, when set, is how many jobs the growth fills the database to
	// (and the run measures nothing else).
	grow int
	// soak, when set, is how long the soak offers its steady load (and
	// the run measures nothing else): soakRate jobs/s, the default
	// namespace keeping its history soakKeep, sampled every soakEvery.
	soak, soakKeep, soakEvery time.Duration
	soakRate                  float64
}

// phaseNames are the measurements --only may name, in the order they run.
var phaseNames = []string{"pgbench", "river", "submits", "e2e", "relay", "open", "pull", "saturated", "light", "wait", "lookup", "routing"}

// runs reports whether the measurement phase is to run.
func (o options) runs(phase string) bool {
	if o.only == "" {
		return true
	}
	for _, p := range strings.Split(o.only, ",") {
		if strings.TrimSpace(p) == phase {
			return true
		}
	}
	return false
}

func parseFlags(env cli.Env, args []string) (options, error) {
	var o options
	fs := env.NewFlagSet("bench")
	fs.Usage = func() { fmt.Fprint(fs.Output(), help); fs.PrintDefaults() }
	cli.SecretVar(fs, &o.databaseURL, "database-url", env.Getenv("DATABASE_URL"), "a PostgreSQL server to create the bench databases on (default: as dev finds one)")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "how long each submit measurement runs")
	fs.IntVar(&o.jobs, "jobs", 3000, "jobs in the end-to-end measurement")
	fs.StringVar(&o.out, "out", "", "also write the Markdown table to this file")
	fs.StringVar(&o.chart, "png", "", "also draw the rates as a PNG chart in this file")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the end-to-end phase to this file")
	fs.StringVar(&o.mutexProfile, "mutexprofile", "", "write a mutex contention profile of the end-to-end phase to this file")
	fs.StringVar(&o.blockProfile, "blockprofile", "", "write a blocking profile of the end-to-end phase to this file")
	fs.StringVar(&o.memProfile, "memprofile", "", "write the allocations up to the end of the end-to-end phase to this file")
	fs.StringVar(&o.only, "only", "", "run only these measurements, comma-separated, of: "+strings.Join(phaseNames, ", "))
	fs.Float64Var(&o.rate, "rate", 0, "the open loop's offered load in jobs/s (default: half the measured end-to-end peak)")
	fs.DurationVar(&o.openFor, "open-for", 10*time.Second, "how long the open loop offers its load")
	fs.DurationVar(&o.satFor, "sat-for", 20*time.Second, "how long the saturated fleet is offered 1.5 times the work it can take")
	fs.IntVar(&o.grow, "grow", 0, "instead of the measurements above, grow the database to this many jobs through the normal write path, measuring at a hundredth, a tenth and all of it: bytes a job by table, list and view reads, fill rate")
	fs.DurationVar(&o.soak, "soak", 0, "instead of the measurements above, offer a steady load this long with retention on (partitions of a minute, archived to a scratch folder) and sample the database's size: it should stop growing")
	fs.Float64Var(&o.soakRate, "soak-rate", 100, "the soak's steady load, jobs/s")
	fs.DurationVar(&o.soakKeep, "soak-retention", 2*time.Minute, "how long the soak's namespace keeps a finished job's history (at least 1m)")
	fs.DurationVar(&o.soakEvery, "soak-every", 30*time.Second, "how often the soak samples the database")
	if err := cli.ParseFlags(fs, args); err != nil {
		return o, err
	}
	if o.grow < 0 || o.grow > 0 && o.only != "" {
		return o, fmt.Errorf("--grow takes a positive number of jobs and runs alone, without --only: %w", cli.ErrUsage)
	}
	if o.soak < 0 || o.soak > maxSoak || o.soak > 0 && (o.only != "" || o.grow > 0) || o.soak > 0 && (o.soakRate <= 0 || o.soakKeep < time.Minute || o.soakEvery <= 0) {
		return o, fmt.Errorf("--soak takes a positive duration up to %s (the bench's agents hold an hour's lease) and runs alone, with --soak-rate > 0, --soak-retention ≥ 1m and --soak-every > 0: %w", maxSoak, cli.ErrUsage)
	}
	for _, p := range strings.Split(o.only, ",") {
		if p = strings.TrimSpace(p); p != "" && !slices.Contains(phaseNames, p) {
			return o, fmt.Errorf("--only: no measurement %q (%s): %w", p, strings.Join(phaseNames, ", "), cli.ErrUsage)
		}
	}
	return o, nil
}

// run is one bench run: its options, what it started and what it measured.
type run struct {
	env cli.Env
	o   options

	svc      Service
	base     string
	pool     *pgxpool.Pool // the bench database, to read the log
	receiver *httptest.Server
	agents   []*httptest.Server
	acked    atomic.Int64 // callbacks the receiver was sent

	tps8, tps1, riverRate float64
	pgbenchErr            error
	peak                  float64 // end-to-end jobs/s through push agents
	relayRate             float64 // end-to-end jobs/s through the no-durability relay
	res                   result
	bars                  []chartBar
	growth                []growStep
	afterGrowth           []growFigure
}

// Main runs `agentreach bench` with args; serve starts the service it
// measures.
func Main(ctx context.Context, env cli.Env, args []string, serve Serve) error {
	o, err := parseFlags(env, args)
	if err != nil {
		return err
	}
	db, err := devdb.Open(ctx, devdb.Options{DatabaseURL: o.databaseURL, Logger: nil})
	if err != nil {
		return err
	}
	defer db.Close()
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	benchDSN, dropBench, err := harness.ScratchDatabase(ctx, db.DSN, "agentreach_bench_"+suffix)
	if err != nil {
		return err
	}
	defer dropBench()
	r := &run{env: env, o: o}
	defer r.close()
	if o.grow > 0 {
		return r.growOnly(ctx, serve, benchDSN)
	}
	if o.soak > 0 {
		return r.soakOnly(ctx, serve, db.DSN, benchDSN)
	}
	// The baselines first, on a quiet machine.
	if err := r.baselines(ctx, db.DSN, benchDSN, "agentreach_pgbench_"+suffix); err != nil {
		return err
	}
	if err := r.start(ctx, serve, benchDSN); err != nil {
		return err
	}
	for _, step := range []struct {
		phase string
		run   func(context.Context) error
	}{{"submits", r.submits}, {"e2e", r.endToEnd}, {"relay", r.relayEndToEnd}, {"open", r.openLoop}, {"pull", r.endToEndPull}, {"saturated", r.saturated}, {"light", r.lightLoad}, {"wait", r.waitRoundTrips}, {"lookup", r.lookups}} {
		if !o.runs(step.phase) {
			continue
		}
		if err := r.settle(ctx); err != nil {
			return err
		}
		refusedSubmits.Store(0)
		if err := step.run(ctx); err != nil {
			return err
		}
		r.progress("%s: done; the process's peak RSS so far %.0f MB", step.phase, peakRSSMB())
		if n := refusedSubmits.Load(); n > 0 && step.phase != "submits" {
			// Refused submits were waited out and sent again: the phase
			// ran to its end, slower than the service could have taken it.
			r.progress("%s: %d submits refused (429/503) and sent again after their Retry-After", step.phase, n)
			r.res.add(step.phase+": submits refused and sent again", fmt.Sprintf("%d", n), "", "")
		}
	}
	r.routingAndMemory()
	if err := r.svc.Stop(); err != nil && !errors.Is(err, context.Canceled) {
		r.progress("the service stopped with: %v", err)
	}
	return r.report()
}

// growOnly is a run of the growth alone (--grow): the service on the
// bench database, filled and measured step by step, and its table.
func (r *run) growOnly(ctx context.Context, serve Serve, dsn string) error {
	if err := r.start(ctx, serve, dsn); err != nil {
		return err
	}
	if err := r.grow(ctx); err != nil {
		return err
	}
	if err := r.svc.Stop(); err != nil && !errors.Is(err, context.Canceled) {
		r.progress("the service stopped with: %v", err)
	}
	table := fmt.Sprintf("Grown %s on %s (%d cores, %s), PostgreSQL on the same host.\n\n%s",
		time.Now().UTC().Format("2006-01-02"), hostDescription(), runtime.NumCPU(), runtime.Version(), growthTable(r.growth)+"\n"+
			figuresTable(r.afterGrowth))
	fmt.Fprint(r.env.Stdout, table)
	if r.o.out != "" {
		return os.WriteFile(r.o.out, []byte(table), 0o644)
	}
	return nil
}

// settle readies the database for the next measurement, so that none
// pays for the one before: the projections have folded the log, and the
// tables are vacuumed and analysed and their pages written out, as pgbench
// does before it runs.
func (r *run) settle(ctx context.Context) error {
	ok, err := harness.Until(ctx, 2*time.Minute, 50*time.Millisecond, func() (bool, error) {
		var behind bool
		err := r.pool.QueryRow(ctx, qBenchProjectionsBehind).Scan(&behind)
		return !behind, err
	})
	if err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	if !ok {
		return errors.New("settle: the projections did not catch up with the log in 2 minutes")
	}
	for _, stmt := range []string{"VACUUM (ANALYZE)", "CHECKPOINT"} {
		_, err := r.pool.Exec(ctx, stmt)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege
			r.progress("settle: %s needs a privilege the bench's role lacks; measuring without it", stmt)
			continue
		}
		if err != nil {
			return fmt.Errorf("settle: %s: %w", stmt, err)
		}
	}
	return nil
}

func (r *run) progress(format string, a ...any) {
	fmt.Fprintf(r.env.Stderr, "bench: "+format+"\n", a...)
}

// close stops what the run started, in reverse.
func (r *run) close() {
	for _, a := range r.agents {
		a.Close()
	}
	if r.receiver != nil {
		r.receiver.Close()
	}
	if r.svc != nil {
		_ = r.svc.Stop()
	}
	if r.pool != nil {
		r.pool.Close()
	}
}

// baselines measures pgbench -N (on its own scratch database) and a bare
// River; pgbench missing is reported, not fatal.
func (r *run) baselines(ctx context.Context, serverDSN, benchDSN, pgbenchDB string) error {
	r.pgbenchErr = errors.New("not asked for (--only)")
	if r.o.runs("pgbench") {
		r.progress("pgbench -N (8 clients, then 1) …")
		r.tps8, r.tps1, r.pgbenchErr = runPgbench(ctx, serverDSN, pgbenchDB)
		if r.pgbenchErr != nil {
			r.progress("pgbench not measured: %v", r.pgbenchErr)
		}
	}
	if !r.o.runs("river") {
		return nil
	}
	r.progress("bare River insert-and-work rate …")
	rate, err := benchRiver(ctx, benchDSN, 20000)
	if err != nil {
		return fmt.Errorf("river baseline: %w", err)
	}
	r.riverRate = rate
	r.progress("River: %.0f jobs/s; the process's peak RSS so far %.0f MB", rate, peakRSSMB())
	return nil
}

// agentTTLSeconds is the lease of the bench's agents, which do not
// heartbeat: longer than the whole run, so that none lapses before the
// last measurement.
const agentTTLSeconds = 3600

// start starts Agent-Reach (authentication off, agents answering inline),
// a callback receiver and four push agents, and waits until they are
// healthy. The pull agents come in their own measurement.
func (r *run) start(ctx context.Context, serve Serve, dsn string, args ...string) error {
	svc, err := serve(ctx, dsn, args...)
	if err != nil {
		return fmt.Errorf("start the service: %w", err)
	}
	r.svc, r.base = svc, svc.URL()
	if err := harness.WaitReady(ctx, r.base+"/readyz", 60*time.Second); err != nil {
		return err
	}
	if r.pool, err = pgxpool.New(ctx, dsn); err != nil {
		return err
	}
	r.receiver = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		r.acked.Add(1)
	}))
	for i := range 4 {
		agent := httptest.NewServer(http.HandlerFunc(inlineAgent))
		r.agents = append(r.agents, agent)
		body := fmt.Sprintf(`{"agent_id":"bench-%d","capabilities":["bench.echo"],"endpoint":%q,"ttl_seconds":%d}`, i, agent.URL, agentTTLSeconds)
		if _, err := harness.Submit(ctx, r.base+"/v1/agents", body); err != nil {
			return err
		}
	}
	return harness.WaitAgentsHealthy(ctx, r.base, 4, 30*time.Second)
}

// inlineAgent answers every delivery SUCCESS at once, and probes (GET) 200.
func inlineAgent(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		return
	}
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"status":"SUCCESS","result":{"ok":true}}`)
}

// submits measures submits alone, dispatch paused, at 1, 16 and 64
// clients; then clears their backlog and lets dispatch run.
func (r *run) submits(ctx context.Context) error {
	if err := r.svc.SetDispatchPaused(ctx, true); err != nil {
		return err
	}
	for _, clients := range []int{1, 16, 64} {
		// Each level starts from an empty queue: the one before may have
		// filled its lane up to the queue limit on a fast machine.
		if err := r.svc.DropDispatchBacklog(ctx); err != nil {
			return err
		}
		refusedSubmits.Store(0)
		r.progress("submit throughput, %d clients, %s …", clients, r.o.duration)
		before, err := readCPU(ctx, r.pool)
		if err != nil {
			return err
		}
		rate, lat, err := benchSubmits(ctx, r.base, clients, r.o.duration)
		if err != nil {
			return err
		}
		after, err := readCPU(ctx, r.pool)
		if err != nil {
			return err
		}
		self, db := after.since(before)
		perSubmit := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(max(len(lat), 1)) }
		r.progress("%.0f submits/s; a submit cost %.0f µs of CPU in this process (service and load generator) and %.0f µs in PostgreSQL's backends",
			rate, perSubmit(self), perSubmit(db))
		r.bars = append(r.bars, chartBar{label: fmt.Sprintf("durable submits, %d clients", clients), value: rate})
		ratio := "n/a"
		if r.tps8 > 0 {
			ratio = fmt.Sprintf("%.2f × pgbench", rate/r.tps8)
		}
		value := fmt.Sprintf("%.0f (%.2f / %.2f / %.2f)", rate, ms(lat, 0.50), ms(lat, 0.95), ms(lat, 0.99))
		if n := refusedSubmits.Load(); n > 0 {
			r.progress("%d submits refused (429/503: the lane's queue limit), waited out and not counted", n)
			value += fmt.Sprintf(", %d refused", n)
		}
		r.res.add(fmt.Sprintf("durable submits/s, %d clients (p50 / p95 / p99 ms)", clients), value,
			fmt.Sprintf("pgbench -N %s tps", fmtRate(r.tps8)), ratio)
	}
	if err := r.svc.DropDispatchBacklog(ctx); err != nil {
		return err
	}
	return r.svc.SetDispatchPaused(ctx, false)
}

// endToEnd measures jobs with callbacks from submit to acknowledgement,
// under the CPU, mutex and block profiles asked for. How long a job waits
// in that burst says little (it is the queue of a closed loop): the open
// loop measures latency under load.
func (r *run) endToEnd(ctx context.Context) error {
	r.progress("end to end, %d jobs with callbacks …", r.o.jobs)
	r.acked.Store(0)
	commits, err := commitCount(ctx, r.pool)
	if err != nil {
		return err
	}
	cpu, err := readCPU(ctx, r.pool)
	if err != nil {
		return err
	}
	stopProfiles, err := startProfiles(r.o.cpuProfile, r.o.mutexProfile, r.o.blockProfile, r.o.memProfile)
	if err != nil {
		return err
	}
	rate, ids, err := benchEndToEnd(ctx, r.base, r.receiver.URL, "bench.echo", r.o.jobs, false, &r.acked)
	if perr := stopProfiles(); err == nil {
		err = perr
	}
	if err != nil {
		return err
	}
	r.peak = rate
	cpuAfter, err := readCPU(ctx, r.pool)
	if err != nil {
		return err
	}
	time.Sleep(time.Second) // backends report their transactions within a second
	after, err := commitCount(ctx, r.pool)
	if err != nil {
		return err
	}
	self, db := cpuAfter.since(cpu)
	perJob := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(r.o.jobs) }
	r.progress("end to end: %.0f jobs/s; a job cost %.2f database transactions (all of them: ours, River's, the projector's), "+
		"%.2f ms of CPU in this process (service, agents, load generator) and %.2f ms in PostgreSQL's backends",
		rate, float64(after-commits)/float64(r.o.jobs), perJob(self), perJob(db))
	r.bars = append(r.bars, chartBar{label: "end to end, push agents", value: rate})
	if err := r.addEndToEnd(ctx, "end-to-end jobs/s, 4 push agents (submit → delivered → SUCCESS → callback acknowledged)", "", rate, ids, ""); err != nil {
		return err
	}
	return r.endToEndKeyed(ctx, rate)
}

// endToEndKeyed measures end to end again with an Idempotency-Key on
// every submit, against plain, the rate just measured.
func (r *run) endToEndKeyed(ctx context.Context, plain float64) error {
	r.progress("end to end, %d jobs with callbacks, each submit with an Idempotency-Key …", r.o.jobs)
	r.acked.Store(0)
	rate, _, err := benchEndToEnd(ctx, r.base, r.receiver.URL, "bench.echo", r.o.jobs, true, &r.acked)
	if err != nil {
		return err
	}
	r.res.add("end-to-end jobs/s, each submit with an Idempotency-Key", fmt.Sprintf("%.0f", rate),
		fmt.Sprintf("plain %.0f jobs/s", plain), fmt.Sprintf("%.2f × plain", rate/plain))
	return nil
}

// openLoop offers jobs at a constant rate (--rate, or half the measured
// end-to-end peak) for --open-for and measures submit → delivered.
func (r *run) openLoop(ctx context.Context) error {
	rate := r.o.rate
	if rate <= 0 {
		rate = r.peak / 2
	}
	if rate <= 0 {
		return fmt.Errorf("the open loop needs --rate or the end-to-end measurement (--only e2e,open): %w", cli.ErrUsage)
	}
	r.progress("open loop, %.0f jobs/s for %s …", rate, r.o.openFor)
	r.acked.Store(0)
	ids, err := benchOpenLoop(ctx, r.base, r.receiver.URL, "bench.echo", rate, r.o.openFor, &r.acked)
	if err != nil {
		return err
	}
	return r.addLatency(ctx, fmt.Sprintf("submit → delivered at an open-loop load of %.0f jobs/s, half the end-to-end peak (p50 / p95 / p99 ms)", rate),
		"aim: p99 ≤ 50 ms", ids)
}

// addLatency adds the row metric of submit → delivered of jobs ids,
// read from the log, beside its aim.
func (r *run) addLatency(ctx context.Context, metric, aim string, ids []string) error {
	lat, err := submitToDelivered(ctx, r.pool, ids)
	if err != nil {
		return err
	}
	r.res.add(metric, fmt.Sprintf("%.2f / %.2f / %.2f", lat[0], lat[1], lat[2]), aim, "")
	return nil
}

// endToEndPull measures the same jobs as endToEnd, of their own
// capability, through four pull agents that claim in a loop and report
// SUCCESS at once; and submit → claimed (a pull agent's delivery) under
// that load. The agents claim only while it runs.
func (r *run) endToEndPull(ctx context.Context) error {
	r.progress("end to end through pull agents, %d jobs with callbacks …", r.o.jobs)
	pctx, stop, err := startPullers(ctx, r.base, 4)
	if err != nil {
		return fmt.Errorf("pull agents: %w", err)
	}
	defer stop()
	if err := harness.WaitAgentsHealthy(pctx, r.base, 8, 30*time.Second); err != nil {
		return fmt.Errorf("pull agents: %w", causeOf(pctx, err))
	}
	r.acked.Store(0)
	rate, ids, err := benchEndToEnd(pctx, r.base, r.receiver.URL, pullCapability, r.o.jobs, false, &r.acked)
	if err != nil {
		return causeOf(pctx, err)
	}
	r.bars = append(r.bars, chartBar{label: "end to end, pull agents", value: rate})
	ofPush := ""
	if r.peak > 0 { // the push agents' end to end, measured before in the same run
		ofPush = fmt.Sprintf("%.2f × push (aim ≥ 0.9)", rate/r.peak)
	}
	if err := r.addEndToEnd(ctx, "end-to-end jobs/s, 4 pull agents (submit → claimed → SUCCESS → callback acknowledged)",
		"submit → claimed under that load (p50 / p95 / p99 ms)", rate, ids, ofPush); err != nil {
		return err
	}
	// Half that peak, an open loop: how soon a waiting claim is answered.
	half := rate / 2
	r.progress("pull agents at an open-loop load of %.0f jobs/s for %s …", half, r.o.openFor)
	r.acked.Store(0)
	ids, err = benchOpenLoop(pctx, r.base, r.receiver.URL, pullCapability, half, r.o.openFor, &r.acked)
	if err != nil {
		return causeOf(pctx, err)
	}
	stop()
	return r.addLatency(ctx, fmt.Sprintf("submit → claimed at an open-loop load of %.0f jobs/s, half the pull peak (p50 / p95 / p99 ms)", half),
		"aim: p50 ≤ 10, p99 ≤ 50 ms", ids)
}

// causeOf is why ctx ended (a pull agent's failure) when err is its end,
// else err.
func causeOf(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}

// addEndToEnd adds the rows of an end-to-end measurement: its rate beside
// bare River's, and submit → delivered of its jobs ids, read from the log.
func (r *run) addEndToEnd(ctx context.Context, rateRow, latencyRow string, rate float64, ids []string, also string) error {
	ratio := "n/a"
	if r.riverRate > 0 {
		ratio = fmt.Sprintf("%.2f × River", rate/r.riverRate)
	}
	if also != "" {
		ratio += ", " + also
	}
	r.res.add(rateRow, fmt.Sprintf("%.0f", rate), fmt.Sprintf("bare River %s jobs/s", fmtRate(r.riverRate)), ratio)
	if latencyRow == "" {
		return nil
	}
	return r.addLatency(ctx, latencyRow, "", ids)
}

// startCPUProfile profiles the CPU into path until the returned function
// is called; no path, no profile.
func startCPUProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// startProfiles profiles the CPU, mutex contention and blocking into the
// paths given (an empty path, no profile) until the returned function is
// called, which writes them and the allocations so far (allocs).
func startProfiles(cpu, mutex, block, allocs string) (func() error, error) {
	stopCPU, err := startCPUProfile(cpu)
	if err != nil {
		return nil, err
	}
	if mutex != "" {
		runtime.SetMutexProfileFraction(5)
	}
	if block != "" {
		runtime.SetBlockProfileRate(int((10 * time.Microsecond).Nanoseconds()))
	}
	return func() error {
		stopCPU()
		var errs []error
		for _, p := range []struct{ name, path string }{{"mutex", mutex}, {"block", block}, {"allocs", allocs}} {
			if p.path != "" {
				errs = append(errs, writeProfile(p.name, p.path))
			}
		}
		runtime.SetMutexProfileFraction(0)
		runtime.SetBlockProfileRate(0)
		return errors.Join(errs...)
	}, nil
}

// writeProfile writes the runtime profile name to path.
func writeProfile(name, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// lightLoad measures submit → delivered under a light, steady load.
func (r *run) lightLoad(ctx context.Context) error {
	r.progress("submit → delivered, lightly loaded …")
	client, done := newClient(4)
	defer done()
	var light []string
	for range 200 {
		id, err := submitJob(ctx, client, r.base, `{"capability":"bench.echo","payload":{"light":true}}`)
		if err != nil {
			return err
		}
		light = append(light, id)
		time.Sleep(5 * time.Millisecond) // a light, steady load: one submit every 5 ms
	}
	if err := waitDelivered(ctx, r.pool, light, 60*time.Second); err != nil {
		return err
	}
	lat, err := submitToDelivered(ctx, r.pool, light)
	if err != nil {
		return err
	}
	r.res.add("submit → delivered, lightly loaded (p50 / p95 / p99 ms)", fmt.Sprintf("%.2f / %.2f / %.2f", lat[0], lat[1], lat[2]),
		"seed design: 3 ms submit→enqueue, 5.8 ms forwarding", "")
	return nil
}

// routingAndMemory adds the routing decision times, pgbench with one
// client, and the process's peak memory.
func (r *run) routingAndMemory() {
	if r.o.runs("routing") {
		r.progress("routing decisions over 1,000 agents …")
		p50, p99 := benchRouting()
		r.res.add("routing decision, 1,000 agents / 50 capabilities (p50 / p99 µs)", fmt.Sprintf("%.1f / %.1f", p50, p99), "aim: p99 ≤ 100 µs", "")
	}
	if r.pgbenchErr == nil {
		r.res.add("pgbench -N, 1 client", fmtRate(r.tps1)+" tps", "", "")
	}
	r.res.add("peak RSS of the process (service, agents and load generator)", fmt.Sprintf("%.0f MB", peakRSSMB()), "aim: ≤ 200 MB", "")
}

// report prints the table, and writes it and the chart where asked.
func (r *run) report() error {
	header := fmt.Sprintf("Measured %s on %s (%d cores, %s), PostgreSQL on the same host.\n",
		time.Now().UTC().Format("2006-01-02"), hostDescription(), runtime.NumCPU(), runtime.Version())
	table := r.res.markdown(header)
	fmt.Fprint(r.env.Stdout, table)
	if r.o.out != "" {
		if err := os.WriteFile(r.o.out, []byte(table), 0o644); err != nil {
			return err
		}
	}
	if r.o.chart == "" {
		return nil
	}
	bars := r.bars
	if r.tps8 > 0 {
		bars = append(bars, chartBar{label: "pgbench -N, 8 clients (tps)", value: r.tps8, base: true})
	}
	bars = append(bars, chartBar{label: "bare River insert-and-work", value: r.riverRate, base: true})
	title := fmt.Sprintf("Agent-Reach vs this machine (%s, %d cores, %s)", hostDescription(), runtime.NumCPU(), time.Now().UTC().Format("2006-01-02"))
	return writeChart(r.o.chart, title, bars)
}
