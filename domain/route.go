package domain

import (
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// RouteAgent is the router's view of one agent: a snapshot the caller builds
// from the registry, the lease and the breaker.
type RouteAgent struct {
	ID        string
	Namespace string
	// Capabilities are matched exactly (case-sensitive) against the job's.
	Capabilities []string
	// Aliases are free words that describe the agent; they only score, via
	// the job's hint, and never decide eligibility.
	Aliases  []string
	Protocol string
	Version  string
	// ProtocolVersion is the version of its protocol the agent speaks.
	ProtocolVersion string
	// Weight in 1..100 scales the weight term and the tie-break; values
	// outside are clamped, so zero counts as 1.
	Weight int
	// MaxConcurrent is the most jobs the agent holds at once; 0 = unlimited.
	MaxConcurrent int
	// InFlight is how many jobs the agent holds now.
	InFlight int
	// FlapPenalty is subtracted from the score of an agent that restarted
	// often lately (see FlapPenalty); 0 for a steady one.
	FlapPenalty float64
	// Queued is the queue length the agent last reported in a heartbeat:
	// work it holds besides ours. It joins InFlight in the load term.
	Queued int
	// RolloutPercent in 0..100 is the canary share of jobs this agent may
	// take. 0 takes none, so a caller must set 100 for a normal agent.
	RolloutPercent int
	// Context is what the agent last said about itself. The router reads
	// "accepting" (false refuses work) and "mode" ("inspection" refuses work).
	Context map[string]any
	State   AgentState
	// Breaker is the agent's breaker state; empty counts as closed.
	Breaker BreakerState
	// PausedUntil: the agent asked for no work until then (a 429 or 503
	// with Retry-After to a delivery); zero when it did not.
	PausedUntil time.Time
	// FailureRate in 0..1 and RecentAttempts describe recent attempts, e.g.
	// BreakerStatus.ErrorRate and BreakerStatus.Attempts.
	FailureRate    float64
	RecentAttempts int
}

// RouteRequest is what one routing decision is about.
type RouteRequest struct {
	// JobID places the job in its canary bucket (see CanaryBucket).
	JobID string `json:"job_id"`
	// Namespace must equal the agent's exactly; empty is a namespace too.
	Namespace string `json:"namespace"`
	// Capability must be one of the agent's, exactly.
	Capability string `json:"capability"`
	// Hint is the caller's free text about the job; it only scores.
	Hint string `json:"hint,omitempty"`
	// Version is a constraint: empty = any, "1.2.*" = prefix "1.2.",
	// anything else = exact.
	Version string `json:"version,omitempty"`
	// Protocol is a constraint: empty = any, otherwise equal ignoring case.
	Protocol string `json:"protocol,omitempty"`
	// ProtocolVersions is a constraint: empty = any, otherwise the agent's
	// protocol version must match one of them (as Version does).
	ProtocolVersions []string `json:"protocol_versions,omitempty"`
	// Exclude lists agents to avoid, e.g. the one whose attempt just failed.
	// They are rejected only while another candidate survives every filter;
	// if none does, they stay candidates: prefer another agent, but do not
	// starve the job.
	Exclude []string `json:"exclude,omitempty"`
	// Intent is how the job's capability was resolved from the caller's
	// words, if it was; it does not score, and the result carries it so
	// that the explanation starts from the intent.
	Intent *IntentResolution `json:"intent,omitempty"`
	// IgnoreCapacity ranks agents at capacity as any other: the caller
	// counts their slots exactly itself (the snapshot's count may be a
	// moment old: a slot just given back).
	IgnoreCapacity bool `json:"-"`
	// Now is the time of the decision: an agent's pause ends then (zero:
	// no agent counts as paused).
	Now time.Time `json:"-"`
}

// RouteConfig holds the scoring constants. Unlike the other configs, zero
// values are taken as they are: a zero term is switched off.
type RouteConfig struct {
	// ExactMatch is added for the exact capability match every candidate has;
	// it keeps scores positive and readable.
	ExactMatch float64
	// AliasHit is added when one of the agent's aliases appears in the hint.
	AliasHit float64
	// TrigramMax scales the trigram similarity of the hint (0..1).
	TrigramMax float64
	// WeightMax scales Weight/100.
	WeightMax float64
	// LoadMax scales InFlight/MaxConcurrent, subtracted.
	LoadMax float64
	// FailurePenalty is subtracted when the agent has at least
	// MinAttemptsForFailure recent attempts and a FailureRate above
	// FailureThreshold. It is a step, not a slope, so a noisy rate does not
	// reorder healthy agents.
	FailurePenalty        float64
	FailureThreshold      float64
	MinAttemptsForFailure int
	// SuspectPenalty is subtracted for a SUSPECT agent: it still gets work
	// when it is the best or only choice, but a HEALTHY peer of similar
	// standing wins.
	SuspectPenalty float64
}

// DefaultRouteConfig returns the scoring used in production: exact 100,
// alias 30, hint similarity up to 20, weight up to 20, load down to -15,
// failure -50 (above 20% over at least 5 attempts), suspect -25.
func DefaultRouteConfig() RouteConfig {
	return RouteConfig{
		ExactMatch:            100,
		AliasHit:              30,
		TrigramMax:            20,
		WeightMax:             20,
		LoadMax:               15,
		FailurePenalty:        50,
		FailureThreshold:      0.20,
		MinAttemptsForFailure: 5,
		SuspectPenalty:        25,
	}
}

// Rejection reasons, in the order the filters run. An agent gets the reason
// of the first filter it fails. The values are stored in events.
const (
	RouteRejectNamespace    = "namespace_mismatch"
	RouteRejectCapability   = "capability_mismatch"
	RouteRejectState        = "state_not_routable"
	RouteRejectBreakerOpen  = "breaker_open"
	RouteRejectPaused       = "paused"          // it asked for no work until RouteAgent.PausedUntil
	RouteRejectNotAccepting = "not_accepting"   // Context["accepting"] == false
	RouteRejectInspection   = "inspection_mode" // Context["mode"] == "inspection"
	RouteRejectVersion      = "version_mismatch"
	RouteRejectProtocol     = "protocol_mismatch"
	RouteRejectProtocolVer  = "protocol_version_mismatch"
	RouteRejectCanary       = "canary_bucket"
	RouteRejectAtCapacity   = "at_capacity"
	// RouteRejectExcluded is not a filter but the soft Exclude preference,
	// applied last (see RouteRequest.Exclude).
	RouteRejectExcluded = "excluded"
)

// Score term names, in the order they appear in RouteCandidate.Terms. The
// values that are not zero are stored in ROUTED events.
const (
	RouteTermExactCapability = "exact_capability"
	RouteTermAliasHit        = "alias_hit"
	RouteTermHintSimilarity  = "hint_similarity"
	RouteTermWeight          = "weight"
	RouteTermLoad            = "load"
	RouteTermFailureRate     = "failure_rate"
	RouteTermSuspect         = "suspect"
	RouteTermFlapping        = "flapping"
)

// routeTermCount is how many terms every candidate carries.
const routeTermCount = 8

// ScoreTerm is one part of a candidate's score.
type ScoreTerm struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

// RouteCandidate is an agent that survived the filters, with its score and
// every term of it (zero terms included, so the explanation is complete;
// a ROUTED event keeps the others, see RouteResult.Recorded).
type RouteCandidate struct {
	AgentID string      `json:"agent_id"`
	Score   float64     `json:"score"`
	Terms   []ScoreTerm `json:"terms"`
}

// RouteRejection is an agent that failed a filter, with the reason code.
type RouteRejection struct {
	AgentID string `json:"agent_id"`
	Reason  string `json:"reason"`
}

// RouteResult is one routing decision, ready to be stored in an event.
type RouteResult struct {
	// Candidates are ranked best first: by score, then by agent id, except
	// that the chosen agent is moved to the front (of its tie, or of all
	// when a canary took the job).
	Candidates []RouteCandidate `json:"candidates"`
	// Rejected lists agents in input order, then soft-excluded ones.
	Rejected []RouteRejection `json:"rejected"`
	// AllAtCapacity is true when there is no candidate and at least one
	// agent passed every filter but capacity: the dispatcher should wait for
	// a slot instead of failing the job.
	AllAtCapacity bool `json:"all_at_capacity,omitempty"`
	// ResumeAt is, when there is no candidate, when the first agent that
	// asked for a pause (rejected as paused) takes work again.
	ResumeAt time.Time `json:"resume_at,omitzero"`
	// Chosen is the agent to try, "" when there is no candidate. It is always
	// Candidates[0].
	Chosen string `json:"chosen"`
	// Canary is true when the job fell in a canary's bucket (below its
	// RolloutPercent) and the best canary took it: so a canary at p % gets
	// about p % of the capability's traffic, not a share of a tie.
	Canary bool `json:"canary,omitempty"`
	// PolicyVersion is the version of the namespace's routing policy the
	// decision used (0: the compiled-in one).
	PolicyVersion int `json:"policy_version,omitempty"`
	// Intent is the request's: the resolution the capability came from.
	Intent *IntentResolution `json:"intent,omitempty"`
}

// Recorded is the decision as a ROUTED event keeps it: every candidate
// with its score and the terms of it that are not zero (a term not named
// is 0), every rejection, the choice. Zero terms are most of a candidate's
// terms; leaving them out makes the event a third of the size, for every
// candidate of a fleet of any size. r is not changed.
func (r RouteResult) Recorded() RouteResult {
	cands := make([]RouteCandidate, len(r.Candidates))
	n := 0
	for _, c := range r.Candidates {
		for _, t := range c.Terms {
			if t.Value != 0 {
				n++
			}
		}
	}
	terms := make([]ScoreTerm, 0, n)
	for i, c := range r.Candidates {
		start := len(terms)
		for _, t := range c.Terms {
			if t.Value != 0 {
				terms = append(terms, t)
			}
		}
		cands[i] = RouteCandidate{AgentID: c.AgentID, Score: c.Score, Terms: terms[start:len(terms):len(terms)]}
	}
	r.Candidates = cands
	return r
}

// routeTieEpsilon is how close two scores must be to count as a tie; scores
// are sums of a few floats, so exact equality would be too brittle.
const routeTieEpsilon = 1e-9

// Route picks the best agent for req among agents.
//
// Filters run in this order and the first failure is the reason: namespace
// (exact), capability (exact), state (only HEALTHY and SUSPECT are routable),
// breaker (open is rejected; half-open passes, and the dispatcher must send
// it only the single probe, see BreakerStatus.AllowsProbe), context
// ("accepting" false, "mode" "inspection"), version, protocol, canary bucket,
// capacity. Then req.Exclude is applied as a preference.
//
// Each survivor is scored with every term kept (see RouteConfig):
//
//	exact_capability  +ExactMatch
//	alias_hit         +AliasHit if an alias occurs in the hint as whole words,
//	                  ignoring case ("pdf" hits "a PDF file", not "pdfs")
//	hint_similarity   +TrigramMax × the best TrigramSimilarity of the hint to
//	                  the capability or any alias
//	weight            +WeightMax × Weight/100
//	load              −LoadMax × InFlight/MaxConcurrent (0 when unlimited)
//	failure_rate      −FailurePenalty when RecentAttempts >= MinAttemptsForFailure
//	                  and FailureRate > FailureThreshold
//	suspect           −SuspectPenalty for a SUSPECT agent
//
// The ranking is deterministic; only a tie for the top score uses rnd, which
// must return a value in [0, n): the winner is drawn with probability
// proportional to Weight. rnd may be nil, and then the first of the tie (by
// agent id) wins. Route does not modify agents.
func Route(agents []RouteAgent, req RouteRequest, cfg RouteConfig, rnd func(n int) int) RouteResult {
	// The buffers keep the common case off the heap; the trigram sets of a
	// long hint spill over.
	var hintBuf, capBuf [64]uint64
	var weightBuf [64]int
	rc := newRouteCtx(&req, &cfg, hintBuf[:0])
	if len(rc.hintTri) > 0 {
		rc.capSim = similaritySorted(rc.hintTri, appendTrigrams(capBuf[:0], req.Capability))
	}
	acc := routeAcc{
		cands:    make([]RouteCandidate, 0, 16),
		terms:    make([]ScoreTerm, 0, 16*routeTermCount),
		rejected: make([]RouteRejection, 0, len(agents)),
	}
	weights := weightBuf[:0]
	for i := range agents {
		a := &agents[i]
		if a.Namespace != req.Namespace {
			acc.reject(a.ID, RouteRejectNamespace)
			continue
		}
		if !slices.Contains(a.Capabilities, req.Capability) {
			acc.reject(a.ID, RouteRejectCapability)
			continue
		}
		if rc.consider(&acc, a, nil) {
			weights = append(weights, clampWeight(a.Weight))
		}
	}
	return acc.finish(&rc, weights, rnd)
}

// RouteIndex is an immutable snapshot of agents indexed by (namespace,
// capability), with the lower-cased aliases and their trigrams computed once,
// so a route over a thousand agents only looks at the few that can match.
// Build a new index for a new snapshot (InFlight and health change often, so
// in practice per dispatch round). It is safe for concurrent use.
//
// Its Route returns the same candidates, scores and choice as the package
// Route over the same agents, but Rejected lists only agents of the request's
// namespace that have its capability: the others are not even looked at.
type RouteIndex struct {
	agents  []RouteAgent
	pre     []routePre // per agent, parallel to agents
	buckets map[routeKey]*routeBucket
}

type routeKey struct{ namespace, capability string }

type routeBucket struct {
	members []int    // indexes into RouteIndex.agents, in input order
	capTri  []uint64 // trigrams of the capability
}

// routePre is what the index precomputes per agent for scoring: its aliases
// lower-cased and the trigram set of each. Both are views into arrays shared
// by the whole index, so building it takes a handful of allocations, not a
// few per alias.
type routePre struct {
	aliases []string
	tris    [][]uint64
}

// NewRouteIndex indexes a snapshot of agents. It copies the slice (not the
// maps or slices inside the agents, which must not change afterwards).
func NewRouteIndex(agents []RouteAgent) *RouteIndex {
	ix := &RouteIndex{
		agents:  slices.Clone(agents),
		pre:     make([]routePre, len(agents)),
		buckets: make(map[routeKey]*routeBucket),
	}
	nAliases := 0
	for i := range agents {
		nAliases += len(agents[i].Aliases)
	}
	var (
		lower   = make([]string, 0, nAliases)
		tris    = make([][]uint64, 0, nAliases)
		spans   = make([][2]int, 0, nAliases) // of each alias in arena
		arena   []uint64
		scratch [64]uint64
		// Replicas share their aliases: each distinct one is done once.
		seen = make(map[string]int) // alias -> its first index in lower
	)
	for i := range ix.agents {
		for _, al := range ix.agents[i].Aliases {
			if k, ok := seen[al]; ok {
				lower = append(lower, lower[k])
				spans = append(spans, spans[k])
				continue
			}
			seen[al] = len(lower)
			lower = append(lower, strings.ToLower(al))
			start := len(arena)
			arena = append(arena, appendTrigrams(scratch[:0], al)...)
			spans = append(spans, [2]int{start, len(arena)})
		}
	}
	for _, sp := range spans {
		tris = append(tris, arena[sp[0]:sp[1]:sp[1]])
	}
	next := 0
	for i := range ix.agents {
		a := &ix.agents[i]
		n := len(a.Aliases)
		ix.pre[i] = routePre{aliases: lower[next : next+n : next+n], tris: tris[next : next+n : next+n]}
		next += n
		for j, c := range a.Capabilities {
			if slices.Contains(a.Capabilities[:j], c) {
				continue // listed twice; index it once
			}
			k := routeKey{a.Namespace, c}
			b := ix.buckets[k]
			if b == nil {
				b = &routeBucket{capTri: appendTrigrams(nil, c)}
				ix.buckets[k] = b
			}
			b.members = append(b.members, i)
		}
	}
	return ix
}

// Route is the package Route over the indexed snapshot; see RouteIndex for
// what differs in Rejected.
func (ix *RouteIndex) Route(req RouteRequest, cfg RouteConfig, rnd func(n int) int) RouteResult {
	b := ix.buckets[routeKey{req.Namespace, req.Capability}]
	if b == nil {
		return RouteResult{Candidates: []RouteCandidate{}, Rejected: []RouteRejection{}, Intent: req.Intent}
	}
	var hintBuf [64]uint64
	var weightBuf [64]int
	rc := newRouteCtx(&req, &cfg, hintBuf[:0])
	if len(rc.hintTri) > 0 {
		rc.capSim = similaritySorted(rc.hintTri, b.capTri)
	}
	n := len(b.members)
	acc := routeAcc{
		cands:    make([]RouteCandidate, 0, n),
		terms:    make([]ScoreTerm, 0, n*routeTermCount),
		rejected: make([]RouteRejection, 0, n),
	}
	weights := weightBuf[:0]
	for _, i := range b.members {
		a := &ix.agents[i]
		if rc.consider(&acc, a, &ix.pre[i]) {
			weights = append(weights, clampWeight(a.Weight))
		}
	}
	return acc.finish(&rc, weights, rnd)
}

// routeCtx is the per-request state shared by both entry points.
type routeCtx struct {
	req       *RouteRequest
	cfg       *RouteConfig
	hintLower string
	hintTri   []uint64
	capSim    float64 // similarity of the hint to req.Capability
	bucket    int     // canary bucket of req.JobID, -1 until needed
}

// newRouteCtx builds the hint's trigram set into buf. It returns the context
// by value and the methods below never store through it, so the caller's
// stack buffers stay on the stack.
func newRouteCtx(req *RouteRequest, cfg *RouteConfig, buf []uint64) routeCtx {
	rc := routeCtx{req: req, cfg: cfg, bucket: -1}
	if strings.TrimSpace(req.Hint) != "" {
		rc.hintLower = strings.ToLower(req.Hint)
		rc.hintTri = appendTrigrams(buf, req.Hint)
	}
	return rc
}

// consider runs the filters after namespace and capability, then scores a
// survivor into acc and reports true (the caller records its weight).
func (rc *routeCtx) consider(acc *routeAcc, a *RouteAgent, pre *routePre) bool {
	if reason := rc.filter(a); reason != "" {
		acc.reject(a.ID, reason)
		if reason == RouteRejectAtCapacity {
			acc.atCapacity++
		}
		if reason == RouteRejectPaused && (acc.resumeAt.IsZero() || a.PausedUntil.Before(acc.resumeAt)) {
			acc.resumeAt = a.PausedUntil
		}
		return false
	}
	start := len(acc.terms)
	acc.terms = slices.Grow(acc.terms, routeTermCount)[:start+routeTermCount]
	score := rc.score(a, pre, acc.terms[start:])
	acc.cands = append(acc.cands, RouteCandidate{AgentID: a.ID, Score: score})
	acc.canary = append(acc.canary, a.RolloutPercent < 100)
	return true
}

// filter returns the reason of the first filter after namespace and
// capability that a fails, or "" when it passes them all.
func (rc *routeCtx) filter(a *RouteAgent) string {
	req := rc.req
	if !a.State.Routable() {
		return RouteRejectState
	}
	if a.Breaker == BreakerOpen {
		return RouteRejectBreakerOpen
	}
	if req.Now.Before(a.PausedUntil) {
		return RouteRejectPaused
	}
	if a.Context != nil {
		if v, ok := a.Context["accepting"].(bool); ok && !v {
			return RouteRejectNotAccepting
		}
		if v, ok := a.Context["mode"].(string); ok && v == "inspection" {
			return RouteRejectInspection
		}
	}
	if req.Version != "" && !versionMatches(a.Version, req.Version) {
		return RouteRejectVersion
	}
	if req.Protocol != "" && !strings.EqualFold(a.Protocol, req.Protocol) {
		return RouteRejectProtocol
	}
	if len(req.ProtocolVersions) > 0 && !slices.ContainsFunc(req.ProtocolVersions, func(v string) bool { return versionMatches(a.ProtocolVersion, v) }) {
		return RouteRejectProtocolVer
	}
	if a.RolloutPercent < 100 {
		if rc.bucket < 0 {
			rc.bucket = CanaryBucket(req.JobID)
		}
		if rc.bucket >= a.RolloutPercent {
			return RouteRejectCanary
		}
	}
	if a.MaxConcurrent > 0 && a.InFlight >= a.MaxConcurrent && !rc.req.IgnoreCapacity {
		return RouteRejectAtCapacity
	}
	return ""
}

// clampWeight keeps Weight in 1..100, so a zero weight still gets a chance.
func clampWeight(w int) int { return min(max(w, 1), 100) }

// versionMatches: "1.2.*" is the prefix "1.2." (so not "1.20"), "*" is any,
// everything else is exact.
func versionMatches(have, want string) bool {
	if p, ok := strings.CutSuffix(want, "*"); ok && (p == "" || strings.HasSuffix(p, ".")) {
		return strings.HasPrefix(have, p)
	}
	return have == want
}

// score fills terms (len routeTermCount) and returns their sum.
func (rc *routeCtx) score(a *RouteAgent, pre *routePre, terms []ScoreTerm) float64 {
	cfg := rc.cfg
	var alias, sim, load, fail, suspect float64
	if rc.hintLower != "" {
		hit, best := rc.aliasMatch(a, pre)
		if hit {
			alias = cfg.AliasHit
		}
		sim = cfg.TrigramMax * best
	}
	weight := cfg.WeightMax * float64(clampWeight(a.Weight)) / 100
	if busy := a.InFlight + a.Queued; a.MaxConcurrent > 0 && busy > 0 {
		load = -cfg.LoadMax * min(1, float64(busy)/float64(a.MaxConcurrent))
	}
	if a.RecentAttempts >= cfg.MinAttemptsForFailure && a.FailureRate > cfg.FailureThreshold {
		fail = -cfg.FailurePenalty
	}
	if a.State == AgentSuspect {
		suspect = -cfg.SuspectPenalty
	}
	terms[0] = ScoreTerm{RouteTermExactCapability, cfg.ExactMatch}
	terms[1] = ScoreTerm{RouteTermAliasHit, alias}
	terms[2] = ScoreTerm{RouteTermHintSimilarity, sim}
	terms[3] = ScoreTerm{RouteTermWeight, weight}
	terms[4] = ScoreTerm{RouteTermLoad, load}
	terms[5] = ScoreTerm{RouteTermFailureRate, fail}
	terms[6] = ScoreTerm{RouteTermSuspect, suspect}
	var flap float64
	if a.FlapPenalty > 0 {
		flap = -a.FlapPenalty
	}
	terms[7] = ScoreTerm{RouteTermFlapping, flap}
	return cfg.ExactMatch + alias + sim + weight + load + fail + suspect + flap
}

// aliasMatch reports whether an alias occurs in the hint and the best trigram
// similarity of the hint to the capability or an alias. Without an index the
// alias trigrams are built in a stack buffer, only for agents that passed the
// filters.
func (rc *routeCtx) aliasMatch(a *RouteAgent, pre *routePre) (hit bool, best float64) {
	best = rc.capSim
	if pre != nil {
		for j, al := range pre.aliases {
			hit = hit || containsWords(rc.hintLower, al)
			best = max(best, similaritySorted(rc.hintTri, pre.tris[j]))
		}
		return hit, best
	}
	var buf [64]uint64
	for _, al := range a.Aliases {
		hit = hit || containsWords(rc.hintLower, strings.ToLower(al))
		if len(rc.hintTri) > 0 {
			best = max(best, similaritySorted(rc.hintTri, appendTrigrams(buf[:0], al)))
		}
	}
	return hit, best
}

// routeAcc collects one decision's outcome.
type routeAcc struct {
	cands      []RouteCandidate
	canary     []bool      // of each candidate: RolloutPercent below 100
	terms      []ScoreTerm // routeTermCount per candidate, in candidate order
	rejected   []RouteRejection
	atCapacity int
	resumeAt   time.Time // the first paused agent's pause ends
}

func (acc *routeAcc) reject(id, reason string) {
	acc.rejected = append(acc.rejected, RouteRejection{AgentID: id, Reason: reason})
}

// finish attaches the terms, applies Exclude, chooses and ranks.
// weights holds each candidate's clamped Weight, in candidate order; it is
// kept out of acc so that its stack buffer does not escape.
func (acc *routeAcc) finish(rc *routeCtx, weights []int, rnd func(n int) int) RouteResult {
	cands := acc.cands
	for i := range cands {
		o := i * routeTermCount
		cands[i].Terms = acc.terms[o : o+routeTermCount : o+routeTermCount]
	}
	if ex := rc.req.Exclude; len(ex) > 0 {
		keep := 0
		for i := range cands {
			if !slices.Contains(ex, cands[i].AgentID) {
				keep++
			}
		}
		if keep > 0 && keep < len(cands) {
			n := 0
			for i, c := range cands {
				if slices.Contains(ex, c.AgentID) {
					acc.reject(c.AgentID, RouteRejectExcluded)
					continue
				}
				cands[n], weights[n], acc.canary[n] = c, weights[i], acc.canary[i]
				n++
			}
			clear(cands[n:])
			cands, weights, acc.canary = cands[:n], weights[:n], acc.canary[:n]
		}
	}
	res := RouteResult{
		Candidates:    cands,
		Rejected:      acc.rejected,
		AllAtCapacity: len(cands) == 0 && acc.atCapacity > 0,
		Intent:        rc.req.Intent,
	}
	if len(cands) == 0 {
		res.ResumeAt = acc.resumeAt
		return res
	}
	chosen := ""
	if slices.Contains(acc.canary, true) {
		// The job is in a canary's bucket: the best canary takes it.
		var cc []RouteCandidate
		var cw []int
		for i, c := range cands {
			if acc.canary[i] {
				cc, cw = append(cc, c), append(cw, weights[i])
			}
		}
		chosen, res.Canary = chooseTop(cc, cw, rnd), true
	} else {
		chosen = chooseTop(cands, weights, rnd)
	}
	slices.SortFunc(cands, func(a, b RouteCandidate) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return strings.Compare(a.AgentID, b.AgentID)
	})
	if chosen != cands[0].AgentID {
		// Move the winner of the tie to the front, keeping the others in order.
		p := slices.IndexFunc(cands, func(c RouteCandidate) bool { return c.AgentID == chosen })
		w := cands[p]
		copy(cands[1:p+1], cands[:p])
		cands[0] = w
	}
	res.Chosen = chosen
	return res
}

