package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/devdb"
	"github.com/agentreach/agentreach/internal/pgtest"
	arsql "github.com/agentreach/agentreach/sql"
)

// syncBuffer is a bytes.Buffer safe for the program's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// Reset empties the buffer.
func (s *syncBuffer) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Reset()
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type running struct {
	m      *Main
	out    *syncBuffer
	cancel context.CancelFunc
	done   chan error
}

// start runs the program in process with env as its whole environment.
func start(t *testing.T, env map[string]string, args ...string) *running {
	t.Helper()
	return startTuned(t, env, nil, args...)
}

// startTuned is start with a configuration hook.
func startTuned(t *testing.T, env map[string]string, tune func(*Config), args ...string) *running {
	t.Helper()
	out := &syncBuffer{}
	m := NewMain()
	m.Tune = func(c *Config) {
		// Most tests leave a job unroutable on purpose and expect its
		// attempt spent at once; the tests of route_wait set their own.
		if c.Jobs.RouteWait == 0 {
			c.Jobs.RouteWait = -1
		}
		if tune != nil {
			tune(c)
		}
	}
	m.Stdout, m.Stderr = out, out
	m.Getenv = func(k string) string { return env[k] }
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{m: m, out: out, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- m.Run(ctx, args) }()
	select {
	case <-m.Started():
	case err := <-r.done:
		cancel()
		t.Fatalf("agentreach %v exited before serving: %v\n%s", args, err, out.String())
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatalf("agentreach %v did not start\n%s", args, out.String())
	}
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	if t.Failed() {
		// What the service logged (warnings and errors) says why, often.
		log := r.out.String()
		t.Logf("the service's log, last 16 KiB:\n%s", log[max(0, len(log)-16<<10):])
	}
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil && !errors.Is(err, context.Canceled) {
			require.NoError(t, err)
		}
		r.done <- nil // later stops return at once
	case <-time.After(30 * time.Second):
		t.Fatalf("agentreach did not stop\n%s", r.out.String())
	}
}

func waitReady(t *testing.T, baseURL string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(baseURL + "/readyz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, string(body))
		}
		require.True(t, time.Now().Before(deadline), "/readyz not 200 within 30 s: %v", err)
		time.Sleep(50 * time.Millisecond) // poll interval while waiting on the condition
	}
}

// deadAddr returns a 127.0.0.1 address where nothing listens (yet): a
// place to start a server, or one to fail to reach.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// TestDevPrivateCluster: with nothing listening where dev looks for a local
// server, dev starts its own cluster, migrates, prints its banner once
// /readyz answers 200, and on
// stop leaves neither a process nor a data folder behind.
func TestDevPrivateCluster(t *testing.T) {
	t.Parallel()
	if _, _, err := devdb.FindServerBinaries(nil); err != nil {
		t.Skipf("no PostgreSQL server binaries (initdb, pg_ctl) on this machine: %v", err)
	}
	keyFile := filepath.Join(t.TempDir(), "dev-admin-key")
	r := start(t, map[string]string{"AGENTREACH_DEV_LOCAL_ADDR": deadAddr(t), "AGENTREACH_DEV_KEY_FILE": keyFile}, "dev", "--addr", "127.0.0.1:0")
	require.Equal(t, devdb.SourcePrivate, r.m.db.Source)
	kept, err := os.ReadFile(keyFile)
	require.NoError(t, err, "dev keeps the key it generated")
	require.Contains(t, r.out.String(), "Admin key: "+strings.TrimSpace(string(kept)), "and prints that one")
	dataDir, pid := r.m.db.DataDir(), r.m.db.PID()
	require.DirExists(t, dataDir)
	require.NotZero(t, pid)
	require.Contains(t, r.out.String(), r.m.URL()+"/v1")
	require.Contains(t, r.out.String(), "Admin key: ark_dev_", "dev prints the admin key it generated")
	require.Contains(t, r.out.String(), "Dashboard: "+r.m.URL()+"/dashboard/")
	require.Contains(t, r.out.String(), "River UI:  "+r.m.URL()+"/riverui/")
	require.Contains(t, r.out.String(), "ITS DATA IS TEMPORARY: it is deleted when dev stops", "a private cluster's data does not outlive the run")
	require.Contains(t, r.out.String(), "agentreach dev --data-dir DIR", "and how to keep it")
	// The banner comes once the schema is current: ready at once, so the
	// commands it points to (projections rebuild, the CLI) answer.
	resp, err := http.Get(r.m.URL() + "/readyz")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "ready when the banner says dev is running: %s", body)

	r.stop(t)
	require.NoDirExists(t, dataDir)
	err = syscall.Kill(pid, 0)
	require.True(t, errors.Is(err, syscall.ESRCH) || processIsZombie(pid), "postmaster %d still running", pid)
}

func processIsZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	return bytes.Contains(b, []byte(") Z "))
}

// TestServeReadyAndEvents: serve on a fresh database migrates on start,
// becomes ready, and serves the global log.
func TestServeReadyAndEvents(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewEmptyDatabase(t)
	r := start(t, map[string]string{"DATABASE_URL": dsn}, "serve", "--insecure", "--addr", "127.0.0.1:0")
	waitReady(t, r.m.URL())

	resp, err := http.Get(r.m.URL() + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	pool, err := pgxpool.New(context.Background(), dsn)
	require.NoError(t, err)
	defer pool.Close()
	_, err = eventstore.New(pool).Append(context.Background(), "job:x", eventstore.NoStream,
		domain.NewEvent("SUBMITTED", map[string]string{"a": "b"}, domain.Metadata{TraceID: "t-1"}))
	require.NoError(t, err)

	var body struct {
		Events []struct {
			Position int64           `json:"position"`
			Type     string          `json:"type"`
			StreamID string          `json:"stream_id"`
			Data     json.RawMessage `json:"data"`
			Metadata map[string]any  `json:"metadata"`
		} `json:"events"`
		NextAfter int64 `json:"next_after"`
	}
	// Another test's open transaction anywhere in the cluster can hold the
	// log's visibility horizon back for a moment: wait for the event.
	deadline := time.Now().Add(15 * time.Second)
	for getJSON(t, r.m.URL()+"/v1/events?after=0&limit=10", http.StatusOK, &body); len(body.Events) == 0; getJSON(t, r.m.URL()+"/v1/events?after=0&limit=10", http.StatusOK, &body) {
		require.True(t, time.Now().Before(deadline), "event not in /v1/events")
		time.Sleep(10 * time.Millisecond) // poll interval while waiting on the condition
	}
	require.Len(t, body.Events, 1)
	require.Equal(t, "SUBMITTED", body.Events[0].Type)
	require.Equal(t, "t-1", body.Events[0].Metadata["trace_id"])
	require.JSONEq(t, `{"a":"b"}`, string(body.Events[0].Data))
	require.Equal(t, body.Events[0].Position, body.NextAfter)

	var errBody struct {
		Error struct{ Code, Field string } `json:"error"`
	}
	getJSON(t, r.m.URL()+"/v1/events?limit=5000", http.StatusBadRequest, &errBody)
	require.Equal(t, "invalid_argument", errBody.Error.Code)
	require.Equal(t, "limit", errBody.Error.Field)
	getJSON(t, r.m.URL()+"/v1/events?after=424242", http.StatusBadRequest, &errBody)
	require.Equal(t, "after", errBody.Error.Field)
	getJSON(t, r.m.URL()+"/v1/nope", http.StatusNotFound, &errBody)
	require.Equal(t, "not_found", errBody.Error.Code)
}

// TestReadyzWithoutDatabase: the process is live but not ready while its
// database does not answer.
func TestReadyzWithoutDatabase(t *testing.T) {
	t.Parallel()
	r := start(t, map[string]string{"DATABASE_URL": "postgres://postgres@" + deadAddr(t) + "/x?sslmode=disable&connect_timeout=1"}, "serve", "--insecure", "--addr", "127.0.0.1:0")
	resp, err := http.Get(r.m.URL() + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, err = http.Get(r.m.URL() + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
}

func getJSON(t *testing.T, url string, wantStatus int, into any) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, wantStatus, resp.StatusCode, string(b))
	require.NoError(t, json.Unmarshal(b, into), string(b))
}

// TestConcurrentMigrate: processes that start together take turns on the
// advisory lock; every one succeeds and the schema is applied once.
func TestConcurrentMigrate(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewEmptyDatabase(t)
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pool, err := pgxpool.New(ctx, dsn)
			if err != nil {
				errs <- err
				return
			}
			defer pool.Close()
			errs <- arsql.Migrate(ctx, pool, logger)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	defer pool.Close()
	require.NoError(t, arsql.Check(ctx, pool))
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM agentreach_migrations`).Scan(&n))
	require.Equal(t, len(arsql.Migrations()), n)
}

func TestVersionAndUsage(t *testing.T) {
	t.Parallel()
	out := &syncBuffer{}
	m := NewMain()
	m.Stdout, m.Stderr = out, out
	require.NoError(t, m.Run(context.Background(), []string{"version"}))
	require.Contains(t, out.String(), "agentreach "+version)
	err := m.Run(context.Background(), []string{"frobnicate"})
	require.ErrorIs(t, err, errUsage)
	require.Contains(t, err.Error(), `unknown command "frobnicate"`) // main prints it after the usage
	require.Contains(t, out.String(), "Usage:")
}

// TestPoolSessionsRunWithoutJIT: the service's sessions run with jit off
// (its short statements would pay hundreds of milliseconds of JIT
// compilation once a table is large), and a URL that sets jit keeps its
// own; the pool's size follows the flag.
func TestPoolSessionsRunWithoutJIT(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	for url, want := range map[string]string{
		dsn:             "off",
		dsn + "&jit=on": "on",
	} {
		a := &App{cfg: Config{DatabaseURL: url, MaxConns: 3}}
		pcfg, err := a.poolConfig()
		require.NoError(t, err)
		require.EqualValues(t, 3, pcfg.MaxConns)
		pool, err := pgxpool.NewWithConfig(t.Context(), pcfg)
		require.NoError(t, err)
		var jit string
		require.NoError(t, pool.QueryRow(t.Context(), "SHOW jit").Scan(&jit))
		pool.Close()
		require.Equal(t, want, jit, url)
	}
}

// dev's admin key outlives the run: the first run writes it (0600), the
// next ones read the same key back; junk in the file is replaced.
func TestDevAdminKeyIsKept(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "agentreach", "dev-admin-key")
	first, kept, err := devAdminKey(path)
	require.NoError(t, err)
	require.False(t, kept)
	require.True(t, strings.HasPrefix(first, "ark_dev_"))
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "only its owner reads it")
	again, kept, err := devAdminKey(path)
	require.NoError(t, err)
	require.True(t, kept)
	require.Equal(t, first, again, "a restart signs in with the same key")

	require.NoError(t, os.WriteFile(path, []byte("not a key"), 0o600))
	fresh, kept, err := devAdminKey(path)
	require.NoError(t, err)
	require.False(t, kept)
	require.NotEqual(t, first, fresh)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, fresh+"\n", string(b))
}

// dev's default archive is a folder per database: a demo's scratch
// database never shares one with dev's own.
func TestDevArchiveFolderPerDatabase(t *testing.T) {
	t.Parallel()
	dev := archiveFolder("postgres://u:secret@127.0.0.1:5432/agentreach")
	again := archiveFolder("postgres://other:pw@127.0.0.1:5432/agentreach?sslmode=disable")
	demo := archiveFolder("postgres://u:secret@127.0.0.1:5432/agentreach_demo_x1")
	elsewhere := archiveFolder("postgres://u:secret@127.0.0.1:5433/agentreach")
	require.Equal(t, dev, again, "the same database: the same folder")
	require.True(t, strings.HasPrefix(dev, "agentreach-"), dev)
	require.NotEqual(t, dev, demo)
	require.NotEqual(t, dev, elsewhere)
	require.NotContains(t, dev, "secret")
}

// userDir finds the user's folders in the environment dev is given, not
// the process's: a test's environment without HOME has none, so dev keeps
// no key and archives nothing in the real user's folders.
func TestUserDirFromTheGivenEnvironment(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("the XDG folders are Linux's")
	}
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	for _, c := range []struct {
		env        map[string]string
		kind, want string
	}{
		{map[string]string{}, "cache", ""},
		{map[string]string{}, "config", ""},
		{map[string]string{"HOME": "/home/u"}, "cache", "/home/u/.cache"},
		{map[string]string{"HOME": "/home/u"}, "config", "/home/u/.config"},
		{map[string]string{"HOME": "/home/u", "XDG_CACHE_HOME": "/x/cache"}, "cache", "/x/cache"},
		{map[string]string{"HOME": "/home/u", "XDG_CACHE_HOME": "relative"}, "cache", "/home/u/.cache"},
		{map[string]string{"XDG_CONFIG_HOME": "/x/config"}, "config", "/x/config"},
	} {
		require.Equal(t, c.want, userDir(env(c.env), c.kind), "%v %s", c.env, c.kind)
	}
}
