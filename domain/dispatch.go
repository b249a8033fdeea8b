package domain

import (
	"fmt"
	"time"
)

// DispatchStep is what a dispatch of an attempt does next.
type DispatchStep int

// The steps of a dispatch.
const (
	// StepStale: the attempt started already, or the job moved on;
	// nothing is done.
	StepStale DispatchStep = iota + 1
	// StepWait: the attempt waits on its retry timer, spending nothing:
	// every candidate is at capacity, none is routable yet within the
	// job's route_wait_ms, or (a low job) its namespace's queue is above
	// its high watermark.
	StepWait
	// StepNoAgent: the attempt is spent: ROUTED to no agent and its
	// failure (a retry after backoff, or the dead letter).
	StepNoAgent
	// StepInbox: ROUTED to a pull agent, whose claim delivers it.
	StepInbox
	// StepDeliver: ROUTED to a push or A2A agent, then delivered.
	StepDeliver
)

// DispatchInput is what a dispatch knows when it plans: the attempt, the
// route the snapshot gave, and the service's settings.
type DispatchInput struct {
	Attempt int
	// WaitingSince is when the attempt began waiting for a routable agent
	// (zero: it was not waiting).
	WaitingSince time.Time
	// HoldLow says the job's namespace is above its high watermark; only
	// a low job is held back by it.
	HoldLow bool
	// HoldFor is how long a held-back job waits before it looks again.
	HoldFor time.Duration
	Route   RouteResult
	// Chosen says the route chose an agent that the snapshot holds; Pull
	// that it claims its work (mode pull).
	Chosen, Pull bool
	// RouteWait bounds the wait for a routable agent (the job's
	// route_wait_ms, or the service's default).
	RouteWait time.Duration
	// CapacityWait is how long an attempt waits when every candidate is
	// at capacity (the namespace's routing policy, or the service's).
	CapacityWait time.Duration
	Now          time.Time
	Jitter       float64
	Metadata     Metadata
}

// DispatchPlan is the next step of a dispatch, with what it writes.
type DispatchPlan struct {
	Step DispatchStep
	// Timer is StepWait's retry timer.
	Timer *Timer
	// Events are ROUTED (StepInbox, StepDeliver), or ROUTED to none and
	// the attempt's failure (StepNoAgent), with their Effects.
	Events  []Event
	Effects Effects
}

// PlanDispatch decides the next step of a dispatch of in.Attempt of j: the
// one road every dispatch takes, whoever runs it (River's dispatch job or
// the process that committed the submit).
func PlanDispatch(j *Job, in DispatchInput) DispatchPlan {
	if !j.CanStart(in.Attempt) {
		return DispatchPlan{Step: StepStale}
	}
	if j.Priority == PriorityLow && in.HoldLow {
		return DispatchPlan{Step: StepWait, Timer: &Timer{Attempt: in.Attempt, Phase: PhaseRetry, Due: in.Now.Add(in.HoldFor),
			WaitingSince: in.WaitingSince}}
	}
	// Agents at capacity or paused come back by themselves: a wait for
	// them is bounded even when the service never waits for a routable
	// agent, and one for a pause looks again when the first pause ends.
	busy := in.Route.AllAtCapacity || !in.Route.ResumeAt.IsZero()
	if !in.Chosen && RouteWait(busy, in.WaitingSince, in.Now, in.RouteWait) {
		t := WaitTimer(j, in.Attempt, busy, in.WaitingSince, in.Now, in.CapacityWait, in.RouteWait)
		if r := in.Route.ResumeAt; r.After(in.Now) && r.Before(t.Due) {
			t.Due = r
		}
		return DispatchPlan{Step: StepWait, Timer: &t}
	}
	routed := NewRouted(in.Attempt, in.Route, in.Metadata)
	switch {
	case in.Chosen && in.Pull:
		return DispatchPlan{Step: StepInbox, Events: []Event{routed}}
	case in.Chosen:
		return DispatchPlan{Step: StepDeliver, Events: []Event{routed}}
	}
	code, reason := "no_agent", fmt.Sprintf("no routable agent offers %s in namespace %s", j.Capability, j.Namespace)
	switch {
	case in.Route.AllAtCapacity:
		code, reason = "at_capacity", fmt.Sprintf("every agent offering %s in namespace %s was at capacity for the job's route_wait_ms", j.Capability, j.Namespace)
	case in.Route.Unavailable():
		code, reason = "all_unavailable", fmt.Sprintf("every agent offering %s in namespace %s was unavailable (down, draining, breaker open) for the job's route_wait_ms", j.Capability, j.Namespace)
	}
	after := *j
	if err := after.Apply(routed); err != nil {
		return DispatchPlan{Step: StepStale} // CanStart said it may follow
	}
	evs, fx := FailAttempt(&after, func(at time.Time) Event {
		return NewEvent(EventAttemptFailed, AttemptFailed{Attempt: in.Attempt, Reason: code, Error: reason, RetryAt: at}, in.Metadata)
	}, 0, in.Now, in.Jitter, in.Metadata, code)
	return DispatchPlan{Step: StepNoAgent, Events: append([]Event{routed}, evs...), Effects: fx}
}

