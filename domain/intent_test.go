package domain_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
)

func TestNormalizeIntent(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Where is my parcel?":    "where is my parcel",
		"  where   is my PARCEL": "where is my parcel",
		"我的包裹在哪里？":               "我的包裹在哪里",
		"ＰＤＦ　を読んで":               "pdf を読んで",
		"e-mail, please!":        "e mail please",
		"?!":                     "",
	} {
		require.Equal(t, want, domain.NormalizeIntent(in), in)
	}
}

func TestCheckIntent(t *testing.T) {
	t.Parallel()
	require.NoError(t, domain.CheckIntent("intent", "where is my parcel"))
	require.NoError(t, domain.CheckIntent("intent", strings.Repeat("包", domain.MaxIntentLength)))
	for _, bad := range []string{"", "   ", "?!", strings.Repeat("a", domain.MaxIntentLength+1)} {
		err := domain.CheckIntent("intent", bad)
		var fe *domain.FieldError
		require.ErrorAs(t, err, &fe, "%q", bad)
		require.Equal(t, "intent", fe.Field)
		require.ErrorIs(t, err, domain.ErrInvalid)
	}
}

// TestResolveSteps: the first confident step decides; a later one is not
// consulted for the answer; with none confident the suggestions are the
// last ranking's; an unavailable model is a step, not an error.
func TestResolveSteps(t *testing.T) {
	t.Parallel()
	cat := &domain.Catalogue{Namespace: "shop", Version: 7}
	rank := func(resolver string, conf float64, names ...string) *domain.IntentRanking {
		r := &domain.IntentRanking{Resolver: resolver, Confidence: conf, Reason: resolver + " reason"}
		for i, n := range names {
			r.Candidates = append(r.Candidates, domain.IntentCandidate{Capability: n, Score: 1 - float64(i)/10})
		}
		return r
	}
	lexical := func(r *domain.IntentRanking) domain.RankedStep {
		return domain.RankedStep{Resolver: domain.ResolverLexical, Threshold: 0.1, Ranking: r}
	}
	embedding := func(r *domain.IntentRanking, err string) domain.RankedStep {
		return domain.RankedStep{Resolver: domain.ResolverEmbedding, Model: "e5", Threshold: 0.05, Ranking: r, Error: err, Cached: r != nil}
	}
	for _, tc := range []struct {
		name     string
		steps    []domain.RankedStep
		want     string // "" = ambiguous
		resolver string
		outcomes []string
		suggest  []string
	}{
		{"lexical decides", []domain.RankedStep{lexical(rank("lexical", 0.5, "a", "b"))},
			"a", "lexical", []string{"resolved"}, []string{"a", "b"}},
		{"the model after an unsure lexical step", []domain.RankedStep{lexical(rank("lexical", 0.05, "a", "b")), embedding(rank("embedding", 0.2, "b", "a"), "")},
			"b", "embedding", []string{"below_threshold", "resolved"}, []string{"b", "a"}},
		{"the model is down: ambiguous with lexical suggestions", []domain.RankedStep{lexical(rank("lexical", 0.05, "a", "b", "c")), embedding(nil, "connection refused")},
			"", "lexical", []string{"below_threshold", "unavailable"}, []string{"a", "b"}},
		{"an llm that chose none", []domain.RankedStep{lexical(rank("lexical", 0.0, "a", "b")), {Resolver: domain.ResolverLLM, Model: "m", Threshold: 1, Ranking: &domain.IntentRanking{Resolver: "llm"}}},
			"", "lexical", []string{"below_threshold", "no_answer"}, []string{"a", "b"}},
		{"nothing matches", []domain.RankedStep{lexical(rank("lexical", 0))},
			"", "lexical", []string{"below_threshold"}, []string{}},
		{"a tie is never confident", []domain.RankedStep{lexical(rank("lexical", 0, "a", "b"))},
			"", "lexical", []string{"below_threshold"}, []string{"a", "b"}},
	} {
		res, ok := domain.ResolveSteps("where is it", cat, tc.steps, 2)
		require.Equal(t, tc.want != "", ok, tc.name)
		require.Equal(t, tc.want, res.Capability, tc.name)
		require.Equal(t, tc.resolver, res.Resolver, tc.name)
		require.Equal(t, int64(7), res.CatalogueVersion, tc.name)
		require.Equal(t, "shop", res.Namespace, tc.name)
		var outcomes, suggest []string
		for _, s := range res.Steps {
			outcomes = append(outcomes, s.Outcome)
		}
		for _, c := range res.Candidates {
			suggest = append(suggest, c.Capability)
		}
		require.Equal(t, tc.outcomes, outcomes, tc.name)
		require.Equal(t, tc.suggest, append([]string{}, suggest...), tc.name)
		if !ok {
			err := &domain.AmbiguousIntentError{Resolution: res}
			require.ErrorIs(t, err, domain.ErrAmbiguousIntent)
			require.ErrorIs(t, err, domain.ErrInvalid)
		}
	}
}

