package domain_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
)

var allAgentStates = []domain.AgentState{
	domain.AgentProbing, domain.AgentHealthy, domain.AgentSuspect,
	domain.AgentDown, domain.AgentDraining, domain.AgentOffline,
}

var allAgentSignals = []domain.AgentSignal{
	domain.SignalRegistered, domain.SignalProbeSucceeded, domain.SignalProbeFailed,
	domain.SignalHeartbeat, domain.SignalHeartbeatLate, domain.SignalLeaseExpired,
	domain.SignalBreakerOpened, domain.SignalBreakerClosed, domain.SignalOffline,
	domain.SignalDeregistered, domain.SignalDrain, domain.SignalConfirmDown, domain.SignalUp, domain.SignalClaimed,
}

// TestAgentTransitionExhaustive checks every (state, signal) pair against a
// table written out by hand, so a change to the state machine must be made
// twice to pass. A missing entry means the pair is illegal.
func TestAgentTransitionExhaustive(t *testing.T) {
	t.Parallel()
	const (
		P  = domain.AgentProbing
		H  = domain.AgentHealthy
		S  = domain.AgentSuspect
		D  = domain.AgentDown
		Dr = domain.AgentDraining
		O  = domain.AgentOffline
	)
	want := map[domain.AgentState]map[domain.AgentSignal]domain.AgentState{
		P: {
			domain.SignalRegistered: P, domain.SignalProbeSucceeded: H, domain.SignalProbeFailed: P,
			domain.SignalHeartbeat: P, domain.SignalHeartbeatLate: P, domain.SignalLeaseExpired: D,
			domain.SignalBreakerOpened: P, domain.SignalBreakerClosed: P, domain.SignalOffline: O,
			domain.SignalDeregistered: Dr, domain.SignalDrain: Dr, domain.SignalConfirmDown: D, domain.SignalUp: H,
			domain.SignalClaimed: H, // a pull agent's first claim proves it
		},
		H: {
			domain.SignalRegistered: P, domain.SignalProbeSucceeded: H, domain.SignalProbeFailed: S,
			domain.SignalHeartbeat: H, domain.SignalHeartbeatLate: S, domain.SignalLeaseExpired: D,
			domain.SignalBreakerOpened: S, domain.SignalBreakerClosed: H, domain.SignalOffline: O,
			domain.SignalDeregistered: Dr, domain.SignalDrain: Dr, domain.SignalConfirmDown: D,
			domain.SignalClaimed: H, // no up: it is up already (409)
		},
		S: {
			domain.SignalRegistered: P, domain.SignalProbeSucceeded: H, domain.SignalProbeFailed: S,
			domain.SignalHeartbeat: H, domain.SignalHeartbeatLate: S, domain.SignalLeaseExpired: D,
			domain.SignalBreakerOpened: S, domain.SignalBreakerClosed: H, domain.SignalOffline: O,
			domain.SignalDeregistered: Dr, domain.SignalDrain: Dr, domain.SignalConfirmDown: D, domain.SignalUp: S,
			domain.SignalClaimed: S,
		},
		D: {
			domain.SignalRegistered: P, domain.SignalHeartbeat: P, domain.SignalHeartbeatLate: D,
			domain.SignalLeaseExpired: D, domain.SignalBreakerOpened: D, domain.SignalBreakerClosed: D,
			domain.SignalOffline: O, domain.SignalDeregistered: Dr,
			domain.SignalDrain: Dr, domain.SignalConfirmDown: D, domain.SignalUp: H,
		},
		Dr: {
			domain.SignalRegistered: P, domain.SignalHeartbeat: Dr, domain.SignalHeartbeatLate: Dr,
			domain.SignalLeaseExpired: Dr, domain.SignalBreakerOpened: Dr, domain.SignalBreakerClosed: Dr,
			domain.SignalOffline: O, domain.SignalDeregistered: Dr,
			domain.SignalDrain: Dr, domain.SignalConfirmDown: D, domain.SignalUp: H,
		},
		O: {
			domain.SignalRegistered: P, domain.SignalOffline: O, domain.SignalDeregistered: O,
			// Only under a drain's hold (ApplyAgentSignal refuses them otherwise).
			domain.SignalUp: H, domain.SignalHeartbeat: O,
		},
		// An agent never seen before only registers (or is told to stay away).
		"": {
			domain.SignalRegistered: P, domain.SignalOffline: O,
		},
	}
	for from, row := range want {
		for _, sig := range allAgentSignals {
			got, err := domain.AgentTransition(from, sig)
			to, legal := row[sig]
			if legal {
				require.NoError(t, err, "%s in %s", sig, from)
				require.Equal(t, to, got, "%s in %s", sig, from)
				continue
			}
			require.Error(t, err, "%s in %s", sig, from)
			require.True(t, errors.Is(err, domain.ErrIllegalAgentTransition), "%s in %s: %v", sig, from, err)
			var te *domain.AgentTransitionError
			require.ErrorAs(t, err, &te)
			require.Equal(t, from, te.From)
			require.Equal(t, sig, te.Signal)
			require.Equal(t, from, got, "an illegal signal leaves the state as it was")
		}
	}
	require.Len(t, want, len(allAgentStates)+1, "every state has a row")

	_, err := domain.AgentTransition(domain.AgentHealthy, "no_such_signal")
	require.ErrorIs(t, err, domain.ErrIllegalAgentTransition)
	_, err = domain.AgentTransition(domain.AgentOffline, domain.SignalProbeSucceeded)
	require.EqualError(t, err, "probe_succeeded in OFFLINE: illegal agent transition")
	_, err = domain.ApplyAgentSignal(domain.AgentLease{State: domain.AgentOffline}, domain.SignalHeartbeat, time.Now())
	require.EqualError(t, err, "heartbeat in OFFLINE: illegal agent transition", "not drained: it must register again")
}

