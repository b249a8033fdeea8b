package sdk

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Without Config.ServerURL and AGENTREACH_URL the agent looks for a
// `make run` on this machine; a URL it cannot use ends Run at once with
// the reason, rather than retrying registration in silence.
func TestServerURLDefaultsAndIsChecked(t *testing.T) {
	t.Setenv("AGENTREACH_URL", "")
	h := func(context.Context, Delivery) (Result, error) { return Success("ok"), nil }
	a := New(Config{Logger: slog.New(slog.DiscardHandler)}, Registration{AgentID: "x", Capabilities: []string{"c"}}, h)
	require.Equal(t, DefaultServerURL, a.cfg.ServerURL)

	for _, bad := range []string{"127.0.0.1:8080", "ftp://127.0.0.1", "http://"} {
		a := New(Config{ServerURL: bad, StartJitter: -1, Logger: slog.New(slog.DiscardHandler)}, Registration{AgentID: "x", Capabilities: []string{"c"}}, h)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		err := a.Run(ctx)
		ended := ctx.Err()
		cancel()
		require.ErrorContains(t, err, "not an absolute http(s) URL", bad)
		require.NoError(t, ended, "ended by the check, not the context (%s)", bad)
	}
}
