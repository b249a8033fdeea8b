package domain_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
)

func TestRoutingPolicy(t *testing.T) {
	t.Parallel()
	d := domain.DefaultRoutingPolicy()
	require.NoError(t, d.Validate())
	require.Equal(t, domain.DefaultRouteConfig(), d.Route(), "the default policy is the compiled-in router")
	require.Equal(t, 0.25, d.Breaker().ErrorRate)
	for field, mod := range map[string]func(*domain.RoutingPolicy){
		"weight_max":           func(p *domain.RoutingPolicy) { p.WeightMax = -1 },
		"exact_capability":     func(p *domain.RoutingPolicy) { p.ExactCapability = math.NaN() },
		"failure_threshold":    func(p *domain.RoutingPolicy) { p.FailureThreshold = 0 },
		"breaker_error_rate":   func(p *domain.RoutingPolicy) { p.BreakerErrorRate = 1.5 },
		"breaker_window_s":     func(p *domain.RoutingPolicy) { p.BreakerWindowS = 0 },
		"failure_min_attempts": func(p *domain.RoutingPolicy) { p.FailureMinAttempts = 0 },
		"capacity_wait_ms":     func(p *domain.RoutingPolicy) { p.CapacityWaitMS = 5 },
		"failure_window_s":     func(p *domain.RoutingPolicy) { p.FailureWindowS = 30 },
	} {
		p := d
		mod(&p)
		var fe *domain.FieldError
		require.ErrorAs(t, p.Validate(), &fe, field)
		require.Equal(t, field, fe.Field)
	}
}
