package devdb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qPing           = queries.Must("DevdbPing")
	qDatabaseExists = queries.Must("DevdbDatabaseExists")
	qCreateDatabase = queries.Must("CreateDatabase")
)

// Values of [DB.Source].
const (
	// SourceEnv means the database came from [Options.DatabaseURL].
	SourceEnv = "env"
	// SourceLocal means a PostgreSQL server already running on
	// [Options.LocalAddr] is used.
	SourceLocal = "local"
	// SourcePrivate means a private cluster was created and started by Open.
	SourcePrivate = "private"
)

// Defaults applied by [Open] to empty [Options] fields.
const (
	// DefaultLocalAddr is the default [Options.LocalAddr].
	DefaultLocalAddr = "127.0.0.1:5432"
	// DefaultLocalUser is the default [Options.LocalUser].
	DefaultLocalUser = "postgres"
	// DefaultDatabase is the default [Options.Database].
	DefaultDatabase = "agentreach"
)

// localProbeTimeout bounds the connection attempt to the local server.
const localProbeTimeout = 2 * time.Second

// ErrNoDatabase is returned (wrapped, test with errors.Is) by [Open] when no
// database could be found or started.
var ErrNoDatabase = errors.New("no PostgreSQL database available: " +
	"set DATABASE_URL, " +
	"or run PostgreSQL on 127.0.0.1:5432 (user postgres, trust auth), " +
	"or install the PostgreSQL server binaries (initdb/pg_ctl; e.g. `apt-get install postgresql`, " +
	"`brew install postgresql`) so a private cluster can be started")

// ErrLocalUnusable is returned (wrapped) by [Open] when a PostgreSQL
// server listens on [Options.LocalAddr] but cannot be used: Open falls back
// to a private cluster only when nothing listens there.
var ErrLocalUnusable = errors.New("devdb: the local PostgreSQL is not usable")

// nothingListens reports whether a failed connection found no server at
// all (the connection was refused), as opposed to a server that refused it.
func nothingListens(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED)
}

// Options configures [Open]. The zero value is ready to use.
type Options struct {
	// DatabaseURL, if set, is returned as is (Source "env"); nothing is
	// checked or connected.
	DatabaseURL string
	// LocalAddr is the host:port probed for a running local server.
	// Default "127.0.0.1:5432".
	LocalAddr string
	// LocalUser is the role used to connect to the local server.
	// Default "postgres".
	LocalUser string
	// Database is the database name; it is created on the local server or
	// private cluster if missing. Default "agentreach".
	Database string
	// DataDir is the private cluster's data folder. Default: a fresh
	// temporary folder, removed by Close. A folder given here is kept by
	// Close, and reused (no initdb) when it already holds a cluster.
	DataDir string
	// BinDirs are extra folders searched first for initdb and pg_ctl.
	BinDirs []string
	// NoDefaultBinSearch disables the default search for initdb and pg_ctl
	// (PATH, then /usr/lib/postgresql/*/bin), leaving only BinDirs.
	NoDefaultBinSearch bool
	// Logger receives progress lines. Default: discard.
	Logger *slog.Logger
}

// DB is a resolved database. Call Close when done with it.
type DB struct {
	// DSN is a pgx/libpq connection URL for the database.
	DSN string
	// Source tells where the database came from: "env", "local" or
	// "private" (see SourceEnv, SourceLocal, SourcePrivate).
	Source string

	mu     sync.Mutex
	closed bool
	priv   *cluster // nil unless Source == SourcePrivate
}

