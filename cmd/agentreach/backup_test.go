package main

import (
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/internal/devdb"
	"github.com/agentreach/agentreach/webhook"
)

// A physical backup of a live database (pg_basebackup, while jobs are
// under way), restored as a cluster of its own: serve starts on it, the
// jobs that were in flight at the backup finish (their lost attempts
// routed again), and agentreach verify finds every job's state the fold of
// its events and the read models equal to their rebuilds.
func TestBackupAndRestore(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("two private PostgreSQL clusters")
	}
	ctx := t.Context()
	live, err := devdb.Open(ctx, devdb.Options{LocalAddr: "127.0.0.1:1"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = live.Close() })
	// The attempts in flight at the backup time out in the restored
	// service (their answers went to the first one): that is the test, and
	// the breaker must not take it for a failing agent (under load, ten
	// such timeouts opened it, and the jobs spent their attempts waiting).
	tune := func(c *Config) {
		fastSweeps(c)
		c.Registry.Breaker = domain.DefaultBreakerConfig()
		c.Registry.Breaker.MinAttempts = 1000
	}
	svc := startTuned(t, map[string]string{"DATABASE_URL": live.DSN}, tune,
		"serve", "--insecure", "--addr", "127.0.0.1:0", "--log-level", "warn")
	base := svc.m.URL()
	waitReady(t, base)
	release := make(chan struct{})
	agent := newTestAgent(t, base, "backup-agent", "t.backup", 50, func(w http.ResponseWriter, env webhook.Envelope) {
		select { // the first jobs wait until the backup is taken
		case <-release:
		case <-time.After(3 * time.Second):
		}
		answer("SUCCESS", "")(w, env)
	})
	var ids []string
	for range 20 {
		ids = append(ids, submitOK(t, base, `{"capability":"t.backup","payload":{},"timeout_ms":2000,"max_attempts":5}`))
	}
	deadline := time.Now().Add(20 * time.Second)
	for agent.hits.Load() == 0 {
		require.True(t, time.Now().Before(deadline), "no delivery within 20 s")
		time.Sleep(20 * time.Millisecond) // poll interval while waiting on the condition
	}

	// Under the system's temporary folder, which the server's account can
	// reach (a test's own folder is closed to it).
	dir, err := os.MkdirTemp("", "agentreach-restored-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, live.BaseBackup(ctx, dir))
	close(release)
	svc.stop(t)
	require.NoError(t, live.Close())

	restored, err := devdb.Open(ctx, devdb.Options{LocalAddr: "127.0.0.1:1", DataDir: dir})
	require.NoError(t, err)
	t.Cleanup(func() { _ = restored.Close() })
	again := startTuned(t, map[string]string{"DATABASE_URL": restored.DSN}, tune,
		"serve", "--insecure", "--addr", "127.0.0.1:0", "--log-level", "warn")
	base = again.m.URL()
	waitReady(t, base)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, base+"/v1/agents/backup-agent/heartbeat", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+agent.token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the agent's registration came back with the backup")
	for _, id := range ids {
		require.Equal(t, "SUCCESS", waitTerminal(t, base, id, 60*time.Second).Status, "job %s", id)
	}
	again.stop(t)

	out := &syncBuffer{}
	m := NewMain()
	m.Stdout, m.Stderr = out, out
	m.Getenv = func(string) string { return "" }
	require.NoError(t, m.Run(ctx, []string{"verify", "--database-url", restored.DSN}), out.String())
	require.Contains(t, out.String(), "all invariants hold")
	require.Contains(t, out.String(), "jobs: 20, terminal: 20")
}
