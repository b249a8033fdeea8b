package intent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/intent"
	"github.com/agentreach/agentreach/internal/pgtest"
	"github.com/agentreach/agentreach/netguard"
	"github.com/agentreach/agentreach/registry"
	"github.com/agentreach/agentreach/registry/riverwork"
)

type bundle struct {
	pool *pgxpool.Pool
	reg  *registry.Registry
	svc  *intent.Service
	ctx  context.Context
}

func setup(t testing.TB, cfg intent.Config) *bundle {
	t.Helper()
	pool := pgtest.NewPool(t)
	store := eventstore.New(pool)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := registry.New(pool, store, logger, registry.Config{})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{}) // insert-only: probes are queued, never run
	require.NoError(t, err)
	reg.SetProbes(riverwork.Probes(client))
	require.NoError(t, cfg.Validate())
	return &bundle{pool: pool, reg: reg, svc: intent.New(pool, store, logger, cfg), ctx: context.Background()}
}

// register registers agent id offering caps, with what it says of them.
func (b *bundle) register(t testing.TB, id string, aliases []string, docs map[string]domain.CapabilityDoc, caps ...string) {
	t.Helper()
	_, _, err := b.reg.Register(b.ctx, domain.AgentRegistration{AgentID: id, Namespace: "shop", Capabilities: caps, Aliases: aliases,
		Endpoint: "http://127.0.0.1:9/" + id, RolloutPercent: 100, CapabilityInfo: docs}, domain.Metadata{Actor: "test"})
	require.NoError(t, err)
}

// shop registers the catalogue most tests use: one capability per topic,
// so a stand-in embedding model that knows the topics tells them apart.
func (b *bundle) shop(t testing.TB) {
	t.Helper()
	b.register(t, "parcels", nil, map[string]domain.CapabilityDoc{"parcel.track": {Title: "Track a parcel",
		Description: "Where a parcel is now. 查询包裹在哪里", Examples: []string{"where is my parcel", "我的包裹在哪里"}}}, "parcel.track")
	b.register(t, "weather", nil, map[string]domain.CapabilityDoc{"weather.forecast": {Description: "The forecast for a city. 天气预报",
		Examples: []string{"will it rain tomorrow"}}}, "weather.forecast")
	b.register(t, "writer", nil, map[string]domain.CapabilityDoc{
		"text.summarize": {Description: "A short summary of a long text. 总结", Examples: []string{"summarise this article"}},
		"text.translate": {Description: "Translate a text into another language. 翻译", Examples: []string{"translate this into French"}},
	}, "text.summarize", "text.translate")
}

// topics are what the stand-in embedding model understands: a text's
// vector counts the words of each topic it holds (plus a little of every
// topic, so no vector is zero).
var topics = [][]string{
	{"parcel", "package", "arrive", "courier", "包裹", "快递"},
	{"weather", "rain", "forecast", "umbrella", "天气"},
	{"summar", "tl;dr", "总结"},
	{"translat", "french", "翻译"},
}

func topicVector(text string) []float32 {
	text = strings.ToLower(text)
	v := make([]float32, len(topics))
	for i, words := range topics {
		v[i] = 0.01
		for _, w := range words {
			v[i] += float32(strings.Count(text, w))
		}
	}
	return v
}

// standIn is an OpenAI-compatible model server started by the test, on
// 127.0.0.1: deterministic embeddings (topicVector) and chat answers
// (choose), counting what it was asked.
type standIn struct {
	srv         *httptest.Server
	embeds      atomic.Int32  // /embeddings requests
	inputs      atomic.Int32  // texts embedded
	chats       atomic.Int32  // /chat/completions requests
	status      atomic.Int32  // answer this status instead, when set
	hold        chan struct{} // when set, requests wait for it (or for their own end)
	mu          sync.Mutex
	lastInputs  []string
	lastPrompt  string
	authHeaders []string
	choose      func(request string) string
}

