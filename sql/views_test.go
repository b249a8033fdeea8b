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

	// A binary with newer migrations applies its views even when the files
	// are the same: one of its migrations may have dropped a view.
	_, err = pool.Exec(ctx, `DROP VIEW reach_recovery; UPDATE agentreach_views SET migration = migration - 1`)
	require.NoError(t, err)
	require.NoError(t, arsql.Migrate(ctx, pool, logger))
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM reach_recovery`).Scan(&n))
	_, by = applied()
	require.Equal(t, arsql.LatestVersion(), by)

	// Another build of the same migrations whose views these cannot
	// replace: a warning, the views left as they are, and the start goes on.
	_, err = pool.Exec(ctx, `DROP VIEW reach_recovery; CREATE VIEW reach_recovery AS SELECT 1 AS other_column;
		UPDATE agentreach_views SET hash = 'same migrations, other views'`)
	require.NoError(t, err)
	require.NoError(t, arsql.Migrate(ctx, pool, logger))
	hash, _ = applied()
	require.Equal(t, "same migrations, other views", hash)
	require.NoError(t, pool.QueryRow(ctx, `SELECT other_column FROM reach_recovery`).Scan(&n))

	// Views a newer binary applied stay as they are.
	_, err = pool.Exec(ctx, `UPDATE agentreach_views SET hash = 'newer', migration = migration + 1`)
	require.NoError(t, err)
	require.NoError(t, arsql.Migrate(ctx, pool, logger))
	hash, _ = applied()
	require.Equal(t, "newer", hash)
}