func TestAgentStateRoutable(t *testing.T) {
	t.Parallel()
	for _, s := range append(allAgentStates, "") {
		want := s == domain.AgentHealthy || s == domain.AgentSuspect
		require.Equal(t, want, s.Routable(), s)
	}
}

func TestEvaluateLease(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	const ttl = 30 * time.Second
	lease := func(s domain.AgentState, probeOK bool) domain.AgentLease {
		return domain.AgentLease{State: s, RegisteredAt: t0.Add(-time.Hour), LastSeen: t0, TTL: ttl, ProbeOK: probeOK}
	}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	cfg := domain.DefaultLeaseConfig()
	cases := []struct {
		name string
		l    domain.AgentLease
		now  time.Time
		cfg  domain.LeaseConfig
		want domain.AgentState
	}{
		{"healthy fresh", lease(domain.AgentHealthy, true), at(0), cfg, domain.AgentHealthy},
		{"healthy at exactly half ttl", lease(domain.AgentHealthy, true), at(15 * time.Second), cfg, domain.AgentHealthy},
		{"suspect just past half ttl", lease(domain.AgentHealthy, true), at(15*time.Second + time.Nanosecond), cfg, domain.AgentSuspect},
		{"suspect at exactly ttl", lease(domain.AgentHealthy, true), at(ttl), cfg, domain.AgentSuspect},
		{"down just past ttl", lease(domain.AgentHealthy, true), at(ttl + time.Nanosecond), cfg, domain.AgentDown},
		{"suspect recovers on fresh heartbeat", lease(domain.AgentSuspect, true), at(time.Second), cfg, domain.AgentHealthy},
		{"suspect expires", lease(domain.AgentSuspect, true), at(time.Minute), cfg, domain.AgentDown},
		{"future last seen counts as fresh", lease(domain.AgentHealthy, true), at(-time.Minute), cfg, domain.AgentHealthy},

		{"probing without probe stays", lease(domain.AgentProbing, false), at(20 * time.Second), cfg, domain.AgentProbing},
		{"probing without probe expires", lease(domain.AgentProbing, false), at(ttl + time.Nanosecond), cfg, domain.AgentDown},
		{"probing with probe is healthy", lease(domain.AgentProbing, true), at(time.Second), cfg, domain.AgentHealthy},
		{"probing with probe but late is suspect", lease(domain.AgentProbing, true), at(20 * time.Second), cfg, domain.AgentSuspect},

		{"down stays down while expired", lease(domain.AgentDown, true), at(ttl + time.Second), cfg, domain.AgentDown},
		{"down with fresh heartbeat must probe again", lease(domain.AgentDown, true), at(time.Second), cfg, domain.AgentProbing},

		{"draining ignores the clock", lease(domain.AgentDraining, true), at(time.Hour), cfg, domain.AgentDraining},
		{"offline ignores the clock", lease(domain.AgentOffline, true), at(0), cfg, domain.AgentOffline},

		{"fraction 0.8 keeps healthy at 0.8", lease(domain.AgentHealthy, true), at(24 * time.Second), domain.LeaseConfig{SuspectAfterFraction: 0.8}, domain.AgentHealthy},
		{"fraction 0.8 suspect past it", lease(domain.AgentHealthy, true), at(24*time.Second + 1), domain.LeaseConfig{SuspectAfterFraction: 0.8}, domain.AgentSuspect},
		{"fraction 1 never suspect", lease(domain.AgentHealthy, true), at(ttl), domain.LeaseConfig{SuspectAfterFraction: 1}, domain.AgentHealthy},
		{"zero fraction means default", lease(domain.AgentHealthy, true), at(16 * time.Second), domain.LeaseConfig{}, domain.AgentSuspect},
		{"zero fraction default keeps healthy", lease(domain.AgentHealthy, true), at(15 * time.Second), domain.LeaseConfig{}, domain.AgentHealthy},
		{"NaN fraction means default", lease(domain.AgentHealthy, true), at(16 * time.Second), domain.LeaseConfig{SuspectAfterFraction: math.NaN()}, domain.AgentSuspect},
		{"fraction above 1 means default", lease(domain.AgentHealthy, true), at(16 * time.Second), domain.LeaseConfig{SuspectAfterFraction: 2}, domain.AgentSuspect},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, domain.EvaluateLease(tc.l, tc.now, tc.cfg))
		})
	}
}

