package chaos

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/internal/cli"
	"github.com/agentreach/agentreach/internal/devdb"
)

// TestChaosShort is the short chaos run of make test: one service process
// SIGKILLed and restarted and PostgreSQL restarted while jobs flow through
// well- and ill-behaved push and pull agents; then every invariant is
// verified. Pull agents took part, and the one that died held claimed work
// when it did, which timed out and was retried elsewhere.
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
	t.Logf("%s", rep.Fleet)
	require.True(t, rep.OK(), cli.FormatVerify(rep.VerifyReport))
	require.Equal(t, 150, rep.Jobs)
	require.Equal(t, 150, rep.Terminal)
	require.Positive(t, rep.Fleet.Successes[modePull], "jobs ended SUCCESS by pull agents")
	require.Positive(t, rep.Fleet.Successes[modePush], "jobs ended SUCCESS by push agents")
	require.Equal(t, rep.Statuses[domain.StatusSuccess], rep.Fleet.Successes[modePull]+rep.Fleet.Successes[modePush],
		"every success is a fleet agent's")
	require.Len(t, rep.Fleet.Deaths, 1, "the dying pull agent died holding claimed work")
	d := rep.Fleet.Deaths[0]
	require.Equal(t, "chaos-11-pull-dies", d.AgentID)
	require.Positive(t, d.Held)
	require.Equal(t, d.Held, d.TimedOut, "every attempt it held timed out at its deadline")
	require.Positive(t, d.RetriedElsewhere, "and its job went to another agent")
	require.LessOrEqual(t, d.NotClaimed, rep.Fleet.NotClaimed)
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
