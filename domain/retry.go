package domain

import "time"

// Retry defaults and bounds (seed design: 10 s base, doubling, 300 s cap,
// 3 retries).
const (
	DefaultBackoffBase = 10 * time.Second
	DefaultBackoffMax  = 300 * time.Second
	MinBackoffBase     = 100 * time.Millisecond
	MaxBackoffMax      = time.Hour
	DefaultMaxAttempts = 4 // the first try and 3 retries
	MaxMaxAttempts     = 20
	DefaultTimeout     = 30 * time.Second
	MinTimeout         = 100 * time.Millisecond
	MaxTimeout         = time.Hour
	DefaultMaxFanout   = 15
	// An attempt that finds no routable agent (all PROBING or SUSPECT, one
	// restarting, none registered yet) waits this long before it is spent.
	DefaultRouteWait = 30 * time.Second
	MaxRouteWait     = time.Hour
)

// RouteWait reports whether a dispatch that could route the job to no agent
// waits, spending no attempt, rather than spending it: for up to limit (the
// job's route_wait_ms) since the attempt began waiting, whatever it waits
// for: a slot when every candidate is at capacity, or a routable agent. A
// service that never waits for a routable agent (limit ≤ 0) still waits
// for a slot, up to DefaultRouteWait: a slot comes back when an attempt
// ends.
func RouteWait(allAtCapacity bool, waitingSince, now time.Time, limit time.Duration) bool {
	if allAtCapacity && limit <= 0 {
		limit = DefaultRouteWait
	}
	if waitingSince.IsZero() {
		return limit > 0
	}
	return now.Sub(waitingSince) < limit
}

// Backoff is the wait before attempt number next (2, 3, …): base doubled for
// each attempt already failed, capped at max, then spread by jitter. jitter
// is a random value in [0, 1); the wait is scaled into [75 %, 125 %) of the
// nominal value (but never above max), so a burst of failures does not
// retry in lockstep.
func Backoff(next int, base, max time.Duration, jitter float64) time.Duration {
	if next < 2 {
		return 0
	}
	d := base
	for i := 2; i < next && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	d = time.Duration(float64(d) * (0.75 + 0.5*jitter))
	return min(d, max)
}

// RetryAfter combines the backoff with a Retry-After the agent asked for:
// the longer wins, so an agent that asks to be left alone is.
func RetryAfter(backoff, asked time.Duration) time.Duration {
	return max(backoff, asked)
}

// TimerPhase says what a job's timer waits for; the deadline sweep acts on
// a due timer by its phase.
type TimerPhase string

// The timer phases (job_timers.phase).
const (
	// PhaseQueued: a dispatch is in River's queue; due when it should have
	// started (else it is enqueued again).
	PhaseQueued TimerPhase = "queued"
	// PhaseOrdered: a job waits for the jobs before it with its
	// ordering_key to end; the one ending before it makes it due (a
	// retry, at once), and it looks again itself at due_at.
	PhaseOrdered TimerPhase = "ordered"
	// PhaseRouted: an attempt was routed; due when its dispatcher should
	// have recorded an outcome.
	PhaseRouted TimerPhase = "routed"
	// PhaseInbox: an attempt routed to a pull agent waits in its inbox;
	// due when it should have been claimed (the claim timeout).
	PhaseInbox TimerPhase = "inbox"
	// PhaseDelivered: an agent holds the attempt; due at its deadline.
	PhaseDelivered TimerPhase = "delivered"
	// PhaseRetry: the next attempt waits for its backoff.
	PhaseRetry TimerPhase = "retry"
	// PhaseCallback: a callback is queued; due when it should have run.
	PhaseCallback TimerPhase = "callback"
	// PhaseApproval: a job awaits approval; due at the approval timeout.
	PhaseApproval TimerPhase = "approval"
	// PhaseInput: an agent awaits the caller's input; due at the input
	// timeout.
	PhaseInput TimerPhase = "input"
)

// MaxRouteWaitInterval bounds how long a waiting attempt sleeps between two
// looks for a routable agent.
const MaxRouteWaitInterval = 2 * time.Second

// RouteWaitInterval is when an attempt that waits for a routable agent looks
// again: soon at first (base, the capacity wait), then a quarter of how long
// it has waited, up to MaxRouteWaitInterval, so a crowd of jobs waiting for
// an agent that is restarting does not poll the database every 250 ms each.
func RouteWaitInterval(waited, base time.Duration) time.Duration {
	return min(max(base, waited/4), MaxRouteWaitInterval)
}

// MaxCapacityRecheck bounds how long an attempt waiting for a slot sleeps
// between two looks of its own.
const MaxCapacityRecheck = 10 * time.Second

// CapacityRecheck is when an attempt that waits for a slot looks again by
// itself: soon at first (base, the capacity wait), then after as long as
// it has waited, up to MaxCapacityRecheck. A slot given back wakes the
// most urgent waiter at once; these looks are only the safety net for a
// wake that came before the wait was written, or capacity that came
// without a slot given back (an agent registered, or raised its
// max_concurrent), so a crowd of waiters does not churn the database.
func CapacityRecheck(waited, base time.Duration) time.Duration {
	return min(max(base, MinCapacityRecheck, waited), MaxCapacityRecheck)
}

// MinCapacityRecheck is the soonest an attempt waiting for a slot looks
// again by itself.
const MinCapacityRecheck = time.Second