func newStandIn(t testing.TB, choose func(string) string) *standIn {
	t.Helper()
	s := &standIn{choose: choose}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body) // read first: the server notices a client that gave up only after
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.mu.Lock()
		s.authHeaders = append(s.authHeaders, r.Header.Get("Authorization"))
		hold := s.hold
		s.mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
		}
		if code := s.status.Load(); code != 0 {
			w.WriteHeader(int(code))
			return
		}
		switch r.URL.Path {
		case "/v1/embeddings":
			var req struct {
				Model string   `json:"model"`
				Input []string `json:"input"`
			}
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model != "topics-1" {
				http.Error(w, "bad request", http.StatusBadRequest)
				return
			}
			s.embeds.Add(1)
			s.inputs.Add(int32(len(req.Input)))
			s.mu.Lock()
			s.lastInputs = req.Input
			s.mu.Unlock()
			type item struct {
				Index     int       `json:"index"`
				Embedding []float32 `json:"embedding"`
			}
			out := struct {
				Data []item `json:"data"`
			}{}
			for i := len(req.Input) - 1; i >= 0; i-- { // out of order, with indexes
				out.Data = append(out.Data, item{Index: i, Embedding: topicVector(req.Input[i])})
			}
			_ = json.NewEncoder(w).Encode(out)
		case "/v1/chat/completions":
			var req struct {
				Model    string `json:"model"`
				Messages []struct {
					Role    string `json:"role"`
					Content string `json:"content"`
				} `json:"messages"`
			}
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model != "chooser-1" || len(req.Messages) != 2 {
				http.Error(w, "bad request", http.StatusBadRequest)
				return
			}
			s.chats.Add(1)
			prompt := req.Messages[1].Content
			s.mu.Lock()
			s.lastPrompt = prompt
			s.mu.Unlock()
			_, request, _ := strings.Cut(prompt, "Request: ")
			request, _, _ = strings.Cut(request, "\n")
			_ = json.NewEncoder(w).Encode(map[string]any{"choices": []map[string]any{
				{"message": map[string]string{"role": "assistant", "content": s.choose(request)}}}})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// holdRequests makes every request wait until the test ends (or the
// client gives up).
func (s *standIn) holdRequests(t testing.TB) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.hold = ch
	s.mu.Unlock()
	t.Cleanup(func() { close(ch) }) // before the server's Close, which waits for its handlers
}

func (s *standIn) embedding() intent.ModelConfig {
	return intent.ModelConfig{URL: s.srv.URL + "/v1", Model: "topics-1", Key: "sk-test-secret"}
}

func (s *standIn) chat() intent.ModelConfig {
	return intent.ModelConfig{URL: s.srv.URL + "/v1/chat/completions", Model: "chooser-1"}
}

func ambiguous(t *testing.T, err error) domain.IntentResolution {
	t.Helper()
	var amb *domain.AmbiguousIntentError
	require.True(t, errors.As(err, &amb), "want an ambiguous intent, got %v", err)
	return amb.Resolution
}

// TestLexicalResolution: English and Chinese intents resolve without any
// model; an intent that fits nothing is ambiguous with suggestions; bad
// intents are field errors; another namespace's catalogue is its own.
func TestLexicalResolution(t *testing.T) {
	t.Parallel()
	b := setup(t, intent.Config{})
	b.shop(t)
	for in, want := range map[string]string{
		"Where is my parcel?": "parcel.track",
		"我的包裹在哪里":             "parcel.track",
		"will it rain":        "weather.forecast",
		"明天天气预报":              "weather.forecast",
		"summarise this text": "text.summarize",
		"text.translate":      "text.translate",
	} {
		res, err := b.svc.Resolve(b.ctx, "shop", in)
		require.NoError(t, err, in)
		require.Equal(t, want, res.Capability, in)
		require.Equal(t, domain.ResolverLexical, res.Resolver, in)
		require.GreaterOrEqual(t, res.Confidence, res.Threshold)
		require.Len(t, res.Steps, 1, "no model is configured")
		require.Equal(t, domain.StepResolved, res.Steps[0].Outcome)
		require.Positive(t, res.CatalogueVersion)
		require.Equal(t, in, res.Intent)
	}
	_, err := b.svc.Resolve(b.ctx, "shop", "text")
	res := ambiguous(t, err)
	require.Empty(t, res.Capability)
	require.ElementsMatch(t, []string{"text.summarize", "text.translate"}, []string{res.Candidates[0].Capability, res.Candidates[1].Capability})
	require.Contains(t, err.Error(), "did you mean")

	_, err = b.svc.Resolve(b.ctx, "other", "where is my parcel")
	res = ambiguous(t, err)
	require.Empty(t, res.Candidates, "namespace other has no catalogue")

	for _, bad := range []string{"", "  ", strings.Repeat("x", domain.MaxIntentLength+1)} {
		_, err := b.svc.Resolve(b.ctx, "shop", bad)
		var fe *domain.FieldError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "intent", fe.Field)
	}
	require.Zero(t, b.svc.Stats().ModelAnswers)
}

