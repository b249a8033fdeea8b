package sql_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/internal/pgtest"
	arsql "github.com/agentreach/agentreach/sql"
)

// TestViewsReapplied: the views and functions of sql/views are applied
// after the migrations and recorded; views that differ from the files are
// applied again (a view a migration dropped comes back); a binary older
// than the one that applied them leaves them alone.
func TestViewsReapplied(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	applied := func() (hash string, by int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT hash, migration FROM agentreach_views`).Scan(&hash, &by))
		return hash, by
	}
	hash, by := applied()
	require.Equal(t, arsql.ViewsHash(), hash)
	require.Equal(t, arsql.LatestVersion(), by)
	for _, v := range arsql.Views() {
		require.Contains(t, v.SQL, "CREATE OR REPLACE", "%s: the files are re-applied", v.Name)
	}

	// Views that differ from the files (here: one missing) are applied again.
	_, err = pool.Exec(ctx, `DROP VIEW reach_recovery; UPDATE agentreach_views SET hash = 'older'`)
	require.NoError(t, err)
	require.NoError(t, arsql.Migrate(ctx, pool, logger))
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM reach_recovery`).Scan(&n))
	hash, _ = applied()
	require.Equal(t, arsql.ViewsHash(), hash)

	// Views a newer binary applied stay as they are.
	_, err = pool.Exec(ctx, `UPDATE agentreach_views SET hash = 'newer', migration = migration + 1`)
	require.NoError(t, err)
	require.NoError(t, arsql.Migrate(ctx, pool, logger))
	hash, _ = applied()
	require.Equal(t, "newer", hash)
}
