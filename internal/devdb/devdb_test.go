package devdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/internal/pgtest"
	"github.com/agentreach/agentreach/sql/queries"
)

// deadAddr returns a 127.0.0.1 address where nothing listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}

func randomName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

func skipWithoutServerBinaries(t *testing.T) {
	t.Helper()
	if _, _, err := FindServerBinaries(nil); err != nil {
		t.Skipf("no PostgreSQL server binaries to start a private cluster (install postgresql): %v", err)
	}
}

// skipWithoutLocal skips unless a server answers on 127.0.0.1:5432.
func skipWithoutLocal(t *testing.T) {
	t.Helper()
	if err := ping(context.Background(), dsn(DefaultLocalUser, DefaultLocalAddr, "postgres"), 2*time.Second); err != nil {
		t.Skipf("no PostgreSQL answering on %s as %s: %v", DefaultLocalAddr, DefaultLocalUser, err)
	}
	pgtest.Reserve(t, 8) // the connections these tests open on the test server
}

// queryDB connects to dsn and returns current_database().
func queryDB(t *testing.T, dsn string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var one int
	require.NoError(t, conn.QueryRow(ctx, "SELECT 1").Scan(&one))
	require.Equal(t, 1, one)
	var name string
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_database()").Scan(&name))
	return name
}

func TestOpenPrivateCluster(t *testing.T) {
	t.Parallel()
	skipWithoutServerBinaries(t)

	start := time.Now()
	db, err := Open(t.Context(), Options{LocalAddr: deadAddr(t), Logger: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	t.Logf("Open took %v", time.Since(start))

	require.Equal(t, SourcePrivate, db.Source)
	require.Regexp(t, `^postgres://postgres@127\.0\.0\.1:\d+/agentreach\?sslmode=disable$`, db.DSN)
	require.Equal(t, "agentreach", queryDB(t, db.DSN))

	dir, pid := db.priv.dataDir, db.priv.pid
	require.DirExists(t, dir)
	require.NotZero(t, pid)
	require.True(t, processAlive(pid))

	start = time.Now()
	require.NoError(t, db.Close())
	t.Logf("Close took %v", time.Since(start))
	require.NoDirExists(t, dir)
	require.False(t, processAlive(pid), "postmaster pid %d still running", pid)

	require.NoError(t, db.Close(), "second Close is a no-op")
}

func TestOpenPrivateClusterKeepsGivenDataDir(t *testing.T) {
	t.Parallel()
	skipWithoutServerBinaries(t)

	// When root, the server runs as user postgres, which must be able to
	// reach the folder: t.TempDir's top folder is 0700.
	parent := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(parent), 0o755))
	require.NoError(t, os.Chmod(parent, 0o755))
	dir := filepath.Join(parent, "pgdata")

	opts := Options{LocalAddr: deadAddr(t), DataDir: dir, Database: "kept", Logger: testLogger(t)}
	db, err := Open(t.Context(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	require.Equal(t, SourcePrivate, db.Source)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, db.DSN)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE TABLE marker (id int)")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	pid := db.priv.pid
	require.NoError(t, db.Close())
	require.False(t, processAlive(pid))
	require.FileExists(t, filepath.Join(dir, "PG_VERSION"), "a given DataDir is kept")

	// Reopen: same cluster (no initdb), data still there.
	db2, err := Open(t.Context(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db2.Close() })
	conn, err = pgx.Connect(ctx, db2.DSN)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM marker").Scan(&n))
	require.NoError(t, db2.Close())
	require.DirExists(t, dir)
}

func TestOpenLocal(t *testing.T) {
	t.Parallel()
	skipWithoutLocal(t)

	name := randomName("devdb_test_")
	t.Cleanup(func() { dropDatabase(t, name) })

	db, err := Open(t.Context(), Options{Database: name, Logger: testLogger(t)})
	require.NoError(t, err)
	require.Equal(t, SourceLocal, db.Source)
	require.Equal(t, "postgres://postgres@127.0.0.1:5432/"+name+"?sslmode=disable", db.DSN)
	require.Equal(t, name, queryDB(t, db.DSN))
	require.NoError(t, db.Close())
	require.NoError(t, db.Close())

	// Existing database: reused.
	db, err = Open(t.Context(), Options{Database: name})
	require.NoError(t, err)
	require.Equal(t, SourceLocal, db.Source)
	require.NoError(t, db.Close())
}

func TestOpenLocalConcurrentCreate(t *testing.T) {
	t.Parallel()
	skipWithoutLocal(t)

	name := randomName("devdb_test_")
	t.Cleanup(func() { dropDatabase(t, name) })

	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			db, err := Open(t.Context(), Options{Database: name})
			if err == nil && db.Source != SourceLocal {
				err = errors.New("source " + db.Source)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, name, queryDB(t, dsn(DefaultLocalUser, DefaultLocalAddr, name)))
}

func dropDatabase(t *testing.T, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn(DefaultLocalUser, DefaultLocalAddr, "postgres"))
	if err != nil {
		t.Errorf("drop database %s: %v", name, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, fmt.Sprintf(queries.Must("DropDatabaseForce"), pgx.Identifier{name}.Sanitize())); err != nil {
		t.Errorf("drop database %s: %v", name, err)
	}
}

func TestOpenEnv(t *testing.T) {
	t.Parallel()
	// Nothing resolves or listens there: Open must not try to connect.
	const url = "postgres://someone:secret@db.invalid:1/whatever?sslmode=require"
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	db, err := Open(ctx, Options{DatabaseURL: url, LocalAddr: deadAddr(t), NoDefaultBinSearch: true})
	require.NoError(t, err)
	require.Equal(t, url, db.DSN)
	require.Equal(t, SourceEnv, db.Source)
	require.Nil(t, db.priv)
	require.NoError(t, db.Close())
	require.NoError(t, db.Close())
}

func TestNoDatabase(t *testing.T) {
	t.Parallel()
	db, err := Open(t.Context(), Options{
		LocalAddr:          deadAddr(t),
		BinDirs:            []string{t.TempDir()},
		NoDefaultBinSearch: true,
	})
	require.Nil(t, db)
	require.ErrorIs(t, err, ErrNoDatabase)
	t.Log(err)
	require.ErrorContains(t, err, "DATABASE_URL")
	require.ErrorContains(t, err, "127.0.0.1:5432")
	require.ErrorContains(t, err, "initdb")
	require.ErrorContains(t, err, "apt-get install postgresql")
}

func TestFindServerBinariesOnlyExtra(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, _, err := findServerBinaries([]string{dir}, false)
	require.Error(t, err)

	for _, name := range []string{"initdb", "pg_ctl"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755))
	}
	initdb, pgctl, err := findServerBinaries([]string{dir}, false)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "initdb"), initdb)
	require.Equal(t, filepath.Join(dir, "pg_ctl"), pgctl)
}

