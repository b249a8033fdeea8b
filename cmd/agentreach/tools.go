package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/bench"
	"github.com/agentreach/agentreach/internal/chaos"
	"github.com/agentreach/agentreach/internal/cli"
	"github.com/agentreach/agentreach/internal/demo"
	"github.com/agentreach/agentreach/internal/mockagent"
	"github.com/agentreach/agentreach/jobs"
	arsql "github.com/agentreach/agentreach/sql"
)

// The tool commands live under internal/; here is what they need of the
// program: its streams and environment, the service's flags, and an
// Agent-Reach started in this process.

// errUsage is the usage error of every command, here and in internal/: the
// program exits with 2.
var errUsage = cli.ErrUsage

func (m *Main) runJobs(ctx context.Context, args []string) error {
	return cli.Jobs(ctx, m.cliEnv(), args)
}

func (m *Main) runMockAgent(ctx context.Context, args []string) error {
	return mockagent.Main(ctx, m.cliEnv(), args)
}

func (m *Main) runChaos(ctx context.Context, args []string) error {
	return chaos.Main(ctx, m.cliEnv(), args)
}

func (m *Main) runBench(ctx context.Context, args []string) error {
	return bench.Main(ctx, m.cliEnv(), args, func(ctx context.Context, dsn string, extra ...string) (bench.Service, error) {
		tune := func(c *Config) {
			c.Jobs.RepairAfter = time.Hour // the submit phase leaves jobs behind on purpose
			c.RateLimit = 0
		}
		return startInProcess(ctx, func(string) string { return "" }, tune,
			append([]string{"serve", "--insecure", "--addr", "127.0.0.1:0", "--database-url", dsn, "--log-level", "error"}, extra...)...)
	})
}

