package domain

import (
	"encoding/json"
	"time"
)

// The decisions of an attempt's life: pure functions from the job's fold,
// what was observed, the policy, the time and a jitter source to the events
// to append and their effects. jobs does the I/O around them: load, route,
// call, append, complete.

// ObservationKind says what a delivery saw of its agent.
type ObservationKind string

// The observations.
const (
	ObservedResult   ObservationKind = "result"   // 200 with SUCCESS or FAILED
	ObservedAccepted ObservationKind = "accepted" // 202: the result comes later
	ObservedHung     ObservationKind = "hung"     // delivered, no answer by the deadline
	ObservedFailed   ObservationKind = "failed"   // not delivered
	ObservedPaused   ObservationKind = "paused"   // 429 or 503 with Retry-After: not taken, ask again later
	// A2A agents only:
	ObservedRejected  ObservationKind = "rejected"  // the agent refused the task: route elsewhere
	ObservedCancelled ObservationKind = "cancelled" // the agent cancelled the task
	ObservedAwaiting  ObservationKind = "awaiting"  // the agent needs input
)

// Observation is what one delivery saw.
type Observation struct {
	Kind       ObservationKind
	Status     JobStatus // ObservedResult: SUCCESS or FAILED
	Result     json.RawMessage
	BizCode    string
	Reason     string // why it failed (ObservedFailed, ObservedRejected)
	ErrText    string
	RetryAfter time.Duration // the agent's Retry-After, if any
	// HTTPStatus is the status of the agent's HTTP answer (0: none, or
	// not HTTP), and Body the first bytes of an answer that was not a
	// usable result, kept so an operator sees what the agent said.
	HTTPStatus int
	Body       string
	// A2A: the agent's task id, whether to poll it, and an interrupted state.
	RemoteTaskID string
	Poll         bool
	A2AState     string
}

// AttemptPolicy is what the attempt decisions need of the service's
// configuration.
type AttemptPolicy struct {
	// InputTimeout bounds how long an agent may await the caller's input.
	InputTimeout time.Duration
}

// FailAttempt decides what follows an attempt of j that produced no usable
// answer: a retry after backoff (jitter in [0, 1) spreads it), or, with no
// attempts left, the dead letter. failure builds the attempt's own event
// (ATTEMPT_FAILED or TIMEOUT) with the retry time, zero when there is none;
// retryAfter is the agent's Retry-After, if any.
func FailAttempt(j *Job, failure func(retryAt time.Time) Event, retryAfter time.Duration, now time.Time, jitter float64, md Metadata, reason string) ([]Event, Effects) {
	fx := Effects{ClearTimer: true, Callback: true}
	if j.CanRetry() {
		at := now.Add(RetryAfter(Backoff(j.Spent()+1, j.BackoffBase(), j.BackoffMax(), jitter), retryAfter))
		fx.Dispatch = &NextDispatch{Attempt: j.Attempts + 1, At: at}
		return []Event{failure(at)}, fx
	}
	return []Event{failure(time.Time{}),
		NewEvent(EventDeadLetter, DeadLettered{Attempts: j.Attempts, Reason: reason, AgentID: j.AgentID}, md)}, fx
}

// Reroute ends an attempt its agent refused (REJECTED, or an incompatible
// operation) and routes the job again at once, away from that agent; with
// no attempts left it is dead-lettered.
func Reroute(j *Job, failure func(retryAt time.Time) Event, now time.Time, md Metadata, reason string) ([]Event, Effects) {
	fx := Effects{ClearTimer: true, Callback: true}
	if j.CanRetry() {
		fx.Dispatch = &NextDispatch{Attempt: j.Attempts + 1, At: now}
		return []Event{failure(now)}, fx
	}
	return []Event{failure(time.Time{}),
		NewEvent(EventDeadLetter, DeadLettered{Attempts: j.Attempts, Reason: reason, AgentID: j.AgentID}, md)}, fx
}

