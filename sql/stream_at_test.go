package sql_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/internal/pgtest"
	arsql "github.com/agentreach/agentreach/sql"
)

// migrationSQL is the text of migration version v.
func migrationSQL(t *testing.T, v int) string {
	t.Helper()
	for _, m := range arsql.Migrations() {
		if m.Version == v {
			return m.SQL
		}
	}
	t.Fatalf("no migration %d", v)
	return ""
}

// streamSamples are streams of every shape events_stream_at tells apart:
// jobs and direct-call batches with UUIDv7 ids around cutoff and at the
// ends of the 48-bit clock, and near misses of each (another UUID version,
// upper-case or non-hex digits, a character too many or too few, a
// multibyte character), and the long-lived streams.
func streamSamples(cutoff time.Time) []string {
	v7 := func(ms int64, tail string) string {
		h := fmt.Sprintf("%012x", ms)
		return h[:8] + "-" + h[8:] + "-7" + tail
	}
	tail := "abc-8def-0123456789ab"
	var out []string
	times := []int64{0, 1, 999, 1000, 1_700_000_000_001, 1<<48 - 1, time.Now().UnixMilli()}
	if !cutoff.IsZero() {
		c := cutoff.UnixMilli()
		times = append(times, c-1, c, c+1)
	}
	for _, ms := range times {
		id := v7(ms, tail)
		out = append(out, "job:"+id, "direct:default/agent-1/"+id, "direct:a/b/c/"+id)
	}
	for range 50 {
		id := uuid.Must(uuid.NewV7()).String()
		out = append(out, "job:"+id, "direct:ns/agent/"+id)
	}
	v4 := uuid.New().String()
	near := v7(1_700_000_000_001, tail)
	out = append(out,
		"job:"+v4, "direct:ns/agent/"+v4,
		"job:"+near[:3]+"G"+near[4:], "job:"+near[:3]+"A"+near[4:], "job:"+near[:10]+"é"+near[11:],
		"direct:ns/agent/"+near[:3]+"g"+near[4:], "direct:ns/agent/"+near[:1]+"F"+near[2:],
		"job:"+near+"0", "job:"+near[1:], "direct:x/"+near, "direct:ns/agent"+near, "direct:ns/agent/"+near+"0",
		"job:"+near[:14]+"8"+near[15:], "agent:default/agent-1", "policy:x", "", "job:", "direct:",
		"direct:né/agént/"+near, "direct:ns/agent/"+near[:20]+"é"+near[21:], "direct:日本/エージェント/"+v7(1_700_000_000_001, tail))
	return out
}

// TestEventsStreamAtAnswersAsBefore: migration 38's events_stream_at gives
// every stream the time migration 31's gave it, with no cutoff and with
// one, so that a read finds every event where its append put it.
func TestEventsStreamAtAnswersAsBefore(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	for _, cutoff := range []time.Time{{}, time.Now().Add(-90 * time.Minute).Round(time.Microsecond),
		time.UnixMilli(1_700_000_000_001).Add(500 * time.Microsecond), time.UnixMilli(1_700_000_000_001)} { // a cutoff on a whole millisecond: its own time is in
		t.Run(fmt.Sprint(cutoff), func(t *testing.T) {
			streams := streamSamples(cutoff)
			if cutoff.IsZero() {
				_, err := pool.Exec(ctx, `UPDATE event_log SET partitioned_from = '-infinity'`)
				require.NoError(t, err)
			} else {
				_, err := pool.Exec(ctx, `UPDATE event_log SET partitioned_from = $1`, cutoff)
				require.NoError(t, err)
			}
			at := func(v int) []string {
				_, err := pool.Exec(ctx, migrationSQL(t, v))
				require.NoError(t, err)
				return streamTimes(t, pool, streams)
			}
			before := at(31)
			after := at(38)
			require.Equal(t, before, after)
			var null bool
			require.NoError(t, pool.QueryRow(ctx, `SELECT events_stream_at(NULL) = '-infinity'`).Scan(&null))
			require.True(t, null, "no stream, no time")
			var infinite int
			for _, a := range after {
				if a == "-infinity" {
					infinite++
				}
			}
			require.Less(t, infinite, len(streams)-50, "most samples have a time: %v", after)
			require.Greater(t, infinite, 10, "the near misses have none")
		})
	}
	t.Run("no cutoff row", func(t *testing.T) { // never so after migration 29; then no stream had a time, and has none
		_, err := pool.Exec(ctx, `DELETE FROM event_log`)
		require.NoError(t, err)
		streams := streamSamples(time.Time{})
		_, err = pool.Exec(ctx, migrationSQL(t, 31))
		require.NoError(t, err)
		before := streamTimes(t, pool, streams)
		_, err = pool.Exec(ctx, migrationSQL(t, 38))
		require.NoError(t, err)
		require.Equal(t, before, streamTimes(t, pool, streams))
		require.Equal(t, []string{"-infinity"}, slices.Compact(before))
	})
}

// streamTimes answers events_stream_at of each stream, as text.
func streamTimes(t *testing.T, pool *pgxpool.Pool, streams []string) []string {
	t.Helper()
	var out []string
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT array_agg(events_stream_at(s)::text ORDER BY o) FROM unnest($1::text[]) WITH ORDINALITY AS u(s, o)`, streams).Scan(&out))
	return out
}
