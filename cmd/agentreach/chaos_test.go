package main

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/internal/devdb"
)

// TestChaosShort is the short chaos run of make test: one service process
// SIGKILLed and restarted and PostgreSQL restarted while jobs flow through
// well- and ill-behaved agents; then every invariant is verified.
func TestChaosShort(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("chaos run skipped in -short mode")
	}
	if _, _, err := devdb.FindServerBinaries(nil); err != nil {
		t.Skipf("no PostgreSQL server binaries for the private cluster: %v", err)
	}
	rep, err := runChaos(context.Background(), chaosOptions{
		Processes: 1, Jobs: 150, Exe: os.Args[0], Env: []string{"AGENTREACH_TEST_MAIN=1"},
		Log: func(format string, args ...any) { t.Logf(format, args...) },
	})
	require.NoError(t, err)
	require.True(t, rep.OK(), formatVerify(rep))
	require.Equal(t, 150, rep.Jobs)
	require.Equal(t, 150, rep.Terminal)
}
