package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/agentreach/agentreach/a2a/card"
	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/sql/queries"
)

// The rows of agents registered by Agent Card: package card fetches and
// judges the cards, this file keeps what it decides.

var (
	qInsertCard      = queries.Must("A2AInsertCard")
	qCardFailed      = queries.Must("A2ACardFailed")
	qCardsDue        = queries.Must("A2ACardsDue")
	qCardNotModified = queries.Must("A2ACardNotModified")
	qCardUnchanged   = queries.Must("A2ACardUnchanged")
	qCardChanged     = queries.Must("A2ACardChanged")
	qAgentOfCard     = queries.Must("A2AUpdateAgentOfCard")
)

// A2AInfo returns the card facts of an agent registered by card, as its
// metadata keeps them (under "a2a").
func (a *Agent) A2AInfo() (card.Info, bool) {
	v, ok := a.Metadata["a2a"]
	if !ok {
		return card.Info{}, false
	}
	return card.InfoOf(v)
}

// RegisterCard registers an A2A agent by its Agent Card: it fetches the card
// at cardURL (or, for a base URL, its well-known path, falling back to the
// legacy agent.json), takes skill ids as capabilities, skill tags as
// aliases, each skill's name, description, examples and tags as the
// catalogue's words of its capability, the card's version and its JSON-RPC interface as the endpoint,
// and registers the agent with protocol a2a. reg carries what the card
// does not say (agent_id, namespace, weight, max_concurrent, rollout, ttl,
// context, metadata); agent_id defaults to the card's name made an id.
// The card is fetched again every third of the lease, with its ETag; each
// successful fetch renews the lease, and a change is recorded as an
// AGENT_CARD_UPDATED event. A card that cannot be fetched or used is a
// *domain.FieldError on card_url.
func (r *Registry) RegisterCard(ctx context.Context, cardURL string, reg domain.AgentRegistration, md domain.Metadata) (*Agent, string, error) {
	if err := card.CheckRegistration(reg); err != nil {
		return nil, "", err
	}
	if err := CheckURLs(ctx, r.cfg.Guard, map[string]string{"card_url": cardURL}); err != nil {
		return nil, "", err
	}
	f, m, err := card.Resolve(ctx, r.cardHTTP, cardURL)
	if err != nil {
		return nil, "", err
	}
	if reg, err = card.Apply(f, m, reg); err != nil {
		return nil, "", err
	}
	now := r.now().UTC()
	return r.register(ctx, reg, md, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, qInsertCard, reg.AgentID, f.URL, f.KeptETag(), m.Hash(), f.Raw, now,
			now.Add(card.Interval(reg.TTLSeconds, f.MaxAge)), reg.Namespace)
		return err
	})
}

// cardFailed records a failed fetch (or an unusable card) and when to try
// again; it answers the failure.
func (r *Registry) cardFailed(ctx context.Context, k domain.AgentKey, next time.Time, failure error) error {
	_, err := r.pool.Exec(ctx, qCardFailed, k.ID, next, failure.Error(), k.Namespace)
	return errors.Join(failure, err)
}

type dueCard struct {
	agent     domain.AgentKey
	url, etag string
	hash      []byte
	ttl       int
}

// RefreshCards fetches every card that is due (up to 100, eight at a
// time), with If-None-Match. A fetch
// that answers (200 or 304) renews the agent's lease; a changed card
// updates the agent and records AGENT_CARD_UPDATED; a failed one leaves the
// lease to lapse. It returns how many cards changed.
func (r *Registry) RefreshCards(ctx context.Context) (int, error) {
	rows, err := r.pool.Query(ctx, qCardsDue, r.now().UTC())
	if err != nil {
		return 0, fmt.Errorf("cards due: %w", err)
	}
	due, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (dueCard, error) {
		var d dueCard
		return d, row.Scan(&d.agent.Namespace, &d.agent.ID, &d.url, &d.etag, &d.hash, &d.ttl)
	})
	if err != nil {
		return 0, fmt.Errorf("cards due: %w", err)
	}
	changed := refreshEach(r, ctx, due, func(d dueCard) (bool, error) {
		ok, err := r.refreshCard(ctx, d)
		if err != nil {
			r.logger.WarnContext(ctx, "agent card refresh", "agent_id", d.agent.ID, "namespace", d.agent.Namespace, "card_url", d.url, "err", err)
		}
		return ok, err
	})
	return changed, nil
}