// Answer turns an agent's answer for j's current, delivered attempt
// (routed at routedAt) into events: SUCCESS or FAILED, or, for a FAILED
// that the caller asked to retry while attempts are left, ATTEMPT_FAILED and
// a new attempt. errText is the agent's own words for a failure, if any
// (an A2A agent's failed status message).
func Answer(j *Job, routedAt time.Time, status JobStatus, result []byte, bizCode, errText string, now time.Time, jitter float64,
	md Metadata) ([]Event, Effects) {
	out := Outcome{Attempt: j.Attempts, AgentID: j.AgentID, Result: result, BizCode: bizCode,
		LatencyMS: float64(now.Sub(routedAt).Microseconds()) / 1000}
	if status == StatusFailed {
		out.Error = errText
	}
	smp := &Sample{AgentID: j.AgentID, At: now, OK: true}
	if status == StatusFailed && j.RetryOnFailed && j.CanRetry() {
		evs, fx := FailAttempt(j, func(at time.Time) Event {
			return NewEvent(EventAttemptFailed, AttemptFailed{Attempt: j.Attempts, AgentID: j.AgentID,
				Reason: "business_failure", BizCode: bizCode, Error: errText, RetryAt: at}, md)
		}, 0, now, jitter, md, "business_failure")
		fx.Sample = smp
		return evs, fx
	}
	t := EventSuccess
	if status == StatusFailed {
		t = EventFailed
	}
	return []Event{NewEvent(t, out, md)}, Effects{ClearTimer: true, Sample: smp, Callback: true}
}

// InputTimer replaces an attempt's deadline while its agent awaits input:
// the caller has the policy's InputTimeout to answer.
func InputTimer(attempt int, agentID string, now time.Time, p AttemptPolicy) *Timer {
	return &Timer{Attempt: attempt, AgentID: agentID, Phase: PhaseInput, Due: now.Add(p.InputTimeout)}
}

// Delivery decides what a delivery of j's current attempt (routed at
// routedAt, due by deadline, answered after latency) did, from what it
// observed: DELIVERED and the answer's events, DELIVERED with a timer at
// the deadline for a 202, a failed or timed-out attempt with a retry or the
// dead letter, a re-route of a refused one.
func Delivery(j *Job, routedAt time.Time, obs Observation, deadline time.Time, latency time.Duration, now time.Time, jitter float64, p AttemptPolicy, md Metadata) ([]Event, Effects) {
	attempt, agentID := j.Attempts, j.AgentID
	delivered := NewEvent(EventDelivered, Delivered{Attempt: attempt, AgentID: agentID, Deadline: deadline,
		Async: obs.Kind == ObservedAccepted || obs.Kind == ObservedAwaiting, LatencyMS: float64(latency.Microseconds()) / 1000,
		RemoteTaskID: obs.RemoteTaskID, HTTPStatus: obs.HTTPStatus}, md)
	afterDelivered := func() *Job {
		after := *j
		_ = after.Apply(delivered) // the routed attempt may always be delivered
		return &after
	}
	poll := 0
	if obs.Poll && obs.RemoteTaskID != "" {
		poll = attempt
	}
	switch obs.Kind {
	case ObservedResult:
		evs, fx := Answer(afterDelivered(), routedAt, obs.Status, obs.Result, obs.BizCode, obs.ErrText, now, jitter, md)
		return append([]Event{delivered}, evs...), fx
	case ObservedAccepted:
		return []Event{delivered}, Effects{Timer: &Timer{Attempt: attempt, AgentID: agentID, Phase: PhaseDelivered, Due: deadline}, Poll: poll}
	case ObservedAwaiting:
		return []Event{delivered, NewEvent(EventAwaitingInput, AwaitingInput{Attempt: attempt,
			AgentID: agentID, State: obs.A2AState, Message: obs.Result}, md)}, Effects{Timer: InputTimer(attempt, agentID, now, p), Poll: poll}
	case ObservedCancelled:
		return []Event{delivered, NewEvent(EventCancelled, Cancelled{Reason: "cancelled by agent " + agentID}, md)},
			Effects{ClearTimer: true, Callback: true}
	case ObservedRejected:
		failure := func(at time.Time) Event {
			return NewEvent(EventAttemptFailed, AttemptFailed{Attempt: attempt, AgentID: agentID,
				Reason: obs.Reason, Error: obs.ErrText, RetryAt: at}, md)
		}
		if obs.Reason == ReasonIncompatible { // refused before taking it: not delivered
			return Reroute(j, failure, now, md, obs.Reason)
		}
		evs, fx := Reroute(afterDelivered(), failure, now, md, obs.Reason)
		return append([]Event{delivered}, evs...), fx
	case ObservedPaused:
		return Paused(j, obs, now, md)
	case ObservedHung:
		evs, fx := FailAttempt(j, func(at time.Time) Event {
			return NewEvent(EventTimeout, TimedOut{Attempt: attempt, AgentID: agentID, Deadline: deadline, RetryAt: at}, md)
		}, 0, now, jitter, md, "timeout")
		fx.Sample = &Sample{AgentID: agentID, At: now, OK: false}
		return append([]Event{delivered}, evs...), fx
	}
	evs, fx := FailAttempt(j, func(at time.Time) Event {
		return NewEvent(EventAttemptFailed, AttemptFailed{Attempt: attempt, AgentID: agentID,
			Reason: obs.Reason, Error: obs.ErrText, RetryAt: at, HTTPStatus: obs.HTTPStatus,
			LatencyMS: float64(latency.Microseconds()) / 1000, Body: obs.Body}, md)
	}, obs.RetryAfter, now, jitter, md, obs.Reason)
	fx.Sample = &Sample{AgentID: agentID, At: now, OK: false}
	return evs, fx
}