func TestGlobByVersion(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, v := range []string{"9.6", "15", "10", "16"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, v, "bin"), 0o755))
	}
	got := globByVersion(filepath.Join(root, "*", "bin"))
	var versions []string
	for _, g := range got {
		versions = append(versions, filepath.Base(filepath.Dir(g)))
	}
	require.Equal(t, []string{"16", "15", "10", "9.6"}, versions)
}

func TestOpenPrivateStartFailureCleansUp(t *testing.T) {
	t.Parallel()
	initdb, pgctl, err := FindServerBinaries(nil)
	if err != nil {
		t.Skipf("no PostgreSQL server binaries (install postgresql): %v", err)
	}
	// A pg_ctl that starts the server with an invalid setting, so the
	// postmaster exits at once. When root, user postgres runs it: make the
	// folder reachable.
	bin := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(bin), 0o755))
	require.NoError(t, os.Chmod(bin, 0o755))
	require.NoError(t, os.Symlink(initdb, filepath.Join(bin, "initdb")))
	script := "#!/bin/sh\nexec " + shellQuote(pgctl) + " -o '-c no_such_setting=1' \"$@\"\n"
	require.NoError(t, os.WriteFile(filepath.Join(bin, "pg_ctl"), []byte(script), 0o755))

	db, err := Open(t.Context(), Options{
		LocalAddr:          deadAddr(t),
		BinDirs:            []string{bin},
		NoDefaultBinSearch: true,
		Logger:             testLogger(t),
	})
	require.Nil(t, db)
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrNoDatabase)
	t.Log(err)
	require.ErrorContains(t, err, "pg_ctl start")
	require.ErrorContains(t, err, "no_such_setting", "error shows the server log")
	// Other tests create data folders in parallel: check this one.
	m := regexp.MustCompile(`server log (\S+)/postmaster\.log`).FindStringSubmatch(err.Error())
	require.Len(t, m, 2, "the error names the data folder")
	require.NoDirExists(t, m[1], "temporary data folder removed")
}

// TestOpenRefusesALocalServerItCannotUse: a server that listens on the
// local address and refuses the connection (a role it does not have, here;
// too many clients or a password likewise), or something that is not
// PostgreSQL, stops Open with the error: dev starts a private cluster only
// when nothing listens, never in place of a server it could not use.
func TestOpenRefusesALocalServerItCannotUse(t *testing.T) {
	t.Parallel()
	skipWithoutLocal(t)
	_, err := Open(t.Context(), Options{LocalUser: "no_such_role_" + randomName(""), Logger: testLogger(t)})
	require.ErrorIs(t, err, ErrLocalUnusable)
	require.ErrorContains(t, err, "127.0.0.1:5432 answered but could not be used")
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr, "the server's own error is kept")
	require.True(t, strings.HasPrefix(pgErr.Code, "28"), "an authorization refusal (class 28): %s", pgErr.Code)

	// Something listens that is not PostgreSQL: it hangs up at once.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	_, err = Open(t.Context(), Options{LocalAddr: l.Addr().String(), Logger: testLogger(t)})
	require.ErrorIs(t, err, ErrLocalUnusable)
	require.NotErrorIs(t, err, ErrNoDatabase)
}
