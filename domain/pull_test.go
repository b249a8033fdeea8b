package domain

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// apply folds evs onto a copy of j, failing the test on a refused event.
func apply(t *testing.T, j *Job, evs []Event) *Job {
	t.Helper()
	after := *j
	for _, e := range evs {
		require.NoError(t, after.Apply(e))
	}
	return &after
}

func claimed(t *testing.T, j *Job, now time.Time) *Job {
	t.Helper()
	j.LastRouted = true
	evs, _, _, ok := Claim(j, j.Attempts, "agent-1", now, now, Metadata{})
	require.True(t, ok)
	return apply(t, j, evs)
}

// TestClaim: only the attempt waiting in the claiming agent's inbox is
// delivered, with a deadline from the claim and the time it waited.
func TestClaim(t *testing.T) {
	t.Parallel()
	routedAt := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := routedAt.Add(1500 * time.Millisecond)
	for _, tc := range []struct {
		name       string
		job        *Job
		attempt    int
		agent      string
		lastRouted bool
		ok         bool
	}{
		{"in the inbox", routedJob(t, 1, 3, false), 1, "agent-1", true, true},
		{"another agent's", routedJob(t, 1, 3, false), 1, "agent-2", true, false},
		{"an earlier attempt", routedJob(t, 2, 3, false), 1, "agent-1", true, false},
		{"claimed already", claimed(t, routedJob(t, 1, 3, false), now), 1, "agent-1", false, false},
		{"moved on since", routedJob(t, 1, 3, false), 1, "agent-1", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.job.LastRouted = tc.lastRouted
			evs, fx, deadline, ok := Claim(tc.job, tc.attempt, tc.agent, routedAt, now, Metadata{})
			require.Equal(t, tc.ok, ok)
			if !ok {
				require.Empty(t, evs)
				return
			}
			require.Equal(t, []EventType{EventDelivered}, types(evs))
			require.Equal(t, now.Add(tc.job.Timeout()), deadline, "the deadline runs from the claim")
			require.Equal(t, &Timer{Attempt: 1, AgentID: "agent-1", Phase: PhaseDelivered, Due: deadline}, fx.Timer)
			after := apply(t, tc.job, evs)
			require.Equal(t, StatusDelivered, after.Status)
			require.True(t, after.Claimed)
			var d Delivered
			require.NoError(t, json.Unmarshal(evs[0].Data, &d))
			require.InDelta(t, 1500, d.LatencyMS, 0.01, "the time it waited in the inbox")
		})
	}
}

// TestNotClaimedSpendsNoAttempt: an inbox timer that comes due routes the
// job again at once without spending an attempt, even on its last one,
// up to max_attempts times; after that an unclaimed attempt spends.
func TestNotClaimedSpendsNoAttempt(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	j := routedJob(t, 1, 1, false) // one attempt allowed, and it is routed
	for i := 1; i <= 2; i++ {
		d := DueTimer(j, Timer{Attempt: j.Attempts, Phase: PhaseInbox, Due: now}, 1, now, 0, AttemptPolicy{}, Metadata{})
		require.Equal(t, TimerAppend, d.Do)
		require.Equal(t, ReasonNotClaimed, d.Report)
		if i == 1 {
			require.Equal(t, []EventType{EventAttemptFailed}, types(d.Events))
			require.Equal(t, &NextDispatch{Attempt: 2, At: now}, d.Effects.Dispatch, "routed again at once")
			require.Equal(t, &Sample{AgentID: "agent-1", At: now, OK: false}, d.Effects.Sample, "a failed reach of the agent")
			j = apply(t, j, d.Events)
			require.Equal(t, 1, j.Unspent)
			require.Equal(t, 0, j.Spent())
			require.NoError(t, j.Apply(NewEvent(EventRouted, Routed{Attempt: 2, AgentID: "agent-1"}, Metadata{})))
			require.Equal(t, 1, j.Spent(), "the second routing replaces the unspent one")
			continue
		}
		// The free re-routes are used up (max_attempts of them): this one spends.
		require.Equal(t, []EventType{EventAttemptFailed, EventDeadLetter}, types(d.Events))
	}
	// A claimed attempt's inbox timer is stale.
	c := claimed(t, routedJob(t, 1, 1, false), now)
	require.Equal(t, TimerDrop, DueTimer(c, Timer{Attempt: 1, Phase: PhaseInbox, Due: now}, 1, now, 0, AttemptPolicy{}, Metadata{}).Do)
}

