package domain

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPlanDispatch covers every road of a dispatch: stale, held back,
// waiting (for a slot, for a routable agent, within and past the job's
// bound), no agent (a retry, or the dead letter on the last attempt),
// a pull agent's inbox and a delivery; the events of each are accepted by
// the fold in order.
func TestPlanDispatch(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	submitted := func(max int, p Priority) *Job {
		var j Job
		require.NoError(t, j.Apply(NewEvent(EventSubmitted, Submitted{Namespace: "n", Capability: "c", MaxAttempts: max, Priority: p,
			TimeoutMS: 1000, BackoffBaseMS: 1000, BackoffMaxMS: 60000}, Metadata{})))
		return &j
	}
	chosen := RouteResult{Chosen: "a1"}
	for _, tc := range []struct {
		name    string
		job     *Job
		in      DispatchInput
		step    DispatchStep
		events  []EventType
		due     time.Duration // the wait's timer, from now
		since   time.Time     // the wait's WaitingSince
		retryAt bool          // the failure retries
		reason  string        // the failure's reason
	}{
		{name: "started already", job: routedJob(t, 1, 3, false), in: DispatchInput{Attempt: 1, Route: chosen, Chosen: true}, step: StepStale},
		{name: "a later attempt's", job: submitted(3, PriorityNormal), in: DispatchInput{Attempt: 2, Route: chosen, Chosen: true}, step: StepStale},
		{name: "low, held back", job: submitted(3, PriorityLow), in: DispatchInput{Attempt: 1, HoldLow: true, HoldFor: 5 * time.Second,
			WaitingSince: now.Add(-time.Minute), Route: chosen, Chosen: true}, step: StepWait, due: 5 * time.Second, since: now.Add(-time.Minute)},
		{name: "normal, never held back", job: submitted(3, PriorityNormal), in: DispatchInput{Attempt: 1, HoldLow: true, Route: chosen, Chosen: true},
			step: StepDeliver, events: []EventType{EventRouted}},
		{name: "every candidate at capacity", job: submitted(3, PriorityNormal), in: DispatchInput{Attempt: 1, RouteWait: 30 * time.Second,
			Route: RouteResult{AllAtCapacity: true}, CapacityWait: 250 * time.Millisecond}, step: StepWait, due: MinCapacityRecheck, since: now},
		{name: "at capacity, waited 8 s", job: submitted(3, PriorityNormal), in: DispatchInput{Attempt: 1, RouteWait: 30 * time.Second,
			WaitingSince: now.Add(-8 * time.Second), Route: RouteResult{AllAtCapacity: true}, CapacityWait: 250 * time.Millisecond},
			step: StepWait, due: 8 * time.Second, since: now.Add(-8 * time.Second)},
		{name: "at capacity, the bound comes first", job: submitted(3, PriorityNormal), in: DispatchInput{Attempt: 1, RouteWait: 9 * time.Second,
			WaitingSince: now.Add(-8 * time.Second), Route: RouteResult{AllAtCapacity: true}, CapacityWait: 250 * time.Millisecond},
			step: StepWait, due: time.Second, since: now.Add(-8 * time.Second)},
		{name: "at capacity past the bound", job: submitted(3, PriorityNormal), in: DispatchInput{Attempt: 1, RouteWait: 30 * time.Second,
			WaitingSince: now.Add(-30 * time.Second), Route: RouteResult{AllAtCapacity: true}},
			step: StepNoAgent, events: []EventType{EventRouted, EventAttemptFailed}, retryAt: true, reason: "at_capacity"},
		{name: "all unavailable past the bound", job: submitted(3, PriorityNormal), in: DispatchInput{Attempt: 1, RouteWait: 30 * time.Second,
			WaitingSince: now.Add(-30 * time.Second), Route: RouteResult{Rejected: []RouteRejection{{AgentID: "a1", Reason: RouteRejectBreakerOpen}}}},
			step: StepNoAgent, events: []EventType{EventRouted, EventAttemptFailed}, retryAt: true, reason: "all_unavailable"},
		{name: "every candidate paused: looks again when the first pause ends", job: submitted(3, PriorityNormal), in: DispatchInput{Attempt: 1,
			Route:        RouteResult{Rejected: []RouteRejection{{AgentID: "a1", Reason: RouteRejectPaused}}, ResumeAt: now.Add(300 * time.Millisecond)},
			CapacityWait: 250 * time.Millisecond}, step: StepWait, due: 300 * time.Millisecond, since: now},
		{name: "paused past the bound", job: submitted(3, PriorityNormal), in: DispatchInput{Attempt: 1, RouteWait: 30 * time.Second,
			WaitingSince: now.Add(-30 * time.Second), Route: RouteResult{Rejected: []RouteRejection{{AgentID: "a1", Reason: RouteRejectPaused}},
				ResumeAt: now.Add(time.Minute)}},
			step: StepNoAgent, events: []EventType{EventRouted, EventAttemptFailed}, retryAt: true, reason: "all_unavailable"},
		{name: "none routable yet, first look", job: submitted(3, PriorityNormal), in: DispatchInput{Attempt: 1, RouteWait: 30 * time.Second,
			CapacityWait: 250 * time.Millisecond}, step: StepWait, due: 250 * time.Millisecond, since: now},
		{name: "none routable yet, waited 8 s", job: submitted(3, PriorityNormal), in: DispatchInput{Attempt: 1, RouteWait: 30 * time.Second,
			WaitingSince: now.Add(-8 * time.Second), CapacityWait: 250 * time.Millisecond}, step: StepWait, due: 2 * time.Second, since: now.Add(-8 * time.Second)},
		{name: "none routable past the bound", job: submitted(3, PriorityNormal), in: DispatchInput{Attempt: 1, RouteWait: 30 * time.Second,
			WaitingSince: now.Add(-31 * time.Second)}, step: StepNoAgent, events: []EventType{EventRouted, EventAttemptFailed}, retryAt: true, reason: "no_agent"},
		{name: "no wait asked", job: submitted(3, PriorityNormal), in: DispatchInput{Attempt: 1},
			step: StepNoAgent, events: []EventType{EventRouted, EventAttemptFailed}, retryAt: true},
		{name: "no agent on the last attempt", job: submitted(1, PriorityNormal), in: DispatchInput{Attempt: 1},
			step: StepNoAgent, events: []EventType{EventRouted, EventAttemptFailed, EventDeadLetter}},
		{name: "a chosen agent the snapshot lost", job: submitted(3, PriorityNormal), in: DispatchInput{Attempt: 1, Route: chosen},
			step: StepNoAgent, events: []EventType{EventRouted, EventAttemptFailed}, retryAt: true},
		{name: "a pull agent", job: submitted(3, PriorityNormal), in: DispatchInput{Attempt: 1, Route: chosen, Chosen: true, Pull: true},
			step: StepInbox, events: []EventType{EventRouted}},
		{name: "a push agent", job: submitted(3, PriorityNormal), in: DispatchInput{Attempt: 1, Route: chosen, Chosen: true},
			step: StepDeliver, events: []EventType{EventRouted}},
	} {
		tc.in.Now = now
		plan := PlanDispatch(tc.job, tc.in)
		require.Equal(t, tc.step, plan.Step, tc.name)
		require.Equal(t, tc.events, typesOrNil(plan.Events), tc.name)
		if tc.step == StepWait {
			require.NotNil(t, plan.Timer, tc.name)
			want := Timer{Attempt: tc.in.Attempt, Phase: PhaseRetry, Due: now.Add(tc.due), WaitingSince: tc.since}
			if !tc.in.HoldLow { // a wait for a slot or an agent says what it waits for
				want.Namespace, want.Capability, want.Rank = "n", "c", WaitRank(tc.job.Priority, tc.since)
			}
			require.Equal(t, want, *plan.Timer, tc.name)
			continue
		}
		require.Nil(t, plan.Timer, tc.name)
		j := *tc.job
		for _, e := range plan.Events {
			require.NoError(t, j.Apply(e), tc.name)
		}
		if tc.step == StepNoAgent {
			require.True(t, plan.Effects.ClearTimer && plan.Effects.Callback, tc.name)
			require.Equal(t, tc.retryAt, plan.Effects.Dispatch != nil, tc.name)
			require.Equal(t, tc.in.Route.Chosen, j.AgentID, tc.name+": ROUTED names what the route chose, if anything")
			if tc.reason != "" {
				var af AttemptFailed
				require.NoError(t, json.Unmarshal(plan.Events[1].Data, &af), tc.name)
				require.Equal(t, tc.reason, af.Reason, tc.name)
			}
		}
	}
}

