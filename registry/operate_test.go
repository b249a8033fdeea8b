package registry

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
)

func TestOperatorActions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	md := domain.Metadata{Actor: "key:ops"}
	_, token := b.register(t, "op", 10, "http://127.0.0.1:1/")

	// Up ends the probe window now.
	a, err := b.r.Operate(b.ctx, key("op"), domain.SignalUp, "verified by hand", md)
	require.NoError(t, err)
	require.Equal(t, domain.AgentHealthy, a.State)

	// Confirmed down: heartbeats and sweeps do not revive it.
	a, err = b.r.Operate(b.ctx, key("op"), domain.SignalConfirmDown, "disk failed", md)
	require.NoError(t, err)
	require.Equal(t, domain.AgentDown, a.State)
	_, err = b.r.Heartbeat(b.ctx, "op", token, nil, nil, domain.Metadata{})
	require.NoError(t, err)
	b.clock.advance(time.Second)
	b.sweep(t)
	require.Equal(t, domain.AgentDown, b.state(t, "op"))
	a, err = b.r.Operate(b.ctx, key("op"), domain.SignalUp, "disk replaced", md)
	require.NoError(t, err)
	require.Equal(t, domain.AgentHealthy, a.State)
	b.sweep(t)
	require.Equal(t, domain.AgentHealthy, b.state(t, "op"), "brought up, its lease holds")

	// Drain: DRAINING while it holds an attempt, OFFLINE once it holds none.
	_, err = b.r.pool.Exec(b.ctx, `INSERT INTO agent_slots (job_id, namespace, agent_id, attempt) VALUES (gen_random_uuid(), 'default', 'op', 1)`)
	require.NoError(t, err)
	a, err = b.r.Operate(b.ctx, key("op"), domain.SignalDrain, "maintenance", md)
	require.NoError(t, err)
	require.Equal(t, domain.AgentDraining, a.State)
	b.sweep(t)
	require.Equal(t, domain.AgentDraining, b.state(t, "op"), "still finishing its work")
	_, err = b.r.pool.Exec(b.ctx, `DELETE FROM agent_slots`)
	require.NoError(t, err)
	b.sweep(t)
	require.Equal(t, domain.AgentOffline, b.state(t, "op"))

	// Drained, it stays held: its heartbeats are taken, a registration
	// (a restart) keeps it out of service, and only up brings it back.
	_, err = b.r.Heartbeat(b.ctx, "op", token, nil, nil, domain.Metadata{})
	require.NoError(t, err, "a drained agent keeps its lease")
	_, token = b.register(t, "op", 10, "http://127.0.0.1:1/")
	require.Equal(t, domain.AgentDraining, b.state(t, "op"), "registered again, still drained")
	b.sweep(t)
	require.Equal(t, domain.AgentOffline, b.state(t, "op"), "and, holding nothing, OFFLINE")
	a, err = b.r.Operate(b.ctx, key("op"), domain.SignalUp, "maintenance over", md)
	require.NoError(t, err, "up after a finished drain")
	require.Equal(t, domain.AgentHealthy, a.State)
	require.Empty(t, a.Hold)
	_, err = b.r.Heartbeat(b.ctx, "op", token, nil, nil, domain.Metadata{})
	require.NoError(t, err, "the new registration's lease goes on")
	require.Equal(t, domain.AgentHealthy, b.state(t, "op"))
	_, err = b.r.Operate(b.ctx, key("op"), domain.SignalUp, "", md)
	require.ErrorIs(t, err, ErrNotNow, "up on a HEALTHY agent")
	_, err = b.r.Operate(b.ctx, key("nobody"), domain.SignalUp, "", md)
	require.ErrorIs(t, err, domain.ErrNotFound)

	recs, err := b.r.store.ReadStream(b.ctx, nil, domain.AgentStream(key("op")))
	require.NoError(t, err)
	var reasons []string
	for _, rec := range recs {
		if rec.Type != domain.EventAgentStateChanged {
			continue
		}
		var d domain.AgentStateChanged
		require.NoError(t, json.Unmarshal(rec.Data, &d))
		if d.Signal == domain.SignalUp || d.Signal == domain.SignalConfirmDown || d.Signal == domain.SignalDrain {
			require.Equal(t, "key:ops", rec.Metadata.Actor)
		}
		reasons = append(reasons, string(d.Signal)+":"+d.Reason)
	}
	require.Equal(t, []string{"registered:", "up:verified by hand", "confirm_down:disk failed", "up:disk replaced",
		"drain:maintenance", "offline:drained", "registered:", "offline:drained", "up:maintenance over"}, reasons)
}