// refreshEach runs refresh on each of due, cardFetchers at a time (a few
// slow ones must not hold up the rest), tells the processes when any
// changed an agent, and answers how many did.
func refreshEach[T any](r *Registry, ctx context.Context, due []T, refresh func(T) (bool, error)) int {
	var changed atomic.Int32
	var g errgroup.Group
	g.SetLimit(cardFetchers)
	for _, d := range due {
		g.Go(func() error {
			if ok, _ := refresh(d); ok {
				changed.Add(1)
			}
			return nil
		})
	}
	_ = g.Wait()
	if changed.Load() > 0 {
		r.changed(ctx)
	}
	return int(changed.Load())
}

// cardFetchers is how many cards one refresh fetches at once.
const cardFetchers = 8

// refreshCard keeps what one revalidation of a card found (card.Revalidate):
// when to fetch again, the lease the answer renews, and a changed card.
func (r *Registry) refreshCard(ctx context.Context, d dueCard) (bool, error) {
	rv := card.Revalidate(ctx, r.cardHTTP, d.url, d.etag, d.hash, func(endpoint string) error {
		return CheckURLs(ctx, r.cfg.Guard, map[string]string{"endpoint": endpoint})
	})
	f, m := rv.Fetched, rv.Mapping
	now := r.now().UTC()
	next := now.Add(card.Interval(d.ttl, f.MaxAge))
	if rv.Outcome == card.Failed {
		return false, r.cardFailed(ctx, d.agent, next, rv.Err)
	}
	r.heartbeats.add(d.agent, now, domain.HealthReport{}) // the card answered: the agent is there
	switch rv.Outcome {
	case card.NotModified:
		_, err := r.pool.Exec(ctx, qCardNotModified, d.agent.ID, next, d.agent.Namespace)
		return false, err
	case card.Unusable:
		// Keep serving the card we had: the agent answers, its new card is unusable.
		return false, r.cardFailed(ctx, d.agent, next, rv.Err)
	case card.Unchanged:
		_, err := r.pool.Exec(ctx, qCardUnchanged, d.agent.ID, f.KeptETag(), f.Raw, now, next, d.agent.Namespace)
		return false, err
	}
	err := r.store.InTx(ctx, func(tx pgx.Tx) error {
		a, err := r.load(ctx, tx, d.agent, true)
		if err != nil {
			return err
		}
		docs, err := capabilityDocs(ctx, tx, d.agent)
		if err != nil {
			return err
		}
		from := domain.CardView{Capabilities: a.Capabilities, Aliases: a.Aliases, Version: a.Version, Endpoint: a.Endpoint}
		if len(docs) > 0 {
			from.CapabilityInfo = docs
		}
		if ci, ok := a.A2AInfo(); ok {
			from.Push = &ci.Push
		}
		to := domain.CardView{Capabilities: m.Capabilities, Aliases: orEmptySlice(m.Aliases), Version: m.Version,
			Endpoint: m.Endpoint, Push: &m.Push, CapabilityInfo: m.Docs}
		recs, err := r.store.AppendTx(ctx, tx, domain.AgentStream(d.agent), a.StreamVersion,
			domain.NewEvent(domain.EventAgentCardUpdated, domain.AgentCardUpdated{CardURL: d.url, From: from, To: to},
				domain.Metadata{Actor: "registry:card_refresh"}))
		if err != nil {
			return err
		}
		md := maps.Clone(a.Metadata)
		if md == nil {
			md = map[string]any{}
		}
		md["a2a"] = m.Entry(d.url)
		mdJSON, _ := json.Marshal(md)
		if _, err := tx.Exec(ctx, qAgentOfCard, d.agent.ID, m.Capabilities, orEmptySlice(m.Aliases), m.Version, m.Endpoint,
			mdJSON, recs[0].Version, d.agent.Namespace); err != nil {
			return err
		}
		if err := writeDocsTx(ctx, tx, d.agent, m.Docs); err != nil { // the catalogue's words (intent)
			return err
		}
		_, err = tx.Exec(ctx, qCardChanged, d.agent.ID, f.KeptETag(), f.Raw, m.Hash(), now, next, d.agent.Namespace)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("update card of agent %s: %w", d.agent, err)
	}
	r.logger.InfoContext(ctx, "agent card changed", "agent_id", d.agent.ID, "namespace", d.agent.Namespace, "capabilities", m.Capabilities, "version", m.Version)
	return true, nil
}
