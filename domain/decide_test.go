package domain

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// routedJob folds a job whose attempt `attempt` (of max) is routed to agent-1.
func routedJob(t *testing.T, attempt, max int, retryOnFailed bool) *Job {
	t.Helper()
	var j Job
	require.NoError(t, j.Apply(NewEvent(EventSubmitted, Submitted{Namespace: "n", Capability: "c", MaxAttempts: max,
		TimeoutMS: 1000, BackoffBaseMS: 1000, BackoffMaxMS: 60000, RetryOnFailed: retryOnFailed}, Metadata{})))
	for a := 1; a <= attempt; a++ {
		if a > 1 {
			require.NoError(t, j.Apply(NewEvent(EventAttemptFailed, AttemptFailed{Attempt: a - 1, AgentID: "agent-1", Reason: "x"}, Metadata{})))
		}
		require.NoError(t, j.Apply(NewEvent(EventRouted, Routed{Attempt: a, AgentID: "agent-1"}, Metadata{})))
	}
	return &j
}

func types(evs []Event) []EventType {
	out := make([]EventType, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// TestDelivery covers every observation of a delivery, on a job with
// attempts left and on its last attempt: the events (which the fold must
// accept, in order) and the effects.
func TestDelivery(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	deadline := now.Add(time.Minute)
	policy := AttemptPolicy{InputTimeout: time.Hour}
	for _, tc := range []struct {
		name     string
		obs      Observation
		last     bool
		want     []EventType
		retry    bool // a next dispatch
		timer    TimerPhase
		sampleOK *bool
		poll     bool
		status   JobStatus
	}{
		{name: "success", obs: Observation{Kind: ObservedResult, Status: StatusSuccess},
			want: []EventType{EventDelivered, EventSuccess}, sampleOK: ptr(true), status: StatusSuccess},
		{name: "failed", obs: Observation{Kind: ObservedResult, Status: StatusFailed},
			want: []EventType{EventDelivered, EventFailed}, sampleOK: ptr(true), status: StatusFailed},
		{name: "accepted", obs: Observation{Kind: ObservedAccepted},
			want: []EventType{EventDelivered}, timer: PhaseDelivered, status: StatusDelivered},
		{name: "accepted, polled", obs: Observation{Kind: ObservedAccepted, Poll: true, RemoteTaskID: "t"},
			want: []EventType{EventDelivered}, timer: PhaseDelivered, poll: true, status: StatusDelivered},
		{name: "awaiting input", obs: Observation{Kind: ObservedAwaiting, A2AState: "input-required"},
			want: []EventType{EventDelivered, EventAwaitingInput}, timer: PhaseInput, status: StatusAwaitingInput},
		{name: "cancelled by the agent", obs: Observation{Kind: ObservedCancelled},
			want: []EventType{EventDelivered, EventCancelled}, status: StatusCancelled},
		{name: "rejected", obs: Observation{Kind: ObservedRejected, Reason: ReasonRejected},
			want: []EventType{EventDelivered, EventAttemptFailed}, retry: true, status: StatusSubmitted},
		{name: "incompatible", obs: Observation{Kind: ObservedRejected, Reason: ReasonIncompatible},
			want: []EventType{EventAttemptFailed}, retry: true, status: StatusSubmitted},
		{name: "hung", obs: Observation{Kind: ObservedHung},
			want: []EventType{EventDelivered, EventTimeout}, retry: true, sampleOK: ptr(false), status: StatusTimeout},
		{name: "paused", obs: Observation{Kind: ObservedPaused, Reason: ReasonAgentPaused, RetryAfter: 5 * time.Second},
			want: []EventType{EventAttemptFailed}, retry: true, status: StatusSubmitted}, // no sample: no failure of the agent's
		{name: "paused, last attempt", last: true, obs: Observation{Kind: ObservedPaused, Reason: ReasonAgentPaused, RetryAfter: time.Second},
			want: []EventType{EventAttemptFailed}, retry: true, status: StatusSubmitted}, // spends nothing
		{name: "not delivered", obs: Observation{Kind: ObservedFailed, Reason: "connection_refused"},
			want: []EventType{EventAttemptFailed}, retry: true, sampleOK: ptr(false), status: StatusSubmitted},
		{name: "rejected, last attempt", last: true, obs: Observation{Kind: ObservedRejected, Reason: ReasonRejected},
			want: []EventType{EventDelivered, EventAttemptFailed, EventDeadLetter}, status: StatusDeadLetter},
		{name: "hung, last attempt", last: true, obs: Observation{Kind: ObservedHung},
			want: []EventType{EventDelivered, EventTimeout, EventDeadLetter}, sampleOK: ptr(false), status: StatusDeadLetter},
		{name: "not delivered, last attempt", last: true, obs: Observation{Kind: ObservedFailed, Reason: "http_503"},
			want: []EventType{EventAttemptFailed, EventDeadLetter}, sampleOK: ptr(false), status: StatusDeadLetter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			attempt, max := 1, 3
			if tc.last {
				attempt = 3
			}
			j := routedJob(t, attempt, max, false)
			evs, fx := Delivery(j, now.Add(-time.Second), tc.obs, deadline, 5*time.Millisecond, now, 0.5, policy, Metadata{})
			require.Equal(t, tc.want, types(evs))
			after := *j
			for _, e := range evs {
				require.NoError(t, after.Apply(e), "the fold accepts %s", e.Type)
			}
			require.Equal(t, tc.status, after.Status)
			require.Equal(t, tc.retry, fx.Dispatch != nil)
			if fx.Dispatch != nil {
				require.Equal(t, attempt+1, fx.Dispatch.Attempt)
				require.False(t, fx.Dispatch.At.Before(now))
			}
			if tc.timer == "" {
				require.Nil(t, fx.Timer)
			} else {
				require.Equal(t, tc.timer, fx.Timer.Phase)
			}
			if tc.sampleOK == nil {
				require.Nil(t, fx.Sample)
			} else {
				require.Equal(t, *tc.sampleOK, fx.Sample.OK)
			}
			require.Equal(t, tc.poll, fx.Poll == attempt)
			if tc.obs.Kind == ObservedPaused {
				require.Equal(t, &AgentPause{AgentID: j.AgentID, Until: now.Add(tc.obs.RetryAfter)}, fx.Pause)
				require.Equal(t, now, fx.Dispatch.At, "routed again at once")
				require.Equal(t, j.Spent()-1, after.Spent(), "the routed attempt is given back")
			} else {
				require.Nil(t, fx.Pause)
			}
			if after.Status.Terminal() {
				require.True(t, fx.Callback, "an ending job calls its caller back")
				require.True(t, fx.ClearTimer, "an ending job keeps no timer")
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestFailAttemptBackoff: the retry waits the backoff (jitter applied), or
// the agent's longer Retry-After; the dead letter names the reason.
func TestFailAttemptBackoff(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	j := routedJob(t, 1, 2, false)
	fail := func(at time.Time) Event {
		return NewEvent(EventAttemptFailed, AttemptFailed{Attempt: 1, RetryAt: at}, Metadata{})
	}
	_, fx := FailAttempt(j, fail, 0, now, 0.5, Metadata{}, "x")
	require.Equal(t, now.Add(Backoff(2, time.Second, time.Minute, 0.5)), fx.Dispatch.At)
	_, fx = FailAttempt(j, fail, time.Hour, now, 0.5, Metadata{}, "x")
	require.Equal(t, now.Add(time.Hour), fx.Dispatch.At, "an agent's longer Retry-After wins")

	last := routedJob(t, 2, 2, false)
	evs, fx := FailAttempt(last, fail, 0, now, 0.5, Metadata{}, "http_503")
	require.Nil(t, fx.Dispatch)
	require.Equal(t, []EventType{EventAttemptFailed, EventDeadLetter}, types(evs))
	require.JSONEq(t, `{"attempts":2,"reason":"http_503","agent_id":"agent-1"}`, string(evs[1].Data))
}

// TestAnswerRetriesABusinessFailureWhenAsked: FAILED with retry_on_failed
// and attempts left is a new attempt; without attempts left it is FAILED.
func TestAnswerRetriesABusinessFailureWhenAsked(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	delivered := func(j *Job) *Job {
		require.NoError(t, j.Apply(NewEvent(EventDelivered, Delivered{Attempt: j.Attempts, AgentID: "agent-1"}, Metadata{})))
		return j
	}
	evs, fx := Answer(delivered(routedJob(t, 1, 3, true)), now.Add(-time.Second), StatusFailed, nil, "out_of_stock", "", now, 0, Metadata{})
	require.Equal(t, []EventType{EventAttemptFailed}, types(evs))
	require.NotNil(t, fx.Dispatch)
	require.True(t, fx.Sample.OK, "the agent answered: reach succeeded")
	evs, fx = Answer(delivered(routedJob(t, 3, 3, true)), now.Add(-time.Second), StatusFailed, nil, "out_of_stock", "", now, 0, Metadata{})
	require.Equal(t, []EventType{EventFailed}, types(evs))
	require.Nil(t, fx.Dispatch)
	evs, _ = Answer(delivered(routedJob(t, 1, 3, false)), now.Add(-1500*time.Millisecond), StatusSuccess, []byte(`{"ok":1}`), "", "", now, 0, Metadata{})
	require.JSONEq(t, `{"attempt":1,"agent_id":"agent-1","result":{"ok":1},"latency_ms":1500}`, string(evs[0].Data))
}

// TestTaskUpdate covers what an A2A task update does: on the open attempt,
// before the dispatcher recorded the delivery, on a decided job, on an
// earlier attempt.
func TestTaskUpdate(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	p := AttemptPolicy{InputTimeout: time.Hour}
	delivered := func(j *Job) *Job {
		require.NoError(t, j.Apply(NewEvent(EventDelivered, Delivered{Attempt: j.Attempts, AgentID: "agent-1", Async: true}, Metadata{})))
		return j
	}
	awaiting := func(j *Job) *Job {
		require.NoError(t, j.Apply(NewEvent(EventAwaitingInput, AwaitingInput{Attempt: j.Attempts, AgentID: "agent-1"}, Metadata{})))
		return j
	}
	succeeded := func(j *Job) *Job {
		require.NoError(t, j.Apply(NewEvent(EventSuccess, Outcome{Attempt: j.Attempts, AgentID: "agent-1"}, Metadata{})))
		return j
	}
	success := Observation{Kind: ObservedResult, Status: StatusSuccess}
	for _, tc := range []struct {
		name         string
		job          *Job
		attempt      int
		lastIsRouted bool
		obs          Observation
		want         []EventType
		rec          Recorded
		reason       string
	}{
		{"completed on the open attempt", delivered(routedJob(t, 1, 3, false)), 1, false, success, []EventType{EventSuccess}, RecordedOutcome, ""},
		{"completed before the delivery was recorded", routedJob(t, 1, 3, false), 1, true, success, []EventType{EventDelivered, EventSuccess}, RecordedOutcome, ""},
		{"working before the delivery was recorded", routedJob(t, 1, 3, false), 1, true, Observation{Kind: ObservedAccepted}, []EventType{EventDelivered}, RecordedOutcome, ""},
		{"working, already delivered", delivered(routedJob(t, 1, 3, false)), 1, false, Observation{Kind: ObservedAccepted}, nil, RecordedNothing, ""},
		{"input required", delivered(routedJob(t, 1, 3, false)), 1, false, Observation{Kind: ObservedAwaiting}, []EventType{EventAwaitingInput}, RecordedOutcome, ""},
		{"input required again", awaiting(delivered(routedJob(t, 1, 3, false))), 1, false, Observation{Kind: ObservedAwaiting}, nil, RecordedNothing, ""},
		{"working after input", awaiting(delivered(routedJob(t, 1, 3, false))), 1, false, Observation{Kind: ObservedAccepted}, []EventType{EventResumed}, RecordedOutcome, ""},
		{"rejected", delivered(routedJob(t, 1, 3, false)), 1, false, Observation{Kind: ObservedRejected, Reason: ReasonRejected}, []EventType{EventAttemptFailed}, RecordedOutcome, ""},
		{"cancelled", delivered(routedJob(t, 1, 3, false)), 1, false, Observation{Kind: ObservedCancelled}, []EventType{EventCancelled}, RecordedOutcome, ""},
		{"completed twice", succeeded(delivered(routedJob(t, 1, 3, false))), 1, false, success, []EventType{EventResultDuplicate}, RecordedDuplicate, "duplicate"},
		{"an earlier attempt", delivered(routedJob(t, 2, 3, false)), 1, false, success, []EventType{EventResultDuplicate}, RecordedDuplicate, "stale_attempt"},
		{"working on a decided job", succeeded(delivered(routedJob(t, 1, 3, false))), 1, false, Observation{Kind: ObservedAccepted}, nil, RecordedNothing, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.job.LastRouted = tc.lastIsRouted
			evs, _, rec := TaskUpdate(tc.job, tc.attempt, "agent-1", now.Add(-time.Second), "task-1", tc.obs, now, 0, p, Metadata{})
			require.Equal(t, tc.want, nilIfEmpty(types(evs)))
			require.Equal(t, tc.rec, rec)
			after := *tc.job
			for _, e := range evs {
				require.NoError(t, after.Apply(e), "the fold accepts %s", e.Type)
			}
			if tc.reason != "" {
				require.Contains(t, string(evs[0].Data), `"reason":"`+tc.reason+`"`)
			}
		})
	}
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

// TestDueTimer covers every timer phase, due while its condition holds and
// due after the job moved on (then the timer is only dropped).
func TestDueTimer(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	p := AttemptPolicy{InputTimeout: time.Hour}
	apply := func(j *Job, evs ...Event) *Job {
		for _, e := range evs {
			require.NoError(t, j.Apply(e))
		}
		return j
	}
	submitted := func() *Job {
		var j Job
		return apply(&j, NewEvent(EventSubmitted, Submitted{Namespace: "n", Capability: "c", MaxAttempts: 3, TimeoutMS: 1000,
			BackoffBaseMS: 1000, BackoffMaxMS: 60000, CallbackURL: "http://127.0.0.1:9/cb"}, Metadata{}))
	}
	failed1 := func() *Job {
		return apply(routedJob(t, 1, 3, false), NewEvent(EventAttemptFailed, AttemptFailed{Attempt: 1, AgentID: "agent-1", Reason: "x"}, Metadata{}))
	}
	delivered := func() *Job {
		return apply(routedJob(t, 1, 3, false), NewEvent(EventDelivered, Delivered{Attempt: 1, AgentID: "agent-1", Async: true}, Metadata{}))
	}
	awaitingApproval := func() *Job {
		return apply(submitted(), NewEvent(EventAwaitingApproval, AwaitingApproval{}, Metadata{}))
	}
	awaitingInput := func() *Job {
		return apply(delivered(), NewEvent(EventAwaitingInput, AwaitingInput{Attempt: 1, AgentID: "agent-1"}, Metadata{}))
	}
	done := func() *Job {
		return apply(submitted(), NewEvent(EventRouted, Routed{Attempt: 1, AgentID: "agent-1"}, Metadata{}),
			NewEvent(EventDelivered, Delivered{Attempt: 1, AgentID: "agent-1"}, Metadata{}),
			NewEvent(EventSuccess, Outcome{Attempt: 1, AgentID: "agent-1"}, Metadata{}))
	}
	for _, tc := range []struct {
		name       string
		job        *Job
		timer      Timer
		lastRouted bool
		do         TimerDo
		want       []EventType
		report     string
	}{
		{"the first dispatch, queued", submitted(), Timer{Attempt: 1, Phase: PhaseQueued}, false, TimerRedispatch, nil, ""},
		{"waiting for its ordering key's turn", submitted(), Timer{Attempt: 1, Phase: PhaseOrdered}, false, TimerOrdered, nil, ""},
		{"its turn came and went", delivered(), Timer{Attempt: 1, Phase: PhaseOrdered}, false, TimerDrop, nil, ""},
		{"a retry's wait over", failed1(), Timer{Attempt: 2, Phase: PhaseRetry}, false, TimerDispatch, nil, ""},
		{"a retry already under way", failed1(), Timer{Attempt: 1, Phase: PhaseRetry}, false, TimerDrop, nil, ""},
		{"the callback not run", done(), Timer{Phase: PhaseCallback}, false, TimerRequeueCallback, nil, ""},
		{"approval timed out", awaitingApproval(), Timer{Attempt: 1, Phase: PhaseApproval}, false, TimerAppend, []EventType{EventRejected}, "rejected"},
		{"approval decided meanwhile", submitted(), Timer{Attempt: 1, Phase: PhaseApproval}, false, TimerDrop, nil, ""},
		{"input timed out", awaitingInput(), Timer{Attempt: 1, Phase: PhaseInput}, false, TimerAppend, []EventType{EventCancelled}, "input_timeout"},
		{"the deadline passed", delivered(), Timer{Attempt: 1, Phase: PhaseDelivered}, false, TimerAppend, []EventType{EventTimeout}, "timeout"},
		{"the deadline of an earlier attempt", delivered(), Timer{Attempt: 0, Phase: PhaseDelivered}, false, TimerDrop, nil, ""},
		{"the dispatcher lost", routedJob(t, 1, 3, false), Timer{Attempt: 1, Phase: PhaseRouted}, true, TimerAppend, []EventType{EventAttemptFailed}, "lost"},
		{"the dispatcher recorded it", delivered(), Timer{Attempt: 1, Phase: PhaseRouted}, false, TimerDrop, nil, ""},
		{"a finished job's deadline", done(), Timer{Attempt: 1, Phase: PhaseDelivered}, false, TimerDrop, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.job.LastRouted = tc.lastRouted
			d := DueTimer(tc.job, tc.timer, 12, now, 0, p, Metadata{})
			require.Equal(t, tc.do, d.Do)
			require.Equal(t, tc.want, nilIfEmpty(types(d.Events)))
			require.Equal(t, tc.report, d.Report)
			after := *tc.job
			for _, e := range d.Events {
				require.NoError(t, after.Apply(e), "the fold accepts %s", e.Type)
			}
		})
	}
}

// TestResult: a result decides the open attempt, or one whose 202 the
// dispatcher has not recorded yet; a second, late or stale one is a
// RESULT_DUPLICATE that changes nothing.
func TestResult(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	delivered := func(j *Job) *Job {
		require.NoError(t, j.Apply(NewEvent(EventDelivered, Delivered{Attempt: j.Attempts, AgentID: "agent-1", Async: true}, Metadata{})))
		return j
	}
	for _, tc := range []struct {
		name       string
		job        *Job
		attempt    int
		lastRouted bool
		want       []EventType
		rec        Recorded
		reason     string
	}{
		{"the open attempt", delivered(routedJob(t, 1, 3, false)), 1, false, []EventType{EventSuccess}, RecordedOutcome, ""},
		{"before the 202 was recorded", routedJob(t, 1, 3, false), 1, true, []EventType{EventDelivered, EventSuccess}, RecordedOutcome, ""},
		{"an earlier attempt", delivered(routedJob(t, 2, 3, false)), 1, false, []EventType{EventResultDuplicate}, RecordedDuplicate, "stale_attempt"},
		{"a failed attempt's late result", routedJob(t, 2, 3, false), 2, false, []EventType{EventResultDuplicate}, RecordedDuplicate, "late"},
	} {
		tc.job.LastRouted = tc.lastRouted
		evs, _, rec := Result(tc.job, tc.attempt, "agent-1", now.Add(-time.Second), StatusSuccess, nil, "", now, 0, Metadata{})
		require.Equal(t, tc.want, types(evs), tc.name)
		require.Equal(t, tc.rec, rec, tc.name)
		if tc.reason != "" {
			require.Contains(t, string(evs[0].Data), `"reason":"`+tc.reason+`"`, tc.name)
		}
		after := *tc.job
		for _, e := range evs {
			require.NoError(t, after.Apply(e), "%s: the fold accepts %s", tc.name, e.Type)
		}
	}
	done := delivered(routedJob(t, 1, 3, false))
	evs, _, _ := Result(done, 1, "agent-1", now, StatusSuccess, nil, "", now, 0, Metadata{})
	require.NoError(t, done.Apply(evs[0]))
	evs, _, rec := Result(done, 1, "agent-1", now, StatusSuccess, nil, "", now, 0, Metadata{})
	require.Equal(t, RecordedDuplicate, rec)
	require.Contains(t, string(evs[0].Data), `"reason":"duplicate"`)
}

// TestJustRouted: "the attempt is routed and nothing recorded of it since"
// is a fact of the fold, true after its ROUTED and false after any later
// event, and only for the latest attempt.
func TestJustRouted(t *testing.T) {
	t.Parallel()
	j := routedJob(t, 2, 3, false)
	require.True(t, j.JustRouted(2))
	require.False(t, j.JustRouted(1), "not the latest attempt")
	for _, tc := range []struct {
		next Event
		want bool
	}{
		{NewEvent(EventDelivered, Delivered{Attempt: 2, AgentID: "agent-1", Async: true}, Metadata{}), false},
		{NewEvent(EventAttemptFailed, AttemptFailed{Attempt: 2, AgentID: "agent-1", Reason: "x"}, Metadata{}), false},
		{NewEvent(EventCancelled, Cancelled{Reason: "r"}, Metadata{}), false},
	} {
		after := *j
		require.NoError(t, after.Apply(tc.next))
		require.Equal(t, tc.want, after.JustRouted(2), tc.next.Type)
	}
	var fresh Job
	require.False(t, fresh.JustRouted(0), "a job with no attempt")
}

func TestSubmitEvents(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	sub := Submitted{JobID: "j", Namespace: "n", Capability: "c"}
	evs, status := SubmitEvents(sub, false, now, time.Hour, Metadata{})
	require.Equal(t, []EventType{EventSubmitted}, types(evs))
	require.Equal(t, StatusSubmitted, status)

	sub.Resolution = &IntentResolution{Capability: "c"}
	evs, status = SubmitEvents(sub, true, now, time.Hour, Metadata{})
	require.Equal(t, []EventType{EventSubmitted, EventIntentResolved, EventAwaitingApproval}, types(evs))
	require.Equal(t, StatusAwaitingApproval, status)
	var aa AwaitingApproval
	require.NoError(t, json.Unmarshal(evs[2].Data, &aa))
	require.Equal(t, now.Add(time.Hour), aa.Until)
	j, err := FoldJob(evs)
	require.NoError(t, err)
	require.Equal(t, status, j.Status, "the status answered is the fold's")
}

func TestCanStart(t *testing.T) {
	t.Parallel()
	fresh := func() *Job {
		var j Job
		require.NoError(t, j.Apply(NewEvent(EventSubmitted, Submitted{Namespace: "n", Capability: "c", MaxAttempts: 3, TimeoutMS: 1000}, Metadata{})))
		return &j
	}
	failed := routedJob(t, 1, 3, false)
	require.NoError(t, failed.Apply(NewEvent(EventAttemptFailed, AttemptFailed{Attempt: 1, AgentID: "agent-1", Reason: "x"}, Metadata{})))
	delivered := routedJob(t, 1, 3, false)
	require.NoError(t, delivered.Apply(NewEvent(EventDelivered, Delivered{Attempt: 1, AgentID: "agent-1", Async: true}, Metadata{})))
	cancelled := fresh()
	require.NoError(t, cancelled.Apply(NewEvent(EventCancelled, Cancelled{Reason: "r"}, Metadata{})))
	for _, tc := range []struct {
		name    string
		job     *Job
		attempt int
		want    bool
	}{
		{"the first attempt of a new job", fresh(), 1, true},
		{"not the next attempt", fresh(), 2, false},
		{"the attempt is under way", routedJob(t, 1, 3, false), 1, false},
		{"the next attempt while one is under way", routedJob(t, 1, 3, false), 2, false},
		{"a retry after a failed attempt", failed, 2, true},
		{"the attempt was delivered", delivered, 2, false},
		{"the job moved on", cancelled, 1, false},
	} {
		require.Equal(t, tc.want, tc.job.CanStart(tc.attempt), tc.name)
	}
}

func TestNewRouted(t *testing.T) {
	t.Parallel()
	route := RouteResult{Chosen: "a", Candidates: []RouteCandidate{{AgentID: "a"}}}
	e := NewRouted(2, route, Metadata{Actor: "dispatcher"})
	require.Equal(t, EventRouted, e.Type)
	var r Routed
	require.NoError(t, json.Unmarshal(e.Data, &r))
	require.Equal(t, 2, r.Attempt)
	require.Equal(t, "a", r.AgentID)
	require.NotEmpty(t, r.Route)
	none := NewRouted(1, RouteResult{}, Metadata{})
	require.NoError(t, json.Unmarshal(none.Data, &r))
	require.Empty(t, r.AgentID, "no agent could take it")
}

func TestApprovalAndCancel(t *testing.T) {
	t.Parallel()
	awaiting := func() *Job {
		evs, _ := SubmitEvents(Submitted{Namespace: "n", Capability: "c", MaxAttempts: 1}, true, time.Now(), time.Hour, Metadata{})
		j, err := FoldJob(evs)
		require.NoError(t, err)
		return &j
	}
	evs, fx, err := Approval(awaiting(), true, "ok", Metadata{})
	require.NoError(t, err)
	require.Equal(t, []EventType{EventApproved}, types(evs))
	require.Equal(t, &QueuedAttempt{Attempt: 1}, fx.Queue, "an approved job's first attempt is queued")
	require.False(t, fx.Callback)
	evs, fx, err = Approval(awaiting(), false, "no", Metadata{})
	require.NoError(t, err)
	require.Equal(t, []EventType{EventRejected}, types(evs))
	require.Nil(t, fx.Queue)
	require.True(t, fx.Callback && fx.ClearTimer)
	_, _, err = Approval(routedJob(t, 1, 1, false), true, "", Metadata{})
	require.ErrorIs(t, err, ErrConflict, "a job that does not await approval")

	evs, fx, err = Cancel(routedJob(t, 1, 1, false), "", Metadata{Actor: "key:k1"})
	require.NoError(t, err)
	require.Equal(t, []EventType{EventCancelled}, types(evs))
	require.True(t, fx.Callback && fx.ClearTimer)
	var c Cancelled
	require.NoError(t, json.Unmarshal(evs[0].Data, &c))
	require.Equal(t, "cancelled by key:k1", c.Reason)
	done := routedJob(t, 1, 1, false)
	require.NoError(t, done.Apply(evs[0]))
	_, _, err = Cancel(done, "again", Metadata{})
	require.ErrorIs(t, err, ErrConflict, "a job that ended")
}