// chooseTop returns the id of the winner among the candidates whose score is
// within routeTieEpsilon of the best: the only one, or, taken in agent id
// order, one drawn by rnd with probability proportional to its weight. With a
// nil rnd the first by id wins.
func chooseTop(cands []RouteCandidate, weights []int, rnd func(n int) int) string {
	top := cands[0].Score
	for _, c := range cands[1:] {
		top = max(top, c.Score)
	}
	var buf [16]int
	tie := buf[:0]
	for i, c := range cands {
		if top-c.Score <= routeTieEpsilon {
			tie = append(tie, i)
		}
	}
	slices.SortFunc(tie, func(a, b int) int { return strings.Compare(cands[a].AgentID, cands[b].AgentID) })
	if len(tie) == 1 || rnd == nil {
		return cands[tie[0]].AgentID
	}
	total := 0
	for _, i := range tie {
		total += weights[i]
	}
	r := rnd(total)
	if r < 0 || r >= total { // a broken rnd must not panic the dispatcher
		r = (r%total + total) % total
	}
	for _, i := range tie {
		r -= weights[i]
		if r < 0 {
			return cands[i].AgentID
		}
	}
	return cands[tie[len(tie)-1]].AgentID
}

// CanaryBucket is the job's stable bucket in 0..99: FNV-1a (32 bit) of the
// job id, modulo 100. An agent with RolloutPercent p takes the job only when
// its bucket is below p, so a job meets the same canaries on every retry and
// a 10% canary sees about 10% of jobs.
func CanaryBucket(jobID string) int {
	const (
		offset32 = 2166136261
		prime32  = 16777619
	)
	h := uint32(offset32)
	for i := 0; i < len(jobID); i++ {
		h ^= uint32(jobID[i])
		h *= prime32
	}
	return int(h % 100)
}

