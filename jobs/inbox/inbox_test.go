package inbox

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/pgtest"
	"github.com/agentreach/agentreach/jobs/jobstore"
	"github.com/agentreach/agentreach/registry"
)

// TestInboxWakesByNotify: a NOTIFY on jobstore.InboxChannel, from any connection,
// wakes this process's claims of the agent it names and no other's.
func TestInboxWakesByNotify(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	s := New(pool, eventstore.New(pool), nil, slog.New(slog.NewTextHandler(io.Discard, nil)), Config{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	mine, stopMine := s.wait(domain.AgentKey{Namespace: "ns", ID: "mine"})
	defer stopMine()
	other, stopOther := s.wait(domain.AgentKey{Namespace: "ns", ID: "other"})
	defer stopOther()
	go s.Run(ctx)

	// Listening starts with a wake of every claim ("anything may have been
	// missed"); drain it.
	for _, ch := range []<-chan struct{}{mine, other} {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			require.FailNow(t, "the listener never started")
		}
	}
	_, err := s.pool.Exec(ctx, "SELECT pg_notify($1, $2)", jobstore.InboxChannel, "ns/third")
	require.NoError(t, err)
	_, err = s.pool.Exec(ctx, "SELECT pg_notify($1, $2)", jobstore.InboxChannel, "ns/mine")
	require.NoError(t, err)
	select {
	case <-mine:
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the notification did not wake the agent's claim")
	}
	select {
	case <-other:
		require.FailNow(t, "a notification for another agent woke this one")
	default:
	}
}

// TestEmptyClaimEndsWithItsBegin: a claim that finds its inbox empty
// takes two round trips (BEGIN with the take of the rows, then the
// rollback) and answers no delivery.
func TestEmptyClaimEndsWithItsBegin(t *testing.T) {
	t.Parallel()
	pool, proxy := pgtest.NewCountingPool(t) // one connection, its statements prepared by the first claim
	s := New(pool, eventstore.New(pool), nil, slog.New(slog.NewTextHandler(io.Discard, nil)), Config{})
	a := &registry.Agent{AgentRegistration: domain.AgentRegistration{Namespace: "ns", AgentID: "puller"}}
	out, err := s.claimOnce(t.Context(), a, 8)
	require.NoError(t, err)
	require.Empty(t, out)
	before := proxy.RoundTrips()
	out, err = s.claimOnce(t.Context(), a, 8)
	require.NoError(t, err)
	require.Empty(t, out)
	require.EqualValues(t, 2, proxy.RoundTrips()-before)
}