// TestCatalogueVersions: the catalogue gathers agents' words and an
// operator's; its version moves on every change of them and only then (a
// restart that says the same moves nothing); each operator edit is an
// event on the catalogue's stream.
func TestCatalogueVersions(t *testing.T) {
	t.Parallel()
	b := setup(t, intent.Config{})
	version := func() int64 {
		cat, err := b.svc.Catalogue(b.ctx, "shop")
		require.NoError(t, err)
		return cat.Version
	}
	require.Zero(t, version())
	b.shop(t)
	v1 := version()
	require.Positive(t, v1)
	cat, err := b.svc.Catalogue(b.ctx, "shop")
	require.NoError(t, err)
	require.Equal(t, []string{"parcel.track", "text.summarize", "text.translate", "weather.forecast"}, cat.Names)

	b.shop(t) // every agent restarts, saying the same
	require.Equal(t, v1, version(), "a restart that says the same changes nothing")

	b.register(t, "parcels", []string{"shipping"}, map[string]domain.CapabilityDoc{"parcel.track": {Description: "Where a parcel is now."}}, "parcel.track")
	v2 := version()
	require.Greater(t, v2, v1, "new aliases and words are a new version")
	e, _, err := b.svc.Entry(b.ctx, "shop", "parcel.track")
	require.NoError(t, err)
	require.Equal(t, "Where a parcel is now.", e.Description)
	require.Equal(t, []string{"shipping"}, e.Tags)
	require.Empty(t, e.Examples, "the new registration replaced what the agent said before")

	md := domain.Metadata{Actor: "key:ops"}
	e, v3, err := b.svc.Describe(b.ctx, "shop", "parcel.track", domain.CapabilityDoc{Title: " Track ", Examples: []string{"where's my stuff"}}, md)
	require.NoError(t, err)
	require.Greater(t, v3, v2)
	require.Equal(t, "Track", e.Title)
	require.Equal(t, "Where a parcel is now.", e.Description, "the agent's description fills what the operator left out")
	require.Equal(t, []string{"where's my stuff"}, e.Examples)
	_, same, err := b.svc.Describe(b.ctx, "shop", "parcel.track", domain.CapabilityDoc{Title: "Track", Examples: []string{"where's my stuff"}}, md)
	require.NoError(t, err)
	require.Equal(t, v3, same, "the same doc again changes nothing")

	e, _, err = b.svc.Describe(b.ctx, "shop", "parcel.insure", domain.CapabilityDoc{Description: "Insure a parcel"}, md)
	require.NoError(t, err)
	require.Empty(t, e.Agents, "an operator may describe a capability no agent offers yet")
	_, _, err = b.svc.Describe(b.ctx, "shop", "parcel.insure", domain.CapabilityDoc{}, md)
	require.ErrorIs(t, err, domain.ErrNotFound, "an empty doc removes it, and nothing is left")
	_, _, err = b.svc.Describe(b.ctx, "shop", "not a name", domain.CapabilityDoc{Title: "x"}, md)
	var fe *domain.FieldError
	require.ErrorAs(t, err, &fe)
	_, _, err = b.svc.Describe(b.ctx, "shop", "parcel.track", domain.CapabilityDoc{Title: strings.Repeat("t", domain.MaxDocTitle+1)}, md)
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "title", fe.Field)

	var types []string
	var data []domain.CapabilityUpdated
	require.NoError(t, eventstore.New(b.pool).ReadStreams(b.ctx, nil, domain.CatalogueStream("shop"), func(r eventstore.Record) error {
		types = append(types, string(r.Type))
		var d domain.CapabilityUpdated
		require.NoError(t, json.Unmarshal(r.Data, &d))
		data = append(data, d)
		return nil
	}))
	require.Equal(t, []string{"CAPABILITY_UPDATED", "CAPABILITY_UPDATED", "CAPABILITY_UPDATED"}, types, "one per change, none for the repeat or the refused")
	require.Nil(t, data[0].From)
	require.Equal(t, "Track", data[0].To.Title)
	require.Nil(t, data[2].To, "the removal")

	before := version()
	require.NoError(t, b.reg.Deregister(b.ctx, domain.AgentKey{Namespace: "shop", ID: "weather"}, md))
	require.Greater(t, version(), before, "a deregistration is a new version")
	_, _, err = b.svc.Entry(b.ctx, "shop", "weather.forecast")
	require.ErrorIs(t, err, domain.ErrNotFound)
}

