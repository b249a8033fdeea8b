package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/agentreach/agentreach/alerting"
	"github.com/agentreach/agentreach/alerting/alertwork"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exaring/otelpgx"
	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/riverqueue/rivercontrib/otelriver"
	"riverqueue.com/riverui"

	"github.com/agentreach/agentreach/auth"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/httpapi"
	"github.com/agentreach/agentreach/intent"
	"github.com/agentreach/agentreach/internal/telemetry"
	"github.com/agentreach/agentreach/jobs"
	"github.com/agentreach/agentreach/jobs/jobwait"
	"github.com/agentreach/agentreach/netguard"
	"github.com/agentreach/agentreach/projection"
	"github.com/agentreach/agentreach/registry"
	"github.com/agentreach/agentreach/registry/riverwork"
	"github.com/agentreach/agentreach/retention"
	arsql "github.com/agentreach/agentreach/sql"
	"github.com/agentreach/agentreach/sweep"
)

// App is one running Agent-Reach process: the HTTP API, the projector and
// the notifier, on one database.
type App struct {
	cfg    Config
	logger *slog.Logger

	pool        *pgxpool.Pool
	store       *eventstore.Store
	projector   *eventstore.Projector
	alerts      *alerting.Service
	alertSender *alertwork.Sender
	registry    *registry.Registry
	tel         *telemetry.Telemetry
	ui          *riverui.Handler
	auth        *auth.Store
	jobs        *jobs.Service
	river       *river.Client[pgx.Tx]
	sweeper     *sweep.Runner
	retention   *retention.Service
	outage      *telemetry.Outage
	server      *http.Server
	listener    net.Listener

	migrated     atomic.Bool
	schemaReady  chan struct{} // closed once migrated is set
	riverStarted atomic.Bool
	// riverMu keeps a restart of River's client (after an outage) and its
	// stop at Close apart.
	riverMu sync.Mutex
	// replication is the primary's standbys as last read (watchReplication).
	replication atomic.Pointer[replicationRead]
	// readPool serves reads a standby may serve (--read-database-url);
	// nil: the pool does.
	readPool *pgxpool.Pool
	readLag  atomic.Uint64 // the read database's lag in seconds, float64 bits
	closing  atomic.Bool   // Close has begun: River is not started again
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// NewApp returns an App that Start will bring up.
func NewApp(cfg Config, logger *slog.Logger) *App {
	// A database outage is told in a few lines, whoever meets it.
	outage := telemetry.NewOutage(nil)
	return &App{cfg: cfg, logger: slog.New(outage.Handler(logger.Handler())), outage: outage, schemaReady: make(chan struct{})}
}

// SchemaReady is closed once the schema is current: from then on the API
// answers (/readyz is 200 while the database does).
func (a *App) SchemaReady() <-chan struct{} { return a.schemaReady }

// newServices makes the services behind the API (the registry, jobs,
// alerts and the projector) and answers their River workers.
func (a *App) newServices(guard *netguard.Policy) *river.Workers {
	a.registry = registry.New(a.pool, a.store, a.logger, a.cfg.Registry)
	a.jobs = jobs.NewService(a.pool, a.store, a.registry, a.logger, a.cfg.Jobs)
	a.jobs.SetTelemetry(a.tel.Tracer, a.tel.Meter)
	a.alerts = alerting.New(a.pool, a.store, guard)
	a.alertSender = alertwork.New(a.alerts, a.logger, alertwork.Config{Guard: guard, Secrets: a.jobs.Callbacks().CallbackSecrets,
		PublicURL: func() string { return a.jobs.Config().PublicURL }})
	a.projector = eventstore.NewProjector(a.store, a.logger, projection.All()...)
	a.projector.Follow(a.alertSender.Notifier()) // it sends: no read model, never rebuilt
	workers := river.NewWorkers()
	riverwork.AddWorkers(workers, a.registry)
	a.jobs.AddWorkers(workers)
	a.alertSender.AddWorkers(workers)
	return workers
}

// Start listens at once (so /healthz answers and /readyz says why it is not
// ready), then migrates in the background, retrying until the database
// answers, and starts the workers once the schema is current.
func (a *App) Start(ctx context.Context) error {
	pcfg, err := a.poolConfig()
	if err != nil {
		return err
	}
	if err := a.cfg.Intent.Validate(); err != nil {
		return fmt.Errorf("intent resolution: %w", err)
	}
	guard, err := netguard.ParsePolicy(a.cfg.DenyNets, a.cfg.AllowNets)
	if err != nil {
		return fmt.Errorf("AGENTREACH_DENY_NETS / AGENTREACH_ALLOW_NETS: %w", err)
	}
	a.cfg.Registry.Guard, a.cfg.Jobs.Guard, a.cfg.Intent.Guard = &guard, &guard, &guard
	a.tel, err = telemetry.Setup(ctx, telemetry.Options{ServiceName: "agent-reach", Version: version,
		SpanExporter: a.cfg.SpanExporter, Getenv: a.cfg.Getenv})
	if err != nil {
		return err
	}
	if a.tel.ExporterLabel != "none" {
		// SQL spans only when traces leave the process: a span per query
		// is not free.
		pcfg.ConnConfig.Tracer = otelpgx.NewTracer(otelpgx.WithTracerProvider(a.tel.Tracer))
	}
	if err := a.openPools(ctx, pcfg); err != nil {
		return err
	}
	a.store = eventstore.New(a.pool)
	a.auth = auth.NewStore(a.pool, a.store, a.cfg.AdminKey)
	workers := a.newServices(&guard)
	// The periodic sweeps run in the leading process (sweep.Runner), not as
	// River periodic jobs: each run was a River job, and they buried the
	// dispatch jobs in River UI.
	a.retention = retention.New(a.pool, a.store, a.projector, a.logger, a.cfg.Retention)
	a.sweeper = sweep.NewRunner(a.pool, a.logger, slices.Concat(a.registry.Sweeps(), a.jobs.Sweeps(), a.retention.Sweeps())...)
	a.river, err = jobs.NewClient(a.pool, a.riverLogger(), workers, jobs.ClientConfig{
		TestOnly: a.cfg.TestOnly,
		Plugins: []rivertype.Plugin{otelriver.NewMiddleware(&otelriver.MiddlewareConfig{
			EnableTracePropagation: true, TracerProvider: a.tel.Tracer, MeterProvider: a.tel.Meter})},
		RescueAfter: a.jobs.Config().RescueAfter(), Retention: a.retention.Config().Period})
	if err != nil {
		a.closePools()
		return err
	}
	a.registry.SetProbes(riverwork.Probes(a.river))
	a.jobs.SetClient(a.river)
	a.alertSender.SetClient(a.river)
	if err := registerGauges(a); err != nil {
		a.closePools()
		return err
	}

	a.listener, err = (&net.ListenConfig{}).Listen(ctx, "tcp", a.cfg.Addr)
	if err != nil {
		a.closePools()
		return fmt.Errorf("listen on %s (choose another address with --addr or AGENTREACH_ADDR): %w", a.cfg.Addr, err)
	}
	a.jobs.SetPublicURL(a.URL())
	a.ui, err = riverui.NewHandler(&riverui.HandlerOpts{Endpoints: riverui.NewEndpoints(a.river, nil), Logger: a.riverLogger(), Prefix: "/riverui"})
	if err != nil {
		a.closePools()
		return fmt.Errorf("river UI: %w", err)
	}
	ui := a.ui
	if a.cfg.Intent.Embedding.Enabled() || a.cfg.Intent.LLM.Enabled() {
		a.logger.Info("intent resolution: lexical, then models", "embedding", a.cfg.Intent.Embedding.URL, "embedding_model",
			a.cfg.Intent.Embedding.Model, "llm", a.cfg.Intent.LLM.URL, "llm_model", a.cfg.Intent.LLM.Model) // never the keys
	}
	// Requests waiting for jobs to end (wait_ms) answer at once when the
	// server shuts down, so that they do not hold the shutdown up.
	waits := jobwait.New(a.store, a.pool, a.cfg.WaitsPerKey, a.logger)
	a.jobs.OnEnded(waits.Ended)
	handler := httpapi.New(httpapi.Deps{
		Pool: a.pool, Store: a.store, Logger: a.logger, Ready: a.ready, ReadyDetails: a.replicationDetails, ReadPool: a.readPool, Writable: a.writesRefused, Version: version,
		Jobs: a.jobs, Approvals: a.jobs, Retention: a.retention, Callbacks: a.jobs.Callbacks(), Inbox: a.jobs.Inbox(), A2AJobs: a.jobs.Adapter(), Agents: a.registry, Routing: a.registry,
		Alerts: a.alerts,
		Intent: intent.New(a.pool, a.store, a.logger, a.cfg.Intent),
		Waits:  waits,
		Tracer: a.tel.Tracer, Metrics: promhttp.HandlerFor(a.tel.Registry, promhttp.HandlerOpts{}),
		Auth: a.auth, Insecure: a.cfg.Insecure, Limiter: auth.NewLimiter(a.cfg.RateLimit, a.cfg.RateBurst),
		FailLimiter: auth.NewLimiter(a.cfg.AuthFailRate, a.cfg.AuthFailBurst),
		Extra: func(r *gin.Engine, operator ...gin.HandlerFunc) {
			// River UI has no auth of its own and shows every namespace's
			// River jobs and queues: only an admin of every namespace.
			r.Any("/riverui", append(operator, gin.WrapH(ui))...)
			r.Any("/riverui/*path", append(operator, gin.WrapH(ui))...)
		},
	})
	a.server = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 4 * httpapi.MaxHeaderBytes}
	a.server.RegisterOnShutdown(waits.Drain)

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a.cancel = cancel
	if a.cfg.GroupCommitWindow > 0 {
		a.jobs.StartGroupCommit(runCtx, a.cfg.GroupCommitWindow, a.cfg.CommitWorkers)
	}
	a.goRun(func() {
		if err := a.server.Serve(a.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.logger.Error("http server stopped", "err", err)
		}
	})
	a.goRun(func() { a.background(runCtx) })
	return nil
}

