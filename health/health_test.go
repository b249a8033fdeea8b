package health

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/internal/pgtest"
)

// seed writes one minute bucket of agent_stats for an agent, now.
func seed(t *testing.T, pool *pgxpool.Pool, ns, agent string, attempted, delivered, succeeded int) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `INSERT INTO agent_stats_minute (namespace, agent_id, capability, bucket,
			attempted, delivered, succeeded, failed, delivery_hist, result_hist)
		VALUES ($1, $2, 'cap', date_trunc('minute', now()), $3::int, $4::int, $5::int, $3::int - $5::int, reach_hist_of('{}'), reach_hist_of('{10,20}'))`,
		ns, agent, attempted, delivered, succeeded)
	require.NoError(t, err)
}

// TestAgentsAndJudge: the views' figures per agent and namespace, and the
// verdict against the default thresholds (99 % reach, 95 % success, at
// least 5 attempts in 5 minutes).
func TestAgentsAndJudge(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	seed(t, pool, "a", "good", 10, 10, 10)
	seed(t, pool, "a", "flaky", 10, 10, 5)
	seed(t, pool, "b", "good", 10, 5, 5) // the same id in another namespace is another agent
	seed(t, pool, "a", "quiet", 2, 0, 0) // too few attempts to judge

	all, err := Agents(ctx, pool, "5m", "")
	require.NoError(t, err)
	require.Len(t, all, 4)
	inA, err := Agents(ctx, pool, "5m", "a")
	require.NoError(t, err)
	require.Len(t, inA, 3)
	for _, h := range inA {
		require.Equal(t, "a", h.Namespace)
		if h.AgentID == "flaky" {
			require.InDelta(t, 0.5, *h.SuccessRate, 1e-9)
			require.InDelta(t, 1.0, *h.ReachRate, 1e-9)
		}
	}
	_, err = Agents(ctx, pool, "7m", "")
	require.ErrorIs(t, err, ErrUnknownWindow)
	require.ErrorIs(t, err, domain.ErrInvalid)

	verdicts, err := Judge(ctx, pool)
	require.NoError(t, err)
	require.False(t, verdicts[domain.AgentKey{Namespace: "a", ID: "good"}].Below)
	require.True(t, verdicts[domain.AgentKey{Namespace: "a", ID: "flaky"}].Below)
	require.True(t, verdicts[domain.AgentKey{Namespace: "b", ID: "good"}].Below, "b's good is another agent, with half its jobs unreached")
	require.NotContains(t, verdicts, domain.AgentKey{Namespace: "a", ID: "quiet"})
}

// TestSeries: per-minute points of the last hour, by namespace.
func TestSeries(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	seed(t, pool, "a", "x", 3, 3, 2)
	seed(t, pool, "b", "y", 1, 1, 1)
	points, err := Series(ctx, pool, "a")
	require.NoError(t, err)
	require.Len(t, points, 1)
	require.Equal(t, "x", points[0].AgentID)
	require.Equal(t, 3, points[0].Attempted)
	require.Equal(t, 2, points[0].Succeeded)
	require.WithinDuration(t, time.Now(), points[0].Minute, 2*time.Minute)
}

// An async attempt still inside its deadline is pending, not a failure; an
// agent never reached has a row with no rates; business_success_rate
// counts only what was delivered.
func TestHonestFigures(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `INSERT INTO agent_stats_minute (namespace, agent_id, capability, bucket,
			attempted, delivered, succeeded, failed, delivery_hist, result_hist)
		VALUES ('a', 'async', 'cap', date_trunc('minute', now()), 15, 15, 14, 0, reach_hist_of('{}'), reach_hist_of('{}')),
		       ('a', 'own-failures', 'cap', date_trunc('minute', now()), 10, 8, 4, 4, reach_hist_of('{}'), reach_hist_of('{}'))`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO agents (agent_id, namespace, capabilities, endpoint, state, instance_id, token_hash,
			registered_at, last_seen_at, lease_expires_at, state_changed_at, stream_version)
		VALUES ('never', 'a', '{cap}', 'http://127.0.0.1:9/', 'PROBING', gen_random_uuid(), '\x00', now(), now(), now(), now(), 1)`)
	require.NoError(t, err)

	got := map[string]AgentHealth{}
	hs, err := Agents(ctx, pool, "5m", "a")
	require.NoError(t, err)
	for _, h := range hs {
		got[h.AgentID] = h
	}
	require.Len(t, got, 3)
	async := got["async"]
	require.Equal(t, 1, async.Pending)
	require.InDelta(t, 1.0, *async.SuccessRate, 1e-9, "the pending one is no failure")
	require.InDelta(t, 1.0, *async.BusinessSuccessRate, 1e-9)
	own := got["own-failures"]
	require.InDelta(t, 0.4, *own.SuccessRate, 1e-9)
	require.InDelta(t, 0.5, *own.BusinessSuccessRate, 1e-9, "4 of the 8 delivered")
	never := got["never"]
	require.Zero(t, never.Attempted)
	require.Nil(t, never.SuccessRate)
	require.Nil(t, never.ReachRate)

	verdicts, err := Judge(ctx, pool)
	require.NoError(t, err)
	require.False(t, verdicts[domain.AgentKey{Namespace: "a", ID: "async"}].Below, "an all-success async agent is not degraded")
	require.True(t, verdicts[domain.AgentKey{Namespace: "a", ID: "own-failures"}].Below)
}

// Time to recover: from DOWN or HEALTH_DEGRADED to HEALTHY or
// HEALTH_RECOVERED, an outage measured from its first bad mark.
func TestRecovery(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	r, err := RecoveryOf(ctx, pool, "a", "x")
	require.NoError(t, err)
	require.Zero(t, r.Recoveries24h)
	require.Nil(t, r.LastMS, "never recovered: no figure")
	v, now := 0, time.Now()
	mark := func(ago time.Duration, typ, to string) {
		v++
		_, err := pool.Exec(ctx, `INSERT INTO events (stream_id, version, type, data, recorded_at)
			VALUES ('agent:a/x', $1, $2, jsonb_build_object('to', $3::text), $4)`, v, typ, to, now.Add(-ago))
		require.NoError(t, err)
	}
	mark(3*time.Hour, "AGENT_STATE_CHANGED", "HEALTHY")
	mark(2*time.Hour, "AGENT_STATE_CHANGED", "DOWN")
	mark(2*time.Hour-time.Minute, "AGENT_STATE_CHANGED", "DOWN")      // the same outage
	mark(2*time.Hour-3*time.Minute, "AGENT_STATE_CHANGED", "HEALTHY") // 3 min after it began
	mark(time.Hour, "HEALTH_DEGRADED", "")
	mark(time.Hour-time.Minute, "HEALTH_RECOVERED", "") // 1 min
	r, err = RecoveryOf(ctx, pool, "a", "x")
	require.NoError(t, err)
	require.Equal(t, 2, r.Recoveries24h)
	require.InDelta(t, 60_000, *r.LastMS, 1)
	require.InDelta(t, 120_000, *r.Mean24hMS, 1, "(3 min + 1 min) / 2")
}
