package domain

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Intent resolution turns a caller's words ("where is my parcel", "我的包裹在
// 哪里") into one capability of the namespace's catalogue: rules and a
// lexical ranking first, a model only when they are not confident. The
// decisions (what a ranking means, when it is confident enough) are here;
// package intent runs the resolvers and keeps their answers.

// EventIntentResolved follows SUBMITTED, in the same append, when a job was
// submitted with an intent instead of a capability: which capability the
// intent resolved to, by which resolver, and why.
const EventIntentResolved EventType = "INTENT_RESOLVED"

// MaxIntentLength bounds an intent, in characters.
const MaxIntentLength = 1024

// Resolver names, as they appear in resolutions.
const (
	ResolverLexical   = "lexical"
	ResolverEmbedding = "embedding"
	ResolverLLM       = "llm"
)

// Outcomes of one resolver's step in a resolution.
const (
	StepResolved       = "resolved"        // confident: this step's top candidate is the answer
	StepBelowThreshold = "below_threshold" // it answered, without enough confidence
	StepUnavailable    = "unavailable"     // it could not answer (a model outage, a timeout)
	StepNoAnswer       = "no_answer"       // a model answered none of the catalogue's names
)

// Default confidence thresholds (see IntentRanking.Confidence).
const (
	DefaultLexicalThreshold   = 0.1
	DefaultEmbeddingThreshold = 0.05
)

// ErrAmbiguousIntent: no resolver was confident enough of any capability.
var ErrAmbiguousIntent = NewError(ErrInvalid, "ambiguous intent")

// AmbiguousIntentError is an intent no resolver was confident of, with
// what they found: the API answers 422 ambiguous_intent with its
// suggestions, and writes nothing.
type AmbiguousIntentError struct {
	Resolution IntentResolution
}

func (e *AmbiguousIntentError) Error() string {
	if len(e.Resolution.Candidates) == 0 {
		return "no capability of the catalogue matches the intent"
	}
	names := make([]string, len(e.Resolution.Candidates))
	for i, c := range e.Resolution.Candidates {
		names[i] = c.Capability
	}
	return fmt.Sprintf("the intent is ambiguous (confidence %.2f, below %.2f): did you mean %s?",
		e.Resolution.Confidence, e.Resolution.Threshold, strings.Join(names, ", "))
}

// Unwrap makes the error of the kind ErrInvalid, as ErrAmbiguousIntent.
func (e *AmbiguousIntentError) Unwrap() error { return ErrAmbiguousIntent }

// IntentCandidate is one capability a resolver ranked, with its score in
// 0..1 and, for the lexical resolver, the terms of the intent it matched.
type IntentCandidate struct {
	Capability string   `json:"capability"`
	Score      float64  `json:"score"`
	Matched    []string `json:"matched,omitempty"`
}

// IntentRanking is one resolver's answer: its candidates best first and
// how confident it is of the first.
type IntentRanking struct {
	Resolver   string            `json:"resolver"`
	Model      string            `json:"model,omitempty"`
	Candidates []IntentCandidate `json:"candidates"`
	// Confidence is the first candidate's score less the second's (0 with
	// none): a clear winner is confident, a tie never is.
	Confidence float64 `json:"confidence"`
	Reason     string  `json:"reason"`
}

// Top is the best candidate's capability, "" with none.
func (r IntentRanking) Top() string {
	if len(r.Candidates) == 0 {
		return ""
	}
	return r.Candidates[0].Capability
}

// Confident reports whether the ranking names a capability with at least
// the threshold's confidence.
func (r IntentRanking) Confident(threshold float64) bool {
	return len(r.Candidates) > 0 && r.Confidence >= threshold && r.Confidence > 0
}

// IntentStep is what one resolver did in a resolution.
type IntentStep struct {
	Resolver   string  `json:"resolver"`
	Model      string  `json:"model,omitempty"`
	Outcome    string  `json:"outcome"`
	Confidence float64 `json:"confidence"`
	Threshold  float64 `json:"threshold"`
	Top        string  `json:"top,omitempty"`
	Cached     bool    `json:"cached,omitempty"`
	// Error says why a model could not answer (never a credential).
	Error string `json:"error,omitempty"`
}

