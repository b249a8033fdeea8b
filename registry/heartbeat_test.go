package registry

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
)

// taken is a buffer whose flush has taken agent a1's heartbeat at t0
// (queue_length 3, in_flight 1), with that flush's batch.
func taken() (b *heartbeatBuffer, batch map[domain.AgentKey]heartbeat, id domain.AgentKey, t0 time.Time) {
	id = domain.AgentKey{Namespace: "default", ID: "a1"}
	t0 = time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	b = newHeartbeatBuffer()
	b.add(id, t0, domain.HealthReport{QueueLength: figure(3), InFlight: figure(1)})
	return b, b.take(), id, t0
}

func figure(v int) *int { return &v }

// TestFailedFlushKeepsItsFigures: a heartbeat whose flush failed goes back
// to the buffer merged with one that came meanwhile, as two heartbeats
// between flushes merge: a figure the newer one does not give keeps the
// failed one's value, and the newer time and figures win.
func TestFailedFlushKeepsItsFigures(t *testing.T) {
	t.Parallel()
	b, batch, id, t0 := taken()
	b.add(id, t0.Add(time.Second), domain.HealthReport{InFlight: figure(2)}) // no queue_length
	b.done(batch, true)

	a := &Agent{AgentRegistration: domain.AgentRegistration{AgentID: id.ID, Namespace: id.Namespace, TTLSeconds: 30}}
	b.overlay(a)
	require.Equal(t, t0.Add(time.Second), a.LastSeenAt)
	require.Equal(t, 3, a.ReportedQueueLength, "the failed flush's queue_length")
	require.Equal(t, 2, a.ReportedInFlight, "the newer in_flight")
	require.Empty(t, b.flushing)

	// Written, a flush leaves nothing behind.
	batch = b.take()
	b.done(batch, false)
	require.Empty(t, b.pending)
	require.Empty(t, b.flushing)
}

// TestFailedFlushOfAForgottenAgent: an agent that registered again while
// its heartbeat was being flushed starts afresh; that flush failing puts
// back nothing of the instance before.
func TestFailedFlushOfAForgottenAgent(t *testing.T) {
	t.Parallel()
	b, batch, id, t0 := taken()
	b.forget(id)                                          // registered again
	b.add(id, t0.Add(time.Second), domain.HealthReport{}) // the new instance's first heartbeat
	b.done(batch, true)

	require.Equal(t, map[domain.AgentKey]heartbeat{id: {at: t0.Add(time.Second)}}, b.pending)
	require.Empty(t, b.flushing)

	// Forgotten with nothing pending since, it stays forgotten.
	b, batch, id, _ = taken()
	b.forget(id)
	b.done(batch, true)
	require.Empty(t, b.pending)
}
