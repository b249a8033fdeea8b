package jobs

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/a2a/adapter"
	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/jobs/jobstore"
)

// TestLegacyPushes: a job with a plain callback_url uses push configs only
// if it has some (an A2A job from before the marker); while no such job
// exists the callback asks nothing, and the answer is read again once a
// minute.
func TestLegacyPushes(t *testing.T) {
	t.Parallel()
	s := newService(t)
	ctx := context.Background()
	now := time.Now()
	s.now = func() time.Time { return now }
	submit := func() *jobstore.Loaded {
		res, err := s.Submit(ctx, domain.Submitted{Capability: "a.b", Payload: json.RawMessage(`{}`), CallbackURL: "http://127.0.0.1:9/cb"},
			domain.Metadata{Actor: "test"})
		require.NoError(t, err)
		l, err := s.Load(ctx, nil, res.JobID)
		require.NoError(t, err)
		return l
	}
	plain := submit()
	uses, err := s.a2a.Uses(ctx, plain)
	require.NoError(t, err)
	require.False(t, uses)

	legacy := submit()
	_, err = s.pool.Exec(ctx, `INSERT INTO a2a_push_configs (job_id, config_id, url) VALUES ($1, 'default', 'http://127.0.0.1:9/cb')`, legacy.JobID)
	require.NoError(t, err)
	uses, err = s.a2a.Uses(ctx, legacy)
	require.NoError(t, err)
	require.False(t, uses, "within the minute, what was read stands")

	now = now.Add(adapter.LegacyPushesFor)
	uses, err = s.a2a.Uses(ctx, legacy)
	require.NoError(t, err)
	require.True(t, uses, "a legacy job's callback is its push configs")
	uses, err = s.a2a.Uses(ctx, plain)
	require.NoError(t, err)
	require.False(t, uses, "the others' is their callback_url")
}
