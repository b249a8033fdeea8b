package domain_test

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
)

const testCap = "pdf.summarize"

// ra is a routable agent for testCap in namespace "ns"; mods adjust it.
func ra(id string, mods ...func(*domain.RouteAgent)) domain.RouteAgent {
	a := domain.RouteAgent{
		ID:             id,
		Namespace:      "ns",
		Capabilities:   []string{"translate", testCap},
		Protocol:       "http",
		Version:        "1.2.3",
		Weight:         50,
		RolloutPercent: 100,
		State:          domain.AgentHealthy,
		Breaker:        domain.BreakerClosed,
	}
	for _, m := range mods {
		m(&a)
	}
	return a
}

func req(mods ...func(*domain.RouteRequest)) domain.RouteRequest {
	r := domain.RouteRequest{JobID: "job-1", Namespace: "ns", Capability: testCap}
	for _, m := range mods {
		m(&r)
	}
	return r
}

// routeBoth routes with and without an index, checks they agree, and returns
// the result of the plain Route.
func routeBoth(t *testing.T, agents []domain.RouteAgent, r domain.RouteRequest, cfg domain.RouteConfig, rnd func(int) int) domain.RouteResult {
	t.Helper()
	before := cloneAgents(agents)
	plain := domain.Route(agents, r, cfg, rnd)
	indexed := domain.NewRouteIndex(agents).Route(r, cfg, rnd)
	require.Equal(t, before, agents, "Route must not modify its input")

	require.Equal(t, plain.Candidates, indexed.Candidates)
	require.Equal(t, plain.Chosen, indexed.Chosen)
	require.Equal(t, plain.AllAtCapacity, indexed.AllAtCapacity)
	// The index only looks at agents with the namespace and capability.
	var want []domain.RouteRejection
	for _, rej := range plain.Rejected {
		if rej.Reason != domain.RouteRejectNamespace && rej.Reason != domain.RouteRejectCapability {
			want = append(want, rej)
		}
	}
	require.ElementsMatch(t, want, indexed.Rejected)
	if len(plain.Candidates) > 0 {
		require.Equal(t, plain.Candidates[0].AgentID, plain.Chosen)
	} else {
		require.Empty(t, plain.Chosen)
	}
	return plain
}

func cloneAgents(in []domain.RouteAgent) []domain.RouteAgent {
	out := slices.Clone(in)
	for i := range out {
		out[i].Capabilities = slices.Clone(out[i].Capabilities)
		out[i].Aliases = slices.Clone(out[i].Aliases)
	}
	return out
}

func candidateIDs(res domain.RouteResult) []string {
	ids := make([]string, len(res.Candidates))
	for i, c := range res.Candidates {
		ids[i] = c.AgentID
	}
	return ids
}

func reasonOf(res domain.RouteResult, id string) string {
	for _, r := range res.Rejected {
		if r.AgentID == id {
			return r.Reason
		}
	}
	return ""
}

func term(c domain.RouteCandidate, name string) float64 {
	for _, tm := range c.Terms {
		if tm.Name == name {
			return tm.Value
		}
	}
	panic("no term " + name)
}

