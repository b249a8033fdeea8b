package eventstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/internal/pgtest"
)

// TestReadsBeyondOneStream: streams by prefix in order, the first event of
// a type per stream, a stream's last event, and a count of streams.
func TestReadsBeyondOneStream(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	s := New(pool)
	ctx := context.Background()
	for i := range 3 {
		_, err := s.Append(ctx, fmt.Sprintf("job:%d", i), NoStream,
			domain.NewEvent(domain.EventSubmitted, map[string]int{"i": i}, domain.Metadata{}),
			domain.NewEvent(domain.EventRouted, nil, domain.Metadata{}))
		require.NoError(t, err)
	}
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