// TestEmbeddingResolver: what the lexical resolver cannot tell, the
// stand-in embedding model can; its answer is cached by normalised intent
// and catalogue version, so the same intent never asks twice; the
// catalogue's vectors are stored with the model's name and, when the
// catalogue changes, only the changed entry is embedded again.
func TestEmbeddingResolver(t *testing.T) {
	t.Parallel()
	m := newStandIn(t, nil)
	b := setup(t, intent.Config{Embedding: m.embedding()})
	b.shop(t)

	res, err := b.svc.Resolve(b.ctx, "shop", "where is my parcel")
	require.NoError(t, err)
	require.Equal(t, domain.ResolverLexical, res.Resolver)
	require.Zero(t, m.embeds.Load(), "a confident lexical answer asks no model")

	const words = "My package hasn't arrived yet"
	res, err = b.svc.Resolve(b.ctx, "shop", words)
	require.NoError(t, err)
	require.Equal(t, "parcel.track", res.Capability)
	require.Equal(t, domain.ResolverEmbedding, res.Resolver)
	require.Equal(t, "topics-1", res.Model)
	require.False(t, res.Cached)
	require.Equal(t, []string{domain.StepBelowThreshold, domain.StepResolved}, []string{res.Steps[0].Outcome, res.Steps[1].Outcome})
	require.EqualValues(t, 2, m.embeds.Load(), "the catalogue in one batch, then the intent")
	require.EqualValues(t, 5, m.inputs.Load(), "four entries and the intent")
	m.mu.Lock()
	require.Equal(t, []string{"Bearer sk-test-secret", "Bearer sk-test-secret"}, m.authHeaders, "the key goes as a bearer token")
	m.mu.Unlock()

	for _, again := range []string{words, "my package   hasn't ARRIVED yet!"} {
		res, err = b.svc.Resolve(b.ctx, "shop", again)
		require.NoError(t, err)
		require.Equal(t, "parcel.track", res.Capability)
		require.True(t, res.Cached, again)
		require.True(t, res.Steps[1].Cached)
	}
	require.EqualValues(t, 2, m.embeds.Load(), "a repeated intent never calls the model twice")
	st := b.svc.Stats()
	require.EqualValues(t, 1, st.ModelAnswers)
	require.EqualValues(t, 2, st.CacheHits)
	require.EqualValues(t, 4, st.CatalogueEmbeddings)
	var version int64
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT catalogue_version FROM intent_answers WHERE namespace = 'shop'`).Scan(&version))
	require.Equal(t, res.CatalogueVersion, version, "the answer names the version it was given for")

	var vectors, answers int
	var model string
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*), min(model) FROM capability_vectors WHERE namespace = 'shop'`).Scan(&vectors, &model))
	require.Equal(t, 4, vectors)
	require.Equal(t, "topics-1", model)
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM intent_answers WHERE namespace = 'shop'`).Scan(&answers))
	require.Equal(t, 1, answers)

	// A replica joins: a new version, so the intent is asked again, but the
	// catalogue says nothing new and none of its entries is embedded again.
	before, err := b.svc.Catalogue(b.ctx, "shop")
	require.NoError(t, err)
	b.register(t, "parcels-2", nil, nil, "parcel.track")
	after, err := b.svc.Catalogue(b.ctx, "shop")
	require.NoError(t, err)
	require.Greater(t, after.Version, before.Version)
	require.Equal(t, before.Fingerprint, after.Fingerprint)
	res, err = b.svc.Resolve(b.ctx, "shop", words)
	require.NoError(t, err)
	require.False(t, res.Cached, "an answer holds for the version it was given for")
	require.Equal(t, after.Version, res.CatalogueVersion)
	require.EqualValues(t, 3, m.embeds.Load(), "the intent alone")
	require.EqualValues(t, 6, m.inputs.Load())

	// A changed catalogue: the cached answer was for the old version.
	_, _, err = b.svc.Describe(b.ctx, "shop", "weather.forecast", domain.CapabilityDoc{Examples: []string{"do I need an umbrella"}},
		domain.Metadata{Actor: "test"})
	require.NoError(t, err)
	res, err = b.svc.Resolve(b.ctx, "shop", words)
	require.NoError(t, err)
	require.False(t, res.Cached, "a new catalogue version asks again")
	require.EqualValues(t, 5, m.embeds.Load(), "the changed entry, then the intent")
	require.EqualValues(t, 8, m.inputs.Load(), "only the changed entry was embedded again")
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM intent_answers WHERE namespace = 'shop'`).Scan(&answers))
	require.Equal(t, 1, answers, "the older versions' answers were pruned")

	// The same text in an unrelated namespace does not reuse shop's answer.
	b.register(t, "elsewhere", nil, nil, "weather.forecast")
	_, err = b.svc.Resolve(b.ctx, "other", words)
	require.Error(t, err)
}