func TestRouteFilters(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		agent  domain.RouteAgent
		req    domain.RouteRequest
		reason string // "" = the agent is a candidate
	}{
		{"eligible", ra("a"), req(), ""},
		{"namespace mismatch", ra("a", func(a *domain.RouteAgent) { a.Namespace = "other" }), req(), domain.RouteRejectNamespace},
		{"empty namespace is its own namespace", ra("a", func(a *domain.RouteAgent) { a.Namespace = "" }), req(), domain.RouteRejectNamespace},
		{"capability missing", ra("a", func(a *domain.RouteAgent) { a.Capabilities = []string{"ocr"} }), req(), domain.RouteRejectCapability},
		{"capability match is exact, case included", ra("a", func(a *domain.RouteAgent) { a.Capabilities = []string{"PDF.summarize"} }), req(), domain.RouteRejectCapability},
		{"capability prefix is no match", ra("a", func(a *domain.RouteAgent) { a.Capabilities = []string{"pdf"} }), req(), domain.RouteRejectCapability},
		{"suspect is routable", ra("a", func(a *domain.RouteAgent) { a.State = domain.AgentSuspect }), req(), ""},
		{"probing", ra("a", func(a *domain.RouteAgent) { a.State = domain.AgentProbing }), req(), domain.RouteRejectState},
		{"down", ra("a", func(a *domain.RouteAgent) { a.State = domain.AgentDown }), req(), domain.RouteRejectState},
		{"draining", ra("a", func(a *domain.RouteAgent) { a.State = domain.AgentDraining }), req(), domain.RouteRejectState},
		{"offline", ra("a", func(a *domain.RouteAgent) { a.State = domain.AgentOffline }), req(), domain.RouteRejectState},
		{"no state", ra("a", func(a *domain.RouteAgent) { a.State = "" }), req(), domain.RouteRejectState},
		{"breaker open", ra("a", func(a *domain.RouteAgent) { a.Breaker = domain.BreakerOpen }), req(), domain.RouteRejectBreakerOpen},
		{"paused", ra("a", func(a *domain.RouteAgent) { a.PausedUntil = time.Unix(200, 0) }), reqAt(time.Unix(100, 0)), domain.RouteRejectPaused},
		{"pause over", ra("a", func(a *domain.RouteAgent) { a.PausedUntil = time.Unix(200, 0) }), reqAt(time.Unix(200, 0)), ""},
		{"breaker half-open passes", ra("a", func(a *domain.RouteAgent) { a.Breaker = domain.BreakerHalfOpen }), req(), ""},
		{"breaker unknown counts as closed", ra("a", func(a *domain.RouteAgent) { a.Breaker = "" }), req(), ""},
		{"not accepting", ra("a", func(a *domain.RouteAgent) { a.Context = map[string]any{"accepting": false} }), req(), domain.RouteRejectNotAccepting},
		{"accepting", ra("a", func(a *domain.RouteAgent) { a.Context = map[string]any{"accepting": true, "mode": "normal"} }), req(), ""},
		{"accepting as a string is not read", ra("a", func(a *domain.RouteAgent) { a.Context = map[string]any{"accepting": "false"} }), req(), ""},
		{"inspection mode", ra("a", func(a *domain.RouteAgent) { a.Context = map[string]any{"mode": "inspection"} }), req(), domain.RouteRejectInspection},
		{"version exact", ra("a"), req(func(r *domain.RouteRequest) { r.Version = "1.2.3" }), ""},
		{"version mismatch", ra("a"), req(func(r *domain.RouteRequest) { r.Version = "1.2.4" }), domain.RouteRejectVersion},
		{"version wildcard", ra("a"), req(func(r *domain.RouteRequest) { r.Version = "1.2.*" }), ""},
		{"version major wildcard", ra("a"), req(func(r *domain.RouteRequest) { r.Version = "1.*" }), ""},
		{"version any", ra("a"), req(func(r *domain.RouteRequest) { r.Version = "*" }), ""},
		{"version wildcard is per component", ra("a", func(a *domain.RouteAgent) { a.Version = "1.20.0" }), req(func(r *domain.RouteRequest) { r.Version = "1.2.*" }), domain.RouteRejectVersion},
		{"version wildcard mismatch", ra("a"), req(func(r *domain.RouteRequest) { r.Version = "2.*" }), domain.RouteRejectVersion},
		{"version bare star suffix is exact", ra("a"), req(func(r *domain.RouteRequest) { r.Version = "1.2*" }), domain.RouteRejectVersion},
		{"protocol match ignores case", ra("a"), req(func(r *domain.RouteRequest) { r.Protocol = "HTTP" }), ""},
		{"protocol mismatch", ra("a"), req(func(r *domain.RouteRequest) { r.Protocol = "grpc" }), domain.RouteRejectProtocol},
		{"canary out of bucket", ra("a", func(a *domain.RouteAgent) { a.RolloutPercent = 0 }), req(), domain.RouteRejectCanary},
		{"canary in bucket", ra("a", func(a *domain.RouteAgent) { a.RolloutPercent = domain.CanaryBucket("job-1") + 1 }), req(), ""},
		{"canary just out of bucket", ra("a", func(a *domain.RouteAgent) { a.RolloutPercent = domain.CanaryBucket("job-1") }), req(), domain.RouteRejectCanary},
		{"at capacity", ra("a", func(a *domain.RouteAgent) { a.MaxConcurrent, a.InFlight = 2, 2 }), req(), domain.RouteRejectAtCapacity},
		{"over capacity", ra("a", func(a *domain.RouteAgent) { a.MaxConcurrent, a.InFlight = 2, 3 }), req(), domain.RouteRejectAtCapacity},
		{"below capacity", ra("a", func(a *domain.RouteAgent) { a.MaxConcurrent, a.InFlight = 2, 1 }), req(), ""},
		{"unlimited capacity", ra("a", func(a *domain.RouteAgent) { a.MaxConcurrent, a.InFlight = 0, 1000 }), req(), ""},
		{"first failing filter wins", ra("a", func(a *domain.RouteAgent) {
			a.State, a.Breaker, a.MaxConcurrent, a.InFlight = domain.AgentDown, domain.BreakerOpen, 1, 1
		}), req(), domain.RouteRejectState},
		{"breaker before context", ra("a", func(a *domain.RouteAgent) {
			a.Breaker, a.Context = domain.BreakerOpen, map[string]any{"accepting": false}
		}), req(), domain.RouteRejectBreakerOpen},
		{"context before version", ra("a", func(a *domain.RouteAgent) { a.Context = map[string]any{"mode": "inspection"} }),
			req(func(r *domain.RouteRequest) { r.Version = "9" }), domain.RouteRejectInspection},
		{"version before protocol", ra("a"), req(func(r *domain.RouteRequest) { r.Version, r.Protocol = "9", "grpc" }), domain.RouteRejectVersion},
		{"protocol before canary", ra("a", func(a *domain.RouteAgent) { a.RolloutPercent = 0 }),
			req(func(r *domain.RouteRequest) { r.Protocol = "grpc" }), domain.RouteRejectProtocol},
		{"canary before capacity", ra("a", func(a *domain.RouteAgent) { a.RolloutPercent, a.MaxConcurrent, a.InFlight = 0, 1, 1 }),
			req(), domain.RouteRejectCanary},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := routeBoth(t, []domain.RouteAgent{tc.agent}, tc.req, domain.DefaultRouteConfig(), nil)
			if tc.reason == "" {
				require.Equal(t, []string{"a"}, candidateIDs(res))
				require.Empty(t, res.Rejected)
				require.Equal(t, "a", res.Chosen)
				return
			}
			require.Empty(t, res.Candidates)
			require.Equal(t, []domain.RouteRejection{{AgentID: "a", Reason: tc.reason}}, res.Rejected)
			require.Empty(t, res.Chosen)
			require.Equal(t, tc.reason == domain.RouteRejectAtCapacity, res.AllAtCapacity)
		})
	}
}