// TrigramSimilarity is pg_trgm's similarity of a and b: each string is
// lower-cased and split into words of letters and digits, each word is padded
// with two spaces in front and one behind, and the result is |A∩B| / |A∪B|
// over the two sets of 3-rune grams. It is 0 when either side has no words.
func TrigramSimilarity(a, b string) float64 {
	var ba, bb [64]uint64
	return similaritySorted(appendTrigrams(ba[:0], a), appendTrigrams(bb[:0], b))
}

// appendTrigrams appends the sorted, deduplicated trigram set of s to dst
// (which is treated as empty). A trigram is three runes packed 21 bits each,
// so it is exact, not a hash.
func appendTrigrams(dst []uint64, s string) []uint64 {
	dst = dst[:0]
	p1, p2 := ' ', ' '
	inWord := false
	for _, r := range s {
		if !isWordRune(r) {
			if inWord {
				dst = append(dst, packTrigram(p1, p2, ' '))
				inWord = false
			}
			continue
		}
		r = lowerRune(r)
		if !inWord {
			p1, p2, inWord = ' ', ' ', true
		}
		dst = append(dst, packTrigram(p1, p2, r))
		p1, p2 = p2, r
	}
	if inWord {
		dst = append(dst, packTrigram(p1, p2, ' '))
	}
	slices.Sort(dst)
	return slices.Compact(dst)
}