func TestCosineRanking(t *testing.T) {
	t.Parallel()
	names := []string{"parcel.track", "text.summarize", "weather.forecast", "no.vector"}
	vecs := [][]float32{{1, 0, 0}, {0, 1, 0}, {0.6, 0.8, 0}, nil}
	r := domain.CosineRanking("e5", []float32{0.9, 0.1, 0}, names, vecs, 3)
	require.Equal(t, domain.ResolverEmbedding, r.Resolver)
	require.Equal(t, "e5", r.Model)
	require.Len(t, r.Candidates, 3)
	require.Equal(t, []string{"parcel.track", "weather.forecast", "text.summarize"},
		[]string{r.Candidates[0].Capability, r.Candidates[1].Capability, r.Candidates[2].Capability})
	require.InDelta(t, 0.9939, r.Candidates[0].Score, 1e-4)
	require.InDelta(t, r.Candidates[0].Score-r.Candidates[1].Score, r.Confidence, 1e-4)
	require.Contains(t, r.Reason, "parcel.track")

	opposite := domain.CosineRanking("e5", []float32{-1, 0, 0}, names[:1], vecs[:1], 3)
	require.Zero(t, opposite.Candidates[0].Score, "a negative similarity counts as none")
	require.False(t, opposite.Confident(0.01))
	wrongDim := domain.CosineRanking("e5", []float32{1, 0}, names[:1], vecs[:1], 3)
	require.Zero(t, wrongDim.Candidates[0].Score, "a vector of another size is not compared")
}

func TestChoiceRanking(t *testing.T) {
	t.Parallel()
	names := []string{"parcel.track", "text.summarize"}
	for answer, want := range map[string]string{
		"parcel.track":        "parcel.track",
		" `text.summarize`\n": "text.summarize",
		`"parcel.track".`:     "parcel.track",
		"none":                "",
		"parcel.tracking":     "",
		"PARCEL.TRACK":        "",
		"":                    "",
	} {
		r := domain.ChoiceRanking("m", answer, names)
		require.Equal(t, want, r.Top(), "%q", answer)
		require.Equal(t, want != "", r.Confident(1), "%q", answer)
		require.Equal(t, domain.ResolverLLM, r.Resolver)
	}
}