func TestRouteScoreTerms(t *testing.T) {
	t.Parallel()
	cfg := domain.DefaultRouteConfig()
	cases := []struct {
		name  string
		agent domain.RouteAgent
		hint  string
		term  string
		want  float64
	}{
		{"exact capability", ra("a"), "", domain.RouteTermExactCapability, 100},

		{"alias hit ignores case", ra("a", aliases("pdf", "summarizer")), "Summarise this PDF, please", domain.RouteTermAliasHit, 30},
		{"alias hit needs whole words", ra("a", aliases("pdf")), "merge these pdfs", domain.RouteTermAliasHit, 0},
		{"alias hit inside a word does not count", ra("a", aliases("art")), "start the job", domain.RouteTermAliasHit, 0},
		{"alias hit at the end", ra("a", aliases("pdf")), "read the pdf", domain.RouteTermAliasHit, 30},
		{"alias hit after a later false start", ra("a", aliases("pdf")), "pdfs and one pdf", domain.RouteTermAliasHit, 30},
		{"multi-word alias", ra("a", aliases("speech to text")), "need Speech to Text for this call", domain.RouteTermAliasHit, 30},
		{"alias ending in a symbol", ra("a", aliases("c++")), "review my c++code", domain.RouteTermAliasHit, 30},
		{"alias hit with unicode", ra("a", aliases("résumé")), "parse this RÉSUMÉ now", domain.RouteTermAliasHit, 30},
		{"no hint no alias hit", ra("a", aliases("pdf")), "", domain.RouteTermAliasHit, 0},
		{"capability name is not an alias", ra("a"), "pdf.summarize", domain.RouteTermAliasHit, 0},

		{"similarity to the capability", ra("a"), "summarize pdf", domain.RouteTermHintSimilarity,
			20 * domain.TrigramSimilarity("summarize pdf", testCap)},
		{"similarity to the best alias", ra("a", aliases("ocr", "document summarizer")), "summarize this document", domain.RouteTermHintSimilarity,
			20 * domain.TrigramSimilarity("summarize this document", "document summarizer")},
		{"similarity of identical words is full", ra("a", aliases("invoice parser")), "Invoice PARSER", domain.RouteTermHintSimilarity, 20},
		{"no hint no similarity", ra("a", aliases("pdf")), "", domain.RouteTermHintSimilarity, 0},
		{"symbols only hint", ra("a", aliases("pdf")), "?!", domain.RouteTermHintSimilarity, 0},

		{"weight", ra("a"), "", domain.RouteTermWeight, 10},
		{"full weight", ra("a", func(a *domain.RouteAgent) { a.Weight = 100 }), "", domain.RouteTermWeight, 20},
		{"weight zero counts as one", ra("a", func(a *domain.RouteAgent) { a.Weight = 0 }), "", domain.RouteTermWeight, 0.2},
		{"weight above 100 is clamped", ra("a", func(a *domain.RouteAgent) { a.Weight = 500 }), "", domain.RouteTermWeight, 20},

		{"load", ra("a", func(a *domain.RouteAgent) { a.MaxConcurrent, a.InFlight = 4, 3 }), "", domain.RouteTermLoad, -11.25},
		{"idle", ra("a", func(a *domain.RouteAgent) { a.MaxConcurrent, a.InFlight = 4, 0 }), "", domain.RouteTermLoad, 0},
		{"unlimited has no load", ra("a", func(a *domain.RouteAgent) { a.InFlight = 50 }), "", domain.RouteTermLoad, 0},
		{"a reported queue joins the load", ra("a", func(a *domain.RouteAgent) { a.MaxConcurrent, a.InFlight, a.Queued = 4, 1, 1 }), "", domain.RouteTermLoad, -7.5},
		{"the load term is bounded", ra("a", func(a *domain.RouteAgent) { a.MaxConcurrent, a.InFlight, a.Queued = 4, 1, 100 }), "", domain.RouteTermLoad, -15},

		{"failure rate over threshold", ra("a", failures(0.21, 5)), "", domain.RouteTermFailureRate, -50},
		{"failure rate at threshold", ra("a", failures(0.20, 100)), "", domain.RouteTermFailureRate, 0},
		{"failure rate with too few attempts", ra("a", failures(1, 4)), "", domain.RouteTermFailureRate, 0},

		{"suspect", ra("a", func(a *domain.RouteAgent) { a.State = domain.AgentSuspect }), "", domain.RouteTermSuspect, -25},
		{"healthy", ra("a"), "", domain.RouteTermSuspect, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := routeBoth(t, []domain.RouteAgent{tc.agent}, req(func(r *domain.RouteRequest) { r.Hint = tc.hint }), cfg, nil)
			require.Len(t, res.Candidates, 1)
			c := res.Candidates[0]
			require.InDelta(t, tc.want, term(c, tc.term), 1e-9)

			names := make([]string, len(c.Terms))
			sum := 0.0
			for i, tm := range c.Terms {
				names[i] = tm.Name
				sum += tm.Value
			}
			require.Equal(t, []string{"exact_capability", "alias_hit", "hint_similarity", "weight", "load", "failure_rate", "suspect", "flapping"}, names)
			require.InDelta(t, sum, c.Score, 1e-9, "the score is the sum of its terms")
		})
	}
}

