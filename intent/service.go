package intent

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/singleflight"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/netguard"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qIntentAnswer       = queries.Must("IntentAnswer")
	qInsertIntentAnswer = queries.Must("InsertIntentAnswer")
)

// Config tunes resolution. Zero values take the defaults.
type Config struct {
	// LexicalThreshold is the confidence the lexical resolver must reach
	// to decide (default domain.DefaultLexicalThreshold, 0.1).
	LexicalThreshold float64
	// Embedding is the embeddings endpoint; an empty URL turns it off.
	Embedding ModelConfig
	// EmbeddingThreshold is the confidence (best cosine similarity less
	// the second best) the embedding resolver must reach (default
	// domain.DefaultEmbeddingThreshold, 0.05).
	EmbeddingThreshold float64
	// LLM is the chat endpoint asked when neither resolver is confident;
	// an empty URL turns it off.
	LLM ModelConfig
	// Suggestions is how many candidates a resolution keeps (default 5).
	Suggestions int
	// MaxChoices is how many capability names the LLM is shown at most,
	// the best ranked first (default 200).
	MaxChoices int
	// Timeout bounds one model call (default 10 s).
	Timeout time.Duration
	// CoolDown is how long a model that failed is not asked again: the
	// resolution goes on without it (default 10 s).
	CoolDown time.Duration
	// Guard decides which addresses model calls may reach (SSRF); nil
	// means netguard.DefaultPolicy.
	Guard *netguard.Policy
}

