package chaos

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/internal/cli"
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
	rep, err := Run(t.Context(), Options{
		Processes: 1, Jobs: 150, Exe: buildAgentreach(t),
		Log: func(format string, args ...any) { t.Logf(format, args...) },
	})
	require.NoError(t, err)
	require.True(t, rep.OK(), cli.FormatVerify(rep))
	require.Equal(t, 150, rep.Jobs)
	require.Equal(t, 150, rep.Terminal)
}

// buildAgentreach builds the binary whose `serve` the run starts and kills.
func buildAgentreach(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build agentreach: %v", err)
	}
	exe := filepath.Join(t.TempDir(), "agentreach")
	out, err := exec.CommandContext(t.Context(), gobin, "build", "-o", exe, "github.com/agentreach/agentreach/cmd/agentreach").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return exe
}
