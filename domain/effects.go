package domain

import "time"

// Effects are the writes that go with a decision's events, in the same
// transaction: the attempt's timer, the agent's attempt sample, the next
// attempt's dispatch, the caller's callback and an A2A poll. A decision
// returns them beside its events; jobs' unit of work writes both.
type Effects struct {
	Timer      *Timer
	ClearTimer bool
	Sample     *Sample
	Dispatch   *NextDispatch
	// Callback queues the caller's callback if the events end the job.
	Callback bool
	// RequeueCallback queues the caller's callback of a job that has
	// ended, whatever the events (a callback whose sender died).
	RequeueCallback bool
	// Poll starts polling an A2A agent for this attempt's task.
	Poll int
	// Queue hands an attempt to River's dispatch queue now, watched by
	// the queued timer.
	Queue *QueuedAttempt
	// Pause gives the agent no work until Until (it asked, with a
	// Retry-After).
	Pause *AgentPause
	// EnterOrder puts a new job at the back of its ordering key's queue.
	EnterOrder bool
}

// AgentPause is an agent's pause: no work for it until Until.
type AgentPause struct {
	AgentID string
	Until   time.Time
}

// QueuedAttempt is an attempt handed to River's dispatch queue.
type QueuedAttempt struct {
	Attempt int
	// WaitingSince is when the attempt began waiting for a routable agent
	// (zero: it is not waiting).
	WaitingSince time.Time
	// Capability and Rank are the wait's (Timer's), kept while its
	// dispatch is queued: its turn at a slot came; Agent is the agent
	// whose slot it was given.
	Capability string
	Rank       time.Time
	Agent      string
}

// Timer is a job's one timer: what it waits for (Phase) and when it is due.
type Timer struct {
	Attempt    int
	AgentID    string
	Phase      TimerPhase
	Due        time.Time
	RiverJobID int64
	// Namespace is the agent's namespace, for an inbox timer (PhaseInbox):
	// the inbox is the agent's timers of that phase.
	Namespace string
	// WaitingSince is when the attempt began waiting for a routable agent
	// (zero: it is not waiting for one); a wait is bounded by route_wait_ms.
	WaitingSince time.Time
	// Capability and Rank name what a waiting attempt (WaitTimer) waits
	// for: a slot given back by an agent offering Capability (in
	// Namespace) wakes its waiter of the lowest Rank at once (WaitRank).
	Capability string
	Rank       time.Time
}

// Sample is one attempt's outcome for the agent's breaker window.
type Sample struct {
	AgentID string
	At      time.Time
	OK      bool
}

// NextDispatch is the next attempt and when it may start.
type NextDispatch struct {
	Attempt int
	At      time.Time
}