// poolConfig parses the database URL and sizes the pool.
func (a *App) poolConfig() (*pgxpool.Config, error) {
	pcfg, err := connConfig(a.cfg.DatabaseURL, "database URL", 50)
	if err != nil {
		return nil, err
	}
	if a.cfg.MaxConns > 0 {
		pcfg.MaxConns = int32(a.cfg.MaxConns)
	}
	return pcfg, nil
}

// openPools opens the pool of the primary and, with --read-database-url,
// the one of reads a standby may serve (job lists, the agents' figures and
// series, alerts); the pools connect lazily.
func (a *App) openPools(ctx context.Context, pcfg *pgxpool.Config) error {
	var err error
	if a.pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		return fmt.Errorf("database pool: %w", err)
	}
	a.cfg.Jobs.CallbackHold = a.callbackHeld
	if a.cfg.ReadDatabaseURL == "" {
		return nil
	}
	rcfg, err := connConfig(a.cfg.ReadDatabaseURL, "read database URL", 10)
	if err != nil {
		a.closePools()
		return err
	}
	rcfg.ConnConfig.Tracer = pcfg.ConnConfig.Tracer
	if a.readPool, err = pgxpool.NewWithConfig(ctx, rcfg); err != nil {
		a.closePools()
		return fmt.Errorf("read database pool: %w", err)
	}
	a.cfg.Jobs.ReadPool = a.readPool
	return nil
}