// Open resolves a database as described in the package documentation.
// The context bounds the resolution only: a private cluster keeps running
// until Close.
func Open(ctx context.Context, opts Options) (*DB, error) {
	if opts.DatabaseURL != "" {
		return &DB{DSN: opts.DatabaseURL, Source: SourceEnv}, nil
	}
	if opts.LocalAddr == "" {
		opts.LocalAddr = DefaultLocalAddr
	}
	if opts.LocalUser == "" {
		opts.LocalUser = DefaultLocalUser
	}
	if opts.Database == "" {
		opts.Database = DefaultDatabase
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}

	// 2) A local server.
	log.Info("devdb: probing " + opts.LocalAddr)
	adminDSN := dsn(opts.LocalUser, opts.LocalAddr, "postgres")
	localErr := ping(ctx, adminDSN, localProbeTimeout)
	if localErr == nil {
		if err := ensureDatabase(ctx, adminDSN, opts.Database, log); err != nil {
			return nil, fmt.Errorf("devdb: local PostgreSQL on %s: %w", opts.LocalAddr, err)
		}
		d := &DB{DSN: dsn(opts.LocalUser, opts.LocalAddr, opts.Database), Source: SourceLocal}
		log.Info("devdb: using local PostgreSQL", "addr", opts.LocalAddr, "database", opts.Database)
		return d, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if !nothingListens(localErr) {
		// A server answered and refused (too many clients, a password it
		// wants, a role it lacks) or did not answer in time: that is this
		// machine's PostgreSQL with a problem to fix, not its absence. A
		// throwaway cluster in its place would hide the problem and lose
		// whatever is written to it.
		return nil, fmt.Errorf("%w: %s answered but could not be used: %w (fix it, set DATABASE_URL, or point --local-addr "+
			"where nothing listens to have dev start a private cluster)", ErrLocalUnusable, opts.LocalAddr, localErr)
	}
	log.Info("devdb: nothing listens on the local address", "addr", opts.LocalAddr, "err", localErr)

	// 3) A private cluster.
	initdb, pgctl, binErr := findServerBinaries(opts.BinDirs, !opts.NoDefaultBinSearch)
	if binErr != nil {
		return nil, fmt.Errorf("%w (local %s: %w; private cluster: %w)",
			ErrNoDatabase, opts.LocalAddr, localErr, binErr)
	}
	c, err := startCluster(ctx, initdb, pgctl, opts.DataDir, log)
	if err != nil {
		return nil, fmt.Errorf("devdb: private PostgreSQL cluster: %w", err)
	}
	if err := ensureDatabase(ctx, dsn("postgres", c.addr, "postgres"), opts.Database, log); err != nil {
		err = fmt.Errorf("devdb: private PostgreSQL cluster: %w", err)
		return nil, errors.Join(err, c.stop())
	}
	return &DB{DSN: dsn("postgres", c.addr, opts.Database), Source: SourcePrivate, priv: c}, nil
}

// Close releases the database. For a private cluster it stops the server
// (pg_ctl stop -m fast), waits until the postmaster process is gone and
// removes the data folder if Open created it. For the other sources it does
// nothing. Close is safe to call more than once and on a nil *DB; only the
// first call does any work.
func (d *DB) Close() error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	if d.priv == nil {
		return nil
	}
	return d.priv.stop()
}

// dsn builds postgres://user@addr/db?sslmode=disable.
func dsn(user, addr, db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(user),
		Host:     addr,
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// connect opens one connection with a connect timeout.
func connect(ctx context.Context, connString string, timeout time.Duration) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(connString)
	if err != nil {
		return nil, err
	}
	cfg.ConnectTimeout = timeout
	// Only try what the DSN names: no fallbacks to other hosts/ports from
	// the environment.
	cfg.Fallbacks = nil
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return pgx.ConnectConfig(ctx, cfg)
}

// ping connects, runs a trivial query and disconnects.
func ping(ctx context.Context, connString string, timeout time.Duration) error {
	conn, err := connect(ctx, connString, timeout)
	if err != nil {
		return err
	}
	defer closeConn(conn)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var one int
	return conn.QueryRow(ctx, qPing).Scan(&one)
}

// ensureDatabase creates database name through the admin connection string
// unless it exists. A concurrent creation by another process counts as
// success.
func ensureDatabase(ctx context.Context, adminDSN, name string, log *slog.Logger) error {
	conn, err := connect(ctx, adminDSN, 10*time.Second)
	if err != nil {
		return err
	}
	defer closeConn(conn)

	exists := func() (bool, error) {
		var ok bool
		err := conn.QueryRow(ctx, qDatabaseExists, name).Scan(&ok)
		return ok, err
	}
	ok, err := exists()
	if err != nil {
		return fmt.Errorf("check database %q: %w", name, err)
	}
	if ok {
		return nil
	}
	_, err = conn.Exec(ctx, fmt.Sprintf(qCreateDatabase, pgx.Identifier{name}.Sanitize()))
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		log.Info("devdb: created database", "database", name)
		return nil
	case errors.As(err, &pgErr) && pgErr.Code == "42P04": // duplicate_database
		return nil
	case errors.As(err, &pgErr) && pgErr.Code == "23505": // unique_violation on pg_database: lost a race
		if ok, err2 := exists(); err2 == nil && ok {
			return nil
		}
	}
	return fmt.Errorf("create database %q: %w", name, err)
}

// closeConn closes conn without waiting long for a stuck server.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// DataDir is the private cluster's data folder, or "" for the other sources.
func (d *DB) DataDir() string {
	if d == nil || d.priv == nil {
		return ""
	}
	return d.priv.dataDir
}

// PID is the private cluster's postmaster process id, or 0.
func (d *DB) PID() int {
	if d == nil || d.priv == nil {
		return 0
	}
	return d.priv.pid
}

// Restart restarts a private cluster (pg_ctl restart -m fast), as a crash
// test of everything that talks to it. Only private clusters restart.
func (d *DB) Restart(ctx context.Context) error {
	if d == nil || d.priv == nil {
		return errors.New("devdb: only a private cluster can be restarted")
	}
	return d.priv.restart(ctx)
}

// BaseBackup writes a physical backup of a private cluster, taken while it
// runs (pg_basebackup, with the WAL it needs), into dir: Open with
// Options.DataDir dir starts the restored cluster. Only private clusters
// are backed up this way.
func (d *DB) BaseBackup(ctx context.Context, dir string) error {
	if d == nil || d.priv == nil {
		return errors.New("devdb: only a private cluster can be backed up")
	}
	return d.priv.baseBackup(ctx, dir)
}