func typesOrNil(evs []Event) []EventType {
	if len(evs) == 0 {
		return nil
	}
	return types(evs)
}

func TestPlanSubmit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status JobStatus
		plain  bool
		p      Priority
		ahead  int
		want   SubmitStep
	}{
		{StatusAwaitingApproval, true, PriorityHigh, 0, SubmitApproval},
		{StatusAwaitingApproval, false, PriorityLow, 0, SubmitApproval},
		{StatusAwaitingApproval, false, PriorityLow, 2, SubmitApproval}, // its turn is looked at once approved
		{StatusSubmitted, true, PriorityHigh, 0, SubmitDirect},
		{StatusSubmitted, true, PriorityNormal, 0, SubmitDirect},
		{StatusSubmitted, true, PriorityLow, 0, SubmitQueue},
		{StatusSubmitted, false, PriorityHigh, 0, SubmitQueue},
		{StatusSubmitted, false, PriorityHigh, 1, SubmitOrdered},
	} {
		require.Equal(t, tc.want, PlanSubmit(tc.status, tc.plain, tc.p, tc.ahead), "%s plain=%v %s ahead %d", tc.status, tc.plain, tc.p, tc.ahead)
	}
}

// TestWaitRank: a slot given back goes to high work before normal before
// low, oldest first within a lane; a job that waited LaneAge longer than
// one of the lane above ranks with it, so no lane starves.
func TestWaitRank(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	lowOld := WaitRank(PriorityLow, t0)
	normal := WaitRank(PriorityNormal, t0.Add(30*time.Second))
	high := WaitRank(PriorityHigh, t0.Add(40*time.Second))
	highLater := WaitRank(PriorityHigh, t0.Add(41*time.Second))
	require.True(t, high.Before(highLater), "oldest first within a lane")
	require.True(t, high.Before(normal) && normal.Before(lowOld), "high, then normal, then low")
	require.True(t, WaitRank(PriorityLow, t0).Before(WaitRank(PriorityHigh, t0.Add(2*LaneAge+time.Second))),
		"a low job that waited two lanes' age longer goes before a high one")
}

// TestPreferring: the agent whose slot was given to a job is chosen when
// it is a candidate; the others keep their order behind it.
func TestPreferring(t *testing.T) {
	t.Parallel()
	r := RouteResult{Chosen: "a", Canary: true, Candidates: []RouteCandidate{{AgentID: "a", Score: 3}, {AgentID: "b", Score: 2}, {AgentID: "c", Score: 1}}}
	got := r.Preferring("c")
	require.Equal(t, "c", got.Chosen)
	require.False(t, got.Canary)
	require.Equal(t, []string{"c", "a", "b"}, []string{got.Candidates[0].AgentID, got.Candidates[1].AgentID, got.Candidates[2].AgentID})
	require.Equal(t, "a", r.Candidates[0].AgentID, "the route it came from is unchanged")
	require.Equal(t, r, r.Preferring("z"), "not a candidate")
	require.Equal(t, r, r.Preferring(""), "none")
	require.Equal(t, r, r.Preferring("a"), "chosen already")
}