func TestBuildCatalogue(t *testing.T) {
	t.Parallel()
	agents := []domain.CatalogueAgent{
		{ID: "b-2", Capabilities: []string{"doc.ocr", "doc.sum"}, Aliases: []string{"scan", "pdf"},
			Docs: map[string]domain.CapabilityDoc{"doc.ocr": {Title: "Read scans (b)", Description: "b's words", Examples: []string{"read it", "b only"}}}},
		{ID: "a-1", Capabilities: []string{"doc.ocr"}, Aliases: []string{"scan"},
			Docs: map[string]domain.CapabilityDoc{"doc.ocr": {Description: "a's words", Examples: []string{"read it"}, Tags: []string{"ocr"}}}},
	}
	notes := []domain.CapabilityNote{{Capability: "doc.ocr", Doc: domain.CapabilityDoc{Description: "The operator's words", Examples: []string{"ops first"}}},
		{Capability: "doc.future", Doc: domain.CapabilityDoc{Title: "Coming soon"}}}
	cat := domain.BuildCatalogue("ns", 3, agents, notes)
	require.Equal(t, int64(3), cat.Version)
	var names []string
	for _, e := range cat.Entries {
		names = append(names, e.Name)
	}
	require.Equal(t, []string{"doc.future", "doc.ocr", "doc.sum"}, names, "by name; an operator's entry needs no agent")
	ocr, ok := cat.Entry("doc.ocr")
	require.True(t, ok)
	require.Equal(t, "The operator's words", ocr.Description, "the operator's description wins")
	require.Equal(t, "Read scans (b)", ocr.Title, "an agent's title fills what the operator left out")
	require.Equal(t, []string{"ops first", "read it", "b only"}, ocr.Examples, "the operator's first, then by agent id, no repeats")
	require.Equal(t, []string{"ocr", "scan", "pdf"}, ocr.Tags, "tags and the agents' aliases")
	require.Equal(t, []string{"a-1", "b-2"}, ocr.Agents)
	require.NotNil(t, ocr.Note)
	future, _ := cat.Entry("doc.future")
	require.Empty(t, future.Agents)
	sum, _ := cat.Entry("doc.sum")
	require.Nil(t, sum.Note)
	require.Empty(t, sum.Description)
	_, ok = cat.Entry("doc.none")
	require.False(t, ok)

	replica := append(agents, domain.CatalogueAgent{ID: "c-3", Capabilities: []string{"doc.sum"}, Aliases: []string{"pdf"}})
	same := domain.BuildCatalogue("ns", 4, replica, notes)
	require.Equal(t, cat.Fingerprint(), same.Fingerprint(), "another agent saying nothing new: the same words")
	worded := domain.BuildCatalogue("ns", 5, append(agents, domain.CatalogueAgent{ID: "c-3", Capabilities: []string{"doc.sum"}, Aliases: []string{"summary"}}), notes)
	require.NotEqual(t, cat.Fingerprint(), worded.Fingerprint(), "a new alias is a new word")
}

func TestCapabilityDocLimits(t *testing.T) {
	t.Parallel()
	d := domain.CapabilityDoc{Title: "  Track  ", Examples: []string{" a ", "", "a", "b"}, Tags: []string{"x", " x "}}
	require.NoError(t, d.Normalize("doc"))
	require.Equal(t, "Track", d.Title)
	require.Equal(t, []string{"a", "b"}, d.Examples)
	require.Equal(t, []string{"x"}, d.Tags)
	for field, bad := range map[string]domain.CapabilityDoc{
		"doc.title":       {Title: strings.Repeat("t", domain.MaxDocTitle+1)},
		"doc.description": {Description: strings.Repeat("d", domain.MaxDocDescription+1)},
		"doc.examples":    {Examples: manyTexts(domain.MaxDocExamples + 1)},
		"doc.tags":        {Tags: []string{strings.Repeat("t", domain.MaxDocTag+1)}},
	} {
		var fe *domain.FieldError
		require.ErrorAs(t, bad.Normalize("doc"), &fe, field)
		require.Equal(t, field, fe.Field)
	}
	clipped := domain.CapabilityDoc{Title: strings.Repeat("题", domain.MaxDocTitle+5), Examples: manyTexts(domain.MaxDocExamples + 3)}.Clip()
	require.Equal(t, domain.MaxDocTitle, len([]rune(clipped.Title)))
	require.Len(t, clipped.Examples, domain.MaxDocExamples)
	require.NoError(t, clipped.Normalize("doc"), "a clipped doc is within the limits")
}

func manyTexts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = strings.Repeat("x", i+1)
	}
	return out
}

