package domain

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
)

// LexicalIndex is the built-in intent resolver's index of one catalogue:
// BM25 over the terms (Tokenize) of each capability's name, title, tags,
// description and examples. It needs nothing outside the process and
// answers in microseconds, so it always runs first. It is safe for
// concurrent use.
//
// Fields weigh differently: a term of the name or the title counts three
// and two times, a tag two, the description and each example once.
type LexicalIndex struct {
	names    []string
	termIDs  map[string]int32 // every indexed term → its id
	postings [][]lexPosting   // by term id
	docLen   []float32
	avgLen   float64
	// units are each capability's texts one by one (its name, title,
	// description, each example and tag), as sorted sets of term ids.
	units [][][]int32
	// exact maps a normalized title or tag to the capabilities that carry
	// it; names0 a normalized name to its capability.
	exact  map[string][]int32
	names0 map[string]int32
	// scratch holds per-query buffers of one score and one mask per
	// capability, so a query allocates little whatever the catalogue's size.
	scratch sync.Pool
}

type lexPosting struct {
	doc int32
	tf  float32
}

type lexScratch struct {
	scores []float64
	masks  []uint64 // which of the query's terms each capability matched
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
	ix := &LexicalIndex{names: make([]string, len(entries)), termIDs: map[string]int32{},
		docLen: make([]float32, len(entries)), units: make([][][]int32, len(entries)),
		exact: map[string][]int32{}, names0: map[string]int32{}}
	n := len(entries)
	ix.scratch.New = func() any { return &lexScratch{scores: make([]float64, n), masks: make([]uint64, n)} }
	id := func(t string) int32 {
		if i, ok := ix.termIDs[t]; ok {
			return i
		}
		i := int32(len(ix.postings))
		ix.termIDs[t] = i
		ix.postings = append(ix.postings, nil)
		return i
	}
	total := 0.0
	tf := map[int32]float32{}
	for i, e := range entries {
		doc := int32(i)
		ix.names[i] = e.Name
		clear(tf)
		add := func(text string, w float32) {
			var unit []int32
			for _, t := range Tokenize(text) {
				k := id(t)
				tf[k] += w
				unit = append(unit, k)
			}
			if len(unit) > 0 {
				slices.Sort(unit)
				ix.units[i] = append(ix.units[i], slices.Compact(unit))
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
		length := float32(0)
		for k, f := range tf {
			ix.postings[k] = append(ix.postings[k], lexPosting{doc: doc, tf: f})
			length += f
		}
		ix.docLen[i] = length
		total += float64(length)
		ix.names0[NormalizeIntent(e.Name)] = doc
		for _, label := range append([]string{e.Title}, e.Tags...) {
			if k := NormalizeIntent(label); k != "" && !slices.Contains(ix.exact[k], doc) {
				ix.exact[k] = append(ix.exact[k], doc)
			}
		}
	}
	if n > 0 {
		ix.avgLen = total / float64(n)
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
	if len(terms) > maxQueryTerms {
		terms = terms[:maxQueryTerms]
	}
	sc := ix.scratch.Get().(*lexScratch)
	defer ix.scratch.Put(sc)
	n := float64(len(ix.names))
	ids := make([]int32, len(terms)) // -1: a term no capability has
	idfs := make([]float64, len(terms))
	var touched []int32
	weight := 0.0
	for i, t := range terms {
		var ps []lexPosting
		ids[i] = -1
		if k, ok := ix.termIDs[t]; ok {
			ids[i], ps = k, ix.postings[k]
		}
		idf := math.Log(1 + (n-float64(len(ps))+0.5)/(float64(len(ps))+0.5))
		idfs[i] = idf
		weight += idf
		for _, p := range ps {
			f := float64(p.tf)
			if sc.masks[p.doc] == 0 {
				touched = append(touched, p.doc)
			}
			sc.scores[p.doc] += idf * f * (bm25K1 + 1) / (f + bm25K1*(1-bm25B+bm25B*float64(ix.docLen[p.doc])/ix.avgLen))
			sc.masks[p.doc] |= 1 << i
		}
	}
	top := newTopK(limit, len(touched))
	for _, doc := range touched {
		best := 0.0
		for _, u := range ix.units[doc] {
			covered := 0.0
			for m := sc.masks[doc]; m != 0; m &= m - 1 {
				i := bits.TrailingZeros64(m)
				if _, ok := slices.BinarySearch(u, ids[i]); ok {
					covered += idfs[i]
				}
			}
			best = max(best, covered)
		}
		top.offer(doc, round4((min(1, sc.scores[doc]/weight)+best/weight)/2), ix.names)
	}
	cands := make([]IntentCandidate, len(top.docs))
	for i, d := range top.docs {
		cands[i] = IntentCandidate{Capability: ix.names[d.doc], Score: d.score, Matched: matchedTerms(terms, sc.masks[d.doc])}
	}
	for _, doc := range touched {
		sc.scores[doc], sc.masks[doc] = 0, 0
	}
	r.Candidates, r.Confidence, r.Reason = cands, rankConfidence(cands), lexicalReason(cands)
	return r
}

func lexicalReason(cands []IntentCandidate) string {
	switch len(cands) {
	case 0:
		return "no capability's words match the intent's"
	case 1:
		return fmt.Sprintf("bm25: %s matched %s (score %.2f); no other capability matched", cands[0].Capability,
			quoteTerms(cands[0].Matched), cands[0].Score)
	}
	return fmt.Sprintf("bm25: %s matched %s (score %.2f); next best %s at %.2f", cands[0].Capability,
		quoteTerms(cands[0].Matched), cands[0].Score, cands[1].Capability, cands[1].Score)
}

// topK keeps the best k scored capabilities, best first, ties by name.
type topK struct {
	k    int
	docs []scoredDoc
}

type scoredDoc struct {
	doc   int32
	score float64
}

func newTopK(k, n int) *topK {
	if k <= 0 || k > n {
		k = n
	}
	return &topK{k: k, docs: make([]scoredDoc, 0, k)}
}

func (t *topK) offer(doc int32, score float64, names []string) {
	better := func(a, b scoredDoc) bool {
		return a.score > b.score || a.score == b.score && names[a.doc] < names[b.doc]
	}
	d := scoredDoc{doc: doc, score: score}
	if len(t.docs) == t.k {
		if t.k == 0 || !better(d, t.docs[t.k-1]) {
			return
		}
		t.docs = t.docs[:t.k-1]
	}
	i := len(t.docs)
	t.docs = append(t.docs, d)
	for ; i > 0 && better(d, t.docs[i-1]); i-- {
		t.docs[i] = t.docs[i-1]
	}
	t.docs[i] = d
}

func (ix *LexicalIndex) ruled(r IntentRanking, doc int32, why string) IntentRanking {
	r.Candidates = []IntentCandidate{{Capability: ix.names[doc], Score: 1}}
	r.Confidence, r.Reason = 1, why
	return r
}

// maxQueryTerms bounds the distinct terms of an intent that are matched:
// the first 64, far more than an intent has.
const maxQueryTerms = 64

func matchedTerms(terms []string, m uint64) []string {
	out := make([]string, 0, bits.OnesCount64(m))
	for ; m != 0; m &= m - 1 {
		out = append(out, terms[bits.TrailingZeros64(m)])
	}
	return out
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
