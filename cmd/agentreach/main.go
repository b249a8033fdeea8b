// Command agentreach is the Agent-Reach service and its tools.
package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jackc/pgx/v5/pgxpool"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentreach/agentreach/httpapi"
	"github.com/agentreach/agentreach/intent"
	"github.com/agentreach/agentreach/internal/cli"
	"github.com/agentreach/agentreach/internal/devdb"
	"github.com/agentreach/agentreach/internal/telemetry"
	"github.com/agentreach/agentreach/jobs"
	"github.com/agentreach/agentreach/jobs/dispatch"
	"github.com/agentreach/agentreach/registry"
	"github.com/agentreach/agentreach/retention"
	arsql "github.com/agentreach/agentreach/sql"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `agentreach: the reach layer for multi-agent systems

Usage:
  agentreach serve     run the service against DATABASE_URL
  agentreach dev       zero-setup: find or start a PostgreSQL, migrate, serve
  agentreach migrate   apply database migrations and exit
  agentreach agents    list registered agents (--json; --watch redraws it as it changes)
  agentreach agents drain|down|up|update ID   an operator's action on an agent (--reason; update: --weight, ...)
  agentreach dig ID    everything about one agent: state, lease, breaker, route hits (--json)
  agentreach mock-agent  run a test agent with a chosen behaviour (see -h)
  agentreach a2a-agent   run an A2A agent (Go A2A SDK) with a chosen behaviour, optionally registered by card
  agentreach projections rebuild [NAME]  rebuild read models from the event log
  agentreach archive verify|import DIR    check an archive of dropped history, or load it into a database
  agentreach keys create|list|revoke      API keys (admin)
  agentreach jobs submit|get|list|events|cancel|replay   submit and follow jobs (--json; events --follow)
  agentreach bench     measure throughput and latency against pgbench and River on this machine
  agentreach chaos     kill processes and the database mid-run, then verify nothing was lost
  agentreach verify    check the invariants of every job in a database
  agentreach demo      a guided run: dev, a mixed fleet, a few thousand jobs, the health table
  agentreach completion bash|zsh   print a shell completion script: source <(agentreach completion bash)
  agentreach version   print the version (also --version)

Run "agentreach COMMAND -h" (or "agentreach help COMMAND") for a command's
flags. Help asked for goes to stdout; a usage mistake prints it to stderr.
Exit status: 0 done, 1 an error, 2 a usage mistake. Colours only on a
terminal, and never with NO_COLOR set or --json.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m := NewMain()
	if err := m.Run(ctx, os.Args[1:]); err != nil {
		var flagErr *cli.FlagError
		if !errors.Is(err, flag.ErrHelp) && !errors.As(err, &flagErr) { // the flag package said it already
			fmt.Fprintln(os.Stderr, "agentreach:", err)
		}
		os.Exit(exitCode(err))
	}
}

// exitCode is the program's exit status after err: 0 done (or help), 1 an
// error, 2 a usage mistake, 3 a job that did not succeed (cli.ExitCode).
func exitCode(err error) int { return cli.ExitCode(err) }

// Main is the program, testable in process: tests set Stdout, Stderr and
// Getenv, call Run in a goroutine and wait on Started.
type Main struct {
	Stdout, Stderr io.Writer
	Getenv         func(string) string

	// Tune, if set, adjusts the configuration of serve and dev after the
	// flags are parsed (tests use it to shorten intervals).
	Tune func(*Config)

	started chan struct{}
	app     *App
	db      *devdb.DB
}

// NewMain returns a Main wired to the process's streams and environment.
func NewMain() *Main {
	return &Main{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, started: make(chan struct{})}
}

// Started is closed once serve or dev is listening.
func (m *Main) Started() <-chan struct{} { return m.started }

// URL is the base URL of the running API (after Started).
func (m *Main) URL() string { return m.app.URL() }

// Run runs the command named by args[0]; serve and dev block until ctx ends.
func (m *Main) Run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(m.Stderr, usage)
		return fmt.Errorf("%w: agentreach COMMAND [flags]", errUsage)
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "serve":
		return m.runServe(ctx, rest)
	case "dev":
		return m.runDev(ctx, rest)
	case "migrate":
		return m.runMigrate(ctx, rest)
	case "agents":
		return cli.Agents(ctx, m.cliEnv(), rest)
	case "dig":
		return cli.Dig(ctx, m.cliEnv(), rest)
	case "mock-agent":
		return m.runMockAgent(ctx, rest)
	case "a2a-agent":
		return m.runA2AAgent(ctx, rest)
	case "projections":
		return m.runProjections(ctx, rest)
	case "archive":
		if len(rest) == 0 { // a usage mistake: its help to stderr
			onStderr := *m
			onStderr.Stdout = m.Stderr
			return onStderr.runArchive(ctx, rest)
		}
		return m.runArchive(ctx, rest)
	case "keys":
		return m.runKeys(ctx, rest)
	case "jobs":
		return m.runJobs(ctx, rest)
	case "bench":
		return m.runBench(ctx, rest)
	case "chaos":
		return m.runChaos(ctx, rest)
	case "demo":
		return m.runDemo(ctx, rest)
	case "verify":
		return m.runVerify(ctx, rest)
	case "completion":
		return cli.Completion(m.cliEnv(), rest, m.completionCommands)
	case "version", "--version", "-version":
		fmt.Fprintln(m.Stdout, "agentreach", version)
		return nil
	case "help", "-h", "-help", "--help":
		if cmd == "help" && len(rest) > 0 && !cli.IsHelp(rest[0]) { // help COMMAND [SUBCOMMAND]: its -h
			if err := m.Run(ctx, append(rest[:min(len(rest), 2):min(len(rest), 2)], "-h")); !errors.Is(err, flag.ErrHelp) {
				return err
			}
			return nil
		}
		fmt.Fprint(m.Stdout, usage)
		return nil
	default:
		fmt.Fprint(m.Stderr, usage)
		return fmt.Errorf("%w: unknown command %q", errUsage, cmd)
	}
}

// Config is the service's configuration, from flags over environment over
// defaults.
type Config struct {
	DatabaseURL string
	Addr        string
	MaxConns    int
	LogLevel    string
	LogFormat   string
	Registry    registry.Config
	Jobs        jobs.Config
	// Intent configures intent resolution: its thresholds and the model
	// endpoints (the keys never printed).
	Intent   intent.Config
	TestOnly bool
	// SpanExporter receives every span (tests); nil: OTEL_* decides.
	SpanExporter sdktrace.SpanExporter
	// Getenv is the environment the OTEL_* variables are read from.
	Getenv func(string) string
	// AdminKey is the bootstrap admin key (every namespace).
	AdminKey string
	// Insecure turns authentication off: requests without a key act as
	// an admin of every namespace.
	Insecure  bool
	RateLimit float64
	RateBurst float64
	// WaitsPerKey bounds the requests one key has waiting for jobs to end
	// at once (wait_ms).
	WaitsPerKey int
	// AuthFailRate and AuthFailBurst bound failed authentications per
	// client address.
	AuthFailRate  float64
	AuthFailBurst float64
	// DenyNets and AllowNets tune the SSRF guard (netguard.ParsePolicy).
	DenyNets, AllowNets string
	// GroupCommitWindow is how long concurrent submits are gathered into
	// one transaction (0: one transaction per submit).
	GroupCommitWindow time.Duration
	// CommitWorkers is how many transactions of gathered submits, and as
	// many of gathered writes, run at once.
	CommitWorkers int
	// Retention is how long finished jobs' history is kept.
	Retention retention.Config
	// DirectDispatchers is how many submits' first attempts may be under
	// way at once in the process that committed them, without a River job
	// (0: every dispatch goes through River).
	DirectDispatchers int
	// ReadDatabaseURL, when set, serves reads a standby may serve.
	ReadDatabaseURL string
	// RequireSyncStandby refuses writes (503) and holds callbacks while
	// the primary has no synchronous standby streaming.
	RequireSyncStandby bool
}

func (m *Main) env(name, def string) string {
	if v := m.Getenv(name); v != "" {
		return v
	}
	return def
}

func (m *Main) commonFlags(fs *flag.FlagSet, cfg *Config, defAddr string) {
	cfg.Getenv = m.Getenv
	cli.SecretVar(fs, &cfg.DatabaseURL, "database-url", m.Getenv("DATABASE_URL"), "PostgreSQL URL (env DATABASE_URL)")
	cli.SecretVar(fs, &cfg.ReadDatabaseURL, "read-database-url", m.Getenv("AGENTREACH_READ_DATABASE_URL"), "a hot standby (or a pooler in front of several) to serve job lists, the agents' figures and alerts (env AGENTREACH_READ_DATABASE_URL; default: the primary serves them)")
	fs.StringVar(&cfg.Addr, "addr", m.env("AGENTREACH_ADDR", defAddr), "listen address (env AGENTREACH_ADDR)")
	fs.IntVar(&cfg.MaxConns, "max-conns", 0, "database pool size (default 50; dev: 20)")
	fs.StringVar(&cfg.LogLevel, "log-level", m.env("AGENTREACH_LOG_LEVEL", "info"), "debug, info, warn or error (env AGENTREACH_LOG_LEVEL)")
	fs.StringVar(&cfg.Jobs.PublicURL, "public-url", m.Getenv("AGENTREACH_PUBLIC_URL"), "base URL agents reach this service at, for result_url (env AGENTREACH_PUBLIC_URL; default: the listen address)")
	cli.SecretVar(fs, &cfg.Jobs.CallbackSecret, "callback-secret", m.Getenv("AGENTREACH_CALLBACK_SECRET"), "whsec_... secret that signs callbacks (env AGENTREACH_CALLBACK_SECRET; default: one kept in the database)")
	fs.DurationVar(&cfg.Jobs.DeadlineSweepInterval, "deadline-sweep-interval", envDuration(m, "AGENTREACH_DEADLINE_SWEEP_INTERVAL"), "how often timeouts and due retries are acted on (env AGENTREACH_DEADLINE_SWEEP_INTERVAL; default 1s)")
	fs.DurationVar(&cfg.Jobs.ClaimTimeout, "claim-timeout", envDuration(m, "AGENTREACH_CLAIM_TIMEOUT"), "how long an attempt waits in a pull agent's inbox before it is routed again to another agent, spending no attempt (env AGENTREACH_CLAIM_TIMEOUT; default 10s)")
	fs.DurationVar(&cfg.Jobs.RouteWait, "route-wait", envDuration(m, "AGENTREACH_ROUTE_WAIT"), "how long an attempt of a job without route_wait_ms waits for a routable agent before it is spent; a negative value never waits (env AGENTREACH_ROUTE_WAIT; default 30s)")
	fs.DurationVar(&cfg.Registry.SelfPreservationBound, "self-preservation-bound", envDuration(m, "AGENTREACH_SELF_PRESERVATION_BOUND"), "how long a self-preservation episode may keep lapsed agents from going DOWN (env AGENTREACH_SELF_PRESERVATION_BOUND; default 5m)")
	fs.IntVar(&cfg.Jobs.Watermarks.High, "queue-high", 0, "backpressure: above this many jobs waiting in a namespace's lane, its low work is held back (default 10000)")
	fs.IntVar(&cfg.Jobs.Watermarks.Low, "queue-low", 0, "backpressure: under this many again, held work goes on (default 5000)")
	fs.IntVar(&cfg.Jobs.Watermarks.Limit, "queue-limit", 0, "backpressure: at this many, submits to the lane get 429 overloaded (default 50000)")
	fs.DurationVar(&cfg.Jobs.LostAfter, "lost-after", envDuration(m, "AGENTREACH_LOST_AFTER"), "how long past its deadline an attempt without an outcome is declared lost (env AGENTREACH_LOST_AFTER; default 10s)")
	fs.DurationVar(&cfg.Retention.Period, "retention", envDuration(m, "AGENTREACH_RETENTION"), "how long a finished job's history is kept at least; a namespace may ask for less (env AGENTREACH_RETENTION; default 720h)")
	fs.StringVar(&cfg.Retention.ArchiveDir, "archive-dir", m.Getenv("AGENTREACH_ARCHIVE_DIR"), "write each partition of the event log here before retention drops it (env AGENTREACH_ARCHIVE_DIR; default: serve archives nothing, dev archives to a folder of the user's cache)")
	fs.DurationVar(&cfg.Retention.PartitionWidth, "partition-width", envDuration(m, "AGENTREACH_PARTITION_WIDTH"), "the submit times one partition of the event log holds, dropped whole once all its jobs are past retention (env AGENTREACH_PARTITION_WIDTH; default 24h, at least 1m)")
	fs.DurationVar(&cfg.Retention.SnapshotEvery, "snapshot-every", envDuration(m, "AGENTREACH_SNAPSHOT_EVERY"), "how often the leader snapshots the read models, so that a rebuild folds at most this much of the log (env AGENTREACH_SNAPSHOT_EVERY; default 6h; negative: only before retention drops part of the log)")
	fs.DurationVar(&cfg.Retention.MinuteFigures, "minute-figures-kept", envDuration(m, "AGENTREACH_MINUTE_FIGURES_KEPT"), "how long the agents' per-minute figures are kept; windows past an hour read the per-hour ones (env AGENTREACH_MINUTE_FIGURES_KEPT; default 24h, at least 2h)")
	fs.DurationVar(&cfg.Retention.HourFigures, "hour-figures-kept", envDuration(m, "AGENTREACH_HOUR_FIGURES_KEPT"), "how long the agents' per-hour figures are kept before they are summed into per-day ones (env AGENTREACH_HOUR_FIGURES_KEPT; default 720h, at least 48h)")
	cli.SecretVar(fs, &cfg.AdminKey, "admin-key", m.Getenv("AGENTREACH_ADMIN_KEY"), "bootstrap admin key for every namespace (env AGENTREACH_ADMIN_KEY)")
	fs.BoolVar(&cfg.RequireSyncStandby, "require-sync-standby", m.Getenv("AGENTREACH_REQUIRE_SYNC_STANDBY") == "1", "refuse writes (503) and hold callbacks while the primary has no synchronous standby streaming, so that no acknowledged commit rests on one node (env AGENTREACH_REQUIRE_SYNC_STANDBY=1)")
	fs.BoolVar(&cfg.Insecure, "insecure", m.Getenv("AGENTREACH_INSECURE") == "1", "turn authentication off: every request acts as an admin (env AGENTREACH_INSECURE=1; development only)")
	fs.StringVar(&cfg.DenyNets, "deny-nets", m.Getenv("AGENTREACH_DENY_NETS"), "CIDRs agents and callbacks may not reach, besides link-local, metadata, unspecified and multicast (env AGENTREACH_DENY_NETS)")
	fs.StringVar(&cfg.AllowNets, "allow-nets", m.Getenv("AGENTREACH_ALLOW_NETS"), "CIDRs allowed even if denied; allow wins (env AGENTREACH_ALLOW_NETS)")
	fs.Func("approval", "capability patterns needing approval in every namespace, comma-separated (env AGENTREACH_APPROVAL)", func(v string) error {
		cfg.Jobs.ApprovalPatterns = splitList(v)
		return nil
	})
	cfg.Jobs.ApprovalPatterns = splitList(m.Getenv("AGENTREACH_APPROVAL"))
	fs.DurationVar(&cfg.GroupCommitWindow, "group-commit-window", 2*time.Millisecond, "gather concurrent submits into one transaction for at most this long (0: off)")
	fs.IntVar(&cfg.CommitWorkers, "commit-workers", jobs.DefaultCommitWorkers(), "transactions of gathered submits (and as many of gathered writes) run at once: by default one per two CPUs, from 1 to 4")
	fs.IntVar(&cfg.DirectDispatchers, "direct-dispatchers", dispatch.DefaultDirectDispatchers, "first attempts of group-committed submits dispatched at once by the process that committed them, with no River job (0: all through River)")
	fs.Float64Var(&cfg.RateLimit, "rate-limit", 200, "requests per second per API key (token bucket; 0 = no limit)")
	fs.Float64Var(&cfg.RateBurst, "rate-burst", 400, "burst of the per-key rate limit")
	fs.IntVar(&cfg.WaitsPerKey, "waits-per-key", httpapi.DefaultWaitsPerKey, "requests one API key may have waiting for jobs to end at once (wait_ms); past it, 429")
	fs.Float64Var(&cfg.AuthFailRate, "auth-fail-rate", 5, "failed authentications per second per client address (0 = no limit)")
	fs.Float64Var(&cfg.AuthFailBurst, "auth-fail-burst", 50, "burst of failed authentications per client address")
	fs.StringVar(&cfg.LogFormat, "log-format", m.env("AGENTREACH_LOG_FORMAT", "text"), "text or json (env AGENTREACH_LOG_FORMAT)")
	m.intentFlags(fs, &cfg.Intent)
}

// intentFlags are intent resolution's: the lexical resolver needs none; a
// model resolver is on when its URL is set. Keys are secrets: -h never
// shows them.
func (m *Main) intentFlags(fs *flag.FlagSet, c *intent.Config) {
	fs.Float64Var(&c.LexicalThreshold, "intent-threshold", envFloat(m, "AGENTREACH_INTENT_THRESHOLD"), "confidence (best score less the runner-up's, 0-1) the lexical intent resolver needs to decide (env AGENTREACH_INTENT_THRESHOLD; default 0.1)")
	fs.StringVar(&c.Embedding.URL, "embed-url", m.Getenv("AGENTREACH_EMBED_URL"), "OpenAI-compatible embeddings endpoint for intent resolution, e.g. http://127.0.0.1:11434/v1 for Ollama (env AGENTREACH_EMBED_URL; default: off)")
	fs.StringVar(&c.Embedding.Model, "embed-model", m.Getenv("AGENTREACH_EMBED_MODEL"), "embedding model, e.g. nomic-embed-text (env AGENTREACH_EMBED_MODEL)")
	cli.SecretVar(fs, &c.Embedding.Key, "embed-key", m.Getenv("AGENTREACH_EMBED_KEY"), "API key of the embeddings endpoint, if it needs one (env AGENTREACH_EMBED_KEY)")
	fs.Float64Var(&c.EmbeddingThreshold, "embed-threshold", envFloat(m, "AGENTREACH_EMBED_THRESHOLD"), "confidence (best cosine similarity less the runner-up's) the embedding resolver needs (env AGENTREACH_EMBED_THRESHOLD; default 0.05)")
	fs.StringVar(&c.LLM.URL, "llm-url", m.Getenv("AGENTREACH_LLM_URL"), "OpenAI-compatible chat endpoint asked to choose a capability when the other resolvers are not confident (env AGENTREACH_LLM_URL; default: off)")
	fs.StringVar(&c.LLM.Model, "llm-model", m.Getenv("AGENTREACH_LLM_MODEL"), "chat model (env AGENTREACH_LLM_MODEL)")
	cli.SecretVar(fs, &c.LLM.Key, "llm-key", m.Getenv("AGENTREACH_LLM_KEY"), "API key of the chat endpoint, if it needs one (env AGENTREACH_LLM_KEY)")
	fs.DurationVar(&c.Timeout, "intent-model-timeout", envDuration(m, "AGENTREACH_INTENT_MODEL_TIMEOUT"), "bound on one model call of intent resolution; past it the model is skipped (env AGENTREACH_INTENT_MODEL_TIMEOUT; default 10s)")
}

// envFloat reads a number from the environment; unset or malformed is
// zero (the default), and a malformed one is reported.
func envFloat(m *Main, name string) float64 {
	v := m.Getenv(name)
	if v == "" {
		return 0
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		fmt.Fprintf(m.Stderr, "agentreach: ignoring %s=%q: %v\n", name, v, err)
	}
	return f
}

// envDuration reads a duration from the environment; unset or malformed is
// zero (the default), and a malformed one is reported.
func envDuration(m *Main, name string) time.Duration {
	v := m.Getenv(name)
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		fmt.Fprintf(m.Stderr, "agentreach: ignoring %s=%q: %v\n", name, v, err)
	}
	return d
}

// newFlagSet is the flag set of `agentreach name`: its help to stdout when
// asked for, to stderr with a usage mistake (cli.Env.NewFlagSet).
func (m *Main) newFlagSet(name string) *flag.FlagSet { return m.cliEnv().NewFlagSet(name) }

func (m *Main) logger(cfg Config) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return nil, fmt.Errorf("log level %q: %w", cfg.LogLevel, err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch cfg.LogFormat {
	case "json":
		return slog.New(telemetry.LogHandler{Handler: slog.NewJSONHandler(m.Stderr, opts)}), nil
	case "text":
		return slog.New(telemetry.LogHandler{Handler: slog.NewTextHandler(m.Stderr, opts)}), nil
	}
	return nil, fmt.Errorf("log format %q: want text or json", cfg.LogFormat)
}

const defaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/agentreach?sslmode=disable"

// parseService parses the flags of a command that talks to the database,
// fills the database default, and returns the logger the flags ask for.
func (m *Main) parseService(fs *flag.FlagSet, cfg *Config, args []string) (*slog.Logger, error) {
	if err := cli.ParseFlags(fs, args); err != nil {
		return nil, err
	}
	if cfg.DatabaseURL == "" {
		cfg.DatabaseURL = defaultDatabaseURL
	}
	if err := cfg.Retention.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	if cfg.WaitsPerKey < 1 && fs.Lookup("waits-per-key") != nil {
		return nil, fmt.Errorf("%w: --waits-per-key must be at least 1", errUsage)
	}
	return m.logger(*cfg)
}

func (m *Main) runServe(ctx context.Context, args []string) error {
	var cfg Config
	fs := m.newFlagSet("serve")
	m.commonFlags(fs, &cfg, ":8080")
	logger, err := m.parseService(fs, &cfg, args)
	if err != nil {
		return err
	}
	if cfg.AdminKey == "" && !cfg.Insecure {
		return fmt.Errorf("%w: serve needs a key store to let anyone in: set AGENTREACH_ADMIN_KEY (the bootstrap admin key, "+
			"which creates the others with `agentreach keys create`), or run with --insecure to turn authentication off", errUsage)
	}
	if cfg.Insecure {
		logger.Warn("AUTHENTICATION IS OFF (--insecure): every request acts as an admin of every namespace")
	}
	return m.serve(ctx, cfg, logger)
}

func (m *Main) serve(ctx context.Context, cfg Config, logger *slog.Logger) error {
	if m.Tune != nil {
		m.Tune(&cfg)
	}
	m.app = NewApp(cfg, logger)
	if err := m.app.Start(ctx); err != nil {
		return err
	}
	logger.Info("agentreach listening", "url", m.app.URL(), "version", version)
	close(m.started)
	<-ctx.Done()
	logger.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return m.app.Close(sctx)
}

// devMaxConns is dev's pool size unless --max-conns says otherwise.
const devMaxConns = 20

func (m *Main) runDev(ctx context.Context, args []string) error {
	var cfg Config
	var localAddr, dataDir string
	fs := m.newFlagSet("dev")
	m.commonFlags(fs, &cfg, "127.0.0.1:8080")
	fs.StringVar(&localAddr, "local-addr", m.env("AGENTREACH_DEV_LOCAL_ADDR", devdb.DefaultLocalAddr), "where to look for a running PostgreSQL (env AGENTREACH_DEV_LOCAL_ADDR)")
	fs.StringVar(&dataDir, "data-dir", m.Getenv("AGENTREACH_DEV_DATA_DIR"), "keep a private cluster's data here (default: a temporary folder removed on exit)")
	keyFile := m.Getenv("AGENTREACH_DEV_KEY_FILE")
	if dir := userDir(m.Getenv, "config"); keyFile == "" && dir != "" {
		keyFile = filepath.Join(dir, "agentreach", "dev-admin-key")
	}
	fs.StringVar(&keyFile, "key-file", keyFile, "where dev keeps the admin key it generates, for the next runs (env AGENTREACH_DEV_KEY_FILE; without AGENTREACH_ADMIN_KEY)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if err := cfg.Retention.Validate(); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	logger, err := m.logger(cfg)
	if err != nil {
		return err
	}
	db, err := devdb.Open(ctx, devdb.Options{DatabaseURL: cfg.DatabaseURL, LocalAddr: localAddr, DataDir: dataDir, Logger: logger})
	if err != nil {
		return err
	}
	m.db = db
	if cfg.Retention.ArchiveDir == "" { // dev archives what retention drops, by default: a folder per database
		if cache := userDir(m.Getenv, "cache"); cache != "" {
			cfg.Retention.ArchiveDir = filepath.Join(cache, "agentreach", "archive", archiveFolder(db.DSN))
		}
	}
	defer func() {
		if err := db.Close(); err != nil {
			logger.Error("stop private PostgreSQL", "err", err)
		}
	}()
	cfg.DatabaseURL = db.DSN
	if cfg.MaxConns == 0 {
		// A dev server shares its PostgreSQL with tests and tools on the
		// same machine (100 connections by default): a smaller pool.
		cfg.MaxConns = devMaxConns
	}
	keyNote := "Admin key: the one in AGENTREACH_ADMIN_KEY (not shown)"
	switch {
	case cfg.Insecure:
		keyNote = "Authentication is OFF (--insecure): every request acts as an admin."
		logger.Warn("AUTHENTICATION IS OFF (--insecure): every request acts as an admin of every namespace")
	case cfg.AdminKey == "":
		var kept bool
		cfg.AdminKey, kept, err = devAdminKey(keyFile)
		switch {
		case err != nil:
			logger.Warn("dev admin key not kept: a new one next run", "file", keyFile, "err", err)
			keyNote = "Admin key: " + cfg.AdminKey + "   (generated for this run; export AGENTREACH_KEY=... for the CLI)"
		case kept:
			keyNote = "Admin key: " + cfg.AdminKey + "   (kept in " + keyFile + "; export AGENTREACH_KEY=... for the CLI)"
		default:
			keyNote = "Admin key: " + cfg.AdminKey + "   (generated, kept in " + keyFile + " for the next dev runs; export AGENTREACH_KEY=... for the CLI)"
		}
	}
	if m.Tune != nil {
		m.Tune(&cfg)
	}
	m.app = NewApp(cfg, logger)
	if err := m.app.Start(ctx); err != nil {
		return err
	}
	// The banner says dev is running once it is: the schema current, so
	// the commands it points to answer at once (until then the log says
	// why the database is not ready).
	select {
	case <-m.app.SchemaReady():
		fmt.Fprint(m.Stdout, devBanner(m.app.URL(), db, dataDir, keyNote))
		close(m.started)
	case <-ctx.Done():
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return m.app.Close(sctx)
}

// devBanner is what dev prints once it serves: where everything is, which
// database it uses and whether its data outlives the run, and the key.
func devBanner(url string, db *devdb.DB, dataDir, keyNote string) string {
	var where string
	switch db.Source {
	case devdb.SourcePrivate:
		if dataDir == "" {
			where = "a private PostgreSQL cluster in a temporary folder.\n" +
				"             ITS DATA IS TEMPORARY: it is deleted when dev stops. To keep it, run\n" +
				"             `agentreach dev --data-dir DIR` (or set AGENTREACH_DEV_DATA_DIR) and use the same DIR next time."
		} else {
			where = "a private PostgreSQL cluster kept in " + dataDir + " (its data stays there after dev stops)"
		}
	case devdb.SourceLocal:
		where = "the PostgreSQL server already running on this machine"
	default:
		where = "DATABASE_URL"
	}
	return fmt.Sprintf(`
