// Package jobs runs Agent-Reach's background work on River: the client and
// its queues, and the workers that dispatch jobs, sweep deadlines and call
// callers back, each inside the transaction that appends its events.
package jobs
