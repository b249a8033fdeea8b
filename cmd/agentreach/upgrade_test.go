package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/internal/harness"
	"github.com/agentreach/agentreach/internal/pgtest"
	"github.com/agentreach/agentreach/webhook"
)

// upgradeBaseline is the release the rolling upgrade starts from: the
// last release commit of main (the start of this round, until a release is
// tagged). Every migration since is expand-then-contract, so that its
// binary keeps working against the new schema while both run.
const upgradeBaseline = "cb9cd44"

// A rolling upgrade: the baseline's serve runs on its schema under load;
// this version migrates the schema under it and serves beside it, both
// taking submits; then the old one stops. Every job accepted by either is
// SUCCESS, delivered once and called back once: nothing lost or doubled.
func TestRollingUpgradeFromTheBaseline(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the baseline release")
	}
	old := buildBaseline(t)
	pgtest.Reserve(t, 12)
	dsn := pgtest.NewEmptyDatabase(t)

	out, err := exec.CommandContext(t.Context(), old, "migrate", "--database-url", dsn).CombinedOutput()
	require.NoError(t, err, "%s", out)
	oldAddr := deadAddr(t)
	oldSvc := exec.Command(old, "serve", "--insecure", "--addr", oldAddr, "--database-url", dsn, "--max-conns", "6", "--log-level", "warn")
	oldLog := &syncBuffer{}
	oldSvc.Stdout, oldSvc.Stderr = oldLog, oldLog
	require.NoError(t, oldSvc.Start())
	t.Cleanup(func() { _ = oldSvc.Process.Kill(); _, _ = oldSvc.Process.Wait() })
	oldBase := "http://" + oldAddr
	waitReady(t, oldBase)

	agent := newCountingAgent(t)
	postJSON(t, oldBase+"/v1/agents", fmt.Sprintf(`{"agent_id":"up","capabilities":["t.up"],"endpoint":%q,"ttl_seconds":120}`, agent.srv.URL),
		http.StatusCreated, &agentJSON{})
	waitState(t, oldBase, "up", "HEALTHY", 20*time.Second)
	callbacks := newCallbackCounter(t)
	body := fmt.Sprintf(`{"capability":"t.up","payload":{},"callback_url":%q}`, callbacks.srv.URL)

	var mu sync.Mutex
	var accepted []string
	submit := func(base string, n int) {
		for range n {
			id, err := harness.Submit(t.Context(), base+"/v1/jobs", body)
			require.NoError(t, err)
			mu.Lock()
			accepted = append(accepted, id)
			mu.Unlock()
		}
	}
	submit(oldBase, 20)

	// This version migrates the schema under the running baseline and
	// serves beside it, while the baseline keeps taking submits.
	stopLoad := make(chan struct{})
	var loadDone sync.WaitGroup
	loadDone.Go(func() {
		for {
			select {
			case <-stopLoad:
				return
			default:
				submit(oldBase, 1)
				time.Sleep(5 * time.Millisecond) // a steady trickle, not a synchronisation
			}
		}
	})
	svc := startTuned(t, map[string]string{"DATABASE_URL": dsn}, fastSweeps, "serve", "--insecure", "--addr", "127.0.0.1:0", "--log-level", "warn")
	base := svc.m.URL()
	waitReady(t, base)
	submit(base, 30)
	submit(oldBase, 10)
	close(stopLoad)
	loadDone.Wait()
	submit(base, 10)

	for _, id := range accepted {
		j := waitTerminal(t, base, id, 60*time.Second)
		require.Equal(t, "SUCCESS", j.Status, "job %s", id)
	}
	deadline := time.Now().Add(60 * time.Second)
	for callbacks.distinct() < len(accepted) {
		require.True(t, time.Now().Before(deadline), "%d of %d jobs called back within 60 s", callbacks.distinct(), len(accepted))
		time.Sleep(20 * time.Millisecond) // poll interval while waiting on the condition
	}
	require.NoError(t, oldSvc.Process.Signal(syscall.SIGTERM))
	_, _ = oldSvc.Process.Wait()

	require.Equal(t, len(accepted), agent.distinct(), "every accepted job delivered")
	require.Equal(t, int64(len(accepted)), agent.count(), "and delivered once")
	require.Equal(t, len(accepted), callbacks.distinct(), "every job called back")
	for _, line := range strings.Split(oldLog.String(), "\n") {
		require.NotContains(t, line, "level=ERROR", "the baseline beside the new schema logged an error")
	}
	pool, err := pgxpool.New(t.Context(), dsn)
	require.NoError(t, err)
	defer pool.Close()
	deadline = time.Now().Add(30 * time.Second)
	for { // the jobs read model, folded by whichever process holds the projector
		var jobs int
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM jobs WHERE status = 'SUCCESS'`).Scan(&jobs))
		require.LessOrEqual(t, jobs, len(accepted), "no job more than those accepted")
		if jobs == len(accepted) {
			break
		}
		require.True(t, time.Now().Before(deadline), "%d of %d jobs in the read model within 30 s", jobs, len(accepted))
		time.Sleep(20 * time.Millisecond) // poll interval while waiting on the condition
	}
	// Jobs submitted within the hour after the migration, by either
	// version, keep their whole stream in events_kept: none is split
	// between it and a time partition that retention would drop.
	var kept, parted int
	var cutoff time.Time
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE stream_at = '-infinity'), count(*) FILTER (WHERE stream_at > '-infinity')
		FROM events WHERE starts_with(stream_id, 'job:')`).Scan(&kept, &parted))
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT partitioned_from FROM event_log`).Scan(&cutoff))
	require.WithinDuration(t, time.Now().Add(time.Hour), cutoff, 10*time.Minute, "time partitions begin an hour after the migration")
	require.Positive(t, kept)
	require.Zero(t, parted, "no job of the upgrade's hour in a time partition")
	t.Logf("%d jobs accepted by both versions, each delivered and called back once; their %d events in events_kept", len(accepted), kept)
}

// buildBaseline builds the baseline release's binary from this
// repository's history (git archive, so the work tree is left alone), or
// skips when the history or the tools are not here.
func buildBaseline(t *testing.T) string {
	t.Helper()
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skipf("no git to read the baseline %s from: %v", upgradeBaseline, err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go to build the baseline: %v", err)
	}
	if out, err := exec.Command(gitBin, "cat-file", "-e", upgradeBaseline+"^{commit}").CombinedOutput(); err != nil {
		t.Skipf("the baseline %s is not in this clone's history (a shallow clone?): %s", upgradeBaseline, out)
	}
	root, err := exec.Command(gitBin, "rev-parse", "--show-toplevel").Output()
	require.NoError(t, err)
	src := t.TempDir()
	archive, err := exec.Command(gitBin, "-C", strings.TrimSpace(string(root)), "archive", "--format=tar", upgradeBaseline).Output()
	require.NoError(t, err)
	require.NoError(t, untar(bytes.NewReader(archive), src))
	exe := filepath.Join(t.TempDir(), "agentreach-"+upgradeBaseline)
	build := exec.CommandContext(t.Context(), goBin, "build", "-o", exe, "./cmd/agentreach")
	build.Dir = src
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build the baseline %s: %s", upgradeBaseline, out)
	return exe
}

// untar writes the tar stream r under dir.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		path := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o755|0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}

// perJob counts what came for each job.
type perJob struct {
	mu    sync.Mutex
	total int64
	jobs  map[string]int
}

func (c *perJob) add(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.jobs == nil {
		c.jobs = map[string]int{}
	}
	c.jobs[id]++
	c.total++
}

func (c *perJob) distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.jobs)
}

func (c *perJob) count() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// countingAgent answers every delivery SUCCESS and counts them by job.
type countingAgent struct {
	perJob
	srv *httptest.Server
}

func newCountingAgent(t *testing.T) *countingAgent {
	t.Helper()
	a := &countingAgent{}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			return
		}
		var env webhook.Envelope
		_ = json.NewDecoder(r.Body).Decode(&env)
		a.add(env.JobID)
		answer("SUCCESS", "")(w, env)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

// callbackCounter acknowledges callbacks and counts them by job.
type callbackCounter struct {
	perJob
	srv *httptest.Server
}

func newCallbackCounter(t *testing.T) *callbackCounter {
	t.Helper()
	c := &callbackCounter{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			JobID string `json:"job_id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		c.add(body.JobID)
	}))
	t.Cleanup(c.srv.Close)
	return c
}
