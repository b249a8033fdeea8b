package queries_test

import (
	"context"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/internal/pgtest"
	"github.com/agentreach/agentreach/sql/queries"
)

// Every query parses and names only tables and columns the migrated schema
// has: PostgreSQL prepares it without running it.
func TestEveryQueryPrepares(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	all := queries.All()
	require.NotEmpty(t, all)
	for _, q := range all {
		if q.Template {
			continue
		}
		_, err := conn.Conn().Prepare(ctx, "", q.SQL)
		require.NoError(t, err, "%s (%s)", q.Name, q.File)
	}
}

func TestMustPanicsOnUnknownName(t *testing.T) {
	t.Parallel()
	require.Panics(t, func() { queries.Must("NoSuchQuery") })
}

func TestParse(t *testing.T) {
	t.Parallel()
	good := fstest.MapFS{"a.sql": {Data: []byte("-- file comment\n-- name: One\n-- what it does\nSELECT 1\n;\n\n-- name: Two :template\nCREATE DATABASE %s\n")}}
	got := queries.Load(good)
	require.Equal(t, "SELECT 1\n;", got["One"].SQL)
	require.False(t, got["One"].Template)
	require.True(t, got["Two"].Template)

	for name, body := range map[string]string{
		"empty block": "-- name: One\n-- only a comment\n",
		"bad marker":  "-- name: One :many\nSELECT 1\n",
		"no name":     "-- name:\nSELECT 1\n",
		"duplicate":   "-- name: One\nSELECT 1\n-- name: One\nSELECT 2\n",
	} {
		require.Panics(t, func() { queries.Load(fstest.MapFS{"a.sql": {Data: []byte(body)}}) }, name)
	}
}
