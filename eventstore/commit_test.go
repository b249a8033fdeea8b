package eventstore_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/pgtest"
)

// TestInTxWhoseCommitLosesItsConnection: every transaction of the store
// (an operator's action, a claim, a registration) asks what became of a
// COMMIT whose connection died: one that committed answers nil, its
// events there once; one that did not answers ErrAborted, nothing written.
func TestInTxWhoseCommitLosesItsConnection(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgtest.NewDatabase(t))
	require.NoError(t, err)
	proxy := pgtest.NewCutProxy(t, u.Host)
	u.Host = proxy.Addr()
	q := u.Query()
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, u.String())
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s := eventstore.New(pool)

	for _, c := range []struct {
		when    int32
		stream  string
		wantErr error
		events  int
	}{
		{2, "agent:committed", nil, 1},                 // cut after the server committed
		{1, "agent:aborted", eventstore.ErrAborted, 0}, // cut before COMMIT reached it
	} {
		proxy.Arm(c.when)
		cuts := proxy.Cuts()
		_, err := s.Append(ctx, c.stream, eventstore.NoStream, ev("A", 1))
		require.Equal(t, cuts+1, proxy.Cuts(), "the connection was cut during COMMIT (armed %d)", c.when)
		if c.wantErr == nil {
			require.NoError(t, err, "a COMMIT that happened is a success")
		} else {
			require.ErrorIs(t, err, c.wantErr)
		}
		got, err := s.ReadStream(ctx, nil, c.stream)
		require.NoError(t, err)
		require.Len(t, got, c.events, "armed %d", c.when)
	}
}
