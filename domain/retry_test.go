package domain_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
)

func TestBackoff(t *testing.T) {
	t.Parallel()
	s := time.Second
	for _, tc := range []struct {
		next      int
		base, max time.Duration
		jitter    float64
		want      time.Duration
	}{
		{1, 10 * s, 300 * s, 0.5, 0},
		{2, 10 * s, 300 * s, 0.5, 10 * s},
		{3, 10 * s, 300 * s, 0.5, 20 * s},
		{4, 10 * s, 300 * s, 0.5, 40 * s},
		{7, 10 * s, 300 * s, 0.5, 300 * s}, // 320 s capped
		{50, 10 * s, 300 * s, 0.5, 300 * s},
		{2, 10 * s, 300 * s, 0, 7500 * time.Millisecond},
		{2, 10 * s, 300 * s, 0.999999, 12499990 * time.Microsecond},
		{7, 10 * s, 300 * s, 0.99, 300 * s}, // jitter never exceeds the cap
		{3, 100 * time.Millisecond, 150 * time.Millisecond, 0.5, 150 * time.Millisecond},
	} {
		got := domain.Backoff(tc.next, tc.base, tc.max, tc.jitter)
		require.InDelta(t, float64(tc.want), float64(got), float64(time.Millisecond), "%+v", tc)
	}
	require.Equal(t, 30*s, domain.RetryAfter(10*s, 30*s))
	require.Equal(t, 10*s, domain.RetryAfter(10*s, 0))
}

func TestRouteWait(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		capacity bool
		since    time.Time
		limit    time.Duration
		want     bool
	}{
		{"at capacity inside the limit", true, now.Add(-29 * time.Second), 30 * time.Second, true},
		{"at capacity at the limit the attempt is spent", true, now.Add(-30 * time.Second), 30 * time.Second, false},
		{"at capacity with no limit, the default bounds it", true, now.Add(-29 * time.Second), -1, true},
		{"at capacity with no limit, past the default", true, now.Add(-domain.DefaultRouteWait), -1, false},
		{"first wait begins", false, time.Time{}, 30 * time.Second, true},
		{"inside the limit", false, now.Add(-29 * time.Second), 30 * time.Second, true},
		{"at the limit the attempt is spent", false, now.Add(-30 * time.Second), 30 * time.Second, false},
		{"past the limit", false, now.Add(-time.Minute), 30 * time.Second, false},
		{"no limit never waits", false, time.Time{}, 0, false},
	} {
		require.Equal(t, tc.want, domain.RouteWait(tc.capacity, tc.since, now, tc.limit), tc.name)
	}
}

func TestNormalizeRouteWait(t *testing.T) {
	t.Parallel()
	base := func(ms int) domain.Submitted {
		return domain.Submitted{Capability: "c", Payload: []byte(`{}`), RouteWaitMS: ms}
	}
	s := base(0)
	require.NoError(t, domain.NormalizeSubmission(&s, 0))
	require.Equal(t, 7*time.Second, s.RouteWait(7*time.Second), "none named: the service's default")
	s = base(1500)
	require.NoError(t, domain.NormalizeSubmission(&s, 0))
	require.Equal(t, 1500*time.Millisecond, s.RouteWait(7*time.Second))
	for _, bad := range []int{-1, int(domain.MaxRouteWait/time.Millisecond) + 1} {
		s := base(bad)
		var fe *domain.FieldError
		require.ErrorAs(t, domain.NormalizeSubmission(&s, 0), &fe)
		require.Equal(t, "route_wait_ms", fe.Field)
	}
	old := domain.Submitted{} // an event written before route_wait_ms
	require.Equal(t, domain.DefaultRouteWait, old.RouteWait(domain.DefaultRouteWait))
}

func TestNormalizeProtocolVersions(t *testing.T) {
	t.Parallel()
	sub := func(vs ...string) domain.Submitted {
		return domain.Submitted{Capability: "c", Payload: []byte(`{}`), Constraints: domain.Constraints{ProtocolVersions: vs}}
	}
	for _, ok := range [][]string{nil, {"1.0"}, {"1.0", "0.3.*"}, {"*"}} {
		s := sub(ok...)
		require.NoError(t, domain.NormalizeSubmission(&s, 0), "%v", ok)
	}
	for _, bad := range [][]string{{""}, {"1.0 beta"}, {"1.*.0"}, make([]string, 17)} {
		s := sub(bad...)
		var fe *domain.FieldError
		require.ErrorAs(t, domain.NormalizeSubmission(&s, 0), &fe, "%v", bad)
		require.Equal(t, "constraints.protocol_versions", fe.Field)
	}
	reg := domain.AgentRegistration{AgentID: "a", Capabilities: []string{"c"}, Endpoint: "http://127.0.0.1:9/", ProtocolVersion: "1.0"}
	require.NoError(t, reg.Normalize())
	reg.ProtocolVersion = "1.0; drop"
	var fe *domain.FieldError
	require.ErrorAs(t, reg.Normalize(), &fe)
	require.Equal(t, "protocol_version", fe.Field)
}

func TestRouteWaitInterval(t *testing.T) {
	t.Parallel()
	base := 250 * time.Millisecond
	require.Equal(t, base, domain.RouteWaitInterval(0, base))
	require.Equal(t, base, domain.RouteWaitInterval(time.Second, base))
	require.Equal(t, time.Second, domain.RouteWaitInterval(4*time.Second, base))
	require.Equal(t, domain.MaxRouteWaitInterval, domain.RouteWaitInterval(time.Minute, base))
}

func TestCapacityRecheck(t *testing.T) {
	t.Parallel()
	base := 250 * time.Millisecond
	require.Equal(t, domain.MinCapacityRecheck, domain.CapacityRecheck(0, base))
	require.Equal(t, 3*time.Second, domain.CapacityRecheck(3*time.Second, base))
	require.Equal(t, domain.MaxCapacityRecheck, domain.CapacityRecheck(time.Minute, base))
}
