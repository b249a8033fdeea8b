package jobs

import (
	"time"

	"github.com/riverqueue/river"

	"github.com/agentreach/agentreach/domain"
)

// River queues. Each priority lane has its own queue and workers, so a
// flood of low-priority jobs never takes the workers of high ones.
const (
	QueueDispatchHigh   = "dispatch_high"
	QueueDispatchNormal = "dispatch_normal"
	QueueDispatchLow    = "dispatch_low"
	QueueCallbacks      = "callbacks"
	QueueSweeps         = "sweeps"
	QueueA2APoll        = "a2a_poll"
)

// laneQueue is the dispatch queue of a priority.
func laneQueue(p domain.Priority) string {
	switch p {
	case domain.PriorityHigh:
		return QueueDispatchHigh
	case domain.PriorityLow:
		return QueueDispatchLow
	}
	return QueueDispatchNormal
}

// lanePriority is River's priority (1 highest) of a lane, which orders jobs
// within a queue too.
func lanePriority(p domain.Priority) int {
	switch p {
	case domain.PriorityHigh:
		return 1
	case domain.PriorityLow:
		return 3
	}
	return 2
}

// DispatchArgs is the River job that makes one attempt of a job: route,
// deliver, record. The job's queued timer watches it; a dispatch for an
// attempt that already started, or that another dispatch wins, does
// nothing (the stream's version decides).
type DispatchArgs struct {
	JobID   string `json:"job_id"`
	Attempt int    `json:"attempt"`
	// WaitingSince is when the attempt began waiting for a routable agent,
	// carried from wait to wait so the wait is bounded by route_wait_ms.
	WaitingSince time.Time `json:"waiting_since,omitzero"`
	// Prefer is the agent whose slot was handed to this waiter: tried
	// first, whatever the snapshot counts.
	Prefer string `json:"prefer,omitempty"`
}

// Kind implements river.JobArgs.
func (DispatchArgs) Kind() string { return "dispatch_job" }

func dispatchOpts(p domain.Priority) *river.InsertOpts {
	return &river.InsertOpts{Queue: laneQueue(p), Priority: lanePriority(p), MaxAttempts: 25}
}

// CallbackArgs is the River job that tells the caller a job finished. The
// job's callback timer watches it.
type CallbackArgs struct {
	JobID string `json:"job_id"`
}

// Kind implements river.JobArgs.
func (CallbackArgs) Kind() string { return "callback_job" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (CallbackArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueCallbacks, MaxAttempts: CallbackMaxAttempts}
}

// CallbackMaxAttempts is how many times a callback is tried before it is
// recorded as finally failed: with callbackWorker.NextRetry's backoff (1 s
// doubling, with jitter) its 11 retries span about 34 minutes.
const CallbackMaxAttempts = 12

// DeadlineSweepArgs is the periodic job that times out attempts past their
// deadline.
type DeadlineSweepArgs struct{}

// Kind implements river.JobArgs.
func (DeadlineSweepArgs) Kind() string { return "deadline_sweep" }

// RepairSweepArgs is the periodic job that re-enqueues what went missing:
// dispatches of open jobs and callbacks of finished ones.
type RepairSweepArgs struct{}

// Kind implements river.JobArgs.
func (RepairSweepArgs) Kind() string { return "repair_sweep" }