// TestEvaluateLeaseAgreesWithTransitions checks that whatever EvaluateLease
// decides, the transition table allows through the signal a reaper would send.
func TestEvaluateLeaseAgreesWithTransitions(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	const ttl = 10 * time.Second
	signalFor := map[domain.AgentState]domain.AgentSignal{
		domain.AgentDown:    domain.SignalLeaseExpired,
		domain.AgentSuspect: domain.SignalHeartbeatLate,
		domain.AgentHealthy: domain.SignalHeartbeat,
		domain.AgentProbing: domain.SignalHeartbeat,
	}
	for _, s := range allAgentStates {
		for _, ok := range []bool{false, true} {
			for d := time.Duration(0); d <= 2*ttl; d += time.Second {
				l := domain.AgentLease{State: s, LastSeen: t0, TTL: ttl, ProbeOK: ok}
				next := domain.EvaluateLease(l, t0.Add(d), domain.DefaultLeaseConfig())
				if next == s {
					continue
				}
				from := s
				if s == domain.AgentProbing && ok {
					// The probe already succeeded: the agent is HEALTHY first.
					from = domain.AgentHealthy
					if next == from {
						continue
					}
				}
				got, err := domain.AgentTransition(from, signalFor[next])
				require.NoError(t, err, "%s -> %s after %s", s, next, d)
				require.Equal(t, next, got, "%s after %s", s, d)
			}
		}
	}
}

func TestAgentLeaseExpired(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	l := domain.AgentLease{LastSeen: t0, TTL: time.Second}
	require.False(t, l.Expired(t0.Add(time.Second)))
	require.True(t, l.Expired(t0.Add(time.Second+1)))
}

func TestApplyAgentSignal(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	cfg := domain.DefaultLeaseConfig()

	l, err := domain.ApplyAgentSignal(domain.AgentLease{TTL: 10 * time.Second}, domain.SignalRegistered, at(0))
	require.NoError(t, err)
	require.Equal(t, domain.AgentLease{State: domain.AgentProbing, RegisteredAt: at(0), LastSeen: at(0), TTL: 10 * time.Second}, l)

	l, err = domain.ApplyAgentSignal(l, domain.SignalHeartbeat, at(3))
	require.NoError(t, err)
	require.Equal(t, at(3), l.LastSeen)
	require.Equal(t, domain.AgentProbing, domain.EvaluateLease(l, at(4), cfg))

	l, err = domain.ApplyAgentSignal(l, domain.SignalProbeSucceeded, at(4))
	require.NoError(t, err)
	require.Equal(t, domain.AgentHealthy, l.State)
	require.True(t, l.ProbeOK)

	l, err = domain.ApplyAgentSignal(l, domain.SignalLeaseExpired, at(20))
	require.NoError(t, err)
	require.Equal(t, domain.AgentDown, l.State)

	// Back from DOWN: PROBING again, and the old probe no longer counts.
	l, err = domain.ApplyAgentSignal(l, domain.SignalHeartbeat, at(21))
	require.NoError(t, err)
	require.Equal(t, domain.AgentProbing, l.State)
	require.False(t, l.ProbeOK)
	require.Equal(t, at(21), l.LastSeen)
	require.Equal(t, domain.AgentProbing, domain.EvaluateLease(l, at(22), cfg))

	off, err := domain.ApplyAgentSignal(l, domain.SignalOffline, at(22))
	require.NoError(t, err)
	same, err := domain.ApplyAgentSignal(off, domain.SignalHeartbeat, at(23))
	require.ErrorIs(t, err, domain.ErrIllegalAgentTransition)
	require.Equal(t, off, same, "an illegal signal leaves the lease as it was")

	// A restart while HEALTHY forgets the probe.
	h := domain.AgentLease{State: domain.AgentHealthy, ProbeOK: true, TTL: time.Second}
	h, err = domain.ApplyAgentSignal(h, domain.SignalRegistered, at(30))
	require.NoError(t, err)
	require.Equal(t, domain.AgentProbing, h.State)
	require.False(t, h.ProbeOK)
	require.Equal(t, at(30), h.RegisteredAt)
}