func aliases(a ...string) func(*domain.RouteAgent) {
	return func(ag *domain.RouteAgent) { ag.Aliases = a }
}

func failures(rate float64, attempts int) func(*domain.RouteAgent) {
	return func(a *domain.RouteAgent) { a.FailureRate, a.RecentAttempts = rate, attempts }
}

func TestRouteConfigScalesTerms(t *testing.T) {
	t.Parallel()
	cfg := domain.RouteConfig{ExactMatch: 1, AliasHit: 2, TrigramMax: 3, WeightMax: 4, LoadMax: 5,
		FailurePenalty: 6, FailureThreshold: 0.5, MinAttemptsForFailure: 1, SuspectPenalty: 7}
	a := ra("a", aliases("invoice parser"), failures(0.6, 1), func(a *domain.RouteAgent) {
		a.Weight, a.MaxConcurrent, a.InFlight, a.State = 100, 2, 1, domain.AgentSuspect
	})
	res := routeBoth(t, []domain.RouteAgent{a}, req(func(r *domain.RouteRequest) { r.Hint = "invoice parser" }), cfg, nil)
	require.Equal(t, []domain.ScoreTerm{
		{Name: "exact_capability", Value: 1}, {Name: "alias_hit", Value: 2}, {Name: "hint_similarity", Value: 3},
		{Name: "weight", Value: 4}, {Name: "load", Value: -2.5}, {Name: "failure_rate", Value: -6}, {Name: "suspect", Value: -7},
		{Name: "flapping", Value: 0},
	}, res.Candidates[0].Terms)
	require.InDelta(t, -5.5, res.Candidates[0].Score, 1e-9)
}

func TestDefaultRouteConfig(t *testing.T) {
	t.Parallel()
	require.Equal(t, domain.RouteConfig{ExactMatch: 100, AliasHit: 30, TrigramMax: 20, WeightMax: 20, LoadMax: 15,
		FailurePenalty: 50, FailureThreshold: 0.20, MinAttemptsForFailure: 5, SuspectPenalty: 25}, domain.DefaultRouteConfig())
}

func TestTrigramSimilarity(t *testing.T) {
	t.Parallel()
	cases := []struct {
		a, b string
		want float64
	}{
		// Values as PostgreSQL's pg_trgm computes them.
		{"word", "two words", 4.0 / 11},
		{"word", "word", 1},
		{"Word", "WORD!", 1},
		// "cat": "  c"," ca","cat","at "; "cats": "  c"," ca","cat","ats","ts ".
		{"cat", "cats", 3.0 / 6},
		{"abc", "xyz", 0},                     // no shared trigram
		{"", "abc", 0},                        // no words
		{"--", "--", 0},                       // no words on either side
		{"a b", "b a", 1},                     // word order does not matter
		{"aa aa", "aa", 1},                    // a set, not a bag
		{"ÉCOLE", "école", 1},                 // unicode lower-casing
		{"pdf.summarize", "pdf summarize", 1}, // punctuation separates words
	}
	for _, tc := range cases {
		require.InDelta(t, tc.want, domain.TrigramSimilarity(tc.a, tc.b), 1e-12, "%q vs %q", tc.a, tc.b)
		require.InDelta(t, tc.want, domain.TrigramSimilarity(tc.b, tc.a), 1e-12, "symmetric: %q vs %q", tc.b, tc.a)
	}
}