// connConfig parses a database URL (named what in errors, never shown:
// it may hold a password) into a pool of maxConns connections, unless the
// URL names its own pool_max_conns.
func connConfig(url, what string, maxConns int32) (*pgxpool.Config, error) {
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	// River's workers each hold a connection while they record an
	// outcome; pgx's default (max(4, cores)) would starve them.
	if !strings.Contains(url, "pool_max_conns") {
		pcfg.MaxConns = maxConns
	}
	// The service's statements are short and run often: PostgreSQL's JIT
	// compiler, which a large table's estimates switch on, spends hundreds
	// of milliseconds compiling what runs in a few. A URL that sets jit
	// keeps its own.
	// It is set once a connection is made, not as a startup parameter,
	// which a pooler such as PgBouncer would refuse.
	if _, set := pcfg.ConnConfig.RuntimeParams["jit"]; !set {
		pcfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			_, err := c.Exec(ctx, "SET jit = off")
			return err
		}
	}
	return pcfg, nil
}

// closePools closes the pools a failed Start opened.
func (a *App) closePools() {
	a.pool.Close()
	if a.readPool != nil {
		a.readPool.Close()
	}
}

func (a *App) goRun(fn func()) {
	a.wg.Add(1)
	go func() { defer a.wg.Done(); fn() }()
}