// Paused ends an attempt whose agent answered "not now" (obs: a 429 or
// 503 with Retry-After) before taking it: the agent is paused until then,
// the attempt is not spent (up to MaxAttempts of them, as an unclaimed
// one) and no failure is counted against the agent (no sample), and the
// job is routed again at once, to another agent or to wait.
func Paused(j *Job, obs Observation, now time.Time, md Metadata) ([]Event, Effects) {
	until := now.Add(obs.RetryAfter)
	after := *j
	if after.Unspent < after.MaxAttempts {
		after.Unspent++ // as the fold will count it
	}
	attempt, agentID := j.Attempts, j.AgentID
	evs, fx := Reroute(&after, func(at time.Time) Event {
		return NewEvent(EventAttemptFailed, AttemptFailed{Attempt: attempt, AgentID: agentID, Reason: ReasonAgentPaused,
			Error: obs.ErrText, RetryAt: at, HTTPStatus: obs.HTTPStatus, PausedUntil: until}, md)
	}, now, md, ReasonAgentPaused)
	fx.Pause = &AgentPause{AgentID: agentID, Until: until}
	return evs, fx
}

// Recorded says what a report of an attempt (a result, an A2A task
// update) did to its job.
type Recorded string

// What a report can do.
const (
	// RecordedNothing: the report changed nothing and is not recorded.
	RecordedNothing Recorded = ""
	// RecordedOutcome: the report decided the attempt (or moved it on).
	RecordedOutcome Recorded = "outcome"
	// RecordedDuplicate: the attempt was already decided (or is not the
	// latest); the report is kept in the log and changes nothing.
	RecordedDuplicate Recorded = "duplicate"
)

