package chaos

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/cli"
	"github.com/agentreach/agentreach/internal/devdb"
	"github.com/agentreach/agentreach/internal/harness"
	arsql "github.com/agentreach/agentreach/sql"
	"github.com/agentreach/agentreach/sql/queries"
)

const help = `agentreach chaos: a run that tries to lose jobs, then proves it did not

It starts a private PostgreSQL cluster and --processes agentreach serve
processes on it, a fleet of 12 agents, 8 push and 4 pull (they claim their
work), of which 5 misbehave (refuse, hang, die mid-run; a flaky pull agent,
and one that dies holding claimed work), and submits --jobs jobs with
callbacks through all processes. During the run it SIGKILLs one service
process (restarting it when it is the only one) and restarts PostgreSQL
once. Then the invariant checker (agentreach verify) proves: every job
terminal, every stream valid with gap-free versions, no job with two
successes, DEAD_LETTER only after max_attempts, every callback
acknowledged, and projections equal to a rebuild; and that every attempt
the dead pull agent held timed out and its job was retried elsewhere.

`

var (
	qJobCounts   = queries.Must("ChaosJobCounts")
	qCheckpoints = queries.Must("ChaosCheckpoints")
)

// Options of a chaos run.
type Options struct {
	Processes int
	Jobs      int
	// Exe and Env start the service processes (default: this binary).
	Exe string
	Env []string
	Log func(format string, args ...any)
}

// Main runs `agentreach chaos` with args and prints the verification; a
// violation of any invariant is an error.
func Main(ctx context.Context, env cli.Env, args []string) error {
	fs := env.NewFlagSet("chaos")
	fs.Usage = func() { fmt.Fprint(fs.Output(), help); fs.PrintDefaults() }
	opts := Options{}
	fs.IntVar(&opts.Processes, "processes", 1, "service processes on the one database")
	fs.IntVar(&opts.Jobs, "jobs", 2000, "jobs to submit")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	opts.Log = func(format string, a ...any) { fmt.Fprintf(env.Stderr, "chaos: "+format+"\n", a...) }
	rep, err := Run(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Fprint(env.Stdout, rep.Fleet)
	return cli.PrintVerify(env.Stdout, rep.VerifyReport)
}

// Run runs the chaos of o and returns what the invariant checker found,
// plus a violation when fewer jobs are in the log than were accepted or
// when the work of the pull agent that died holding it was not timed out
// and retried; and what the fleet did. Its error is one of setting the run
// up (the cluster, a service process, the fleet) or of reading the
// database at the end.
func Run(ctx context.Context, o Options) (Report, error) {
	if o.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return Report{}, err
		}
		o.Exe = exe
	}
	o.Processes = max(o.Processes, 1)
	db, err := devdb.Open(ctx, devdb.Options{LocalAddr: "127.0.0.1:1", NoDefaultBinSearch: false})
	if err != nil {
		return Report{}, fmt.Errorf("a private PostgreSQL for the chaos run: %w", err)
	}
	defer db.Close()
	o.Log("private PostgreSQL at %s (%s)", db.DataDir(), db.DSN)
	pool, err := pgxpool.New(ctx, db.DSN)
	if err != nil {
		return Report{}, err
	}
	defer pool.Close()
	if err := arsql.Migrate(ctx, pool, slog.New(slog.DiscardHandler)); err != nil {
		return Report{}, err
	}
	r := &run{o: o, db: db, pool: pool, svcs: &services{exe: o.Exe, env: o.Env, dsn: db.DSN}}
	defer r.svcs.stopAll()
	return r.run(ctx)
}

// run is one chaos run on its cluster.
type run struct {
	o    Options
	db   *devdb.DB
	pool *pgxpool.Pool
	svcs *services
	// fleet is the run's agents, once started.
	fleet *fleet
}