// TestLLMFallback: when neither the lexical nor the embedding resolver is
// confident, the chat model chooses among the catalogue's names; an answer
// that is not one of them counts as none; both answers are cached.
func TestLLMFallback(t *testing.T) {
	t.Parallel()
	m := newStandIn(t, func(request string) string {
		switch {
		case strings.Contains(request, "stuff"):
			return " `parcel.track` "
		case strings.Contains(request, "teleport"):
			return "parcel.teleport" // not in the catalogue
		}
		return "none"
	})
	b := setup(t, intent.Config{Embedding: m.embedding(), LLM: m.chat()})
	b.shop(t)

	res, err := b.svc.Resolve(b.ctx, "shop", "my stuff went missing")
	require.NoError(t, err)
	require.Equal(t, "parcel.track", res.Capability)
	require.Equal(t, domain.ResolverLLM, res.Resolver)
	require.Equal(t, "chooser-1", res.Model)
	require.Len(t, res.Steps, 3)
	require.Equal(t, domain.StepBelowThreshold, res.Steps[1].Outcome, "the embedding model was asked first")
	require.EqualValues(t, 1, m.chats.Load())
	m.mu.Lock()
	require.Contains(t, m.lastPrompt, "- parcel.track: Track a parcel. Where a parcel is now.", "the model sees the names and what they do")
	require.Contains(t, m.lastPrompt, "- text.translate")
	m.mu.Unlock()

	_, err = b.svc.Resolve(b.ctx, "shop", "teleport me")
	res = ambiguous(t, err)
	require.Equal(t, domain.StepNoAnswer, res.Steps[2].Outcome, "a name the catalogue does not have is no answer")
	require.EqualValues(t, 2, m.chats.Load())

	for _, again := range []string{"my stuff went missing", "teleport me"} {
		res, err = b.svc.Resolve(b.ctx, "shop", again)
		if again == "teleport me" {
			res = ambiguous(t, err)
		} else {
			require.NoError(t, err)
		}
		require.True(t, res.Steps[2].Cached, again)
	}
	require.EqualValues(t, 2, m.chats.Load(), "both answers, the choice and the refusal, came from the cache")
	require.EqualValues(t, 4, b.svc.Stats().CacheHits, "two embedding answers and two choices")
}