// TaskUpdate decides what an update of attempt's A2A task (pushed, or read
// by polling), seen as obs, does to j (whose latest attempt was routed at
// routedAt; perhaps with nothing recorded of it since, Job.JustRouted): the events
// to append (none when it changes nothing), their effects and what it
// recorded. taskID is the agent's task id.
func TaskUpdate(j *Job, attempt int, agentID string, routedAt time.Time, taskID string, obs Observation,
	now time.Time, jitter float64, p AttemptPolicy, md Metadata) ([]Event, Effects, Recorded) {
	latest := attempt == j.Attempts
	var pre []Event
	cur := *j
	if latest && j.Status == StatusSubmitted && j.JustRouted(attempt) {
		// The update beat the dispatcher's record of the delivery.
		d := NewEvent(EventDelivered, Delivered{Attempt: attempt, AgentID: agentID,
			Deadline: now.Add(j.Timeout()), Async: true, RemoteTaskID: taskID}, md)
		if err := cur.Apply(d); err == nil {
			pre = append(pre, d)
		}
	}
	terminal := obs.Kind == ObservedResult || obs.Kind == ObservedRejected || obs.Kind == ObservedCancelled
	open := latest && (cur.Status == StatusDelivered || cur.Status == StatusAwaitingInput)
	if !open {
		if !terminal || (obs.Kind == ObservedCancelled && j.Status == StatusCancelled) {
			return nil, Effects{}, RecordedNothing
		}
		reason := "late"
		if latest && j.Status.Terminal() {
			reason = "duplicate"
		} else if !latest {
			reason = "stale_attempt"
		}
		status := StatusFailed
		if obs.Kind == ObservedResult && obs.Status == StatusSuccess {
			status = StatusSuccess
		}
		return []Event{NewEvent(EventResultDuplicate, ResultDuplicate{
			Attempt: attempt, Status: status, Reason: reason, Result: obs.Result}, md)}, Effects{}, RecordedDuplicate
	}
	var evs []Event
	var fx Effects
	switch obs.Kind {
	case ObservedResult:
		evs, fx = Answer(&cur, routedAt, obs.Status, obs.Result, obs.BizCode, obs.ErrText, now, jitter, md)
	case ObservedRejected:
		evs, fx = Reroute(&cur, func(at time.Time) Event {
			return NewEvent(EventAttemptFailed, AttemptFailed{Attempt: attempt, AgentID: agentID,
				Reason: obs.Reason, Error: obs.ErrText, RetryAt: at}, md)
		}, now, md, obs.Reason)
	case ObservedCancelled:
		evs = []Event{NewEvent(EventCancelled, Cancelled{Reason: "cancelled by agent " + agentID}, md)}
		fx = Effects{ClearTimer: true, Callback: true}
	case ObservedAwaiting:
		if cur.Status != StatusAwaitingInput {
			evs = []Event{NewEvent(EventAwaitingInput, AwaitingInput{Attempt: attempt, AgentID: agentID,
				State: obs.A2AState, Message: obs.Result}, md)}
			fx = Effects{Timer: InputTimer(attempt, agentID, now, p)}
		}
	case ObservedAccepted:
		if cur.Status == StatusAwaitingInput {
			deadline := now.Add(j.Timeout())
			evs = []Event{NewEvent(EventResumed, Resumed{Attempt: attempt, AgentID: agentID, Deadline: deadline}, md)}
			fx = Effects{Timer: &Timer{Attempt: attempt, AgentID: agentID, Phase: PhaseDelivered, Due: deadline}}
		} else if len(pre) > 0 {
			fx = Effects{Timer: &Timer{Attempt: attempt, AgentID: agentID, Phase: PhaseDelivered, Due: cur.Deadline}}
		}
	}
	if len(pre)+len(evs) == 0 {
		return nil, Effects{}, RecordedNothing
	}
	return append(pre, evs...), fx, RecordedOutcome
}

// TimerDo is what a due timer asks of the service.
type TimerDo int

// What a due timer asks.
const (
	// TimerDrop: the timer's work is done (the job moved on): delete it.
	TimerDrop TimerDo = iota
	// TimerDispatch: the retry's wait is over: enqueue its dispatch.
	TimerDispatch
	// TimerRedispatch: the queued dispatch should have started: enqueue
	// it again, unless River still holds it alive (then wait longer).
	TimerRedispatch
	// TimerRequeueCallback: the queued callback should have run: queue it
	// again, unless River still holds it alive (then wait longer).
	TimerRequeueCallback
	// TimerAppend: append Events with Effects.
	TimerAppend
	// TimerOrdered: a job waiting for its turn among its ordering key's
	// looks whether it came: if so its first attempt is queued
	// (TimerDispatch), else it waits another OrderedRecheck.
	TimerOrdered
)

// TimerDecision is what to do about a due timer.
type TimerDecision struct {
	Do      TimerDo
	Events  []Event
	Effects Effects
	// Report names, for the sweep's report, what TimerAppend did.
	Report string
	// CancelAtAgent: the job was cancelled while an A2A agent held its
	// task; tell the agent (a courtesy).
	CancelAtAgent bool
}