func (a *App) background(ctx context.Context) {
	for attempt := 1; ; attempt++ {
		err := arsql.Migrate(ctx, a.pool, a.logger)
		if err == nil {
			// The partitions the first submits need, before any is taken.
			_, err = arsql.EnsureEventPartitions(ctx, a.pool, time.Now(), a.retention.Config().PartitionWidth)
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		a.logger.Warn("database not ready, retrying", "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(min(time.Duration(attempt)*500*time.Millisecond, 5*time.Second)):
		}
	}
	// The standbys read once before the service is ready: with
	// --require-sync-standby a write that came before the watcher's first
	// read was refused as "not known" (a failed read leaves it to the
	// watcher).
	_ = a.readReplication(ctx)
	a.migrated.Store(true)
	close(a.schemaReady)
	a.goRun(func() { a.watchOutage(ctx) })
	a.goRun(func() { a.watchReplication(ctx) })
	a.logger.Info("schema is current")
	a.goRun(func() { a.store.RunNotifier(ctx, a.logger) })
	a.goRun(func() { a.store.RunListener(ctx, a.logger) })
	a.goRun(func() { _ = a.projector.Run(ctx) })
	a.goRun(func() { a.registry.Run(ctx) })
	a.goRun(func() { a.jobs.Inbox().Run(ctx) })
	if err := a.ui.Start(ctx); err != nil {
		a.logger.Error("start River UI", "err", err)
	}
	if !a.startRiver(ctx) {
		return
	}
	if a.cfg.DirectDispatchers > 0 && a.cfg.GroupCommitWindow > 0 {
		a.jobs.Dispatcher().StartDirect(ctx, a.cfg.DirectDispatchers)
	}
	a.goRun(func() { a.sweeper.Run(ctx) })
}

// startRiver starts River's client. River checks the database as it
// starts; one that is restarting just then (a crash, a failover) must not
// leave this process without workers for good: it starts again until it
// works, and says false only when ctx ends first.
func (a *App) startRiver(ctx context.Context) bool {
	for attempt := 1; ; attempt++ {
		err := a.river.Start(ctx)
		if err == nil {
			a.riverStarted.Store(true)
			return true
		}
		if ctx.Err() != nil || a.closing.Load() {
			return false
		}
		a.logger.Warn("start River, retrying", "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(min(time.Duration(attempt)*250*time.Millisecond, time.Second)):
		}
	}
}

// riverRestartAfter is the outage after which River's client is restarted
// once the database answers: River's leader election backs off
// exponentially while the database fails it (up to a minute), and no
// setting of River's resets that, so after an outage longer than its first
// steps the deployment would stay without River's leader (its maintenance:
// retries coming due, stuck jobs rescued) for as long again.
const riverRestartAfter = 2 * time.Second

// restartRiver stops River's client (letting running work finish for a
// few seconds, then cancelling what is left) and starts it again, so that
// its leader election bids at once.
func (a *App) restartRiver(ctx context.Context, outage time.Duration) {
	a.riverMu.Lock()
	defer a.riverMu.Unlock()
	if !a.riverStarted.Load() || ctx.Err() != nil || a.closing.Load() {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := a.river.Stop(sctx)
	cancel()
	if err != nil {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = a.river.StopAndCancel(cctx)
		cancel()
	}
	if err != nil {
		// The stop goes on: Start now would find River still running and
		// do nothing. Wait for it.
		a.logger.Warn("restart River after the database came back: stopping takes long", "err", err)
		select {
		case <-a.river.Stopped():
		case <-ctx.Done():
			return
		}
	}
	a.riverStarted.Store(false)
	if a.startRiver(ctx) {
		a.logger.Info("River restarted after the database came back, so that its leader election bids at once", "outage", outage)
	}
}

// watchOutage ends a database outage the log tells of as soon as the
// database answers again: it asks every second while one lasts.
func (a *App) watchOutage(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !a.outage.Down() {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if a.pool.Ping(pctx) == nil {
			if lasted := a.outage.Back(ctx); lasted >= riverRestartAfter {
				a.restartRiver(ctx, lasted)
			}
		}
		cancel()
	}
}

// riverLogger is the logger River and River UI get: warnings and errors
// only, unless the service logs at debug, since River's routine info (a
// "producer job counts" line per queue every few seconds) drowns the
// service's own log.
func (a *App) riverLogger() *slog.Logger {
	if a.logger.Enabled(context.Background(), slog.LevelDebug) {
		return a.logger
	}
	return slog.New(telemetry.Floor{Handler: a.logger.Handler(), Min: slog.LevelWarn})
}

func (a *App) ready(ctx context.Context) error {
	if !a.migrated.Load() {
		return errors.New("migrations are not applied yet")
	}
	return arsql.Check(ctx, a.pool)
}

// URL is the base URL the API listens on.
func (a *App) URL() string {
	addr := a.listener.Addr().(*net.TCPAddr)
	host := addr.IP.String()
	if addr.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, fmt.Sprint(addr.Port))
}

// Close stops accepting requests, lets running ones finish (within ctx),
// stops the background work and closes the pool.
func (a *App) Close(ctx context.Context) error {
	var err error
	if a.server != nil {
		err = a.server.Shutdown(ctx)
	}
	if a.jobs != nil {
		a.jobs.Dispatcher().StopDirect(ctx)
	}
	a.closing.Store(true)
	a.riverMu.Lock()
	if a.riverStarted.Load() {
		if rerr := a.river.Stop(ctx); rerr != nil {
			a.logger.Warn("stop River", "err", rerr)
		}
	}
	a.riverMu.Unlock()
	if a.cancel != nil {
		a.cancel()
	}
	a.wg.Wait()
	if a.registry != nil {
		a.registry.StopWatches()
	}
	if a.pool != nil {
		a.pool.Close()
	}
	if a.readPool != nil {
		a.readPool.Close()
	}
	if a.tel != nil {
		err = errors.Join(err, a.tel.Shutdown(ctx))
	}
	return err
}