func TestSelfPreservation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		total, lapsing int
		threshold      float64
		want           bool
	}{
		{0, 0, 0.5, false},
		{1, 1, 0.5, false}, // a lone agent lapsing is just that agent
		{2, 1, 0.5, false}, // exactly half is not more than half
		{2, 2, 0.5, true},
		{4, 2, 0.5, false},
		{4, 3, 0.5, true},
		{10, 5, 0.5, false},
		{10, 6, 0.5, true},
		{10, 6, 0, true},  // zero means the default
		{10, 5, 0, false}, // zero means the default
		{10, 6, math.NaN(), true},
		{10, 3, 0.25, true},
		{10, 2, 0.25, false},
		{10, 10, 1, false}, // a threshold of 1 never triggers
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, domain.SelfPreservation(tc.total, tc.lapsing, tc.threshold),
			"total=%d lapsing=%d threshold=%v", tc.total, tc.lapsing, tc.threshold)
	}
}

func TestDecidePreservation(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name           string
		total, lapsing int
		since          time.Time
		bound          time.Duration
		want           domain.Preservation
	}{
		{"nothing lapses", 4, 0, time.Time{}, 0, domain.PreserveNone},
		{"a minority lapses", 4, 2, time.Time{}, 0, domain.PreserveNone},
		{"a minority ends an open episode", 4, 1, now.Add(-time.Minute), 0, domain.PreserveNone},
		{"a lone agent is only itself", 1, 1, time.Time{}, 0, domain.PreserveNone},
		{"most lapse: an episode begins", 4, 3, time.Time{}, 0, domain.PreserveBegin},
		{"inside the default bound", 4, 3, now.Add(-4*time.Minute - 59*time.Second), 0, domain.PreserveHold},
		{"at the default bound it expires", 4, 3, now.Add(-5 * time.Minute), 0, domain.PreserveExpired},
		{"a configured bound", 4, 3, now.Add(-2 * time.Minute), time.Minute, domain.PreserveExpired},
		{"inside a configured bound", 4, 3, now.Add(-30 * time.Second), time.Minute, domain.PreserveHold},
	} {
		require.Equal(t, tc.want, domain.DecidePreservation(tc.total, tc.lapsing, 0.5, tc.since, now, tc.bound), tc.name)
	}
}

