package intent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qCapabilityVectors      = queries.Must("CapabilityVectors")
	qUpsertCapabilityVector = queries.Must("UpsertCapabilityVector")
	qDeleteStaleVectors     = queries.Must("DeleteStaleVectors")
)

// embedBatch is how many texts one embeddings request carries.
const embedBatch = 64

// rankKept is how many candidates a model's ranking keeps (and the cache
// holds): enough to order what the LLM is shown, small enough to read
// back fast.
const rankKept = 50

// embedding ranks by the cosine similarity of the intent's embedding to
// each catalogue entry's. Entries' vectors are kept in capability_vectors
// with the model's name and a fingerprint of the text embedded; when the
// catalogue's version moves, only entries whose text changed are embedded
// again.
type embedding struct {
	s      *Service
	client *modelClient

	mu   sync.Mutex
	sets map[string]*vectorSet // by namespace
}

// vectorSet is the vectors of one catalogue's entries, in their order,
// for what the catalogue said (its fingerprint).
type vectorSet struct {
	fingerprint []byte
	version     int64
	vecs        [][]float32
}

func newEmbedding(s *Service, c *modelClient) *embedding {
	return &embedding{s: s, client: c, sets: map[string]*vectorSet{}}
}

func (e *embedding) Name() string  { return domain.ResolverEmbedding }
func (e *embedding) Model() string { return e.client.cfg.Model }

// Rank embeds the intent and ranks every entry by cosine similarity.
func (e *embedding) Rank(ctx context.Context, cat *Catalogue, intent string, _ domain.IntentRanking) (domain.IntentRanking, error) {
	set, err := e.vectors(ctx, cat)
	if err != nil {
		return domain.IntentRanking{}, err
	}
	v, err := e.client.embed(ctx, []string{intent})
	if err != nil {
		return domain.IntentRanking{}, err
	}
	return domain.CosineRanking(e.Model(), v[0], cat.Names, set.vecs, rankKept), nil
}

// vectors returns the vectors of cat's entries, embedding those whose
// text is not stored yet (or changed) and dropping those of capabilities
// that left the catalogue.
func (e *embedding) vectors(ctx context.Context, cat *Catalogue) (*vectorSet, error) {
	e.mu.Lock()
	set := e.sets[cat.Namespace]
	e.mu.Unlock()
	if set != nil && bytes.Equal(set.fingerprint, cat.Fingerprint) {
		return set, nil // a version that says nothing new has the same vectors
	}
	got, err, _ := e.s.loads.Do(fmt.Sprintf("vectors|%s|%s|%x", cat.Namespace, e.Model(), cat.Fingerprint), func() (any, error) {
		return e.refresh(ctx, cat) // ctx is the model call's own (Service.ask)
	})
	if err != nil {
		return nil, err
	}
	return got.(*vectorSet), nil
}

func (e *embedding) refresh(ctx context.Context, cat *Catalogue) (*vectorSet, error) {
	type stored struct {
		hash []byte
		vec  []float32
	}
	rows, err := e.s.pool.Query(ctx, qCapabilityVectors, cat.Namespace, e.Model())
	if err != nil {
		return nil, fmt.Errorf("capability vectors: %w", err)
	}
	have := map[string]stored{}
	for rows.Next() {
		var name string
		var st stored
		if err := rows.Scan(&name, &st.hash, &st.vec); err != nil {
			rows.Close()
			return nil, fmt.Errorf("capability vectors: %w", err)
		}
		have[name] = st
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("capability vectors: %w", err)
	}
	set := &vectorSet{fingerprint: cat.Fingerprint, version: cat.Version, vecs: make([][]float32, len(cat.Entries))}
	var missing []int
	hashes := make([][]byte, len(cat.Entries))
	texts := make([]string, len(cat.Entries))
	for i, en := range cat.Entries {
		texts[i] = entryText(en)
		h := sha256.Sum256([]byte(texts[i]))
		hashes[i] = h[:]
		if st, ok := have[en.Name]; ok && bytes.Equal(st.hash, hashes[i]) {
			set.vecs[i] = st.vec
			continue
		}
		missing = append(missing, i)
	}
	for start := 0; start < len(missing); start += embedBatch {
		batch := missing[start:min(start+embedBatch, len(missing))]
		in := make([]string, len(batch))
		for j, i := range batch {
			in[j] = texts[i]
		}
		vecs, err := e.client.embed(ctx, in)
		if err != nil {
			return nil, err
		}
		e.s.embedded.Add(int64(len(batch)))
		err = pgx.BeginFunc(ctx, e.s.pool, func(tx pgx.Tx) error {
			now := e.s.now().UTC()
			for j, i := range batch {
				set.vecs[i] = vecs[j]
				if _, err := tx.Exec(ctx, qUpsertCapabilityVector, cat.Namespace, e.Model(), cat.Entries[i].Name, hashes[i], vecs[j], now); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil { // the vectors stand; the next process to need them embeds them again
			e.s.logger.WarnContext(ctx, "keep capability vectors", "namespace", cat.Namespace, "model", e.Model(), "err", err)
		}
	}
	if len(have) > len(cat.Entries)-len(missing) {
		if _, err := e.s.pool.Exec(ctx, qDeleteStaleVectors, cat.Namespace, e.Model(), cat.Names); err != nil {
			e.s.logger.WarnContext(ctx, "drop stale capability vectors", "namespace", cat.Namespace, "model", e.Model(), "err", err)
		}
	}
	e.mu.Lock()
	if cur := e.sets[cat.Namespace]; cur == nil || cur.version < set.version {
		e.sets[cat.Namespace] = set
	}
	e.mu.Unlock()
	return set, nil
}
