package intent_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/intent"
)

// benchSubjects × benchVerbs are the 1,000 capabilities of the benchmark's
// catalogue.
var (
	benchSubjects = strings.Fields(`invoice receipt contract email image audio video code sql parcel order refund ticket
		calendar meeting report slide sheet form resume letter poem recipe menu flight hotel train weather news stock
		payment account password review survey quiz lesson map route address photo scan label barcode license patent
		claim policy memo alert`)
	benchVerbs = strings.Fields(`summarize extract translate classify redact check create update delete search compare
		validate format convert schedule cancel approve reject archive share`)
)

// benchCatalogue registers 1,000 capabilities (50 subjects × 20 verbs) on
// 20 agents of 50 capabilities each, every one described, and returns the
// names in catalogue order.
func benchCatalogue(b *testing.B, bd *bundle) []string {
	b.Helper()
	var names []string
	for _, s := range benchSubjects {
		for _, v := range benchVerbs {
			names = append(names, s+"."+v)
		}
	}
	require.Equal(b, 1000, len(names))
	for a := range 20 {
		caps := names[a*50 : (a+1)*50]
		docs := map[string]domain.CapabilityDoc{}
		for _, c := range caps {
			s, v, _ := strings.Cut(c, ".")
			docs[c] = domain.CapabilityDoc{Title: v + " a " + s, Description: fmt.Sprintf("Takes a %s and will %s it.", s, v),
				Examples: []string{fmt.Sprintf("please %s my %s", v, s), fmt.Sprintf("%s this %s for me", v, s)}}
		}
		bd.register(b, fmt.Sprintf("bench-%02d", a), nil, docs, caps...)
	}
	slices.Sort(names)
	return names
}

// oneHotModel is a stand-in embedding model for the benchmark: each
// catalogue entry's text (its first line is its name as words) is the unit
// vector of its own index, and an intent "zq N" is the vector of entry N:
// words the lexical resolver cannot place but the model can.
func oneHotModel(b *testing.B, names []string) *httptest.Server {
	index := map[string]int{}
	for i, n := range names {
		index[strings.ReplaceAll(n, ".", " ")] = i
	}
	vec := func(text string) []float32 {
		v := make([]float32, len(names))
		first, _, _ := strings.Cut(text, "\n")
		if i, ok := index[first]; ok {
			v[i] = 1
		} else if n, ok := strings.CutPrefix(text, "zq "); ok {
			k, _ := strconv.Atoi(n)
			v[k%len(names)] = 1
		}
		v[0] += 0.001 // no zero vector
		return v
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		type item struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		var out struct {
			Data []item `json:"data"`
		}
		for i, t := range req.Input {
			out.Data = append(out.Data, item{Index: i, Embedding: vec(t)})
		}
		_ = json.NewEncoder(w).Encode(out)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// BenchmarkResolve measures POST /v1/resolve's work over a catalogue of
// 1,000 capabilities on the real database: "lexical", intents the lexical
// resolver is confident of (the catalogue's version read, the BM25 rank);
// "cached", intents only the embedding model can place, answered from the
// cache (the version read, the lexical rank, the cached answer read). It
// reports the p50 and p99 of one resolution.
func BenchmarkResolve(b *testing.B) {
	bd := setup(b, intent.Config{})
	names := benchCatalogue(b, bd)
	srv := oneHotModel(b, names)
	cached := intent.New(bd.pool, eventstore.New(bd.pool), slog.New(slog.NewTextHandler(io.Discard, nil)), intent.Config{Embedding: intent.ModelConfig{URL: srv.URL + "/v1", Model: "one-hot"}})

	lexical := make([]string, 0, 200)
	for i := range 200 {
		s, v := benchSubjects[(i*7)%len(benchSubjects)], benchVerbs[(i*3)%len(benchVerbs)]
		lexical = append(lexical, fmt.Sprintf("%s this %s please", v, s))
	}
	modelled := make([]string, 0, 200)
	for i := range 200 {
		modelled = append(modelled, fmt.Sprintf("zq %d", i*5))
	}
	for _, in := range lexical[:20] {
		res, err := bd.svc.Resolve(bd.ctx, "shop", in)
		require.NoError(b, err, in)
		require.Equal(b, domain.ResolverLexical, res.Resolver)
	}
	for _, in := range modelled { // the cache is warm: every answer is in it
		res, err := cached.Resolve(bd.ctx, "shop", in)
		require.NoError(b, err, in)
		require.Equal(b, domain.ResolverEmbedding, res.Resolver, in)
	}

	for _, bc := range []struct {
		name    string
		svc     *intent.Service
		intents []string
		cached  bool
	}{{"lexical", bd.svc, lexical, false}, {"cached", cached, modelled, true}} {
		b.Run(bc.name, func(b *testing.B) {
			before := bc.svc.Stats()
			var took []time.Duration
			i := 0
			for b.Loop() {
				start := time.Now()
				res, err := bc.svc.Resolve(bd.ctx, "shop", bc.intents[i%len(bc.intents)])
				took = append(took, time.Since(start))
				var amb *domain.AmbiguousIntentError
				if err != nil && !errors.As(err, &amb) || res.Cached != bc.cached {
					b.Fatalf("%q: %+v %v", bc.intents[i%len(bc.intents)], res, err)
				}
				i++
			}
			if bc.cached && bc.svc.Stats().ModelAnswers != before.ModelAnswers {
				b.Fatal("a cached resolution asked the model")
			}
			reportPercentiles(b, took)
		})
	}
}

// BenchmarkLexicalRank is the lexical resolver alone, in memory, over the
// same 1,000 capabilities.
func BenchmarkLexicalRank(b *testing.B) {
	var entries []domain.CatalogueEntry
	for _, s := range benchSubjects {
		for _, v := range benchVerbs {
			entries = append(entries, domain.CatalogueEntry{Name: s + "." + v, Title: v + " a " + s,
				Description: fmt.Sprintf("Takes a %s and will %s it.", s, v),
				Examples:    []string{fmt.Sprintf("please %s my %s", v, s), fmt.Sprintf("%s this %s for me", v, s)}})
		}
	}
	ix := domain.NewLexicalIndex(entries)
	var took []time.Duration
	i := 0
	for b.Loop() {
		s, v := benchSubjects[(i*7)%len(benchSubjects)], benchVerbs[(i*3)%len(benchVerbs)]
		start := time.Now()
		r := ix.Rank(v+" this "+s+" please", 20)
		took = append(took, time.Since(start))
		if r.Top() != s+"."+v {
			b.Fatalf("%s.%s: %+v", s, v, r)
		}
		i++
	}
	reportPercentiles(b, took)
}

func reportPercentiles(b *testing.B, took []time.Duration) {
	if len(took) == 0 {
		return
	}
	slices.Sort(took)
	at := func(p float64) float64 {
		return float64(took[min(len(took)-1, int(p*float64(len(took))))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}
