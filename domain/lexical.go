package domain

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// LexicalIndex is the built-in intent resolver's index of one catalogue:
// BM25 over the terms (Tokenize) of each capability's name, title, tags,
// description and examples. It needs nothing outside the process and
// answers in microseconds, so it always runs first.
//
// Fields weigh differently: a term of the name or the title counts three
// and two times, a tag two, the description and each example once.
type LexicalIndex struct {
	names    []string
	postings map[string][]lexPosting
	docLen   []float32
	avgLen   float64
	// units are each capability's texts one by one (its name, title,
	// description, each example and tag), as sorted term sets.
	units [][][]string
	// exact maps a normalized name, title or tag to the capabilities that
	// carry it (a name to its own only).
	exact  map[string][]int32
	names0 map[string]int32 // normalized name → capability
}

type lexPosting struct {
	doc int32
	tf  float32
}

// BM25 constants: the usual ones.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// Field weights of the lexical index.
const (
	weightName        = 3
	weightTitle       = 2
	weightTag         = 2
	weightDescription = 1
	weightExample     = 1
)

// NewLexicalIndex indexes a catalogue's entries.
func NewLexicalIndex(entries []CatalogueEntry) *LexicalIndex {
	ix := &LexicalIndex{names: make([]string, len(entries)), postings: map[string][]lexPosting{},
		docLen: make([]float32, len(entries)), units: make([][][]string, len(entries)),
		exact: map[string][]int32{}, names0: map[string]int32{}}
	total := 0.0
	tf := map[string]float32{}
	for i, e := range entries {
		doc := int32(i)
		ix.names[i] = e.Name
		clear(tf)
		add := func(text string, w float32) {
			ts := Tokenize(text)
			for _, t := range ts {
				tf[t] += w
			}
			if len(ts) > 0 {
				slices.Sort(ts)
				ix.units[i] = append(ix.units[i], slices.Compact(ts))
			}
		}
		add(e.Name, weightName)
		add(e.Title, weightTitle)
		for _, t := range e.Tags {
			add(t, weightTag)
		}
		add(e.Description, weightDescription)
		for _, x := range e.Examples {
			add(x, weightExample)
		}
		n := float32(0)
		for t, f := range tf {
			ix.postings[t] = append(ix.postings[t], lexPosting{doc: doc, tf: f})
			n += f
		}
		ix.docLen[i] = n
		total += float64(n)
		ix.names0[NormalizeIntent(e.Name)] = doc
		for _, label := range append([]string{e.Title}, e.Tags...) {
			if k := NormalizeIntent(label); k != "" && !slices.Contains(ix.exact[k], doc) {
				ix.exact[k] = append(ix.exact[k], doc)
			}
		}
	}
	if len(entries) > 0 {
		ix.avgLen = total / float64(len(entries))
	}
	return ix
}

// Len is how many capabilities the index holds.
func (ix *LexicalIndex) Len() int { return len(ix.names) }

// Rank ranks the capabilities for an intent and keeps the best limit (all
// with limit <= 0).
//
// Two rules come first. An intent that is a capability's name ("parcel.track",
// in any case) is that capability, confidence 1. An intent that is the title
// or a tag of exactly one capability is that one, confidence 1.
//
// Otherwise each capability scores the mean of two shares of what the
// caller said, each weighed by the terms' IDF (a term no capability has
// counts against every one): its BM25 over the intent's distinct terms
// divided by the sum of their IDF weights (near the share its words
// account for, capped at 1), and the share the best single text of it
// (its description, one example, its title …) accounts for, so an intent
// close to one example beats one that gathers its words from many. The
// confidence is the best score less the second best: a tie is never
// confident however well both match.
func (ix *LexicalIndex) Rank(intent string, limit int) IntentRanking {
	r := IntentRanking{Resolver: ResolverLexical, Candidates: []IntentCandidate{}}
	if len(ix.names) == 0 {
		r.Reason = "the catalogue is empty"
		return r
	}
	norm := NormalizeIntent(intent)
	if doc, ok := ix.names0[norm]; ok {
		return ix.ruled(r, doc, "the intent is the capability's name")
	}
	if docs := ix.exact[norm]; len(docs) == 1 {
		return ix.ruled(r, docs[0], "the intent is the capability's title or one of its tags")
	}
	terms := dedupeTerms(Tokenize(intent))
	if len(terms) == 0 {
		r.Reason = "the intent has no words to match"
		return r
	}
	n := float64(len(ix.names))
	scores := map[int32]float64{}
	matched := map[int32][]string{}
	idfs := make([]float64, len(terms))
	weight := 0.0
	for i, t := range terms {
		ps := ix.postings[t]
		idf := math.Log(1 + (n-float64(len(ps))+0.5)/(float64(len(ps))+0.5))
		idfs[i] = idf
		weight += idf
		for _, p := range ps {
			f := float64(p.tf)
			scores[p.doc] += idf * f * (bm25K1 + 1) / (f + bm25K1*(1-bm25B+bm25B*float64(ix.docLen[p.doc])/ix.avgLen))
			matched[p.doc] = append(matched[p.doc], t)
		}
	}
	cands := make([]IntentCandidate, 0, len(scores))
	for doc, s := range scores {
		best := 0.0
		for _, u := range ix.units[doc] {
			covered := 0.0
			for i, t := range terms {
				if _, ok := slices.BinarySearch(u, t); ok {
					covered += idfs[i]
				}
			}
			best = max(best, covered)
		}
		score := (min(1, s/weight) + best/weight) / 2
		cands = append(cands, IntentCandidate{Capability: ix.names[doc], Score: round4(score), Matched: matched[doc]})
	}
	sortCandidates(cands)
	if limit > 0 && len(cands) > limit {
		cands = cands[:limit]
	}
	r.Candidates, r.Confidence = cands, rankConfidence(cands)
	switch {
	case len(cands) == 0:
		r.Reason = "no capability's words match the intent's"
	case len(cands) == 1:
		r.Reason = fmt.Sprintf("bm25: %s matched %s (score %.2f); no other capability matched", cands[0].Capability,
			quoteTerms(cands[0].Matched), cands[0].Score)
	default:
		r.Reason = fmt.Sprintf("bm25: %s matched %s (score %.2f); next best %s at %.2f", cands[0].Capability,
			quoteTerms(cands[0].Matched), cands[0].Score, cands[1].Capability, cands[1].Score)
	}
	return r
}

func (ix *LexicalIndex) ruled(r IntentRanking, doc int32, why string) IntentRanking {
	r.Candidates = []IntentCandidate{{Capability: ix.names[doc], Score: 1}}
	r.Confidence, r.Reason = 1, why
	return r
}

func dedupeTerms(ts []string) []string {
	out := ts[:0:0]
	for _, t := range ts {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

func quoteTerms(ts []string) string {
	q := make([]string, len(ts))
	for i, t := range ts {
		q[i] = fmt.Sprintf("%q", t)
	}
	return strings.Join(q, " ")
}
