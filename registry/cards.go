package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"golang.org/x/sync/errgroup"

	"github.com/agentreach/agentreach/a2abridge"
	"github.com/agentreach/agentreach/domain"
)

// DefaultCardTTLSeconds is the lease of an agent registered by card when
// the registration names none: its card is fetched every third of it.
const DefaultCardTTLSeconds = 60

// CardInfo is what the registry keeps of an agent's card in its metadata
// (under "a2a"), so the router's snapshot and operators see it.
type CardInfo struct {
	CardURL         string `json:"card_url"`
	Name            string `json:"name,omitempty"`
	Push            bool   `json:"push"`
	Streaming       bool   `json:"streaming"`
	ProtocolVersion string `json:"protocol_version,omitempty"`
}

// A2AInfo returns the card facts of an agent registered by card.
func (a *Agent) A2AInfo() (CardInfo, bool) {
	v, ok := a.Metadata["a2a"]
	if !ok {
		return CardInfo{}, false
	}
	b, _ := json.Marshal(v)
	var ci CardInfo
	return ci, json.Unmarshal(b, &ci) == nil && ci.CardURL != ""
}

// cardInfo is the metadata entry ("a2a") of an agent with card m at cardURL.
func cardInfo(m a2abridge.Mapping, cardURL string) map[string]any {
	b, _ := json.Marshal(CardInfo{CardURL: cardURL, Name: m.Name, Push: m.Push, Streaming: m.Streaming, ProtocolVersion: m.ProtocolVersion})
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

var slugRe = regexp.MustCompile(`[^a-z0-9._:-]+`)

// slug makes an agent id of a card's name.
func slug(name string) string {
	return strings.Trim(slugRe.ReplaceAllString(strings.ToLower(name), "-"), "-._:")
}

// RegisterCard registers an A2A agent by its Agent Card: it fetches the card
// at cardURL (or, for a base URL, its well-known path, falling back to the
// legacy agent.json), takes skill ids as capabilities, skill tags as
// aliases, the card's version and its JSON-RPC interface as the endpoint,
// and registers the agent with protocol a2a. reg carries what the card
// does not say (agent_id, namespace, weight, max_concurrent, rollout, ttl,
// context, metadata); agent_id defaults to the card's name made an id.
// The card is fetched again every third of the lease, with its ETag; each
// successful fetch renews the lease, and a change is recorded as an
// AGENT_CARD_UPDATED event. A card that cannot be fetched or used is a
// *domain.FieldError on card_url.
func (r *Registry) RegisterCard(ctx context.Context, cardURL string, reg domain.AgentRegistration, md domain.Metadata) (*Agent, string, error) {
	if len(reg.Capabilities) > 0 || reg.Endpoint != "" || reg.HealthURL != "" || (reg.Protocol != "" && reg.Protocol != domain.ProtocolA2A) {
		return nil, "", &domain.FieldError{Field: "card_url", Message: "with card_url, capabilities, endpoint, health_url and protocol come from the card; leave them out"}
	}
	if err := CheckURLs(ctx, r.cfg.Guard, map[string]string{"card_url": cardURL}); err != nil {
		return nil, "", err
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	f, err := a2abridge.FetchFirst(fctx, r.cardHTTP, cardURL)
	cancel()
	if err != nil {
		return nil, "", &domain.FieldError{Field: "card_url", Message: "cannot be read: " + err.Error()}
	}
	m, err := f.Card.Map()
	if err != nil {
		return nil, "", &domain.FieldError{Field: "card_url", Message: err.Error()}
	}
	if reg.Namespace == "" {
		reg.Namespace = domain.DefaultNamespace
	}
	if reg.AgentID == "" {
		reg.AgentID = slug(m.Name)
		if reg.AgentID == "" {
			return nil, "", &domain.FieldError{Field: "agent_id", Message: "is required: the card has no name to make one of"}
		}
	}
	reg.Capabilities, reg.Aliases, reg.Endpoint, reg.Protocol, reg.HealthURL = m.Capabilities, m.Aliases, m.Endpoint, domain.ProtocolA2A, f.URL
	if reg.Version == "" {
		reg.Version = m.Version
	}
	if reg.TTLSeconds == 0 {
		reg.TTLSeconds = DefaultCardTTLSeconds
	}
	reg.Metadata = maps.Clone(reg.Metadata)
	if reg.Metadata == nil {
		reg.Metadata = map[string]any{}
	}
	reg.Metadata["a2a"] = cardInfo(m, f.URL)
	now := r.now().UTC()
	return r.register(ctx, reg, md, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO agent_cards (agent_id, card_url, etag, card_hash, card, fetched_at, next_fetch_at, namespace)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			ON CONFLICT (namespace, agent_id) DO UPDATE SET card_url = excluded.card_url, etag = excluded.etag,
				card_hash = excluded.card_hash, card = excluded.card, fetched_at = excluded.fetched_at,
				next_fetch_at = excluded.next_fetch_at, failures = 0, last_error = ''`,
			reg.AgentID, f.URL, keptETag(f), m.Hash(), f.Raw, now, now.Add(cardInterval(reg.TTLSeconds, f.MaxAge)), reg.Namespace)
		return err
	})
}

func keptETag(f a2abridge.Fetched) string {
	if f.NoStore {
		return ""
	}
	return f.ETag
}

// cardInterval is how long until a card is fetched again: a third of the
// lease, so a live agent never lapses, or sooner when the card's own
// max-age says it may change sooner (at least a second).
func cardInterval(ttlSeconds int, maxAge time.Duration) time.Duration {
	d := time.Duration(ttlSeconds) * time.Second / 3
	if maxAge > 0 && maxAge < d {
		d = maxAge
	}
	return max(d, time.Second)
}

// cardFailed records a failed fetch (or an unusable card) and when to try
// again; it answers the failure.
func (r *Registry) cardFailed(ctx context.Context, k domain.AgentKey, next time.Time, failure error) error {
	_, err := r.pool.Exec(ctx, `UPDATE agent_cards SET next_fetch_at = $2, failures = failures + 1, last_error = $3
		WHERE agent_id = $1 AND namespace = $4`, k.ID, next, failure.Error(), k.Namespace)
	return errors.Join(failure, err)
}

// CardRefreshArgs is the periodic River job that fetches the Agent Cards
// that are due.
type CardRefreshArgs struct{}

// Kind implements river.JobArgs.
func (CardRefreshArgs) Kind() string { return "agent_card_refresh" }

type cardRefreshWorker struct {
	river.WorkerDefaults[CardRefreshArgs]
	r *Registry
}

func (w *cardRefreshWorker) Timeout(*river.Job[CardRefreshArgs]) time.Duration { return time.Minute }

func (w *cardRefreshWorker) Work(ctx context.Context, _ *river.Job[CardRefreshArgs]) error {
	_, err := w.r.RefreshCards(ctx)
	return err
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
	rows, err := r.pool.Query(ctx, `SELECT c.namespace, c.agent_id, c.card_url, c.etag, c.card_hash, a.ttl_seconds
		FROM agent_cards c JOIN agents a USING (namespace, agent_id)
		WHERE c.next_fetch_at <= $1 AND NOT a.deregistered AND a.state <> 'OFFLINE'
		ORDER BY c.next_fetch_at LIMIT 100`, r.now().UTC())
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
	var changed atomic.Int32
	var g errgroup.Group
	g.SetLimit(cardFetchers) // a few slow cards must not hold up the rest
	for _, d := range due {
		g.Go(func() error {
			ok, err := r.refreshCard(ctx, d)
			if err != nil {
				r.logger.WarnContext(ctx, "agent card refresh", "agent_id", d.agent.ID, "namespace", d.agent.Namespace, "card_url", d.url, "err", err)
			}
			if ok {
				changed.Add(1)
			}
			return nil
		})
	}
	_ = g.Wait()
	if changed.Load() > 0 {
		r.changed(ctx)
	}
	return int(changed.Load()), nil
}

// cardFetchers is how many cards one refresh fetches at once.
const cardFetchers = 8

func (r *Registry) refreshCard(ctx context.Context, d dueCard) (bool, error) {
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	f, err := a2abridge.Fetch(fctx, r.cardHTTP, d.url, d.etag)
	cancel()
	now := r.now().UTC()
	next := now.Add(cardInterval(d.ttl, f.MaxAge))
	if err != nil {
		return false, r.cardFailed(ctx, d.agent, next, err)
	}
	r.heartbeats.add(d.agent, now, nil) // the card answered: the agent is there
	if f.NotModified {
		_, err := r.pool.Exec(ctx, `UPDATE agent_cards SET next_fetch_at = $2, failures = 0, last_error = ''
			WHERE agent_id = $1 AND namespace = $3`, d.agent.ID, next, d.agent.Namespace)
		return false, err
	}
	m, err := f.Card.Map()
	if err == nil {
		err = CheckURLs(ctx, r.cfg.Guard, map[string]string{"endpoint": m.Endpoint})
	}
	if err != nil {
		// Keep serving the card we had: the agent answers, its new card is unusable.
		return false, r.cardFailed(ctx, d.agent, next, err)
	}
	if bytes.Equal(m.Hash(), d.hash) {
		_, err := r.pool.Exec(ctx, `UPDATE agent_cards SET etag = $2, card = $3, fetched_at = $4, next_fetch_at = $5, failures = 0, last_error = ''
			WHERE agent_id = $1 AND namespace = $6`, d.agent.ID, keptETag(f), f.Raw, now, next, d.agent.Namespace)
		return false, err
	}
	err = r.store.InTx(ctx, func(tx pgx.Tx) error {
		a, err := r.load(ctx, tx, d.agent, true)
		if err != nil {
			return err
		}
		from := domain.CardView{Capabilities: a.Capabilities, Aliases: a.Aliases, Version: a.Version, Endpoint: a.Endpoint}
		if ci, ok := a.A2AInfo(); ok {
			from.Push = &ci.Push
		}
		to := domain.CardView{Capabilities: m.Capabilities, Aliases: orEmptySlice(m.Aliases), Version: m.Version,
			Endpoint: m.Endpoint, Push: &m.Push}
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
		md["a2a"] = cardInfo(m, d.url)
		mdJSON, _ := json.Marshal(md)
		if _, err := tx.Exec(ctx, `UPDATE agents SET capabilities = $2, aliases = $3, version = $4, endpoint = $5,
				metadata = $6, stream_version = $7 WHERE agent_id = $1 AND namespace = $8`,
			d.agent.ID, m.Capabilities, orEmptySlice(m.Aliases), m.Version, m.Endpoint, mdJSON, recs[0].Version, d.agent.Namespace); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE agent_cards SET etag = $2, card = $3, card_hash = $4, fetched_at = $5, next_fetch_at = $6,
				failures = 0, last_error = '' WHERE agent_id = $1 AND namespace = $7`, d.agent.ID, keptETag(f), f.Raw, m.Hash(), now, next, d.agent.Namespace)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("update card of agent %s: %w", d.agent, err)
	}
	r.logger.InfoContext(ctx, "agent card changed", "agent_id", d.agent.ID, "namespace", d.agent.Namespace, "capabilities", m.Capabilities, "version", m.Version)
	return true, nil
}