func TestRouteRanking(t *testing.T) {
	t.Parallel()
	agents := []domain.RouteAgent{
		ra("loaded", func(a *domain.RouteAgent) { a.MaxConcurrent, a.InFlight = 10, 9 }),
		ra("heavy", func(a *domain.RouteAgent) { a.Weight = 100 }),
		ra("flaky", failures(0.5, 20)),
		ra("suspect", func(a *domain.RouteAgent) { a.State = domain.AgentSuspect }),
		ra("alias", aliases("summarizer")),
		ra("b-plain"),
		ra("a-plain"),
	}
	res := routeBoth(t, agents, req(func(r *domain.RouteRequest) { r.Hint = "summarizer for a long report" }), domain.DefaultRouteConfig(), nil)
	require.Equal(t, []string{"alias", "heavy", "a-plain", "b-plain", "loaded", "suspect", "flaky"}, candidateIDs(res))
	require.Equal(t, "alias", res.Chosen)
	for i := 1; i < len(res.Candidates); i++ {
		require.GreaterOrEqual(t, res.Candidates[i-1].Score, res.Candidates[i].Score)
	}
}

func TestRouteTieBreakByWeight(t *testing.T) {
	t.Parallel()
	// "a" has weight 50 (+10); "b" has weight 100 (+20) but half its slots
	// busy (-10 with LoadMax 20): the same score, and b is twice as likely.
	cfg := domain.DefaultRouteConfig()
	cfg.LoadMax = 20
	agents := []domain.RouteAgent{
		ra("b", func(a *domain.RouteAgent) { a.Weight, a.MaxConcurrent, a.InFlight = 100, 2, 1 }),
		ra("a"),
		ra("c", func(a *domain.RouteAgent) { a.Weight = 10 }), // lower score, not in the tie
	}
	fixed := func(v int, gotN *int) func(int) int {
		return func(n int) int { *gotN = n; return v }
	}
	for _, tc := range []struct {
		r    int
		want string
	}{{0, "a"}, {49, "a"}, {50, "b"}, {149, "b"}, {150, "a"} /* out of range wraps */, {-1, "b"}} {
		var n int
		res := routeBoth(t, agents, req(), cfg, fixed(tc.r, &n))
		require.Equal(t, 150, n, "rnd gets the total weight of the tie")
		require.Equal(t, tc.want, res.Chosen, "r=%d", tc.r)
		require.Equal(t, tc.want, res.Candidates[0].AgentID)
		require.Equal(t, "c", res.Candidates[2].AgentID)
		require.Equal(t, res.Candidates[0].Score, res.Candidates[1].Score)
	}
	// Without rnd the tie goes to the first by id.
	require.Equal(t, "a", routeBoth(t, agents, req(), cfg, nil).Chosen)

	// Both outcomes come up about as often as the weights say.
	rng := rand.New(rand.NewPCG(1, 2))
	wins := map[string]int{}
	for range 3000 {
		wins[domain.Route(agents, req(), cfg, rng.IntN).Chosen]++
	}
	require.InDelta(t, 1000, wins["a"], 150)
	require.InDelta(t, 2000, wins["b"], 150)

	// No tie, no draw.
	called := false
	res := domain.Route(agents[1:], req(), cfg, func(int) int { called = true; return 0 })
	require.False(t, called)
	require.Equal(t, "a", res.Chosen)
}

func TestCanaryBucket(t *testing.T) {
	t.Parallel()
	h := fnv.New32a()
	_, _ = h.Write([]byte("job-42"))
	require.Equal(t, int(h.Sum32()%100), domain.CanaryBucket("job-42"))
	require.Equal(t, domain.CanaryBucket("job-42"), domain.CanaryBucket("job-42"), "stable")

	canary := func(p int) []domain.RouteAgent {
		return []domain.RouteAgent{ra("canary", func(a *domain.RouteAgent) { a.RolloutPercent = p })}
	}
	count := func(p int, n int) int {
		ix := domain.NewRouteIndex(canary(p))
		got := 0
		for i := range n {
			r := req(func(r *domain.RouteRequest) { r.JobID = fmt.Sprintf("job-%d", i) })
			res := ix.Route(r, domain.DefaultRouteConfig(), nil)
			if res.Chosen == "canary" {
				got++
			} else {
				require.Equal(t, domain.RouteRejectCanary, reasonOf(res, "canary"))
			}
		}
		return got
	}
	require.Equal(t, 0, count(0, 1000))
	require.Equal(t, 1000, count(100, 1000))
	require.Equal(t, 1000, count(150, 1000), "above 100 counts as all")
	require.Equal(t, 0, count(-5, 1000), "below 0 counts as none")
	ten := count(10, 10000)
	require.InDelta(t, 1000, ten, 100, "about 10%% of jobs, got %d", ten)

	// A job in a 10% canary is in every larger one: raising the rollout
	// only adds jobs.
	for i := range 1000 {
		id := fmt.Sprintf("job-%d", i)
		b := domain.CanaryBucket(id)
		require.True(t, b >= 0 && b < 100)
		in10 := domain.Route(canary(10), req(func(r *domain.RouteRequest) { r.JobID = id }), domain.DefaultRouteConfig(), nil).Chosen != ""
		in50 := domain.Route(canary(50), req(func(r *domain.RouteRequest) { r.JobID = id }), domain.DefaultRouteConfig(), nil).Chosen != ""
		require.Equal(t, b < 10, in10)
		require.True(t, !in10 || in50)
	}
}

