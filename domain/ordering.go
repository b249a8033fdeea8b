package domain

import "time"

// Ordered delivery per key. A job submitted with an ordering_key takes its
// place in its namespace's queue of that key when it is submitted; it is
// delivered only when every job of the key before it has ended (SUCCESS,
// FAILED, DEAD_LETTER, CANCELLED, REJECTED), one at a time, while other
// keys go on in parallel. A job that dead-letters ends its turn like any
// other: the next job of the key starts (order is of delivery, not of
// success; a replay goes to the back of the key's queue).

// OrderedRecheck is how often a job waiting for its turn looks by itself
// whether its turn came; the job ending before it wakes it at once.
const OrderedRecheck = time.Minute

// OrderedTimer is the timer of a job of attempt 1 waiting for its turn
// among the jobs of its ordering key.
func OrderedTimer(now time.Time) *Timer {
	return &Timer{Attempt: 1, Phase: PhaseOrdered, Due: now.Add(OrderedRecheck)}
}

// WaitTurn is fx for a job whose first attempt fx queues, with ahead jobs
// of its ordering key before it: with any ahead, it waits its turn
// (OrderedTimer) instead.
func WaitTurn(fx Effects, ahead int, now time.Time) Effects {
	if ahead > 0 && fx.Queue != nil {
		fx.Queue, fx.Timer = nil, OrderedTimer(now)
	}
	return fx
}