Agent-Reach dev is running.
  Dashboard: %[1]s/dashboard/
  River UI:  %[1]s/riverui/   (an admin key of every namespace)
  API:       %[1]s/v1   (OpenAPI: %[1]s/openapi.json)
  Health:    %[1]s/healthz   Ready: %[1]s/readyz
  Database:  %[2]s
             from %[3]s
  %[4]s
Press Ctrl-C to stop.
`, url, redact(db.DSN), where, keyNote)
}

// devAdminKey is dev's bootstrap admin key: the one kept in path by an
// earlier run (kept), else a new one, written there (mode 0600) for the
// next. Two dev runs starting at once agree on one.
func devAdminKey(path string) (key string, kept bool, err error) {
	read := func() string {
		b, err := os.ReadFile(path)
		if k := strings.TrimSpace(string(b)); err == nil && strings.HasPrefix(k, "ark_") && len(k) >= 20 {
			return k
		}
		return ""
	}
	if path == "" {
		return generateKey(), false, errors.New("no folder to keep it in")
	}
	if k := read(); k != "" {
		return k, true, nil
	}
	key = generateKey()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return key, false, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		_ = os.Remove(path) // unreadable or not a key: made anew
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	}
	if errors.Is(err, os.ErrExist) {
		if k := read(); k != "" { // another dev run wrote it first
			return k, true, nil
		}
	}
	if err != nil {
		return key, false, err
	}
	if _, err := f.WriteString(key + "\n"); err != nil {
		f.Close()
		return key, false, err
	}
	return key, false, f.Close()
}

// generateKey makes a bootstrap admin key for a dev run.
func generateKey() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return "ark_dev_" + base64.RawURLEncoding.EncodeToString(b)
}

// redact hides a password in a connection string (a URL or key=value
// pairs) before it is printed; one it cannot read is not shown at all.
func redact(dsn string) string {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return "(a connection string that does not parse)"
	}
	pw := cfg.ConnConfig.Password
	if pw == "" {
		return dsn
	}
	out := dsn
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			out = strings.Replace(u.String(), "xxxxx", "***", 1)
		}
	}
	for _, form := range []string{pw, url.QueryEscape(pw), url.PathEscape(pw)} {
		out = strings.ReplaceAll(out, form, "***") // also a password= parameter
	}
	return out
}

func (m *Main) runMigrate(ctx context.Context, args []string) error {
	var cfg Config
	fs := m.newFlagSet("migrate")
	m.commonFlags(fs, &cfg, "")
	logger, err := m.parseService(fs, &cfg, args)
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := arsql.Migrate(ctx, pool, logger); err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "schema is at version %d\n", arsql.LatestVersion())
	return nil
}

// userDir is the user's folder of kind, "cache" or "config", as
// os.UserCacheDir and os.UserConfigDir find it, read from getenv: an
// environment without HOME (a test's, the demo's in them) has none, and
// dev keeps nothing in one then ("").
func userDir(getenv func(string) string, kind string) string {
	home := getenv("HOME")
	switch runtime.GOOS {
	case "windows":
		return getenv(map[string]string{"cache": "LocalAppData", "config": "AppData"}[kind])
	case "darwin", "ios":
		if home == "" {
			return ""
		}
		return filepath.Join(home, "Library", map[string]string{"cache": "Caches", "config": "Application Support"}[kind])
	}
	if dir := getenv("XDG_" + strings.ToUpper(kind) + "_HOME"); filepath.IsAbs(dir) {
		return dir
	}
	if home == "" {
		return ""
	}
	return filepath.Join(home, "."+kind)
}

// archiveFolder names dev's archive folder of the database at dsn: its
// name and a digest of where it is, so that two databases (dev's and the
// demo's scratch ones) never share one (an archive holds one database's
// partitions).
func archiveFolder(dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "default"
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s:%d/%s", cfg.Host, cfg.Port, cfg.Database)))
	return cfg.Database + "-" + hex.EncodeToString(sum[:6])
}