// TestModelOutageDegrades: a model that errs, hangs past the timeout, or
// sits in a network the guard denies is a step of the resolution, never
// an error: confident lexical answers are unaffected, the rest are
// ambiguous with the lexical suggestions, and a failed model is left alone
// for its cool-down.
func TestModelOutageDegrades(t *testing.T) {
	t.Parallel()
	t.Run("errors", func(t *testing.T) {
		t.Parallel()
		m := newStandIn(t, nil)
		m.status.Store(http.StatusServiceUnavailable)
		b := setup(t, intent.Config{Embedding: m.embedding(), CoolDown: time.Hour})
		b.shop(t)
		res, err := b.svc.Resolve(b.ctx, "shop", "where is my parcel")
		require.NoError(t, err, "the lexical resolver needs no model")
		require.Equal(t, "parcel.track", res.Capability)

		_, err = b.svc.Resolve(b.ctx, "shop", "my package hasn't arrived yet")
		res = ambiguous(t, err)
		require.Equal(t, domain.StepUnavailable, res.Steps[1].Outcome)
		require.Contains(t, res.Steps[1].Error, "503")
		require.NotContains(t, res.Steps[1].Error, "sk-test-secret")
		require.Equal(t, domain.ResolverLexical, res.Resolver, "the suggestions are the lexical resolver's")
		hits := len(m.authHeaders)

		_, err = b.svc.Resolve(b.ctx, "shop", "my package hasn't arrived yet")
		res = ambiguous(t, err)
		require.Contains(t, res.Steps[1].Error, "not asked")
		require.Len(t, m.authHeaders, hits, "cooling down: not asked again")
		require.EqualValues(t, 2, b.svc.Stats().Unavailable)
	})
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		m := newStandIn(t, nil)
		m.holdRequests(t) // each call waits for its own timeout
		b := setup(t, intent.Config{Embedding: m.embedding(), Timeout: 200 * time.Millisecond})
		b.shop(t)
		start := time.Now()
		_, err := b.svc.Resolve(b.ctx, "shop", "my package hasn't arrived yet")
		res := ambiguous(t, err)
		require.Equal(t, domain.StepUnavailable, res.Steps[1].Outcome)
		require.Less(t, time.Since(start), 5*time.Second)
	})
	t.Run("denied network", func(t *testing.T) {
		t.Parallel()
		m := newStandIn(t, nil)
		guard, err := netguardDenying("127.0.0.0/8")
		require.NoError(t, err)
		b := setup(t, intent.Config{Embedding: m.embedding(), Guard: &guard})
		b.shop(t)
		_, err = b.svc.Resolve(b.ctx, "shop", "my package hasn't arrived yet")
		res := ambiguous(t, err)
		require.Equal(t, domain.StepUnavailable, res.Steps[1].Outcome)
		require.Contains(t, res.Steps[1].Error, "denied")
		require.Empty(t, m.authHeaders, "the guard refused the connection")
	})
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, intent.Config{}.Validate())
	require.NoError(t, intent.Config{Embedding: intent.ModelConfig{URL: "http://127.0.0.1:11434/v1", Model: "nomic-embed-text"}}.Validate())
	for _, bad := range []intent.Config{
		{LexicalThreshold: 1.5},
		{Embedding: intent.ModelConfig{URL: "http://127.0.0.1:11434/v1"}},
		{LLM: intent.ModelConfig{URL: "ftp://x", Model: "m"}},
		{LLM: intent.ModelConfig{URL: "http://user:pw@x/v1", Model: "m"}},
	} {
		require.Error(t, bad.Validate(), "%+v", bad)
	}
	require.NotContains(t, intent.ModelConfig{URL: "http://x", Model: "m", Key: "sk-1"}.String(), "sk-1")
}

func netguardDenying(cidrs string) (netguard.Policy, error) { return netguard.ParsePolicy(cidrs, "") }