func (c Config) withDefaults() Config {
	if c.LexicalThreshold <= 0 {
		c.LexicalThreshold = domain.DefaultLexicalThreshold
	}
	if c.EmbeddingThreshold <= 0 {
		c.EmbeddingThreshold = domain.DefaultEmbeddingThreshold
	}
	if c.Suggestions <= 0 {
		c.Suggestions = 5
	}
	if c.MaxChoices <= 0 {
		c.MaxChoices = 200
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if c.CoolDown <= 0 {
		c.CoolDown = 10 * time.Second
	}
	if c.Guard == nil {
		p := netguard.DefaultPolicy()
		c.Guard = &p
	}
	return c
}

// Validate checks the configuration: thresholds in 0..1, each endpoint an
// absolute http(s) URL without credentials, with a model.
func (c Config) Validate() error {
	for name, t := range map[string]float64{"intent threshold": c.LexicalThreshold, "embedding threshold": c.EmbeddingThreshold} {
		if t < 0 || t > 1 {
			return fmt.Errorf("%s must be between 0 and 1", name)
		}
	}
	for name, m := range map[string]ModelConfig{"embedding": c.Embedding, "LLM": c.LLM} {
		if !m.Enabled() {
			continue
		}
		u, err := url.Parse(m.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return fmt.Errorf("%s URL must be an absolute http(s) URL without credentials (the key goes in its own setting)", name)
		}
		if m.Model == "" {
			return fmt.Errorf("%s model is required with its URL", name)
		}
	}
	return nil
}

// Resolver ranks a catalogue's capabilities for an intent. prior is the
// best ranking of the resolvers that ran before it (at least the lexical
// one's), which a model resolver may use to choose what it shows a model.
type Resolver interface {
	// Name is the resolver's name in resolutions (domain.ResolverLexical …).
	Name() string
	// Model is the model it asks, "" for none: only answers of a model
	// are cached.
	Model() string
	Rank(ctx context.Context, cat *Catalogue, intent string, prior domain.IntentRanking) (domain.IntentRanking, error)
}

// Stats counts what resolutions did, since the service started.
type Stats struct {
	Resolutions int64
	// ModelAnswers are the answers models gave (each a call for the
	// intent; embedding the catalogue is counted in CatalogueEmbeddings).
	ModelAnswers int64
	// CacheHits are model answers served from the cache.
	CacheHits int64
	// Unavailable are model steps that could not answer.
	Unavailable int64
	// CatalogueEmbeddings are catalogue entries embedded.
	CatalogueEmbeddings int64
}

// Service resolves intents over the catalogues of every namespace.
type Service struct {
	pool    *pgxpool.Pool
	store   *eventstore.Store
	logger  *slog.Logger
	cfg     Config
	now     func() time.Time
	lexical Resolver
	models  []*modelStep

	mu         sync.Mutex
	catalogues map[string]*Catalogue
	loads      singleflight.Group // catalogue loads, by namespace
	calls      singleflight.Group // model answers, by cache key

	resolutions, modelAnswers, cacheHits, unavailable, embedded atomic.Int64
}

// modelStep is a model resolver in the chain, with its threshold and its
// cool-down after a failure.
type modelStep struct {
	r         Resolver
	threshold float64
	downUntil atomic.Int64 // unix nanoseconds
}

// New returns a Service over pool: the lexical resolver, then the
// embedding resolver and the LLM when cfg configures them. cfg must be
// valid (Config.Validate).
func New(pool *pgxpool.Pool, store *eventstore.Store, logger *slog.Logger, cfg Config) *Service {
	cfg = cfg.withDefaults()
	s := &Service{pool: pool, store: store, logger: logger, cfg: cfg, now: time.Now, lexical: Lexical{},
		catalogues: map[string]*Catalogue{}}
	if cfg.Embedding.Enabled() {
		s.models = append(s.models, &modelStep{r: newEmbedding(s, newModelClient(cfg.Embedding, cfg.Guard, cfg.Timeout)),
			threshold: cfg.EmbeddingThreshold})
	}
	if cfg.LLM.Enabled() {
		s.models = append(s.models, &modelStep{r: &llm{client: newModelClient(cfg.LLM, cfg.Guard, cfg.Timeout), maxChoices: cfg.MaxChoices},
			threshold: 1})
	}
	return s
}

// Config returns the configuration, defaults filled in.
func (s *Service) Config() Config { return s.cfg }

// Stats returns the counters.
func (s *Service) Stats() Stats {
	return Stats{Resolutions: s.resolutions.Load(), ModelAnswers: s.modelAnswers.Load(), CacheHits: s.cacheHits.Load(),
		Unavailable: s.unavailable.Load(), CatalogueEmbeddings: s.embedded.Load()}
}

// Resolve resolves an intent over namespace ns's catalogue: the lexical
// resolver, then each configured model while none is confident. A
// resolution no resolver was confident of is a *domain.AmbiguousIntentError
// holding the suggestions (kind domain.ErrInvalid); a bad intent is a
// *domain.FieldError on "intent". A model that fails is a step of the
// resolution, not an error; only the database's failures are errors.
func (s *Service) Resolve(ctx context.Context, ns, intent string) (domain.IntentResolution, error) {
	if err := domain.CheckIntent("intent", intent); err != nil {
		return domain.IntentResolution{}, err
	}
	cat, err := s.Catalogue(ctx, ns)
	if err != nil {
		return domain.IntentResolution{}, err
	}
	s.resolutions.Add(1)
	lex, err := s.lexical.Rank(ctx, cat, intent, domain.IntentRanking{})
	if err != nil {
		return domain.IntentResolution{}, err
	}
	steps := []domain.RankedStep{{Resolver: s.lexical.Name(), Threshold: s.cfg.LexicalThreshold, Ranking: &lex}}
	if !lex.Confident(s.cfg.LexicalThreshold) && len(cat.Entries) > 0 {
		prior, norm := lex, domain.NormalizeIntent(intent)
		for _, m := range s.models {
			st, err := s.ask(ctx, m, cat, intent, norm, prior)
			if err != nil {
				return domain.IntentResolution{}, err
			}
			steps = append(steps, st)
			if st.Ranking != nil && st.Ranking.Confident(st.Threshold) {
				break
			}
			if st.Ranking != nil && len(st.Ranking.Candidates) > 1 {
				prior = *st.Ranking
			}
		}
	}
	res, ok := domain.ResolveSteps(intent, &cat.Catalogue, steps, s.cfg.Suggestions)
	if !ok {
		return res, &domain.AmbiguousIntentError{Resolution: res}
	}
	return res, nil
}

// ask is one model step: the cached answer, or the model's, kept in the
// cache. A model that fails, or is cooling down after a failure, is a
// step without a ranking.
func (s *Service) ask(ctx context.Context, m *modelStep, cat *Catalogue, intent, norm string, prior domain.IntentRanking) (domain.RankedStep, error) {
	st := domain.RankedStep{Resolver: m.r.Name(), Model: m.r.Model(), Threshold: m.threshold}
	sum := sha256.Sum256([]byte(norm))
	key := answerKey{ns: cat.Namespace, resolver: st.Resolver, model: st.Model, version: cat.Version, hash: sum[:]}
	if r, ok, err := s.cached(ctx, key); err != nil {
		return st, err
	} else if ok {
		s.cacheHits.Add(1)
		st.Ranking, st.Cached = &r, true
		return st, nil
	}
	if until := m.downUntil.Load(); s.now().UnixNano() < until {
		s.unavailable.Add(1)
		st.Error = "not asked: it failed less than " + s.cfg.CoolDown.String() + " ago"
		return st, nil
	}
	v, err, _ := s.calls.Do(key.String(), func() (any, error) {
		// Shared by every caller asking the same now: not bound to the
		// first one's request.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.Timeout)
		defer cancel()
		r, err := m.r.Rank(cctx, cat, intent, prior)
		if err != nil {
			return nil, err
		}
		s.modelAnswers.Add(1)
		if _, err := s.pool.Exec(cctx, qInsertIntentAnswer, key.ns, key.resolver, key.model, key.version, key.hash, norm, r); err != nil {
			// The answer stands; only the next ask will not find it.
			s.logger.WarnContext(ctx, "cache an intent answer", "resolver", key.resolver, "model", key.model, "err", err)
		}
		return r, nil
	})
	if err != nil {
		m.downUntil.Store(s.now().Add(s.cfg.CoolDown).UnixNano())
		s.unavailable.Add(1)
		st.Error = err.Error()
		s.logger.WarnContext(ctx, "intent model unavailable; resolving without it", "resolver", st.Resolver, "model", st.Model, "err", err)
		return st, nil
	}
	r := v.(domain.IntentRanking)
	st.Ranking = &r
	return st, nil
}

// answerKey is where a model answer is cached: by catalogue version and
// the normalised intent's hash.
type answerKey struct {
	ns, resolver, model string
	version             int64
	hash                []byte
}

func (k answerKey) String() string {
	return fmt.Sprintf("%s|%s|%s|%d|%x", k.ns, k.resolver, k.model, k.version, k.hash)
}

func (s *Service) cached(ctx context.Context, k answerKey) (domain.IntentRanking, bool, error) {
	var r domain.IntentRanking
	err := s.pool.QueryRow(ctx, qIntentAnswer, k.ns, k.resolver, k.model, k.version, k.hash).Scan(&r)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return r, false, nil
	case err != nil:
		return r, false, fmt.Errorf("cached intent answer: %w", err)
	}
	return r, true, nil
}

// Lexical is the built-in resolver: the catalogue's domain.LexicalIndex.
type Lexical struct{}

// Name implements Resolver.
func (Lexical) Name() string { return domain.ResolverLexical }

// Model implements Resolver: none.
func (Lexical) Model() string { return "" }

// Rank implements Resolver.
func (Lexical) Rank(_ context.Context, cat *Catalogue, intent string, _ domain.IntentRanking) (domain.IntentRanking, error) {
	return cat.Lexical.Rank(intent, rankKept), nil
}