// IntentResolution is the data of INTENT_RESOLVED and the answer of
// POST /v1/resolve: the capability an intent resolved to and the whole
// reasoning, so a job's routing can be explained from its stream.
type IntentResolution struct {
	Intent     string `json:"intent"`
	Namespace  string `json:"namespace"`
	Capability string `json:"capability"`
	// Resolver and Model say which step decided; Confidence and Threshold
	// are that step's.
	Resolver   string  `json:"resolver"`
	Model      string  `json:"model,omitempty"`
	Confidence float64 `json:"confidence"`
	Threshold  float64 `json:"threshold"`
	Reason     string  `json:"reason"`
	// Cached: the deciding model answer came from the cache.
	Cached           bool  `json:"cached,omitempty"`
	CatalogueVersion int64 `json:"catalogue_version"`
	// Candidates are the deciding step's best candidates (for an
	// ambiguous intent, the suggestions).
	Candidates []IntentCandidate `json:"candidates"`
	Steps      []IntentStep      `json:"steps"`
}

// ResolveSteps decides a resolution from the rankings of the resolvers
// tried, in order: the first confident one decides. Each step holds its
// ranking (nil when its resolver could not answer), threshold and
// outcome. With none confident the resolution names no capability and
// its candidates are the suggestions: those of the last step that ranked
// any, up to limit.
func ResolveSteps(intent string, cat *Catalogue, steps []RankedStep, limit int) (IntentResolution, bool) {
	res := IntentResolution{Intent: intent, Namespace: cat.Namespace, CatalogueVersion: cat.Version,
		Candidates: []IntentCandidate{}, Steps: make([]IntentStep, 0, len(steps))}
	var suggest *RankedStep
	for i := range steps {
		s := &steps[i]
		st := IntentStep{Resolver: s.Resolver, Model: s.Model, Threshold: s.Threshold, Cached: s.Cached, Error: s.Error, Outcome: StepUnavailable}
		if s.Ranking != nil {
			st.Confidence, st.Top = s.Ranking.Confidence, s.Ranking.Top()
			st.Outcome = StepBelowThreshold
			if len(s.Ranking.Candidates) == 0 && s.Resolver == ResolverLLM {
				st.Outcome = StepNoAnswer
			}
			if len(s.Ranking.Candidates) > 0 {
				suggest = s
			}
		}
		if s.Ranking != nil && res.Capability == "" && s.Ranking.Confident(s.Threshold) {
			st.Outcome = StepResolved
			res.Capability, res.Resolver, res.Model = s.Ranking.Top(), s.Resolver, s.Model
			res.Confidence, res.Threshold, res.Reason, res.Cached = s.Ranking.Confidence, s.Threshold, s.Ranking.Reason, s.Cached
			res.Candidates = clipCandidates(s.Ranking.Candidates, limit)
		}
		res.Steps = append(res.Steps, st)
	}
	if res.Capability != "" {
		return res, true
	}
	if suggest != nil {
		res.Resolver, res.Model, res.Cached = suggest.Resolver, suggest.Model, suggest.Cached
		res.Confidence, res.Threshold, res.Reason = suggest.Ranking.Confidence, suggest.Threshold, suggest.Ranking.Reason
		res.Candidates = clipCandidates(suggest.Ranking.Candidates, limit)
	} else {
		res.Resolver, res.Reason = ResolverLexical, "no capability of the catalogue matches the intent"
	}
	return res, false
}

// RankedStep is one resolver's turn, the input of ResolveSteps.
type RankedStep struct {
	Resolver  string
	Model     string
	Threshold float64
	Ranking   *IntentRanking // nil: the resolver could not answer
	Cached    bool
	Error     string
}

func clipCandidates(c []IntentCandidate, limit int) []IntentCandidate {
	if limit > 0 && len(c) > limit {
		c = c[:limit]
	}
	return slices.Clone(c)
}