// DueTimer decides what a due timer t of job j does. lastRouted: j's latest
// event is a ROUTED (nothing was recorded of that attempt since);
// callbackMax is how many callbacks are tried before giving up.
func DueTimer(j *Job, t Timer, callbackMax int, now time.Time, jitter float64, p AttemptPolicy, md Metadata) TimerDecision {
	// The next attempt waits: the previous one ended and nothing started since.
	waiting := (j.Status == StatusSubmitted || j.Status == StatusTimeout) && j.Attempts == t.Attempt-1 &&
		(j.Attempts == 0 || !j.LastRouted)
	switch {
	case t.Phase == PhaseRetry && waiting:
		return TimerDecision{Do: TimerDispatch}
	case t.Phase == PhaseQueued && waiting:
		return TimerDecision{Do: TimerRedispatch}
	case t.Phase == PhaseOrdered && waiting:
		return TimerDecision{Do: TimerOrdered}
	case t.Phase == PhaseCallback && j.Status.Terminal() && j.CallbackURL != "" && !j.CallbackAcked && !j.CallbackGaveUp &&
		j.Callbacks < callbackMax:
		return TimerDecision{Do: TimerRequeueCallback}
	case t.Phase == PhaseApproval && j.Status == StatusAwaitingApproval:
		return TimerDecision{Do: TimerAppend, Report: "rejected", Effects: Effects{ClearTimer: true, Callback: true},
			Events: []Event{NewEvent(EventRejected, Decided{Reason: "no approval decision before the approval timeout"}, md)}}
	case t.Phase == PhaseInput && j.Status == StatusAwaitingInput && j.Attempts == t.Attempt:
		return TimerDecision{Do: TimerAppend, Report: "input_timeout", Effects: Effects{ClearTimer: true, Callback: true},
			Events: []Event{NewEvent(EventCancelled, Cancelled{Reason: "input_timeout: the agent's request for input was not answered within " +
				p.InputTimeout.String()}, md)}, CancelAtAgent: j.RemoteTaskID != ""}
	case t.Phase == PhaseDelivered && j.Status == StatusDelivered && j.Attempts == t.Attempt:
		evs, fx := FailAttempt(j, func(at time.Time) Event {
			return NewEvent(EventTimeout, TimedOut{Attempt: t.Attempt, AgentID: j.AgentID, Deadline: t.Due, RetryAt: at}, md)
		}, 0, now, jitter, md, "timeout")
		fx.Sample = &Sample{AgentID: j.AgentID, At: now, OK: false}
		return TimerDecision{Do: TimerAppend, Report: "timeout", Events: evs, Effects: fx}
	case t.Phase == PhaseInbox && j.Status == StatusSubmitted && j.JustRouted(t.Attempt):
		return notClaimed(j, t, now, md)
	case t.Phase == PhaseRouted && j.Status == StatusSubmitted && j.JustRouted(t.Attempt):
		evs, fx := FailAttempt(j, func(at time.Time) Event {
			return NewEvent(EventAttemptFailed, AttemptFailed{Attempt: t.Attempt, AgentID: j.AgentID,
				Reason: "dispatcher_lost", Error: "the dispatcher recorded no outcome by the deadline", RetryAt: at}, md)
		}, 0, now, jitter, md, "dispatcher_lost")
		return TimerDecision{Do: TimerAppend, Report: "lost", Events: evs, Effects: fx}
	}
	return TimerDecision{Do: TimerDrop}
}

// Result decides what an agent's reported result for attempt of j (routed
// at routedAt; Job.JustRouted when nothing is recorded of it since) does: it decides
// the latest, delivered attempt (or one whose delivery the dispatcher has
// not recorded yet, as a 202 it answered); anything else (a second result,
// a late one, one for an earlier attempt) is recorded as RESULT_DUPLICATE
// and changes nothing.
func Result(j *Job, attempt int, agentID string, routedAt time.Time, status JobStatus, result []byte, bizCode string,
	now time.Time, jitter float64, md Metadata) ([]Event, Effects, Recorded) {
	latest := attempt == j.Attempts
	switch {
	case latest && j.Status == StatusDelivered:
		evs, fx := Answer(j, routedAt, status, result, bizCode, "", now, jitter, md)
		return evs, fx, RecordedOutcome
	case latest && j.Status == StatusSubmitted && j.JustRouted(attempt):
		// The result beat the dispatcher's record of the 202.
		delivered := NewEvent(EventDelivered, Delivered{Attempt: attempt, AgentID: agentID, Deadline: now, Async: true}, md)
		after := *j
		if err := after.Apply(delivered); err == nil {
			evs, fx := Answer(&after, routedAt, status, result, bizCode, "", now, jitter, md)
			return append([]Event{delivered}, evs...), fx, RecordedOutcome
		}
	}
	reason := "late"
	if j.Status.Terminal() && latest {
		reason = "duplicate"
	} else if !latest {
		reason = "stale_attempt"
	}
	return []Event{NewEvent(EventResultDuplicate, ResultDuplicate{Attempt: attempt, Status: status, Reason: reason, Result: result}, md)},
		Effects{}, RecordedDuplicate
}