func TestRouteExclude(t *testing.T) {
	t.Parallel()
	cfg := domain.DefaultRouteConfig()
	best := ra("best", func(a *domain.RouteAgent) { a.Weight = 100 })
	other := ra("other")
	down := ra("down", func(a *domain.RouteAgent) { a.State = domain.AgentDown })
	full := ra("full", func(a *domain.RouteAgent) { a.MaxConcurrent, a.InFlight = 1, 1 })

	// Another candidate survives: the excluded one is rejected.
	res := routeBoth(t, []domain.RouteAgent{best, other}, req(func(r *domain.RouteRequest) { r.Exclude = []string{"best"} }), cfg, nil)
	require.Equal(t, []string{"other"}, candidateIDs(res))
	require.Equal(t, "other", res.Chosen)
	require.Equal(t, domain.RouteRejectExcluded, reasonOf(res, "best"))

	// Nobody else survives the filters: the excluded agent is still used.
	res = routeBoth(t, []domain.RouteAgent{best, down}, req(func(r *domain.RouteRequest) { r.Exclude = []string{"best"} }), cfg, nil)
	require.Equal(t, "best", res.Chosen)
	require.Equal(t, domain.RouteRejectState, reasonOf(res, "down"))
	require.Empty(t, reasonOf(res, "best"))

	// Everyone is excluded: all stay candidates, ranked as usual.
	res = routeBoth(t, []domain.RouteAgent{other, best}, req(func(r *domain.RouteRequest) { r.Exclude = []string{"best", "other"} }), cfg, nil)
	require.Equal(t, []string{"best", "other"}, candidateIDs(res))
	require.Empty(t, res.Rejected)

	// Exclusion keeps each survivor's terms.
	res = routeBoth(t, []domain.RouteAgent{best, other, ra("third", func(a *domain.RouteAgent) { a.Weight = 75 })},
		req(func(r *domain.RouteRequest) { r.Exclude = []string{"best"} }), cfg, nil)
	require.Equal(t, []string{"third", "other"}, candidateIDs(res))
	require.InDelta(t, 15, term(res.Candidates[0], domain.RouteTermWeight), 1e-9)
	require.InDelta(t, 10, term(res.Candidates[1], domain.RouteTermWeight), 1e-9)

	// An excluded agent at capacity is rejected for capacity, and the one
	// left is not "all at capacity".
	res = routeBoth(t, []domain.RouteAgent{full, other}, req(func(r *domain.RouteRequest) { r.Exclude = []string{"other"} }), cfg, nil)
	require.Equal(t, "other", res.Chosen)
	require.False(t, res.AllAtCapacity)
	require.Equal(t, domain.RouteRejectAtCapacity, reasonOf(res, "full"))
}

func TestRouteAllAtCapacity(t *testing.T) {
	t.Parallel()
	cfg := domain.DefaultRouteConfig()
	full := func(id string) domain.RouteAgent {
		return ra(id, func(a *domain.RouteAgent) { a.MaxConcurrent, a.InFlight = 3, 3 })
	}
	down := ra("down", func(a *domain.RouteAgent) { a.State = domain.AgentDown })
	elsewhere := ra("elsewhere", func(a *domain.RouteAgent) { a.Namespace = "other" })
	cases := []struct {
		name   string
		agents []domain.RouteAgent
		want   bool
	}{
		{"all full", []domain.RouteAgent{full("a"), full("b")}, true},
		{"full and others ineligible", []domain.RouteAgent{full("a"), down, elsewhere}, true},
		{"nobody eligible at all", []domain.RouteAgent{down, elsewhere}, false},
		{"no agents", nil, false},
		{"one with room", []domain.RouteAgent{full("a"), ra("b")}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := routeBoth(t, tc.agents, req(), cfg, nil)
			require.Equal(t, tc.want, res.AllAtCapacity)
			if tc.want {
				require.Empty(t, res.Candidates)
				require.Empty(t, res.Chosen)
			}
		})
	}
}