// An operator's holds: a confirmed-down or drained agent stays so through
// heartbeats, lease sweeps and registrations until it is brought up; up
// ends the probe window at once, and a HEALTHY agent cannot be brought up.
func TestOperatorHolds(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cfg := domain.LeaseConfig{}
	healthy := domain.AgentLease{State: domain.AgentHealthy, LastSeen: now, TTL: 10 * time.Second, ProbeOK: true}

	down, err := domain.ApplyAgentSignal(healthy, domain.SignalConfirmDown, now)
	require.NoError(t, err)
	require.Equal(t, domain.AgentDown, down.State)
	require.Equal(t, domain.HoldDown, down.Hold)
	beat, err := domain.ApplyAgentSignal(down, domain.SignalHeartbeat, now.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, domain.AgentDown, beat.State, "a heartbeat does not revive a confirmed-down agent")
	require.Equal(t, now.Add(time.Second), beat.LastSeen, "but its lease is renewed")
	require.Equal(t, domain.AgentDown, domain.EvaluateLease(beat, now.Add(2*time.Second), cfg), "nor does the lease sweep")

	up, err := domain.ApplyAgentSignal(beat, domain.SignalUp, now.Add(2*time.Second))
	require.NoError(t, err)
	require.Equal(t, domain.AgentHealthy, up.State)
	require.Equal(t, domain.HoldNone, up.Hold)
	require.True(t, up.ProbeOK)

	again, err := domain.ApplyAgentSignal(down, domain.SignalRegistered, now.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, domain.AgentDown, again.State, "a confirmed-down agent that registers again stays down")
	require.Equal(t, domain.HoldDown, again.Hold, "a registration lifts no hold: only up does")
	free, err := domain.ApplyAgentSignal(healthy, domain.SignalRegistered, now.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, domain.AgentProbing, free.State)
	_, err = domain.ApplyAgentSignal(healthy, domain.SignalUp, now)
	require.ErrorIs(t, err, domain.ErrIllegalAgentTransition, "up on a HEALTHY agent: 409")

	probing := domain.AgentLease{State: domain.AgentProbing, LastSeen: now, TTL: 10 * time.Second}
	up, err = domain.ApplyAgentSignal(probing, domain.SignalUp, now)
	require.NoError(t, err)
	require.Equal(t, domain.AgentHealthy, up.State, "up ends the probe window now")
	require.Equal(t, domain.AgentHealthy, domain.EvaluateLease(up, now.Add(time.Second), cfg), "and the sweep keeps it")

	drained, err := domain.ApplyAgentSignal(healthy, domain.SignalDrain, now)
	require.NoError(t, err)
	require.Equal(t, domain.AgentDraining, drained.State)
	require.Equal(t, domain.HoldDrain, drained.Hold)
	require.Equal(t, domain.AgentDraining, domain.EvaluateLease(drained, now.Add(time.Hour), cfg))

	// A finished drain holds through heartbeats and registrations until up.
	offline := drained
	offline.State = domain.AgentOffline
	beat, err = domain.ApplyAgentSignal(offline, domain.SignalHeartbeat, now.Add(time.Second))
	require.NoError(t, err, "a drained agent keeps its lease")
	require.Equal(t, domain.AgentOffline, beat.State)
	back, err := domain.ApplyAgentSignal(offline, domain.SignalRegistered, now.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, domain.AgentDraining, back.State, "registered again, it is still drained")
	require.Equal(t, domain.HoldDrain, back.Hold)
	up, err = domain.ApplyAgentSignal(offline, domain.SignalUp, now.Add(time.Minute))
	require.NoError(t, err, "up after a finished drain")
	require.Equal(t, domain.AgentHealthy, up.State)
	require.Equal(t, domain.HoldNone, up.Hold)
	gone := domain.AgentLease{State: domain.AgentOffline, LastSeen: now, TTL: 10 * time.Second}
	_, err = domain.ApplyAgentSignal(gone, domain.SignalUp, now)
	require.ErrorIs(t, err, domain.ErrIllegalAgentTransition, "an agent that went offline by itself must register again")
	_, err = domain.ApplyAgentSignal(gone, domain.SignalHeartbeat, now)
	require.ErrorIs(t, err, domain.ErrIllegalAgentTransition)

	// Brought up with an expired lease, the sweep sends it DOWN again.
	stale := domain.AgentLease{State: domain.AgentDown, LastSeen: now.Add(-time.Hour), TTL: 10 * time.Second}
	up, err = domain.ApplyAgentSignal(stale, domain.SignalUp, now)
	require.NoError(t, err)
	require.Equal(t, domain.AgentHealthy, up.State)
	require.Equal(t, domain.AgentDown, domain.EvaluateLease(up, now, cfg))
}

func TestHealthReportValidate(t *testing.T) {
	t.Parallel()
	i := func(n int) *int { return &n }
	f := func(x float64) *float64 { return &x }
	require.NoError(t, domain.HealthReport{}.Validate())
	require.NoError(t, domain.HealthReport{InFlight: i(3), QueueLength: i(0), ErrorRate: f(0), PoolUsage: f(1)}.Validate())
	for field, h := range map[string]domain.HealthReport{
		"in_flight":    {InFlight: i(-1)},
		"queue_length": {QueueLength: i(-1)},
		"error_rate":   {ErrorRate: f(1.5)},
		"pool_usage":   {PoolUsage: f(math.NaN())},
	} {
		var fe *domain.FieldError
		require.ErrorAs(t, h.Validate(), &fe, field)
		require.Equal(t, field, fe.Field)
	}
	big := domain.HealthReport{QueueLength: i(domain.MaxQueueLength + 1)}
	require.Error(t, big.Validate())
}

func TestProbeInterval(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want time.Duration }{
		{0, time.Second}, {1500 * time.Millisecond, time.Second}, {2 * time.Second, 2 * time.Second},
		{5 * time.Second, 4 * time.Second}, {20 * time.Second, 16 * time.Second},
		{40 * time.Second, 30 * time.Second}, {time.Hour, 30 * time.Second}, {-time.Second, time.Second},
	} {
		require.Equal(t, tc.want, domain.ProbeInterval(tc.in), "after %s", tc.in)
	}
}