// SubmitEvents are the first events of a job's stream: SUBMITTED, the
// INTENT_RESOLVED of a capability that came from the caller's intent, and
// AWAITING_APPROVAL until now plus approvalTimeout when the capability
// needs an approval. It answers the job's status after them.
func SubmitEvents(sub Submitted, needsApproval bool, now time.Time, approvalTimeout time.Duration, md Metadata) ([]Event, JobStatus) {
	evs := []Event{NewEvent(EventSubmitted, sub, md)}
	if sub.Resolution != nil {
		evs = append(evs, NewEvent(EventIntentResolved, sub.Resolution, md))
	}
	if !needsApproval {
		return evs, StatusSubmitted
	}
	evs = append(evs, NewEvent(EventAwaitingApproval, AwaitingApproval{Until: now.UTC().Add(approvalTimeout)}, md))
	return evs, StatusAwaitingApproval
}

// CanStart reports whether a dispatch of attempt may start on j: it is
// the next attempt, the job waits for one (SUBMITTED, or TIMEOUT before a
// retry), and the latest attempt is not under way. A dispatch that may not
// is stale (the attempt started already, or the job moved on) and does
// nothing.
func (j *Job) CanStart(attempt int) bool {
	return attempt == j.Attempts+1 && (j.Status == StatusSubmitted || j.Status == StatusTimeout) &&
		(j.Attempts == 0 || !j.JustRouted(j.Attempts))
}

// NewRouted is the ROUTED of attempt: the agent route chose (none: no
// agent could take it) and the route's explanation, with only its
// candidates' non-zero score terms.
func NewRouted(attempt int, route RouteResult, md Metadata) Event {
	explained, _ := json.Marshal(route.Recorded())
	return NewEvent(EventRouted, Routed{Attempt: attempt, AgentID: route.Chosen, Route: explained}, md)
}

// Approval decides an approver's answer for j: APPROVED (the job is then
// dispatched: its first attempt queued) or REJECTED (terminal: the timer is cleared and
// the caller called back). A job that does not await approval is of the
// kind ErrConflict.
func Approval(j *Job, approve bool, reason string, md Metadata) (evs []Event, fx Effects, err error) {
	if j.Status != StatusAwaitingApproval {
		return nil, Effects{}, NewError(ErrConflict, "the job is "+string(j.Status)+", not awaiting approval")
	}
	if approve {
		return []Event{NewEvent(EventApproved, Decided{Reason: reason}, md)}, Effects{Queue: &QueuedAttempt{Attempt: 1}}, nil
	}
	return []Event{NewEvent(EventRejected, Decided{Reason: reason}, md)}, Effects{ClearTimer: true, Callback: true}, nil
}

// Cancel decides a cancel of j by md.Actor: CANCELLED (its reason, or who
// cancelled it), clearing the timer and calling the caller back. A job
// that already ended is of the kind ErrConflict.
func Cancel(j *Job, reason string, md Metadata) ([]Event, Effects, error) {
	if j.Status.Terminal() {
		return nil, Effects{}, NewError(ErrConflict, "the job is already "+string(j.Status))
	}
	if reason == "" {
		reason = "cancelled by " + md.Actor
	}
	return []Event{NewEvent(EventCancelled, Cancelled{Reason: reason}, md)}, Effects{ClearTimer: true, Callback: true}, nil
}
