package domain

import "time"

// The decisions of a pull agent's attempts. The router chooses a pull agent
// as it chooses any; the attempt then waits in that agent's inbox (its
// PhaseInbox timer) until the agent claims it, which is its delivery.

// DefaultClaimTimeout is how long an attempt waits in a pull agent's inbox
// before it is routed again to another agent (reason not_claimed).
const DefaultClaimTimeout = 10 * time.Second

// Claim limits: how many deliveries one claim may ask for, and how long it
// may wait for them.
const (
	MaxClaim = 100
	// MaxClaimNext bounds what a result report may claim with it
	// (ResultReport.ClaimNext): each is claimed inside the report's
	// transaction, which commits with other writes.
	MaxClaimNext   = 10
	MaxClaimWaitMS = 60_000
)

// InboxTimer is the timer of an attempt routed to pull agent (namespace
// ns, id agentID) at now: due when it should have been claimed.
func InboxTimer(attempt int, ns, agentID string, now time.Time, claimTimeout time.Duration) *Timer {
	if claimTimeout <= 0 {
		claimTimeout = DefaultClaimTimeout
	}
	return &Timer{Attempt: attempt, AgentID: agentID, Namespace: ns, Phase: PhaseInbox, Due: now.Add(claimTimeout)}
}

// inInbox reports whether attempt of j waits in agentID's inbox: routed to
// it, and nothing recorded of it since (Job.JustRouted).
func inInbox(j *Job, attempt int, agentID string) bool {
	return j.JustRouted(attempt) && j.AgentID == agentID && j.Status == StatusSubmitted
}

// Claim decides agentID's claim of attempt of j (routed at routedAt) at
// now: DELIVERED, the claim being the
// delivery, with the attempt's deadline (now plus the job's timeout) and
// its timer. ok is false when the attempt no longer waits in that inbox
// (it moved on: cancelled, routed again): the claim skips it.
func Claim(j *Job, attempt int, agentID string, routedAt, now time.Time, md Metadata) (evs []Event, fx Effects, deadline time.Time, ok bool) {
	if !inInbox(j, attempt, agentID) {
		return nil, Effects{}, time.Time{}, false
	}
	deadline = now.Add(j.Timeout())
	d := NewEvent(EventDelivered, Delivered{Attempt: attempt, AgentID: agentID, Deadline: deadline, Async: true, Claimed: true,
		LatencyMS: float64(now.Sub(routedAt).Microseconds()) / 1000}, md)
	return []Event{d}, Effects{Timer: &Timer{Attempt: attempt, AgentID: agentID, Phase: PhaseDelivered, Due: deadline}}, deadline, true
}

// Release decides agentID giving back attempt of j. Unstarted (errText
// empty): an attempt still in its inbox, or claimed and not begun, is
// routed again at once to another agent and spends no attempt (reason
// released). With errText: a claimed attempt the agent could not do, a
// failed attempt as a push delivery answered 5xx (retried after backoff; it
// spends the attempt). ok is false when the attempt is not the agent's to
// give back (it moved on, or it is another agent's).
func Release(j *Job, attempt int, agentID string, errText string, now time.Time, jitter float64, md Metadata) ([]Event, Effects, bool) {
	queued := inInbox(j, attempt, agentID)
	held := attempt == j.Attempts && j.AgentID == agentID && j.Status == StatusDelivered
	if !queued && !held {
		return nil, Effects{}, false
	}
	if errText != "" && held {
		evs, fx := FailAttempt(j, func(at time.Time) Event {
			return NewEvent(EventAttemptFailed, AttemptFailed{Attempt: attempt, AgentID: agentID, Reason: "agent_error",
				Error: errText, RetryAt: at}, md)
		}, 0, now, jitter, md, "agent_error")
		fx.Sample = &Sample{AgentID: agentID, At: now, OK: false}
		return evs, fx, true
	}
	evs, fx := unstarted(j, attempt, agentID, ReasonReleased, "given back unstarted by "+agentID, now, md)
	return evs, fx, true
}

// unstarted ends an attempt its pull agent never started and routes the
// job again at once; it spends no attempt (up to MaxAttempts of them).
func unstarted(j *Job, attempt int, agentID, reason, text string, now time.Time, md Metadata) ([]Event, Effects) {
	after := *j
	if after.Unspent < after.MaxAttempts {
		after.Unspent++ // as the fold will count it
	}
	return Reroute(&after, func(at time.Time) Event {
		return NewEvent(EventAttemptFailed, AttemptFailed{Attempt: attempt, AgentID: agentID, Reason: reason, Error: text, RetryAt: at}, md)
	}, now, md, reason)
}

// notClaimed decides an inbox timer that came due: the agent did not claim
// the attempt within the claim timeout, so it goes to another agent; it
// spends no attempt, and counts as a failed reach of the agent.
func notClaimed(j *Job, t Timer, now time.Time, md Metadata) TimerDecision {
	evs, fx := unstarted(j, t.Attempt, j.AgentID, ReasonNotClaimed, "not claimed by "+j.AgentID+" within the claim timeout", now, md)
	fx.Sample = &Sample{AgentID: j.AgentID, At: now, OK: false}
	return TimerDecision{Do: TimerAppend, Report: ReasonNotClaimed, Events: evs, Effects: fx}
}

// ReasonAgentGone is the failure of an attempt a pull agent had claimed
// when the agent went DOWN (its lease lapsed) or OFFLINE without
// answering or releasing it.
const ReasonAgentGone = "agent_gone"

// AgentGone decides what becomes of j's attempt, delivered to a pull agent
// that went DOWN or OFFLINE holding it: the attempt is spent (the agent
// had it, and may have started it) and the job routed again at once,
// away from that agent if another can take it; the last attempt goes to
// the dead letter.
func AgentGone(j *Job, state AgentState, now time.Time, md Metadata) ([]Event, Effects) {
	agentID := j.AgentID
	evs, fx := Reroute(j, func(at time.Time) Event {
		return NewEvent(EventAttemptFailed, AttemptFailed{Attempt: j.Attempts, AgentID: agentID, Reason: ReasonAgentGone,
			Error: "pull agent " + agentID + " went " + string(state) + " holding the attempt", RetryAt: at}, md)
	}, now, md, ReasonAgentGone)
	fx.Sample = &Sample{AgentID: agentID, At: now, OK: false}
	return evs, fx
}
