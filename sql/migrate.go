package sql

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qMigrateLock           = queries.Must("MigrateLock")
	qMigrateUnlock         = queries.Must("MigrateUnlock")
	qCreateMigrationsTable = queries.Must("CreateMigrationsTable")
	qRecordMigration       = queries.Must("RecordMigration")
	qSchemaVersion         = queries.Must("SchemaVersion")
	qMigrationsTableExists = queries.Must("MigrationsTableExists")
	qCreateViewsTable      = queries.Must("CreateViewsTable")
	qViewsApplied          = queries.Must("ViewsApplied")
	qRecordViews           = queries.Must("RecordViews")
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

//go:embed views/*.sql
var viewFiles embed.FS

// View is one embedded file of sql/views: the present definition of one
// view or function (CREATE OR REPLACE), applied after the migrations.
type View struct {
	Name string
	SQL  string
}

// Views returns the embedded views and functions in the order they are
// applied (their files' names: a function before the views that call it).
func Views() []View {
	var out []View
	for _, f := range embedded(viewFiles, "views") {
		out = append(out, View{Name: strings.TrimSuffix(f.name, ".sql"), SQL: f.body})
	}
	return out
}

type embeddedFile struct{ name, body string }

// embedded are the files of dir in fsys, in the order of their names; an
// unreadable one is a build mistake and panics.
func embedded(fsys embed.FS, dir string) []embeddedFile {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		panic(err)
	}
	out := make([]embeddedFile, len(entries))
	for i, e := range entries {
		body, err := fsys.ReadFile(path.Join(dir, e.Name()))
		if err != nil {
			panic(err)
		}
		out[i] = embeddedFile{name: e.Name(), body: string(body)}
	}
	return out // fs.ReadDir sorts by name
}

// ViewsHash identifies the embedded views: a hash of their files.
func ViewsHash() string {
	h := sha256.New()
	for _, v := range Views() {
		fmt.Fprintf(h, "%s\n%s\n", v.Name, v.SQL)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// migrateLockKey is the advisory lock that serialises migrations across
// processes: the bytes of "agntrch1".
const migrateLockKey int64 = 0x61676e7472636831

// Migration is one embedded schema file.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Migrations returns the embedded migrations in order. Files are named
// NNNN_name.sql; a malformed name is a build mistake and panics.
func Migrations() []Migration {
	var out []Migration
	for _, f := range embedded(migrationFiles, "migrations") {
		num, name, ok := strings.Cut(strings.TrimSuffix(f.name, ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			panic("sql: migration file name must be NNNN_name.sql: " + f.name)
		}
		out = append(out, Migration{Version: v, Name: name, SQL: f.body})
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Version < out[k].Version })
	return out
}

// LatestVersion is the version of the newest embedded migration.
func LatestVersion() int {
	ms := Migrations()
	return ms[len(ms)-1].Version
}

// Migrate applies every outstanding migration, ours and River's, holding a
// session advisory lock so that concurrent callers wait for each other. Each
// of our migrations runs in its own transaction with its bookkeeping row.
func Migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate: acquire connection: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, qMigrateLock, migrateLockKey); err != nil {
		return fmt.Errorf("migrate: take advisory lock: %w", err)
	}
	defer func() {
		// A fresh context: the lock must be released even when ctx is done.
		_, _ = conn.Exec(context.Background(), qMigrateUnlock, migrateLockKey)
	}()

	if _, err := conn.Exec(ctx, qCreateMigrationsTable); err != nil {
		return fmt.Errorf("migrate: create bookkeeping table: %w", err)
	}
	current, err := currentVersion(ctx, conn.Conn())
	if err != nil {
		return err
	}
	for _, m := range Migrations() {
		if m.Version <= current {
			continue
		}
		err := pgx.BeginFunc(ctx, conn.Conn(), func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, qRecordMigration, m.Version, m.Name)
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate: apply %04d_%s: %w", m.Version, m.Name, err)
		}
		logger.Info("migration applied", "version", m.Version, "name", m.Name)
	}
	if err := applyViews(ctx, conn.Conn(), logger); err != nil {
		return err
	}

	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: logger})
	if err != nil {
		return fmt.Errorf("migrate: river migrator: %w", err)
	}
	// River logs each version it applies through logger.
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate: river: %w", err)
	}
	return nil
}

// applyViews re-applies the views and functions of sql/views after the
// migrations, in one transaction, when they differ from those applied. A
// binary older than the one that applied them (a lower newest migration,
// during a rolling upgrade) leaves them as they are; a newer one applies
// its own even when the files are unchanged, since one of its migrations
// may have dropped a view (to change its columns): this puts it back. A
// binary of the same migrations but other views (a views-only change, or
// its rollback) applies its own, and when PostgreSQL refuses (a view
// would lose columns) it says so and leaves the views as they are rather
// than refuse to start.
func applyViews(ctx context.Context, conn *pgx.Conn, logger *slog.Logger) error {
	if _, err := conn.Exec(ctx, qCreateViewsTable); err != nil {
		return fmt.Errorf("migrate: create views table: %w", err)
	}
	hash, latest := ViewsHash(), LatestVersion()
	var applied string
	var by int
	err := conn.QueryRow(ctx, qViewsApplied).Scan(&applied, &by)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return fmt.Errorf("migrate: read views applied: %w", err)
	case by > latest || (by == latest && applied == hash):
		return nil
	}
	peer := err == nil && by == latest // the same migrations, other views
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, v := range Views() {
			if _, err := tx.Exec(ctx, v.SQL); err != nil {
				return fmt.Errorf("%s: %w", v.Name, err)
			}
		}
		_, err := tx.Exec(ctx, qRecordViews, hash, latest)
		return err
	})
	if err != nil && peer && ctx.Err() == nil {
		logger.Warn("views of another build of the same migrations are applied, and these cannot replace them; left as they are", "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("migrate: apply views: %w", err)
	}
	logger.Info("views applied", "views", len(Views()), "hash", hash[:12])
	return nil
}

func currentVersion(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (int, error) {
	var v int
	err := q.QueryRow(ctx, qSchemaVersion).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// ErrNotMigrated is returned by Check when the database's schema is behind.
var ErrNotMigrated = domain.NewError(domain.ErrUnavailable, "database schema is not current")

// Check reports whether the database is reachable and fully migrated, ours
// and River's; it is what readiness means. It returns ErrNotMigrated
// (wrapped) when a migration is outstanding.
func Check(ctx context.Context, pool *pgxpool.Pool) error {
	var exists bool
	if err := pool.QueryRow(ctx, qMigrationsTableExists).Scan(&exists); err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	if !exists {
		return fmt.Errorf("%w: no migrations applied", ErrNotMigrated)
	}
	v, err := currentVersion(ctx, pool)
	if err != nil {
		return err
	}
	if want := LatestVersion(); v < want {
		return fmt.Errorf("%w: at %d, want %d", ErrNotMigrated, v, want)
	}
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return fmt.Errorf("check river schema: %w", err)
	}
	res, err := migrator.Validate(ctx, nil)
	if err != nil {
		return fmt.Errorf("check river schema: %w", err)
	}
	if !res.OK {
		return fmt.Errorf("%w: river: %s", ErrNotMigrated, strings.Join(res.Messages, "; "))
	}
	return nil
}