// NormalizeIntent is the form of an intent that cached answers are kept
// under: full-width forms folded, lower-case, every run of what is not a
// letter, digit or mark one space, trimmed. "Where is my parcel?" and
// "where is my  PARCEL" are one intent.
func NormalizeIntent(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		r = foldWidth(r)
		if unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r) {
			if space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = false
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		space = true
	}
	return b.String()
}

// CheckIntent checks an intent as a caller gives it: some words, at most
// MaxIntentLength characters.
func CheckIntent(field, s string) error {
	switch {
	case strings.TrimSpace(s) == "":
		return fieldErr(field, "is required: the caller's words, e.g. \"where is my parcel\"")
	case utf8.RuneCountInString(s) > MaxIntentLength:
		return fieldErr(field, "must be at most %d characters", MaxIntentLength)
	case NormalizeIntent(s) == "":
		return fieldErr(field, "must hold some letters or digits")
	}
	return nil
}

// round4 keeps scores readable in events and answers.
func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }

// rankConfidence is the first score less the second (0 without candidates).
func rankConfidence(c []IntentCandidate) float64 {
	switch len(c) {
	case 0:
		return 0
	case 1:
		return c[0].Score
	}
	return round4(c[0].Score - c[1].Score)
}

// CosineRanking ranks the catalogue's entries by the cosine similarity of
// their vectors to the intent's (vecs[i] is names[i]'s; a nil or empty
// vector scores 0), negative similarities counted as 0, and keeps the best
// limit.
func CosineRanking(model string, intent []float32, names []string, vecs [][]float32, limit int) IntentRanking {
	cands := make([]IntentCandidate, 0, len(names))
	in := norm(intent)
	for i, n := range names {
		s := 0.0
		if v := vecs[i]; len(v) == len(intent) && in > 0 {
			if vn := norm(v); vn > 0 {
				s = max(0, dot(intent, v)/(in*vn))
			}
		}
		cands = append(cands, IntentCandidate{Capability: n, Score: round4(min(1, s))})
	}
	sortCandidates(cands)
	if limit > 0 && len(cands) > limit {
		cands = cands[:limit]
	}
	r := IntentRanking{Resolver: ResolverEmbedding, Model: model, Candidates: cands, Confidence: rankConfidence(cands)}
	switch {
	case len(cands) == 0:
		r.Reason = "the catalogue is empty"
	case len(cands) == 1:
		r.Reason = fmt.Sprintf("cosine similarity %.2f to %s, the only capability", cands[0].Score, cands[0].Capability)
	default:
		r.Reason = fmt.Sprintf("cosine similarity %.2f to %s; next best %s at %.2f", cands[0].Score, cands[0].Capability,
			cands[1].Capability, cands[1].Score)
	}
	return r
}

// ChoiceRanking is the ranking of a model asked to choose one of the
// catalogue's names: its answer, trimmed of quotes, spaces and a final
// full stop, counts only if it is exactly one of names (confidence 1);
// anything else is no answer (no candidates, confidence 0).
func ChoiceRanking(model, answer string, names []string) IntentRanking {
	a := strings.TrimSuffix(strings.TrimSpace(answer), ".")
	a = strings.Trim(a, "`\"' \n\t")
	r := IntentRanking{Resolver: ResolverLLM, Model: model, Candidates: []IntentCandidate{}}
	if slices.Contains(names, a) {
		r.Candidates = []IntentCandidate{{Capability: a, Score: 1}}
		r.Confidence = 1
		r.Reason = fmt.Sprintf("the model chose %s among %d capabilities", a, len(names))
		return r
	}
	r.Reason = fmt.Sprintf("the model chose none of the %d capabilities", len(names))
	return r
}

func dot(a, b []float32) float64 {
	s := 0.0
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func norm(a []float32) float64 { return math.Sqrt(dot(a, a)) }

// sortCandidates orders by score, best first, then by name.
func sortCandidates(c []IntentCandidate) {
	slices.SortFunc(c, func(a, b IntentCandidate) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return strings.Compare(a.Capability, b.Capability)
	})
}