func TestRouteResultJSON(t *testing.T) {
	t.Parallel()
	res := routeBoth(t, []domain.RouteAgent{ra("a"), ra("b", func(a *domain.RouteAgent) { a.State = domain.AgentDown })},
		req(), domain.DefaultRouteConfig(), nil)
	b, err := json.Marshal(res)
	require.NoError(t, err)
	require.JSONEq(t, `{
		"candidates": [{"agent_id": "a", "score": 110, "terms": [
			{"name": "exact_capability", "value": 100},
			{"name": "alias_hit", "value": 0},
			{"name": "hint_similarity", "value": 0},
			{"name": "weight", "value": 10},
			{"name": "load", "value": 0},
			{"name": "failure_rate", "value": 0},
			{"name": "suspect", "value": 0}, {"name": "flapping", "value": 0}]}],
		"rejected": [{"agent_id": "b", "reason": "state_not_routable"}],
		"chosen": "a"
	}`, string(b))

	var back domain.RouteResult
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, res, back)

	empty, err := json.Marshal(domain.NewRouteIndex(nil).Route(req(), domain.DefaultRouteConfig(), nil))
	require.NoError(t, err)
	require.JSONEq(t, `{"candidates": [], "rejected": [], "chosen": ""}`, string(empty))
}

func TestRouteIndexIsASnapshot(t *testing.T) {
	t.Parallel()
	agents := []domain.RouteAgent{ra("a"), ra("b", func(a *domain.RouteAgent) { a.Capabilities = []string{testCap, testCap} })}
	ix := domain.NewRouteIndex(agents)
	agents[0].State = domain.AgentDown // the caller's slice changes afterwards
	res := ix.Route(req(), domain.DefaultRouteConfig(), nil)
	require.Equal(t, []string{"a", "b"}, candidateIDs(res), "a capability listed twice is indexed once")

	res = ix.Route(req(func(r *domain.RouteRequest) { r.Capability = "translate" }), domain.DefaultRouteConfig(), nil)
	require.Equal(t, []string{"a"}, candidateIDs(res))
	res = ix.Route(req(func(r *domain.RouteRequest) { r.Namespace = "nowhere" }), domain.DefaultRouteConfig(), nil)
	require.Empty(t, res.Candidates)
	require.Empty(t, res.Rejected)
}

// TestRouteIndexAgreesWithRoute compares the two entry points over random
// fleets, so the indexed fast path cannot drift from the plain one.
func TestRouteIndexAgreesWithRoute(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 11))
	caps := []string{"pdf.summarize", "ocr", "translate", "speech.to.text"}
	aliasPool := []string{"pdf", "summarizer", "scanner", "Translator", "speech to text", "OCR", "résumé", "c++"}
	hints := []string{"", "summarize this PDF", "scan and OCR the receipt", "translate to French", "speech to text for a call", "pdfs", "RÉSUMÉ"}
	pick := func(n int) func(*domain.RouteAgent) {
		return func(a *domain.RouteAgent) {
			a.Namespace = []string{"ns", "ns", "other"}[rng.IntN(3)]
			a.Capabilities = []string{caps[rng.IntN(len(caps))], caps[rng.IntN(len(caps))]}
			a.Aliases = []string{aliasPool[rng.IntN(len(aliasPool))], aliasPool[rng.IntN(len(aliasPool))]}[:rng.IntN(3)]
			a.State = allAgentStates[rng.IntN(3)]
			a.Breaker = []domain.BreakerState{domain.BreakerClosed, domain.BreakerHalfOpen, domain.BreakerOpen}[rng.IntN(3)]
			a.Weight = rng.IntN(4) * 25
			a.MaxConcurrent = rng.IntN(4)
			a.InFlight = rng.IntN(4)
			a.RolloutPercent = []int{100, 100, 50, 0}[rng.IntN(4)]
			a.FailureRate, a.RecentAttempts = rng.Float64()/2, rng.IntN(10)
		}
	}
	for round := range 200 {
		n := rng.IntN(30)
		agents := make([]domain.RouteAgent, n)
		for i := range agents {
			agents[i] = ra(fmt.Sprintf("agent-%02d", i), pick(i))
		}
		r := req(func(r *domain.RouteRequest) {
			r.JobID = fmt.Sprintf("job-%d", round)
			r.Capability = caps[rng.IntN(len(caps))]
			r.Hint = hints[rng.IntN(len(hints))]
			if n > 0 && rng.IntN(2) == 0 {
				r.Exclude = []string{agents[rng.IntN(n)].ID}
			}
		})
		draw := rng.IntN(1 << 20)
		routeBoth(t, agents, r, domain.DefaultRouteConfig(), func(n int) int { return draw % n })
	}
}