func (r *run) run(ctx context.Context) (Report, error) {
	var rep Report
	if err := r.svcs.startAll(ctx, r.o.Processes); err != nil {
		return rep, err
	}
	r.o.Log("%d service processes up", r.o.Processes)

	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body) // an acknowledged callback
	}))
	defer receiver.Close()
	r.fleet = startFleet(ctx, r.svcs.pick, r.o.Log)
	defer r.fleet.stop()
	r.o.Log("fleet: %s", describeFleet(behaviours))
	if err := harness.WaitAgentsHealthy(ctx, r.svcs.pick(0), len(r.fleet.agents)-1, 60*time.Second); err != nil {
		return rep, err
	}

	total, err := r.submitWithChaos(ctx, receiver.URL)
	if err != nil {
		return rep, err
	}
	r.o.Log("%d jobs accepted; waiting for every one to finish and call back", total)
	r.waitFinished(ctx, total, 3*time.Minute)
	r.svcs.stopAll()
	r.o.Log("verifying")
	if rep.VerifyReport, err = cli.Verify(ctx, r.pool); err != nil {
		return rep, err
	}
	if rep.Jobs < total {
		rep.Violations = append(rep.Violations, fmt.Sprintf("%d jobs accepted but %d in the log", total, rep.Jobs))
	}
	var violations []string
	if rep.Fleet, violations, err = readFleetReport(ctx, eventstore.New(r.pool), r.fleet.agents); err != nil {
		return rep, err
	}
	rep.Violations = append(rep.Violations, violations...)
	for _, a := range r.fleet.agents {
		if a.behaviour == pullDies && len(a.heldAtDeath()) == 0 {
			r.o.Log("pull agent %s never died: no work came to it after it was told to", a.id)
		}
	}
	return rep, nil
}

// submitWithChaos submits o.Jobs jobs through the live services; after
// 30% of them it SIGKILLs the last service (restarting it when it is the
// only one), after 45% it tells the dying pull agent to die at its next
// claim that brings work, after 60% it restarts PostgreSQL. It returns how
// many jobs were accepted.
func (r *run) submitWithChaos(ctx context.Context, callback string) (int, error) {
	s := &submitter{pick: r.svcs.pick, callback: callback, jobs: r.o.Jobs}
	sctx, cancel := context.WithCancel(ctx)
	s.start(sctx, 16)
	defer s.wait()
	defer cancel() // before the wait: a run that fails here stops its submitters
	s.waitFor(ctx, int64(r.o.Jobs)*3/10)
	victim := r.o.Processes - 1
	r.o.Log("SIGKILL service %d after %d submits", victim, s.submitted.Load())
	r.svcs.kill(victim)
	if r.o.Processes == 1 {
		if err := r.svcs.start(ctx, victim); err != nil {
			return 0, fmt.Errorf("restart service: %w", err)
		}
		r.o.Log("service restarted")
	}
	s.waitFor(ctx, int64(r.o.Jobs)*45/100)
	r.o.Log("pull agents that die will die at their next claim that brings work, after %d submits", s.submitted.Load())
	r.fleet.dieHolding()
	s.waitFor(ctx, int64(r.o.Jobs)*6/10)
	r.o.Log("restarting PostgreSQL after %d submits", s.submitted.Load())
	if err := r.db.Restart(ctx); err != nil {
		return 0, fmt.Errorf("restart PostgreSQL: %w", err)
	}
	s.wait()
	return s.accepted(), nil
}

// waitFinished waits until every job is terminal and called back and every
// accepted job is in the read model; past within (or when ctx ends) it logs
// what is still open, and returns for the verification to say what broke.
func (r *run) waitFinished(ctx context.Context, total int, within time.Duration) {
	var open, unacked, n int
	ok, _ := harness.Until(ctx, within, 200*time.Millisecond, func() (bool, error) {
		// The database may be restarting: an error is one more poll.
		err := r.pool.QueryRow(ctx, qJobCounts).Scan(&open, &unacked, &n)
		return err == nil && open == 0 && unacked == 0 && n >= total, nil
	})
	if ok {
		return
	}
	inLog, _ := eventstore.CountStreams(ctx, r.pool, domain.JobStream(""))
	var checkpoints string
	_ = r.pool.QueryRow(ctx, qCheckpoints).Scan(&checkpoints)
	r.o.Log("still %d open and %d callbacks unacknowledged; %d of %d jobs in the log; checkpoints %s", open, unacked, inLog, total, checkpoints)
	for i, p := range r.svcs.procs {
		if p.out != nil {
			r.o.Log("log of service %d:\n%s", i, tail(p.out.String(), 15))
		}
	}
}
