package bench

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/internal/cli"
	"github.com/agentreach/agentreach/internal/pgtest"
)

// The lookup rows, from a short run against a real service: both latency
// rows ordered (a cached lookup faster than one that asks the registry)
// and a positive report ingestion rate beside pgbench's.
func TestLookupRows(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a service and a few seconds of reports")
	}
	exe := buildAgentreach(t)
	dsn := pgtest.NewDatabase(t)
	r := &run{env: cli.Env{Stdout: io.Discard, Stderr: t.Output()}, o: options{duration: time.Second}, tps8: 1000}
	t.Cleanup(r.close)
	require.NoError(t, r.start(t.Context(), serveChild(t, exe), dsn))
	require.NoError(t, r.lookups(t.Context()))
	t.Logf("%s", r.res.markdown(""))
	require.Len(t, r.res.rows, 3)
	var u50, u99, c50, c99 float64
	_, err := fmt.Sscanf(r.res.rows[0].ours, "%f / %f", &u50, &u99)
	require.NoError(t, err, r.res.rows[0].ours)
	_, err = fmt.Sscanf(r.res.rows[1].ours, "%f / %f", &c50, &c99)
	require.NoError(t, err, r.res.rows[1].ours)
	require.Positive(t, u50)
	require.LessOrEqual(t, u50, u99)
	require.Positive(t, c50)
	require.LessOrEqual(t, c50, c99)
	require.Less(t, c50/1000, u50, "a cached lookup (µs) beats one that asks the registry (ms)")
	var rate float64
	_, err = fmt.Sscanf(r.res.rows[2].ours, "%f", &rate)
	require.NoError(t, err)
	require.Positive(t, rate)
	require.Equal(t, "pgbench -N 1000 tps", r.res.rows[2].baseline)
}