// A canary at 5 % takes about 5 % of the capability's traffic: the jobs of
// its buckets are its own, not a tie shared with the stable agent.
func TestCanaryShare(t *testing.T) {
	t.Parallel()
	agents := []domain.RouteAgent{
		ra("stable"),
		ra("canary", func(a *domain.RouteAgent) { a.RolloutPercent = 5 }),
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	canary := 0
	const jobs = 2000
	for i := range jobs {
		id := uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "job %d", i)).String() // job ids, the same every run
		res := domain.Route(agents, domain.RouteRequest{JobID: id, Namespace: "ns", Capability: testCap}, domain.DefaultRouteConfig(), rnd.IntN)
		inBucket := domain.CanaryBucket(id) < 5
		require.Equal(t, inBucket, res.Canary, id)
		if res.Chosen == "canary" {
			canary++
			require.True(t, inBucket, "the canary takes only jobs of its buckets")
		} else {
			require.False(t, inBucket, "a job of the canary's buckets goes to the canary")
		}
		require.Equal(t, res.Chosen, res.Candidates[0].AgentID)
	}
	share := 100 * float64(canary) / jobs
	require.InDelta(t, 5, share, 1.5, "canary share %.1f %%", share)
}

// A caller that names the protocol versions it speaks gets only agents
// speaking one of them.
func TestRouteProtocolVersions(t *testing.T) {
	t.Parallel()
	agents := []domain.RouteAgent{
		ra("v1", func(a *domain.RouteAgent) { a.ProtocolVersion = "1.0" }),
		ra("v03", func(a *domain.RouteAgent) { a.ProtocolVersion = "0.3.0" }),
		ra("unknown"),
	}
	chosen := func(versions ...string) []string {
		res := domain.Route(agents, req(func(r *domain.RouteRequest) { r.ProtocolVersions = versions }), domain.DefaultRouteConfig(), nil)
		var ids []string
		for _, c := range res.Candidates {
			ids = append(ids, c.AgentID)
		}
		slices.Sort(ids)
		for _, r := range res.Rejected {
			require.Equal(t, domain.RouteRejectProtocolVer, r.Reason)
		}
		return ids
	}
	require.Equal(t, []string{"unknown", "v03", "v1"}, chosen(), "no constraint: any")
	require.Equal(t, []string{"v1"}, chosen("1.0"))
	require.Equal(t, []string{"v03", "v1"}, chosen("1.0", "0.3.*"))
	require.Empty(t, chosen("2.0"))
}

// A ROUTED event keeps each candidate's non-zero terms, in their order, and
// everything else of the decision; the decision itself is left whole.
func TestRouteRecordedDropsZeroTerms(t *testing.T) {
	t.Parallel()
	term := func(kv ...any) []domain.ScoreTerm {
		var out []domain.ScoreTerm
		for i := 0; i < len(kv); i += 2 {
			out = append(out, domain.ScoreTerm{Name: kv[i].(string), Value: kv[i+1].(float64)})
		}
		return out
	}
	cases := []struct {
		name string
		in   domain.RouteResult
		want domain.RouteResult
	}{
		{"no candidate", domain.RouteResult{Candidates: []domain.RouteCandidate{},
			Rejected: []domain.RouteRejection{{AgentID: "a", Reason: domain.RouteRejectExcluded}}},
			domain.RouteResult{Candidates: []domain.RouteCandidate{},
				Rejected: []domain.RouteRejection{{AgentID: "a", Reason: domain.RouteRejectExcluded}}}},
		{"zeros dropped, signs and order kept", domain.RouteResult{Chosen: "a", Canary: true, PolicyVersion: 3,
			Candidates: []domain.RouteCandidate{
				{AgentID: "a", Score: 107.5, Terms: term("exact_capability", 100.0, "alias_hit", 0.0, "weight", 10.0, "load", -2.5, "flapping", 0.0)},
				{AgentID: "b", Score: 0, Terms: term("exact_capability", 0.0, "alias_hit", 0.0)},
			}},
			domain.RouteResult{Chosen: "a", Canary: true, PolicyVersion: 3,
				Candidates: []domain.RouteCandidate{
					{AgentID: "a", Score: 107.5, Terms: term("exact_capability", 100.0, "weight", 10.0, "load", -2.5)},
					{AgentID: "b", Score: 0, Terms: []domain.ScoreTerm{}},
				}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before, err := json.Marshal(c.in)
			require.NoError(t, err)
			got := c.in.Recorded()
			require.Equal(t, c.want, got)
			after, err := json.Marshal(c.in)
			require.NoError(t, err)
			require.JSONEq(t, string(before), string(after), "the decision itself is not changed")
			// A stored candidate's terms encode as a list, never null.
			b, err := json.Marshal(got)
			require.NoError(t, err)
			require.NotContains(t, string(b), `"terms":null`)
		})
	}
}

// reqAt is req() decided at now.
func reqAt(now time.Time) domain.RouteRequest {
	r := req()
	r.Now = now
	return r
}
