package bench

import (
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/internal/cli"
	"github.com/agentreach/agentreach/internal/pgtest"
)

func TestGrowSteps(t *testing.T) {
	t.Parallel()
	require.Equal(t, []int{10_000, 100_000, 1_000_000}, growSteps(1_000_000))
	require.Equal(t, []int{3, 30, 300}, growSteps(300))
	require.Equal(t, []int{5}, growSteps(5))
}

// TestGrow: a small growth against a real service, step by step: every
// job written through the normal path and counted, its bytes by table,
// and each read timed at each step (what a run to 1M jobs prints, at the
// scale of a test).
func TestGrow(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a service and 300 jobs")
	}
	exe := buildAgentreach(t)
	dsn := pgtest.NewDatabase(t)
	r := &run{env: cli.Env{Stdout: io.Discard, Stderr: t.Output()}, o: options{grow: 300}}
	t.Cleanup(r.close)
	require.NoError(t, r.start(t.Context(), serveChild(t, exe), dsn))
	require.NoError(t, r.grow(t.Context()))

	require.Len(t, r.growth, 3)
	var jobs int
	require.NoError(t, r.pool.QueryRow(t.Context(), `SELECT count(*) FROM jobs WHERE status = 'SUCCESS'`).Scan(&jobs))
	require.Equal(t, 300, jobs, "every job through the normal path, SUCCESS")
	for i, s := range r.growth {
		require.Equal(t, []int{3, 30, 300}[i], s.jobs)
		require.Positive(t, s.rate)
		require.Positive(t, s.bytes["events (the log)"])
		require.Positive(t, s.bytes["jobs (read model)"])
		for _, rd := range growReads("", "") {
			require.Positive(t, s.latency[rd.name], rd.name)
		}
		require.Positive(t, s.latency["SELECT * FROM reach_health"])
	}
	require.Len(t, r.afterGrowth, 6)
	for _, f := range r.afterGrowth {
		require.NotEmpty(t, f.value, f.name)
	}
	require.Contains(t, r.afterGrowth[1].value, "events folded")
	require.Contains(t, figuresTable(r.afterGrowth), "| rebuild of every read model from position 0 |")
	table := growthTable(r.growth)
	require.Contains(t, table, "| measure | 3 jobs | 30 jobs | 300 jobs |")
	require.Contains(t, table, "| GET /v1/jobs?limit=50, median ms |")
}