// TestRelease: unstarted work goes back at once and spends nothing; a
// claimed attempt released with an error is a failed attempt with backoff;
// another agent's or a finished attempt is not the agent's to give back.
func TestRelease(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		job        *Job
		agent      string
		lastRouted bool
		errText    string
		ok         bool
		reason     string
		unspent    int
		backoff    bool
	}{
		{"in the inbox", routedJob(t, 1, 1, false), "agent-1", true, "", true, ReasonReleased, 1, false},
		{"claimed, unstarted", claimed(t, routedJob(t, 1, 1, false), now), "agent-1", false, "", true, ReasonReleased, 1, false},
		{"claimed, failed", claimed(t, routedJob(t, 1, 3, false), now), "agent-1", false, "boom", true, "agent_error", 0, true},
		{"another agent's", claimed(t, routedJob(t, 1, 3, false), now), "agent-2", false, "", false, "", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.job.LastRouted = tc.lastRouted
			evs, fx, ok := Release(tc.job, 1, tc.agent, tc.errText, now, 0, Metadata{})
			require.Equal(t, tc.ok, ok)
			if !ok {
				require.Empty(t, evs)
				return
			}
			require.Equal(t, []EventType{EventAttemptFailed}, types(evs), "never the dead letter: it spends nothing")
			var f AttemptFailed
			require.NoError(t, json.Unmarshal(evs[0].Data, &f))
			require.Equal(t, tc.reason, f.Reason)
			require.Equal(t, 2, fx.Dispatch.Attempt)
			require.Equal(t, tc.backoff, fx.Dispatch.At.After(now), "a failure waits its backoff; a give-back none")
			after := apply(t, tc.job, evs)
			require.Equal(t, tc.unspent, after.Unspent)
			require.Empty(t, after.SlotHolder, "the slot is given back")
		})
	}
	done := apply(t, claimed(t, routedJob(t, 1, 1, false), now), []Event{NewEvent(EventSuccess, Outcome{Attempt: 1, AgentID: "agent-1"}, Metadata{})})
	_, _, ok := Release(done, 1, "agent-1", "", now, 0, Metadata{})
	require.False(t, ok, "a finished attempt cannot be given back")
}

// TestPullRegistration: a pull agent has no endpoint and speaks http; a
// push agent must have an endpoint.
func TestPullRegistration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		reg   AgentRegistration
		field string
	}{
		{"pull", AgentRegistration{Mode: ModePull}, ""},
		{"pull with an endpoint", AgentRegistration{Mode: ModePull, Endpoint: "http://127.0.0.1:9/"}, "endpoint"},
		{"pull with a health URL", AgentRegistration{Mode: ModePull, HealthURL: "http://127.0.0.1:9/"}, "health_url"},
		{"pull over a2a", AgentRegistration{Mode: ModePull, Protocol: ProtocolA2A}, "protocol"},
		{"push without an endpoint", AgentRegistration{}, "endpoint"},
		{"an unknown mode", AgentRegistration{Mode: "poll"}, "mode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.reg
			r.AgentID, r.Capabilities = "a", []string{"c"}
			err := r.Normalize()
			if tc.field == "" {
				require.NoError(t, err)
				require.True(t, r.Pull())
				require.Equal(t, ProtocolHTTP, r.Protocol)
				return
			}
			var fe *FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, tc.field, fe.Field)
		})
	}
}

// TestAgentGone: an attempt held by a pull agent that went DOWN or
// OFFLINE is spent and routed again at once, away from that agent; on the
// last attempt the job goes to the dead letter. Either way its slot comes
// back.
func TestAgentGone(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		max   int
		state AgentState
		want  []EventType
	}{
		{"lease lapsed, attempts left", 3, AgentDown, []EventType{EventAttemptFailed}},
		{"offline, the last attempt", 1, AgentOffline, []EventType{EventAttemptFailed, EventDeadLetter}},
	} {
		j := claimed(t, routedJob(t, 1, tc.max, false), now)
		require.Equal(t, StatusDelivered, j.Status, tc.name)
		evs, fx := AgentGone(j, tc.state, now, Metadata{})
		require.Equal(t, tc.want, types(evs), tc.name)
		var af AttemptFailed
		require.NoError(t, json.Unmarshal(evs[0].Data, &af), tc.name)
		require.Equal(t, ReasonAgentGone, af.Reason, tc.name)
		require.Contains(t, af.Error, string(tc.state), tc.name)
		require.Equal(t, &Sample{AgentID: j.AgentID, At: now, OK: false}, fx.Sample, tc.name)
		after := apply(t, j, evs)
		require.Empty(t, after.SlotHolder, tc.name)
		if tc.max > 1 {
			require.Equal(t, &NextDispatch{Attempt: 2, At: now}, fx.Dispatch, tc.name+": routed again at once")
			require.Equal(t, j.AgentID, after.LastFailedAgent, tc.name+": and away from the gone agent")
		} else {
			require.Nil(t, fx.Dispatch, tc.name)
			require.Equal(t, StatusDeadLetter, after.Status, tc.name)
		}
	}
}
