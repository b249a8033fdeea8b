// Package pgtest gives each test its own PostgreSQL database, cloned from a
// migrated template, so tests run in parallel against the real server and
// leave nothing behind.
package pgtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	arsql "github.com/agentreach/agentreach/sql"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qTemplateExists             = queries.Must("PgtestTemplateExists")
	qLock                       = queries.Must("PgtestLock")
	qUnlock                     = queries.Must("PgtestUnlock")
	qCreateDatabase             = queries.Must("CreateDatabase")
	qCreateDatabaseFromTemplate = queries.Must("CreateDatabaseFromTemplate")
	qDropDatabaseForce          = queries.Must("DropDatabaseForce")
	qMarkDatabaseTemplate       = queries.Must("MarkDatabaseTemplate")
)

// ident quotes a database name for a template query.
func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// AdminURL is the maintenance connection: PGTEST_ADMIN_URL, or the local
// server as the postgres user.
func AdminURL() string {
	if u := os.Getenv("PGTEST_ADMIN_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// templateName names the template by a hash of the schema, so a changed
// migration gets a fresh template and parallel test binaries share one.
func templateName() string {
	h := sha256.New()
	for _, m := range arsql.Migrations() {
		fmt.Fprintf(h, "%d %s\n%s\n", m.Version, m.Name, m.SQL)
	}
	fmt.Fprintf(h, "views %s\n", arsql.ViewsHash())
	return "agentreach_tmpl_" + hex.EncodeToString(h.Sum(nil))[:12]
}

var (
	templateOnce sync.Once
	templateErr  error
)

// lockKey serialises template creation across test binaries.
const lockKey int64 = 0x7067746573740001

func ensureTemplate(ctx context.Context) (string, error) {
	name := templateName()
	templateOnce.Do(func() {
		templateErr = func() error {
			admin, err := pgx.Connect(ctx, AdminURL())
			if err != nil {
				return fmt.Errorf("connect %s: %w", AdminURL(), err)
			}
			defer admin.Close(ctx)
			if _, err := admin.Exec(ctx, qLock, lockKey); err != nil {
				return err
			}
			defer admin.Exec(ctx, qUnlock, lockKey) //nolint:errcheck
			var ok bool
			if err := admin.QueryRow(ctx, qTemplateExists, name).Scan(&ok); err != nil {
				return err
			}
			if ok {
				return nil
			}
			// A half-made template from a crashed run is dropped and made again.
			if _, err := admin.Exec(ctx, fmt.Sprintf(qDropDatabaseForce, ident(name))); err != nil {
				return err
			}
			if _, err := admin.Exec(ctx, fmt.Sprintf(qCreateDatabase, ident(name))); err != nil {
				return err
			}
			pool, err := pgxpool.New(ctx, withDatabase(AdminURL(), name))
			if err != nil {
				return err
			}
			err = arsql.Migrate(ctx, pool, slog.New(slog.NewTextHandler(io.Discard, nil)))
			pool.Close()
			if err != nil {
				return err
			}
			_, err = admin.Exec(ctx, fmt.Sprintf(qMarkDatabaseTemplate, ident(name)))
			return err
		}()
	})
	return name, templateErr
}

// PoolMaxConns bounds the pool of anything opened on a test database's URL
// (pgxpool reads pool_max_conns from it): tests run in parallel beside a
// `make run`, on a server that allows 100 connections in all.
const PoolMaxConns = 12

// withDatabase swaps the database name in a postgres:// URL.
func withDatabase(raw, db string) string {
	u, err := url.Parse(raw)
	if err != nil {
		panic("pgtest: bad admin URL: " + err.Error())
	}
	u.Path = "/" + db
	return u.String()
}

// testURL is the URL handed to a test: its database, and a small pool.
func testURL(db string) string {
	u, _ := url.Parse(withDatabase(AdminURL(), db))
	q := u.Query()
	q.Set("pool_max_conns", fmt.Sprint(PoolMaxConns))
	u.RawQuery = q.Encode()
	return u.String()
}

// NewDatabase creates a migrated database for one test and drops it when the
// test ends. It returns the database's URL. It first reserves the test's
// connections (DefaultConns, or Conns) from the suite's budget, waiting
// while other tests hold too many.
func NewDatabase(t testing.TB, opts ...Option) string {
	t.Helper()
	reserve(t, opts)
	tmpl, err := ensureTemplate(context.Background())
	require.NoError(t, err, "pgtest: template database (is PostgreSQL running on 127.0.0.1:5432?)")
	return createDatabase(t, tmpl)
}

// NewEmptyDatabase creates an empty (unmigrated) database for one test, for
// tests of migration itself, and drops it at the end; it reserves
// connections as NewDatabase does.
func NewEmptyDatabase(t testing.TB, opts ...Option) string {
	t.Helper()
	reserve(t, opts)
	return createDatabase(t, "")
}

func reserve(t testing.TB, opts []Option) {
	t.Helper()
	o := options{conns: DefaultConns}
	for _, opt := range opts {
		opt(&o)
	}
	Reserve(t, o.conns)
}

// createDatabase creates a database for one test, a copy of template tmpl
// unless tmpl is empty, and drops it at the end.
func createDatabase(t testing.TB, tmpl string) string {
	t.Helper()
	ctx := context.Background()
	name := "agentreach_test_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
	admin, err := pgx.Connect(ctx, AdminURL())
	require.NoError(t, err)
	defer admin.Close(ctx)
	create := fmt.Sprintf(qCreateDatabase, ident(name))
	if tmpl != "" {
		create = fmt.Sprintf(qCreateDatabaseFromTemplate, ident(name), ident(tmpl))
	}
	_, err = admin.Exec(ctx, create)
	require.NoError(t, err)
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), AdminURL())
		if err != nil {
			t.Errorf("pgtest: drop %s: %v", name, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), fmt.Sprintf(qDropDatabaseForce, ident(name))); err != nil {
			t.Errorf("pgtest: drop %s: %v", name, err)
		}
	})
	if tmpl != "" { // the template's partitions of the log may be days old
		c, err := pgx.Connect(ctx, withDatabase(AdminURL(), name))
		require.NoError(t, err)
		_, err = arsql.EnsureEventPartitions(ctx, c, time.Now(), domain.DefaultPartitionWidth)
		c.Close(ctx)
		require.NoError(t, err)
	}
	return testURL(name)
}

// NewPool returns a pool on a fresh migrated database, closed at test end.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}