// TestRegistrationCapabilityInfo: capability_info is checked with the
// registration: only for the agent's own capabilities, within the limits;
// empty docs are dropped.
func TestRegistrationCapabilityInfo(t *testing.T) {
	t.Parallel()
	reg := func(info map[string]domain.CapabilityDoc) domain.AgentRegistration {
		return domain.AgentRegistration{AgentID: "a", Capabilities: []string{"parcel.track"}, Endpoint: "http://127.0.0.1:9/",
			CapabilityInfo: info}
	}
	ok := reg(map[string]domain.CapabilityDoc{"parcel.track": {Description: " where a parcel is ", Examples: []string{"where is my parcel"}}})
	require.NoError(t, ok.Normalize())
	require.Equal(t, "where a parcel is", ok.CapabilityInfo["parcel.track"].Description)
	empty := reg(map[string]domain.CapabilityDoc{"parcel.track": {Examples: []string{" "}}})
	require.NoError(t, empty.Normalize())
	require.Nil(t, empty.CapabilityInfo)

	var fe *domain.FieldError
	other := reg(map[string]domain.CapabilityDoc{"parcel.return": {Description: "x"}})
	require.ErrorAs(t, other.Normalize(), &fe)
	require.Equal(t, "capability_info[parcel.return]", fe.Field)
	long := reg(map[string]domain.CapabilityDoc{"parcel.track": {Examples: []string{strings.Repeat("e", domain.MaxDocExample+1)}}})
	require.ErrorAs(t, long.Normalize(), &fe)
	require.Equal(t, "capability_info[parcel.track].examples", fe.Field)
}

// TestIntentResolvedFold: INTENT_RESOLVED follows SUBMITTED once, before
// any attempt, and the fold keeps the resolution.
func TestIntentResolvedFold(t *testing.T) {
	t.Parallel()
	md := domain.Metadata{TraceID: "t"}
	res := domain.IntentResolution{Intent: "where is my parcel", Capability: "parcel.track", Resolver: "lexical", Confidence: 0.4}
	submitted := domain.NewEvent(domain.EventSubmitted, domain.Submitted{JobID: "j", Capability: "parcel.track",
		Intent: "where is my parcel", Payload: json.RawMessage(`{}`), MaxAttempts: 2, Resolution: &res}, md)
	require.NotContains(t, string(submitted.Data), `"resolver"`, "the resolution is not SUBMITTED's data")
	resolved := domain.NewEvent(domain.EventIntentResolved, res, md)
	routed := domain.NewEvent(domain.EventRouted, domain.Routed{Attempt: 1, AgentID: "a"}, md)

	j, err := domain.FoldJob([]domain.Event{submitted, resolved, routed})
	require.NoError(t, err)
	require.Equal(t, domain.StatusSubmitted, j.Status)
	require.Equal(t, "where is my parcel", j.Intent)
	require.NotNil(t, j.Resolution)
	require.Equal(t, "parcel.track", j.Resolution.Capability)

	for name, evs := range map[string][]domain.Event{
		"twice":            {submitted, resolved, resolved},
		"after an attempt": {submitted, routed, resolved},
		"before SUBMITTED": {resolved, submitted},
	} {
		_, err := domain.FoldJob(evs)
		var te *domain.TransitionError
		require.True(t, errors.As(err, &te), "%s: %v", name, err)
		require.ErrorIs(t, err, domain.ErrIllegalTransition, name)
	}
}

// TestRouteCarriesTheIntent: both routing entry points hand the request's
// resolution to the result, so ROUTED and GET /v1/route show it.
func TestRouteCarriesTheIntent(t *testing.T) {
	t.Parallel()
	res := &domain.IntentResolution{Intent: "where is my parcel", Capability: "parcel.track"}
	agents := []domain.RouteAgent{{ID: "a", Namespace: "default", Capabilities: []string{"parcel.track"}, State: domain.AgentHealthy,
		Weight: 50, RolloutPercent: 100}}
	req := domain.RouteRequest{JobID: "j", Namespace: "default", Capability: "parcel.track", Intent: res}
	cfg := domain.DefaultRouteConfig()
	require.Same(t, res, domain.Route(agents, req, cfg, nil).Intent)
	ix := domain.NewRouteIndex(agents)
	require.Same(t, res, ix.Route(req, cfg, nil).Intent)
	req.Capability = "none.here"
	require.Same(t, res, ix.Route(req, cfg, nil).Intent, "also when no agent has it")
	b, err := json.Marshal(ix.Route(domain.RouteRequest{Namespace: "default", Capability: "parcel.track"}, cfg, nil))
	require.NoError(t, err)
	require.NotContains(t, string(b), `"intent"`, "a job named by capability has no intent")
}
