package domain_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/agentreach/agentreach/domain"
)

// benchFleet is 1,000 agents over 50 capabilities (about 20 per capability,
// some agents serving two), mostly in one namespace, with the mix of states,
// breakers, loads and canaries a real fleet has, plus hints a caller would
// write.
func benchFleet() ([]domain.RouteAgent, []domain.RouteRequest) {
	rng := rand.New(rand.NewPCG(42, 1))
	subjects := []string{"pdf", "invoice", "receipt", "contract", "email", "image", "audio", "video", "code", "sql"}
	verbs := []string{"summarize", "extract", "translate", "classify", "redact"}
	var caps [][3]string // capability, alias, second alias
	for _, s := range subjects {
		for _, v := range verbs {
			caps = append(caps, [3]string{s + "." + v, s + " " + v + "r", v + " " + s + " documents"})
		}
	}
	states := []domain.AgentState{domain.AgentHealthy, domain.AgentHealthy, domain.AgentHealthy, domain.AgentHealthy,
		domain.AgentSuspect, domain.AgentProbing, domain.AgentDown}
	agents := make([]domain.RouteAgent, 1000)
	for i := range agents {
		c := caps[i%len(caps)]
		a := domain.RouteAgent{
			ID:             fmt.Sprintf("agent-%04d", i),
			Namespace:      "default",
			Capabilities:   []string{c[0]},
			Aliases:        []string{c[1], c[2]},
			Protocol:       "http",
			Version:        fmt.Sprintf("1.%d.0", i%3),
			Weight:         10 + rng.IntN(91),
			MaxConcurrent:  rng.IntN(8),
			RolloutPercent: 100,
			State:          states[rng.IntN(len(states))],
			Breaker:        domain.BreakerClosed,
			FailureRate:    rng.Float64() * 0.3,
			RecentAttempts: rng.IntN(50),
		}
		if a.MaxConcurrent > 0 {
			a.InFlight = rng.IntN(a.MaxConcurrent + 1)
		}
		if i%7 == 0 {
			a.Capabilities = append(a.Capabilities, caps[(i+1)%len(caps)][0])
		}
		if i%23 == 0 {
			a.Breaker = domain.BreakerOpen
		}
		if i%31 == 0 {
			a.RolloutPercent = 10
		}
		if i%10 == 9 {
			a.Namespace = "team-b"
		}
		if i%53 == 0 {
			a.Context = map[string]any{"accepting": false}
		}
		agents[i] = a
	}
	hints := []string{
		"please summarize the attached quarterly report pdf",
		"extract line items and totals from this invoice",
		"Translate the contract into German, keep the legal terms",
		"classify incoming support emails by urgency",
		"redact personal data from the audio transcript before sharing",
		"",
	}
	reqs := make([]domain.RouteRequest, 64)
	for i := range reqs {
		reqs[i] = domain.RouteRequest{
			JobID:      fmt.Sprintf("job-%06d", i),
			Namespace:  "default",
			Capability: caps[rng.IntN(len(caps))][0],
			Hint:       hints[i%len(hints)],
		}
		if i%4 == 0 {
			reqs[i].Version = "1.*"
		}
	}
	return agents, reqs
}

func BenchmarkRoute1000Agents50Caps(b *testing.B) {
	agents, reqs := benchFleet()
	cfg := domain.DefaultRouteConfig()
	rng := rand.New(rand.NewPCG(1, 2))

	b.Run("index", func(b *testing.B) {
		ix := domain.NewRouteIndex(agents)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			_ = ix.Route(reqs[i%len(reqs)], cfg, rng.IntN)
			i++
		}
	})
	b.Run("scan", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			_ = domain.Route(agents, reqs[i%len(reqs)], cfg, rng.IntN)
			i++
		}
	})
}

// BenchmarkNewRouteIndex is the cost of indexing a fresh snapshot, which the
// index route pays once per dispatch round.
func BenchmarkNewRouteIndex(b *testing.B) {
	agents, _ := benchFleet()
	b.ReportAllocs()
	for b.Loop() {
		_ = domain.NewRouteIndex(agents)
	}
}
