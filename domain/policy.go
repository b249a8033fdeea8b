package domain

import "time"

// RoutingPolicy is a namespace's routing policy: the router's score terms
// and thresholds, the breaker's, and the capacity wait. It is kept in the
// database (PUT /v1/policies/routing), versioned, and every process applies
// a change at its next snapshot (within a second). Version 0 is the
// compiled-in default.
type RoutingPolicy struct {
	Version            int     `json:"version"`
	ExactCapability    float64 `json:"exact_capability"`
	AliasHit           float64 `json:"alias_hit"`
	HintSimilarityMax  float64 `json:"hint_similarity_max"`
	WeightMax          float64 `json:"weight_max"`
	LoadMax            float64 `json:"load_max"`
	FailurePenalty     float64 `json:"failure_penalty"`
	FailureThreshold   float64 `json:"failure_threshold"`
	FailureMinAttempts int     `json:"failure_min_attempts"`
	FailureWindowS     int     `json:"failure_window_s"`
	SuspectPenalty     float64 `json:"suspect_penalty"`
	BreakerErrorRate   float64 `json:"breaker_error_rate"`
	BreakerWindowS     int     `json:"breaker_window_s"`
	BreakerMinAttempts int     `json:"breaker_min_attempts"`
	BreakerCoolDownS   int     `json:"breaker_cool_down_s"`
	CapacityWaitMS     int     `json:"capacity_wait_ms"`
}

// DefaultRoutingPolicy is the compiled-in policy (version 0).
func DefaultRoutingPolicy() RoutingPolicy {
	r := DefaultRouteConfig()
	return RoutingPolicy{
		ExactCapability: r.ExactMatch, AliasHit: r.AliasHit, HintSimilarityMax: r.TrigramMax, WeightMax: r.WeightMax,
		LoadMax: r.LoadMax, FailurePenalty: r.FailurePenalty, FailureThreshold: r.FailureThreshold,
		FailureMinAttempts: r.MinAttemptsForFailure, FailureWindowS: 300, SuspectPenalty: r.SuspectPenalty,
		BreakerErrorRate: 0.25, BreakerWindowS: 60, BreakerMinAttempts: 10, BreakerCoolDownS: 30, CapacityWaitMS: 250,
	}
}

// Validate checks every field, returning the first problem as a
// *FieldError: score terms 0-1000, rates in 0..1, windows 1-3600 s,
// attempts 1-10,000, a capacity wait of 10-60,000 ms.
func (p RoutingPolicy) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"exact_capability", p.ExactCapability}, {"alias_hit", p.AliasHit}, {"hint_similarity_max", p.HintSimilarityMax},
		{"weight_max", p.WeightMax}, {"load_max", p.LoadMax}, {"failure_penalty", p.FailurePenalty}, {"suspect_penalty", p.SuspectPenalty}} {
		if !(f.v >= 0 && f.v <= 1000) {
			return fieldErr(f.name, "must be between 0 and 1000")
		}
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"failure_threshold", p.FailureThreshold}, {"breaker_error_rate", p.BreakerErrorRate}} {
		if !(f.v > 0 && f.v <= 1) {
			return fieldErr(f.name, "must be a fraction above 0 and at most 1")
		}
	}
	for _, f := range []struct {
		name      string
		v, lo, hi int
	}{{"failure_min_attempts", p.FailureMinAttempts, 1, 10_000}, {"failure_window_s", p.FailureWindowS, 60, 3600},
		{"breaker_min_attempts", p.BreakerMinAttempts, 1, 10_000},
		{"breaker_window_s", p.BreakerWindowS, 1, 3600}, {"breaker_cool_down_s", p.BreakerCoolDownS, 1, 3600},
		{"capacity_wait_ms", p.CapacityWaitMS, 10, 60_000}} {
		if f.v < f.lo || f.v > f.hi {
			return fieldErr(f.name, "must be between %d and %d", f.lo, f.hi)
		}
	}
	return nil
}

// Route is the router's configuration of the policy.
func (p RoutingPolicy) Route() RouteConfig {
	return RouteConfig{ExactMatch: p.ExactCapability, AliasHit: p.AliasHit, TrigramMax: p.HintSimilarityMax, WeightMax: p.WeightMax,
		LoadMax: p.LoadMax, FailurePenalty: p.FailurePenalty, FailureThreshold: p.FailureThreshold,
		MinAttemptsForFailure: p.FailureMinAttempts, SuspectPenalty: p.SuspectPenalty}
}

// Breaker is the breaker's configuration of the policy.
func (p RoutingPolicy) Breaker() BreakerConfig {
	return BreakerConfig{ErrorRate: p.BreakerErrorRate, Window: time.Duration(p.BreakerWindowS) * time.Second,
		MinAttempts: p.BreakerMinAttempts, CoolDown: time.Duration(p.BreakerCoolDownS) * time.Second}
}

// FailureWindow is how far back the router's failure term looks.
func (p RoutingPolicy) FailureWindow() time.Duration {
	return time.Duration(p.FailureWindowS) * time.Second
}

// CapacityWait is how long a job waits before it looks for a slot again.
func (p RoutingPolicy) CapacityWait() time.Duration {
	return time.Duration(p.CapacityWaitMS) * time.Millisecond
}

// EventRoutingPolicyChanged, on "policy:routing:<namespace>": a new
// version of the namespace's routing policy.
const EventRoutingPolicyChanged EventType = "ROUTING_POLICY_CHANGED"

// RoutingPolicyChanged is its data: the policy before and after.
type RoutingPolicyChanged struct {
	Namespace string        `json:"namespace"`
	From      RoutingPolicy `json:"from"`
	To        RoutingPolicy `json:"to"`
}
