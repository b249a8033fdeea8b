package telemetry_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/internal/telemetry"
)

// TestFloorDropsRoutine: River's logger, floored at warn, drops its info
// chatter and keeps its warnings, with their attributes and groups.
func TestFloorDropsRoutine(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	base := slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug})
	river := slog.New(telemetry.Floor{Handler: base, Min: slog.LevelWarn}).With("component", "river").WithGroup("g")
	river.Info("producer job counts", "queue", "dispatch_normal")
	river.Debug("fetch")
	require.Empty(t, b.String())
	require.False(t, river.Enabled(context.Background(), slog.LevelInfo))
	river.Warn("job rescued", "id", 7)
	require.Contains(t, b.String(), `msg="job rescued" component=river g.id=7`)
}
