package sql_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/internal/pgtest"
	arsql "github.com/agentreach/agentreach/sql"
)

// Partitions are made once, whoever asks and however often: processes
// that race wait for each other, and a partition dropped is not made again.
func TestEnsureEventPartitions(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	at := time.Now().Add(40 * 24 * time.Hour) // past what the test database has

	var wg sync.WaitGroup
	made := make([][]string, 3)
	for i := range made {
		wg.Go(func() {
			var err error
			made[i], err = arsql.EnsureEventPartitions(ctx, pool, at, time.Hour)
			require.NoError(t, err)
		})
	}
	wg.Wait()
	total := 0
	for _, m := range made {
		total += len(m)
	}
	require.Equal(t, 2+int(domain.PartitionsAhead(time.Hour)/time.Hour), total, "the hour behind, the present and three ahead, made once: %v", made)

	parts, err := arsql.EventPartitions(ctx, pool)
	require.NoError(t, err)
	last := parts[len(parts)-1]
	attached := func() bool {
		var b bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass($1))`, last.Name).Scan(&b))
		return b
	}
	require.NoError(t, arsql.MarkPartitionDropping(ctx, pool, last.Name))
	require.NoError(t, arsql.DetachEventPartition(ctx, pool, last.Name))
	require.False(t, attached(), "detached: no write reaches it")
	require.NoError(t, arsql.DetachEventPartition(ctx, pool, last.Name), "detached already")
	require.NoError(t, arsql.ReattachEventPartition(ctx, pool, last))
	require.True(t, attached(), "put back")
	require.Equal(t, at.Truncate(time.Hour).Add(3*time.Hour).UTC(), last.Low.UTC())
	require.NoError(t, arsql.DropEventPartition(ctx, pool, last.Name))
	require.NoError(t, arsql.DropEventPartition(ctx, pool, last.Name), "a drop run again is done already")
	again, err := arsql.EnsureEventPartitions(ctx, pool, at, time.Hour)
	require.NoError(t, err)
	require.Empty(t, again, "a dropped range is not made again")
	var table bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, last.Name).Scan(&table))
	require.False(t, table)
}