func packTrigram(a, b, c rune) uint64 {
	return uint64(a)<<42 | uint64(b)<<21 | uint64(c)
}

// similaritySorted is |A∩B| / |A∪B| for sorted, deduplicated sets.
func similaritySorted(a, b []uint64) float64 {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	common, i, j := 0, 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			common++
			i++
			j++
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return float64(common) / float64(len(a)+len(b)-common)
}

func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

func lowerRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		return r
	}
	return unicode.ToLower(r)
}

// containsWords reports whether w occurs in s (both lower-cased) with no
// letter or digit glued to either end, so "pdf" matches "a pdf file" but not
// "pdfs"; an alias that itself ends in a symbol ("c++") needs no boundary
// on that side.
func containsWords(s, w string) bool {
	if w == "" {
		return false
	}
	first, _ := utf8.DecodeRuneInString(w)
	last, _ := utf8.DecodeLastRuneInString(w)
	needBefore, needAfter := isWordRune(first), isWordRune(last)
	for from := 0; from <= len(s)-len(w); {
		i := strings.Index(s[from:], w)
		if i < 0 {
			return false
		}
		i += from
		end := i + len(w)
		ok := true
		if needBefore && i > 0 {
			r, _ := utf8.DecodeLastRuneInString(s[:i])
			ok = !isWordRune(r)
		}
		if ok && needAfter && end < len(s) {
			r, _ := utf8.DecodeRuneInString(s[end:])
			ok = !isWordRune(r)
		}
		if ok {
			return true
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		from = i + size
	}
	return false
}

// Unavailable reports whether an agent offering the capability exists but
// none could take the job for its state (not routable, breaker open, not
// accepting, in inspection): the attempt is spent as all_unavailable
// rather than no_agent.
func (r RouteResult) Unavailable() bool {
	for _, rj := range r.Rejected {
		switch rj.Reason {
		case RouteRejectState, RouteRejectBreakerOpen, RouteRejectPaused, RouteRejectNotAccepting, RouteRejectInspection:
			return true
		}
	}
	return false
}

// Preferring chooses agent id when it is a candidate: the agent whose slot
// was just given back to this job. The others keep their order behind it.
func (r RouteResult) Preferring(id string) RouteResult {
	p := slices.IndexFunc(r.Candidates, func(c RouteCandidate) bool { return c.AgentID == id })
	if id == "" || p <= 0 {
		return r // not a candidate, or chosen already
	}
	cands := slices.Clone(r.Candidates)
	w := cands[p]
	copy(cands[1:p+1], cands[:p])
	cands[0] = w
	r.Candidates, r.Chosen, r.Canary = cands, id, false
	return r
}