// WaitTimer is the retry timer of an attempt of j that waits, spending
// nothing, for a slot (atCapacity) or a routable agent. It remembers when
// the wait began (waitingSince, or now) and what it waits for: j's
// namespace and capability, ranked by WaitRank, so that a slot given back
// wakes the most urgent waiter at once. Until then it looks again sooner
// the shorter it has waited (RouteWaitInterval), and at the latest at the
// wait's bound (RouteWait).
func WaitTimer(j *Job, attempt int, atCapacity bool, waitingSince, now time.Time, capacityWait, bound time.Duration) Timer {
	if waitingSince.IsZero() {
		waitingSince = now
	}
	if atCapacity && bound <= 0 {
		bound = DefaultRouteWait
	}
	interval := RouteWaitInterval(now.Sub(waitingSince), capacityWait)
	if atCapacity {
		interval = CapacityRecheck(now.Sub(waitingSince), capacityWait)
	}
	due := now.Add(interval)
	if end := waitingSince.Add(bound); bound > 0 && end.Before(due) {
		due = end
	}
	return Timer{Attempt: attempt, Phase: PhaseRetry, Due: due, WaitingSince: waitingSince,
		Namespace: j.Namespace, Capability: j.Capability, Rank: WaitRank(j.Priority, waitingSince)}
}

// LaneAge is how much longer a job of one lane has waited than one of the
// lane above when the two rank alike: a slot given back goes to high work
// before normal before low, oldest first within a lane, but a job that
// has waited LaneAge more than one of the lane above goes first, so a
// flood of high work delays low work, never starves it.
const LaneAge = time.Minute

// WaitRank orders the jobs waiting for a slot (the lowest first): when the
// wait began, pushed back LaneAge for each lane below high.
func WaitRank(p Priority, waitingSince time.Time) time.Time {
	lanes := 1 // normal
	switch p {
	case PriorityHigh:
		lanes = 0
	case PriorityLow:
		lanes = 2
	}
	return waitingSince.Add(time.Duration(lanes) * LaneAge)
}

// SubmitStep is where a submitted job goes first.
type SubmitStep int

// Where a submitted job goes first.
const (
	// SubmitApproval: it waits for an operator's approval, on its
	// approval timer.
	SubmitApproval SubmitStep = iota + 1
	// SubmitDirect: its first attempt may start in the process that
	// committed it, if one of its direct dispatchers is free.
	SubmitDirect
	// SubmitQueue: its first attempt goes to River's dispatch queue.
	SubmitQueue
	// SubmitOrdered: jobs with its ordering_key submitted before it have
	// not ended: it waits for them (OrderedTimer).
	SubmitOrdered
)

// PlanSubmit decides where a submission goes first, given the status
// SubmitEvents gave it, whether it is plain (no parent, no ordering_key,
// nothing written beside it) and how many jobs of
// its ordering_key are ahead of it: approval first; then a job behind
// others of its key waits for them; a plain one that is not low may start
// directly; low work waits in its own lane.
func PlanSubmit(status JobStatus, plain bool, p Priority, ahead int) SubmitStep {
	switch {
	case status == StatusAwaitingApproval:
		return SubmitApproval
	case ahead > 0:
		return SubmitOrdered
	case plain && p != PriorityLow:
		return SubmitDirect
	}
	return SubmitQueue
}