func (m *Main) runDemo(ctx context.Context, args []string) error {
	// What retention drops of the scratch database (dropped at the end)
	// is archived in a folder removed with it, not in the user's cache.
	archive, err := os.MkdirTemp("", "agentreach-demo-archive-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(archive) }()
	getenv := func(k string) string {
		if k == "AGENTREACH_ARCHIVE_DIR" {
			return archive
		}
		return m.Getenv(k)
	}
	return demo.Main(ctx, m.cliEnv(), args, func(ctx context.Context, dsn, addr string) (demo.Service, error) {
		// The demo's own scratch server: its 16 submitters go past the
		// default 200 requests a second of a key.
		return startInProcess(ctx, getenv, nil, "dev", "--insecure", "--addr", addr, "--database-url", dsn, "--log-level", "error",
			"--rate-limit", "0")
	})
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
	rep, err := cli.Verify(ctx, pool)
	if err != nil {
		return err
	}
	return cli.PrintVerify(m.Stdout, rep)
}

// runProjections is `agentreach projections rebuild|snapshot [NAME...]`. It acts on
// the database the service uses, which it is told (--database-url or
// DATABASE_URL): it never guesses one, since `agentreach dev` may run on a
// private cluster no default names, and a rebuild of another database
// would report success and change nothing the service reads.
func (m *Main) runProjections(ctx context.Context, args []string) error {
	if len(args) > 0 && cli.IsHelp(args[0]) {
		args = []string{"rebuild", "-h"}
	}
	var dsn string
	fs := m.newFlagSet("projections")
	cli.SecretVar(fs, &dsn, "database-url", m.Getenv("DATABASE_URL"),
		// No backquotes here: the flag package takes a quoted word of the
		// usage for the name of the flag's value.
		"the database the service uses (env DATABASE_URL; required: agentreach dev prints its URL as Database)")
	jsonOut := fs.Bool("json", false, "print the report as JSON")
	fromStart := fs.Bool("from-start", false, "rebuild: fold the log from position 0, not from the latest snapshot")
	cmd, chosen, err := cli.ParseProjections(fs, args)
	if err != nil {
		return err
	}
	if cmd == "snapshot" && *fromStart {
		return fmt.Errorf("%w: --from-start is for projections rebuild", errUsage)
	}
	if dsn == "" {
		return fmt.Errorf("%w: say which database to rebuild, the one the service uses: --database-url or DATABASE_URL "+
			"(`agentreach dev` prints it as Database); projections rebuild does not guess", errUsage)
	}
	pool, err := openMigrated(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	env := m.cliEnv()
	if cmd == "snapshot" {
		rep, err := cli.TakeSnapshots(ctx, pool, env.Logger(), chosen)
		if err != nil {
			return err
		}
		if *jsonOut {
			return cli.PrintJSON(m.Stdout, rep)
		}
		return cli.PrintSnapshots(m.Stdout, rep)
	}
	from := eventstore.FromSnapshot
	if *fromStart {
		from = eventstore.FromStart
		if dropped, err := eventstore.New(pool).Dropped(ctx); err == nil && dropped {
			fmt.Fprintln(m.Stderr, "warning: retention has dropped part of the log: a rebuild from position 0 cannot give back "+
				"what the dropped jobs added to the agents' figures, and the next snapshot keeps what it gives")
		}
	}
	rep, err := cli.RebuildProjections(ctx, env, pool, env.Logger(), chosen, from)
	if err != nil {
		return err
	}
	if *jsonOut {
		return cli.PrintJSON(m.Stdout, rep)
	}
	return cli.PrintRebuild(m.Stdout, rep)
}

// harnessService is what the bench and the demo ask of the Agent-Reach they run.
type harnessService interface {
	bench.Service
	demo.Service
}

// inProcess is Agent-Reach run in this process by `Main.Run(args)`, its
// output discarded.
type inProcess struct {
	m    *Main
	stop context.CancelFunc
	done chan error
	once sync.Once
	err  error
}

// startInProcess runs the program with args, getenv as its environment and
// tune over its configuration, and returns once it serves; an error is the
// one it exited with before serving.
func startInProcess(ctx context.Context, getenv func(string) string, tune func(*Config), args ...string) (harnessService, error) {
	svc := NewMain()
	svc.Stdout, svc.Stderr, svc.Getenv, svc.Tune = io.Discard, io.Discard, getenv, tune
	sctx, stop := context.WithCancel(ctx)
	p := &inProcess{m: svc, stop: stop, done: make(chan error, 1)}
	go func() { p.done <- svc.Run(sctx, args) }()
	select {
	case <-svc.Started():
		return p, nil
	case err := <-p.done:
		stop()
		return nil, err
	}
}

func (p *inProcess) URL() string { return p.m.URL() }

// Stop ends the program and returns what Run returned.
func (p *inProcess) Stop() error {
	p.once.Do(func() { p.stop(); p.err = <-p.done })
	return p.err
}

func (p *inProcess) Lag(ctx context.Context) (map[string]int64, error) {
	return p.m.app.projector.Lag(ctx)
}

func (p *inProcess) DropDispatchBacklog(ctx context.Context) error {
	return p.m.app.jobs.DropDispatchBacklog(ctx)
}

// SetDispatchPaused pauses or resumes the dispatch queues, and holds or
// resumes direct dispatch (what a submit writes while held waits for the
// sweep, or for DropDispatchBacklog).
func (p *inProcess) SetDispatchPaused(ctx context.Context, paused bool) error {
	p.m.app.jobs.Dispatcher().HoldDirect(paused)
	set := p.m.app.river.QueueResume
	if paused {
		set = p.m.app.river.QueuePause
	}
	for _, q := range []string{jobs.QueueDispatchHigh, jobs.QueueDispatchNormal, jobs.QueueDispatchLow} {
		if err := set(ctx, q, nil); err != nil {
			return err
		}
	}
	return nil
}

// openMigrated opens a pool on the database at dsn, which must be
// migrated to this version's schema.
func openMigrated(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err)
	}
	if err := arsql.Check(ctx, pool); err != nil {
		pool.Close()
		if errors.Is(err, arsql.ErrNotMigrated) {
			return nil, fmt.Errorf("database at %s: %w (is it the service's? `agentreach migrate` brings a new one up to date)", redact(dsn), err)
		}
		return nil, fmt.Errorf("database at %s: %w", redact(dsn), err)
	}
	return pool, nil
}
