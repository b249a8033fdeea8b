package domain_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
)

func TestProgress(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	deadline := now.Add(10 * time.Second)
	delivered := func() *domain.Job {
		j := &domain.Job{}
		for _, e := range []domain.Event{
			domain.NewEvent(domain.EventSubmitted, domain.Submitted{JobID: "j", Capability: "c", MaxAttempts: 3}, domain.Metadata{}),
			domain.NewEvent(domain.EventRouted, domain.Routed{Attempt: 1, AgentID: "a"}, domain.Metadata{}),
			domain.NewEvent(domain.EventDelivered, domain.Delivered{Attempt: 1, AgentID: "a", Deadline: deadline}, domain.Metadata{}),
		} {
			require.NoError(t, j.Apply(e))
		}
		return j
	}
	for _, tc := range []struct {
		name     string
		attempt  int
		extend   time.Duration
		deadline time.Time // after; zero: refused
	}{
		{"extends", 1, time.Minute, now.Add(time.Minute)},
		{"never shortens", 1, time.Second, deadline},
		{"progress only", 1, 0, deadline},
		{"at most an hour", 1, 2 * time.Hour, now.Add(domain.MaxExtend)},
		{"an earlier attempt", 0, time.Minute, time.Time{}},
		{"a later attempt", 2, time.Minute, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j := delivered()
			evs, fx, err := domain.Progress(j, tc.attempt, "a", tc.extend, json.RawMessage(`{"step":1}`), now, domain.Metadata{})
			if tc.deadline.IsZero() {
				require.ErrorIs(t, err, domain.ErrConflict)
				return
			}
			require.NoError(t, err)
			require.Len(t, evs, 1)
			require.NoError(t, j.Apply(evs[0]))
			require.Equal(t, domain.StatusDelivered, j.Status)
			require.Equal(t, tc.deadline, j.Deadline)
			require.JSONEq(t, `{"step":1}`, string(j.Progress))
			if tc.deadline.Equal(deadline) {
				require.Nil(t, fx.Timer, "the timer stays")
			} else {
				require.Equal(t, &domain.Timer{Attempt: 1, AgentID: "a", Phase: domain.PhaseDelivered, Due: tc.deadline}, fx.Timer)
			}
		})
	}
	// Not running: answered, timed out.
	j := delivered()
	require.NoError(t, j.Apply(domain.NewEvent(domain.EventSuccess, domain.Outcome{Attempt: 1, AgentID: "a"}, domain.Metadata{})))
	_, _, err := domain.Progress(j, 1, "a", time.Minute, nil, now, domain.Metadata{})
	require.ErrorIs(t, err, domain.ErrConflict)
}
