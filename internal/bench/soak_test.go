package bench

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/internal/cli"
	"github.com/agentreach/agentreach/internal/pgtest"
)

// TestSoak: a short soak against a real service with retention on: the
// load runs at its rate, the database is sampled as it goes, the last
// sample counts every job, and the archive check reads the folder (a run
// this short drops nothing: its first partition is still open).
func TestSoak(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a service and a few seconds of load")
	}
	exe := buildAgentreach(t)
	dsn := pgtest.NewDatabase(t)
	dir := t.TempDir()
	r := &run{env: cli.Env{Stdout: io.Discard, Stderr: t.Output()},
		o: options{soak: 3 * time.Second, soakRate: 20, soakKeep: time.Minute, soakEvery: time.Second}}
	t.Cleanup(r.close)
	require.NoError(t, r.start(t.Context(), serveChild(t, exe), dsn, soakArgs(dir)...))
	samples, err := r.soak(t.Context())
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(samples), 2, "sampled as it ran, and at the end")
	last := samples[len(samples)-1]
	require.Equal(t, int64(60), last.submitted)
	require.Equal(t, int64(60), last.jobs, "nothing dropped yet")
	require.Positive(t, last.attached)
	require.Positive(t, last.eventsBytes)
	check, err := r.soakArchive(t.Context(), dir, last.submitted)
	require.NoError(t, err)
	require.Contains(t, check, "0 jobs dropped from the log: every dropped job archived exactly once")
	require.Contains(t, soakTable(samples), "| 60 | 60 |")
	imported, err := r.soakImport(t.Context(), pgtest.AdminURL(), dir)
	require.NoError(t, err)
	require.Regexp(t, `^(Nothing was archived: nothing to import\.|Imported into a fresh database .*: the same jobs and events\.)$`, imported)
}