func TestUpdateSettings(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.register(t, "u1", 10, "http://127.0.0.1:1/")
	b.prove(t, "u1")
	w, mc := 90, 3
	a, err := b.r.Update(b.ctx, key("u1"), domain.AgentPatch{Weight: &w, MaxConcurrent: &mc}, domain.Metadata{Actor: "key:ops"})
	require.NoError(t, err)
	require.Equal(t, 90, a.Weight)
	require.Equal(t, domain.AgentHealthy, a.State, "no restart, no probe window")
	got, err := b.r.Get(b.ctx, key("u1"))
	require.NoError(t, err)
	require.Equal(t, 90, got.Weight)
	require.Equal(t, 3, got.MaxConcurrent)

	// The same values again record nothing; a bad one is refused.
	_, err = b.r.Update(b.ctx, key("u1"), domain.AgentPatch{Weight: &w}, domain.Metadata{})
	require.NoError(t, err)
	bad := 0
	_, err = b.r.Update(b.ctx, key("u1"), domain.AgentPatch{Weight: &bad}, domain.Metadata{})
	var fe *domain.FieldError
	require.ErrorAs(t, err, &fe)

	recs, err := b.r.store.ReadStream(b.ctx, nil, domain.AgentStream(key("u1")))
	require.NoError(t, err)
	var updates []domain.AgentUpdated
	for _, rec := range recs {
		if rec.Type == domain.EventAgentUpdated {
			var u domain.AgentUpdated
			require.NoError(t, json.Unmarshal(rec.Data, &u))
			updates = append(updates, u)
		}
	}
	require.Len(t, updates, 1)
	require.Equal(t, []string{"weight", "max_concurrent"}, updates[0].Fields)
	require.Equal(t, 50, updates[0].From.Weight)
	require.Equal(t, 90, updates[0].To.Weight)
}

// A flapping agent (three restarts within the hour) needs three probes in
// a row; a failed one starts the count over. A steady agent needs one.
func TestFlappingAgentNeedsProbesInARow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var healthy atomic.Bool
	healthy.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	var a *Agent
	for range 4 {
		a, _ = b.register(t, "flap", 10, srv.URL)
	}
	require.Equal(t, 3, a.RecentRestarts)
	probe := func() error { return b.r.ProbeInstance(b.ctx, key("flap"), a.InstanceID, "river:1") }
	require.NoError(t, probe())
	require.NoError(t, probe())
	require.Equal(t, domain.AgentProbing, b.state(t, "flap"), "two in a row are not enough")
	healthy.Store(false)
	require.NoError(t, probe(), "a failed probe is recorded, not an error")
	healthy.Store(true)
	require.NoError(t, probe())
	require.NoError(t, probe())
	require.Equal(t, domain.AgentProbing, b.state(t, "flap"), "a failure started the count over")
	require.NoError(t, probe())
	require.Equal(t, domain.AgentHealthy, b.state(t, "flap"))

	steady, _ := b.register(t, "steady", 10, srv.URL)
	require.Zero(t, steady.RecentRestarts)
	require.NoError(t, b.r.ProbeInstance(b.ctx, key("steady"), steady.InstanceID, "river:2"))
	require.Equal(t, domain.AgentHealthy, b.state(t, "steady"))
}

// A breaker's turns are events on the agent's stream, once each.
func TestBreakerTurnsAreEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.register(t, "brk", 3600, "http://127.0.0.1:1/")
	b.prove(t, "brk")
	sample := func(at time.Time, ok bool) {
		_, err := b.r.pool.Exec(b.ctx, `INSERT INTO agent_attempts (namespace, agent_id, at, ok) VALUES ('default', 'brk', $1, $2)`, at, ok)
		require.NoError(t, err)
	}
	start := b.clock.now()
	for i := range 20 {
		sample(start.Add(-time.Duration(i)*time.Millisecond), false)
	}
	require.NoError(t, b.r.snap.Refresh(b.ctx))
	require.Equal(t, domain.BreakerOpen, b.r.snap.Breaker(key("brk")).State)
	b.sweep(t)
	b.sweep(t)
	breakerEvents := func() []domain.EventType {
		var out []domain.EventType
		for _, e := range b.events(t, domain.AgentStream(key("brk"))) {
			if e == domain.EventBreakerOpened || e == domain.EventBreakerClosed {
				out = append(out, e)
			}
		}
		return out
	}
	require.Equal(t, []domain.EventType{domain.EventBreakerOpened}, breakerEvents(), "once per turn")

	// After the cool-down a good probe delivery closes it.
	b.clock.advance(31 * time.Second)
	sample(b.clock.now(), true)
	require.NoError(t, b.r.snap.Refresh(b.ctx))
	require.Equal(t, domain.BreakerClosed, b.r.snap.Breaker(key("brk")).State)
	b.sweep(t)
	require.Equal(t, []domain.EventType{domain.EventBreakerOpened, domain.EventBreakerClosed}, breakerEvents())
}

// A hold outlives a registration but not a deletion: an agent downed and
// then deregistered registers again as a new deployment, PROBING, held by
// nothing.
func TestDeletionEndsAHold(t *testing.T) {
	t.Parallel()
	b := setup(t)
	md := domain.Metadata{Actor: "key:ops"}
	b.register(t, "gone", 10, "http://127.0.0.1:1/")
	_, err := b.r.Operate(b.ctx, key("gone"), domain.SignalConfirmDown, "disk failed", md)
	require.NoError(t, err)
	b.register(t, "gone", 10, "http://127.0.0.1:1/")
	require.Equal(t, domain.AgentDown, b.state(t, "gone"), "a restart does not end the hold")
	require.NoError(t, b.r.Deregister(b.ctx, key("gone"), md))
	a, _ := b.register(t, "gone", 10, "http://127.0.0.1:1/")
	require.Equal(t, domain.AgentProbing, a.State, "a deletion does")
	require.Empty(t, a.Hold)
	require.Equal(t, domain.AgentProbing, b.state(t, "gone"))
}
