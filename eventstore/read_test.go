package eventstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/internal/pgtest"
)

// threeJobs is a new log with streams job:0 to job:2, each SUBMITTED and
// ROUTED.
func threeJobs(t *testing.T) (*pgxpool.Pool, *Store, context.Context) {
	t.Helper()
	pool := pgtest.NewPool(t)
	s := New(pool)
	ctx := context.Background()
	for i := range 3 {
		_, err := s.Append(ctx, fmt.Sprintf("job:%d", i), NoStream,
			domain.NewEvent(domain.EventSubmitted, map[string]int{"i": i}, domain.Metadata{}),
			domain.NewEvent(domain.EventRouted, nil, domain.Metadata{}))
		require.NoError(t, err)
	}
	return pool, s, ctx
}

// TestReadsBeyondOneStream: streams by prefix in order, the first event of
// a type per stream, a stream's last event, and a count of streams.
func TestReadsBeyondOneStream(t *testing.T) {
	t.Parallel()
	pool, s, ctx := threeJobs(t)
	_, err := s.Append(ctx, "job:1", 2, domain.NewEvent(domain.EventDelivered, nil, domain.Metadata{}))
	require.NoError(t, err)
	_, err = s.Append(ctx, "other:1", NoStream, domain.NewEvent("X", nil, domain.Metadata{}))
	require.NoError(t, err)

	var seen []string
	require.NoError(t, s.ReadStreams(ctx, nil, "job:", func(r Record) error {
		seen = append(seen, fmt.Sprintf("%s/%d", r.StreamID, r.Version))
		return nil
	}))
	require.Equal(t, []string{"job:0/1", "job:0/2", "job:1/1", "job:1/2", "job:1/3", "job:2/1", "job:2/2"}, seen)

	firsts, err := FirstOfType(ctx, pool, []string{"job:0", "job:1", "job:2", "job:9"}, domain.EventDelivered)
	require.NoError(t, err)
	require.Len(t, firsts, 1)
	require.Equal(t, 3, firsts["job:1"].Version)

	last, ok, err := Last(ctx, pool, "job:1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, domain.EventDelivered, last.Type)
	_, ok, err = Last(ctx, pool, "job:nope")
	require.NoError(t, err)
	require.False(t, ok)

	n, err := CountStreams(ctx, pool, "job:")
	require.NoError(t, err)
	require.Equal(t, 3, n)

	events, err := CountEvents(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, int64(8), events)
}

// TestReadStreamsOfKeepsItsPlan: a read of several streams answers each
// once, in version order, and leaves out those with no events; in a
// transaction, run again and again on one connection, its statement runs
// on the generic plan made at its first run (a read planned afresh at
// every run cost more to plan than to run, and slowed every hand-off of a
// slot), and the rest of the transaction plans as before.
func TestReadStreamsOfKeepsItsPlan(t *testing.T) {
	t.Parallel()
	pool, _, ctx := threeJobs(t)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()

	read := func(q BatchQuerier) {
		one, err := ReadStreamsOf(ctx, q, []string{"job:1"})
		require.NoError(t, err)
		require.Len(t, one["job:1"], 2)
		some, err := ReadStreamsOf(ctx, q, []string{"job:2", "job:9", "job:0", "job:2"})
		require.NoError(t, err)
		require.Len(t, some, 2, "job:9 has no events")
		for _, stream := range []string{"job:0", "job:2"} {
			require.Len(t, some[stream], 2, stream)
			require.Equal(t, []domain.EventType{domain.EventSubmitted, domain.EventRouted},
				[]domain.EventType{some[stream][0].Type, some[stream][1].Type}, stream)
		}
		none, err := ReadStreamsOf(ctx, q, nil)
		require.NoError(t, err)
		require.Empty(t, none)
	}
	read(conn) // outside a transaction too
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	for range 10 {
		read(tx)
	}
	var mode string
	require.NoError(t, tx.QueryRow(ctx, "SHOW plan_cache_mode").Scan(&mode))
	require.Equal(t, "auto", mode, "the rest of the transaction")
	plans := func(sql string) (generic, custom int64) {
		require.NoError(t, tx.QueryRow(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1`,
			sql).Scan(&generic, &custom))
		return generic, custom
	}
	generic, custom := plans(qReadStream + inBracket)
	require.Equal(t, int64(40), generic, "the reads in the transaction (four a round), on its generic plan")
	require.Zero(t, custom)
	generic, custom = plans(qReadStream)
	require.Zero(t, generic, "the reads outside it, under a text of their own")
	require.LessOrEqual(t, custom, int64(4))
}
