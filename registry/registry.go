package registry

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/netguard"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qLoadAgent           = queries.Must("LoadAgent")
	qLoadAgentForUpdate  = queries.Must("LoadAgentForUpdate")
	qListAgents          = queries.Must("ListAgents")
	qForgetAgentCard     = queries.Must("ForgetAgentCard")
	qUpsertAgent         = queries.Must("UpsertAgent")
	qAgentByToken        = queries.Must("AgentByToken")
	qTokenSuperseded     = queries.Must("TokenSuperseded")
	qRotateAgentToken    = queries.Must("RotateAgentToken")
	qSetAgentContext     = queries.Must("SetAgentContext")
	qDeregisterAgent     = queries.Must("DeregisterAgent")
	qSetAgentState       = queries.Must("SetAgentState")
	qRecentAgentActivity = queries.Must("RecentAgentActivity")
)

// Errors the registry returns; callers match them with errors.Is.
var (
	// ErrUnauthenticated: the agent token is missing or wrong.
	ErrUnauthenticated error = &domain.KindError{Kind: domain.ErrUnauthenticated, Message: "agent token missing or invalid",
		Public: "agent token missing or invalid (Authorization: Bearer <token>)"}
	// ErrAmbiguous: an agent id asked for in every namespace is in several.
	ErrAmbiguous error = &domain.KindError{Kind: domain.ErrConflict, Field: "namespace", Message: "agent id is in several namespaces: name one",
		Public: "this agent id is in several namespaces: name one with ?namespace="}
	// ErrGone: the agent is OFFLINE and must register again (of the kind
	// domain.ErrNotFound).
	ErrGone = domain.NewError(domain.ErrNotFound, "agent is offline: register again")
)

// NoAgentError is the answer for an agent id or token that no registered
// agent holds, of the kind domain.ErrNotFound. The API tells the agent to
// register again, unless the question was an operator's (httpapi's
// loadAgent answers those).
type NoAgentError struct{ kind *domain.KindError }

func noAgent(agent any) error { return noAgentMsg(fmt.Sprintf("agent %s not found", agent)) }

func noAgentMsg(msg string) error {
	return &NoAgentError{&domain.KindError{Kind: domain.ErrNotFound, Message: msg, Public: msg + ": register it"}}
}

func (e *NoAgentError) Error() string { return e.kind.Message }

// Unwrap makes errors.Is see the kind (and the API its message).
func (e *NoAgentError) Unwrap() error { return e.kind }

// NotifyChannel is the PostgreSQL channel on which registry changes are
// announced, so every process refreshes its snapshot.
const NotifyChannel = "agentreach_agents"

// Config tunes the registry.
type Config struct {
	Lease   domain.LeaseConfig
	Breaker domain.BreakerConfig
	Route   domain.RouteConfig
	// SelfPreservation is the share of a namespace's agents that may lapse in
	// one sweep before the sweep holds off (default 0.5).
	SelfPreservation float64
	// SelfPreservationBound is how long one episode may hold lapsed agents
	// back before they go DOWN as any lapsed agent would (default 5 min).
	SelfPreservationBound time.Duration
	// SweepInterval is how often leases are evaluated (default 1 s).
	SweepInterval time.Duration
	// RefreshInterval bounds the snapshot's staleness when a notification is
	// lost (default 1 s).
	RefreshInterval time.Duration
	// HeartbeatFlush is how long heartbeats are buffered before one batched
	// write (default 200 ms).
	HeartbeatFlush time.Duration
	// ProbeTimeout bounds one probe request (default 2 s).
	ProbeTimeout time.Duration
	// HealthInterval is how often health alerts are judged (default 10 s).
	HealthInterval time.Duration
	// TokenOverlap is how long a rotated-out agent token keeps working
	// (default 24 h, as the best webhook services do for their secrets).
	TokenOverlap time.Duration
	// Guard decides which addresses agents may have (SSRF): endpoints and
	// health URLs are checked at registration and every probe's address at
	// connect time. Nil means netguard.DefaultPolicy.
	Guard *netguard.Policy
}

func (c Config) withDefaults() Config {
	if c.Lease == (domain.LeaseConfig{}) {
		c.Lease = domain.DefaultLeaseConfig()
	}
	if c.Breaker == (domain.BreakerConfig{}) {
		c.Breaker = domain.DefaultBreakerConfig()
	}
	if c.Route == (domain.RouteConfig{}) {
		c.Route = domain.DefaultRouteConfig()
	}
	if c.SelfPreservation == 0 {
		c.SelfPreservation = domain.DefaultSelfPreservationThreshold
	}
	if c.SelfPreservationBound <= 0 {
		c.SelfPreservationBound = domain.DefaultPreservationBound
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = time.Second
	}
	if c.RefreshInterval <= 0 {
		c.RefreshInterval = time.Second
	}
	if c.HeartbeatFlush <= 0 {
		c.HeartbeatFlush = 200 * time.Millisecond
	}
	if c.ProbeTimeout <= 0 {
		c.ProbeTimeout = 2 * time.Second
	}
	if c.TokenOverlap <= 0 {
		c.TokenOverlap = 24 * time.Hour
	}
	if c.Guard == nil {
		p := netguard.DefaultPolicy()
		c.Guard = &p
	}
	return c
}

// Registry is the agent registry of one process.
type Registry struct {
	pool   *pgxpool.Pool
	store  *eventstore.Store
	logger *slog.Logger
	cfg    Config
	now    func() time.Time
	http   *http.Client
	// cardHTTP fetches Agent Cards (longer timeout than a probe).
	cardHTTP *http.Client
	// mcpServers holds MCP server agents' endpoints (MCPEndpoint).
	mcpServers mcpCache
	// mcpWatches watch MCP server agents' tool lists (the leader's).
	mcpWatches mcpWatches

	snap       *Snapshot
	heartbeats *heartbeatBuffer
	// beforeFlush runs between a heartbeat flush's take and its write
	// (tests hold a flush there).
	beforeFlush func()
	pokes       chan struct{}
	probes      ProbeQueue
}

// SetProbes gives the registry the queue it inserts probes with
// (riverwork.Probes over the River client). It must be called before
// Register; the client is built after the registry because the client
// needs the registry's workers.
func (r *Registry) SetProbes(q ProbeQueue) { r.probes = q }

// MaxRedirects bounds the redirects a probe or a card fetch follows; each
// target is checked by the network guard when it is dialled.
const MaxRedirects = 3

func boundedRedirects(_ *http.Request, via []*http.Request) error {
	if len(via) > MaxRedirects {
		return fmt.Errorf("stopped after %d redirects", MaxRedirects)
	}
	return nil
}

// New returns a Registry. Start its background work with Run.
func New(pool *pgxpool.Pool, store *eventstore.Store, logger *slog.Logger, cfg Config) *Registry {
	cfg = cfg.withDefaults()
	r := &Registry{
		pool: pool, store: store, logger: logger, cfg: cfg, now: time.Now, beforeFlush: func() {},
		http: &http.Client{Timeout: cfg.ProbeTimeout, CheckRedirect: boundedRedirects, Transport: &http.Transport{Proxy: nil,
			DialContext: cfg.Guard.DialContext(&net.Dialer{Timeout: cfg.ProbeTimeout})}},
		cardHTTP: &http.Client{Timeout: 10 * time.Second, CheckRedirect: boundedRedirects, Transport: &http.Transport{Proxy: nil,
			DialContext: cfg.Guard.DialContext(&net.Dialer{Timeout: 5 * time.Second})}},
		pokes: make(chan struct{}, 1),
	}
	r.snap = newSnapshot(r)
	r.heartbeats = newHeartbeatBuffer()
	return r
}

// Config returns the registry's configuration, defaults filled in.
func (r *Registry) Config() Config { return r.cfg }

// Snapshot returns the in-memory view of the registry.
func (r *Registry) Snapshot() *Snapshot { return r.snap }

// Agent is an agent as the registry knows it.
type Agent struct {
	domain.AgentRegistration
	State            domain.AgentState
	InstanceID       string
	ProbeOK          bool
	ReportedInFlight int
	// Hold is an operator's hold on the agent (domain.HoldDrain, HoldDown).
	Hold string
	// What its heartbeats last reported of its health (nil: never).
	ReportedQueueLength int
	ReportedErrorRate   *float64
	ReportedPoolUsage   *float64
	// RecentRestarts are its re-registrations in the hour before the latest
	// one; ProbeStreak the probes it passed in a row since (flap damping).
	RecentRestarts int
	ProbeStreak    int
	breakerOpen    bool // as last recorded on its stream
	// LastProbeError is why the last probe failed ("" when it passed, or
	// none ran), at LastProbeAt (nil: never probed).
	LastProbeError string
	LastProbeAt    *time.Time
	// PausedUntil: the agent asked for no work until then (a 429 or 503
	// with Retry-After); nil when it never did.
	PausedUntil    *time.Time
	RegisteredAt   time.Time
	LastSeenAt     time.Time
	LeaseExpiresAt time.Time
	StateChangedAt time.Time
	StreamVersion  int
	Deregistered   bool
	tokenHash      []byte
	prevTokenHash  []byte
	prevTokenUntil *time.Time
}

// Gone reports whether the agent is OFFLINE for good: deregistered or
// lapsed, not an operator's drain (a drained agent stays registered,
// held). A gone agent neither heartbeats nor claims.
func (a *Agent) Gone() bool { return a.State == domain.AgentOffline && a.Hold != domain.HoldDrain }

// SigningKeys are the keys that sign deliveries to the agent: the SHA-256 of
// its token, which the agent can compute and the registry stores, and,
// during a rotation's overlap, that of its previous token, so the agent
// verifies deliveries whichever token it holds.
func (a *Agent) SigningKeys(now time.Time) [][]byte {
	keys := [][]byte{a.tokenHash}
	if a.prevTokenHash != nil && a.prevTokenUntil != nil && now.Before(*a.prevTokenUntil) {
		keys = append(keys, a.prevTokenHash)
	}
	return keys
}

// tokenValid checks a token against the current one and, during a
// rotation's overlap, the previous one.
func (a *Agent) tokenValid(token string, now time.Time) bool {
	if tokenMatches(token, a.tokenHash) {
		return true
	}
	return a.prevTokenHash != nil && a.prevTokenUntil != nil && now.Before(*a.prevTokenUntil) && tokenMatches(token, a.prevTokenHash)
}

func (a *Agent) lease() domain.AgentLease {
	return domain.AgentLease{State: a.State, RegisteredAt: a.RegisteredAt, LastSeen: a.LastSeenAt,
		TTL: time.Duration(a.TTLSeconds) * time.Second, ProbeOK: a.ProbeOK, Hold: a.Hold}
}

// newToken returns a fresh agent token and its hash. The token is shown
// once, to the agent; only the hash is stored.
func newToken() (token string, hash []byte) {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	token = "art_" + base64.RawURLEncoding.EncodeToString(b)
	return token, hashToken(token)
}

func hashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// tokenMatches compares in constant time.
func tokenMatches(token string, hash []byte) bool {
	return token != "" && subtle.ConstantTimeCompare(hashToken(token), hash) == 1
}

// scanAgent reads the columns every agent query of registry.sql returns.
func scanAgent(row pgx.Row) (*Agent, error) {
	var a Agent
	var state string
	var ctxJSON, mdJSON []byte
	err := row.Scan(&a.AgentID, &a.Namespace, &a.Capabilities, &a.Aliases, &a.Endpoint, &a.HealthURL, &a.Protocol,
		&a.Weight, &a.MaxConcurrent, &a.Version, &a.RolloutPercent, &a.TTLSeconds, &ctxJSON, &mdJSON, &state, &a.InstanceID,
		&a.ProbeOK, &a.ReportedInFlight, &a.tokenHash, &a.RegisteredAt, &a.LastSeenAt, &a.LeaseExpiresAt, &a.StateChangedAt,
		&a.StreamVersion, &a.Deregistered, &a.prevTokenHash, &a.prevTokenUntil, &a.Hold,
		&a.ReportedQueueLength, &a.ReportedErrorRate, &a.ReportedPoolUsage, &a.ProtocolVersion, &a.RecentRestarts, &a.ProbeStreak, &a.breakerOpen, &a.Mode,
		&a.PausedUntil, &a.LastProbeError, &a.LastProbeAt)
	if err != nil {
		return nil, err
	}
	a.State = domain.AgentState(state)
	_ = json.Unmarshal(ctxJSON, &a.Context)
	_ = json.Unmarshal(mdJSON, &a.Metadata)
	return &a, nil
}

func (r *Registry) load(ctx context.Context, q eventstore.Querier, k domain.AgentKey, forUpdate bool) (*Agent, error) {
	query := qLoadAgent
	if forUpdate {
		query = qLoadAgentForUpdate
	}
	a, err := scanAgent(q.QueryRow(ctx, query, k.Namespace, k.ID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, noAgent(k)
	}
	if err != nil {
		return nil, fmt.Errorf("load agent %s: %w", k, err)
	}
	return a, nil
}

// Get returns an agent; a deregistered one is domain.ErrNotFound.
func (r *Registry) Get(ctx context.Context, k domain.AgentKey) (*Agent, error) {
	a, err := r.load(ctx, r.pool, k, false)
	if err != nil {
		return nil, err
	}
	if a.Deregistered {
		return nil, noAgent(k)
	}
	r.heartbeats.overlay(a)
	return a, nil
}

// Find returns agent id of namespace ns, or, with ns empty (a key of every
// namespace that named none), the one agent of that id in any namespace:
// ErrAmbiguous when several namespaces have one.
func (r *Registry) Find(ctx context.Context, ns, id string) (*Agent, error) {
	if ns != "" {
		return r.Get(ctx, domain.AgentKey{Namespace: ns, ID: id})
	}
	found, err := r.List(ctx, ListFilter{ID: id})
	switch {
	case err != nil:
		return nil, err
	case len(found) == 0:
		return nil, noAgent(id)
	case len(found) > 1:
		return nil, fmt.Errorf("agent %s: %w", id, ErrAmbiguous)
	}
	return found[0], nil
}

// ListFilter narrows List; empty fields match everything.
type ListFilter struct {
	Namespace  string
	ID         string
	Capability string
	State      domain.AgentState
}

// List returns the registered agents that match f, by agent id.
func (r *Registry) List(ctx context.Context, f ListFilter) ([]*Agent, error) {
	rows, err := r.pool.Query(ctx, qListAgents, f.Namespace, f.Capability, string(f.State), f.ID)
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	defer rows.Close()
	var out []*Agent
	for rows.Next() {
		a, err := scanAgent(rows)
		if err != nil {
			return nil, fmt.Errorf("list agents: %w", err)
		}
		r.heartbeats.overlay(a)
		out = append(out, a)
	}
	return out, rows.Err()
}

// Register registers an agent, or re-registers it (a restart: a new
// instance). The agent starts PROBING and gets no work until a probe of its
// health URL succeeds. It returns the agent and its new token; an earlier
// token stops working.
func (r *Registry) Register(ctx context.Context, reg domain.AgentRegistration, md domain.Metadata) (*Agent, string, error) {
	if reg.Protocol == domain.ProtocolMCP {
		return r.RegisterMCP(ctx, reg, nil, md)
	}
	return r.register(ctx, reg, md, func(ctx context.Context, tx pgx.Tx) error {
		// Registered by hand now: its card or MCP server, if it had one, no
		// longer speaks for it.
		if _, err := tx.Exec(ctx, qForgetAgentCard, reg.Namespace, reg.AgentID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, qMCPForgetServer, reg.Namespace, reg.AgentID)
		return err
	})
}

// register is Register with more writes (also) in its transaction.
func (r *Registry) register(ctx context.Context, reg domain.AgentRegistration, md domain.Metadata, also func(context.Context, pgx.Tx) error) (*Agent, string, error) {
	if err := reg.Normalize(); err != nil {
		return nil, "", err
	}
	if err := CheckURLs(ctx, r.cfg.Guard, map[string]string{"endpoint": reg.Endpoint, "health_url": reg.HealthURL}); err != nil {
		return nil, "", err
	}
	token, hash := newToken()
	now := r.now().UTC()
	instance := uuid.Must(uuid.NewV7()).String()
	var out *Agent
	err := r.store.InTx(ctx, func(tx pgx.Tx) error {
		prev, err := r.load(ctx, tx, reg.Key(), true)
		if err != nil && !errors.Is(err, domain.ErrNotFound) {
			return err
		}
		version, from, hold := 0, domain.AgentState(""), domain.HoldNone
		if prev != nil {
			version, from, hold = prev.StreamVersion, prev.State, prev.Hold
			if prev.Deregistered {
				hold = domain.HoldNone // a deletion ends the hold: a new deployment of the id starts afresh
			}
		}
		to := domain.RegisteredState(hold) // a drain or a down outlives the registration
		recs, err := r.store.AppendTx(ctx, tx, domain.AgentStream(reg.Key()), version,
			domain.NewEvent(domain.EventAgentRegistered, domain.AgentRegistered{AgentRegistration: reg, InstanceID: instance, Restart: prev != nil}, md),
			domain.NewEvent(domain.EventAgentStateChanged, domain.AgentStateChanged{From: from, To: to, Signal: domain.SignalRegistered}, md))
		if err != nil {
			return err
		}
		restarts, err := r.recentRestarts(ctx, tx, reg.Key())
		if err != nil {
			return err
		}
		ctxJSON, _ := json.Marshal(orEmpty(reg.Context))
		mdJSON, _ := json.Marshal(orEmpty(reg.Metadata))
		lease := now.Add(time.Duration(reg.TTLSeconds) * time.Second)
		_, err = tx.Exec(ctx, qUpsertAgent,
			reg.AgentID, reg.Namespace, reg.Capabilities, orEmptySlice(reg.Aliases), reg.Endpoint, reg.HealthURL, reg.Protocol,
			reg.Weight, reg.MaxConcurrent, reg.Version, reg.RolloutPercent, reg.TTLSeconds, ctxJSON, mdJSON, string(to), instance,
			hash, now, lease, recs[len(recs)-1].Version, reg.ProtocolVersion, restarts, reg.Mode)
		if err != nil {
			return fmt.Errorf("register agent %s: %w", reg.Key(), err)
		}
		if err := writeDocsTx(ctx, tx, reg.Key(), reg.CapabilityInfo); err != nil { // the catalogue's words (intent)
			return err
		}
		if !reg.Pull() && hold == domain.HoldNone { // a pull agent's first claim is its probe; a held one waits for up
			if err := r.enqueueProbeTx(ctx, tx, reg.Key(), instance); err != nil {
				return err
			}
		}
		if err := also(ctx, tx); err != nil {
			return err
		}
		out, err = r.load(ctx, tx, reg.Key(), false)
		return err
	})
	if err != nil {
		return nil, "", err
	}
	r.heartbeats.forget(reg.Key())
	r.changed(ctx)
	return out, token, nil
}

// recentRestarts counts the agent's re-registrations within FlapWindow
// before its latest registration, by the times the log recorded them.
func (r *Registry) recentRestarts(ctx context.Context, tx pgx.Tx, k domain.AgentKey) (int, error) {
	recs, err := r.store.ReadStream(ctx, tx, domain.AgentStream(k))
	if err != nil || len(recs) == 0 {
		return 0, err
	}
	latest := recs[len(recs)-1].RecordedAt
	n := 0
	for _, rec := range recs {
		if rec.Type == domain.EventAgentRegistered && latest.Sub(rec.RecordedAt) < domain.FlapWindow {
			n++
		}
	}
	return max(0, n-1), nil
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

func orEmptySlice(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// CheckURLs checks outbound URLs (field name → URL; empty ones are skipped)
// against the SSRF guard, in the fields' order, as a *domain.FieldError
// naming the first field refused.
func CheckURLs(ctx context.Context, guard *netguard.Policy, urls map[string]string) error {
	for _, field := range slices.Sorted(maps.Keys(urls)) {
		u := urls[field]
		if u == "" {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := guard.CheckURL(cctx, nil, u)
		cancel()
		if errors.Is(err, netguard.ErrDenied) {
			return &domain.FieldError{Field: field, Message: "is not allowed: " + err.Error()}
		}
		if err != nil {
			return &domain.FieldError{Field: field, Message: "cannot be checked: " + err.Error()}
		}
	}
	return nil
}

// Authenticate finds the agent a token belongs to, which must be agent id
// (of whatever namespace the token's agent is in: the token is the
// agent's identity). A token of another agent, or one past its rotation
// overlap, or one a re-registration replaced, is ErrUnauthenticated; a
// token no agent holds, or one of a deregistered agent, is domain.ErrNotFound
// ("register again"). The answer depends on the token alone, whatever id
// was asked for, so it says nothing of other namespaces' ids.
func (r *Registry) Authenticate(ctx context.Context, id, token string) (*Agent, error) {
	a, err := r.AgentByToken(ctx, token)
	if err != nil {
		return nil, err
	}
	if a.AgentID != id {
		return nil, fmt.Errorf("agent %s: the token is another agent's: %w", id, ErrUnauthenticated)
	}
	return a, nil
}

// KnownToken reports whether token is a current or previous token of an
// agent in the snapshot, with no query.
func (r *Registry) KnownToken(token string) bool {
	a := r.snap.byToken(hashToken(token))
	return a != nil && a.tokenValid(token, r.now())
}

// AgentByToken returns the agent a token belongs to (its current token, or
// its previous one during a rotation's overlap): ErrUnauthenticated for
// no token, domain.ErrNotFound when no registered agent holds it.
func (r *Registry) AgentByToken(ctx context.Context, token string) (*Agent, error) {
	if !strings.HasPrefix(token, "art_") {
		return nil, ErrUnauthenticated
	}
	h := hashToken(token)
	now := r.now()
	a := r.snap.byToken(h)
	if a == nil || !a.tokenValid(token, now) {
		// Not in the snapshot (or a token it does not know yet): the rows.
		var err error
		a, err = scanAgent(r.pool.QueryRow(ctx, qAgentByToken, h))
		if errors.Is(err, pgx.ErrNoRows) {
			var replaced bool
			if err := r.pool.QueryRow(ctx, qTokenSuperseded, h).Scan(&replaced); err != nil {
				return nil, fmt.Errorf("authenticate agent: %w", err)
			}
			if replaced {
				return nil, fmt.Errorf("this token was replaced by a newer registration of its agent: %w", ErrUnauthenticated)
			}
			return nil, noAgentMsg("no agent holds this token")
		}
		if err != nil {
			return nil, fmt.Errorf("authenticate agent: %w", err)
		}
	}
	switch {
	case a.Deregistered:
		return nil, noAgent(a.AgentID)
	case !a.tokenValid(token, now):
		return nil, fmt.Errorf("agent %s: %w", a.AgentID, ErrUnauthenticated)
	}
	return a, nil
}

// RotateToken gives an agent a new token. The previous one keeps working,
// for heartbeats, results and delivery signatures, until the overlap
// (Config.TokenOverlap, default 24 h) ends; then only the new one does.
// presented is the agent token the request came with ("" when an operator's
// key asks): only the current token may rotate, never one in its overlap,
// else a leaked old token could mint fresh ones (ErrUnauthenticated).
func (r *Registry) RotateToken(ctx context.Context, k domain.AgentKey, presented string, md domain.Metadata) (string, time.Time, error) {
	token, hash := newToken()
	now := r.now().UTC()
	until := now.Add(r.cfg.TokenOverlap)
	err := r.store.InTx(ctx, func(tx pgx.Tx) error {
		a, err := r.load(ctx, tx, k, true)
		if err != nil {
			return err
		}
		if a.Deregistered {
			return noAgent(k)
		}
		if presented != "" && !tokenMatches(presented, a.tokenHash) {
			return fmt.Errorf("agent %s: only the current token may rotate: %w", k, ErrUnauthenticated)
		}
		recs, err := r.store.AppendTx(ctx, tx, domain.AgentStream(k), a.StreamVersion, domain.NewEvent(domain.EventAgentTokenRotated,
			domain.AgentTokenRotated{PreviousValidUntil: until, InstanceID: a.InstanceID}, md))
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, qRotateAgentToken, k.ID, until, hash, recs[0].Version, k.Namespace)
		return err
	})
	if err != nil {
		return "", time.Time{}, err
	}
	r.changed(ctx)
	return token, until, nil
}

// Heartbeat renews an agent's lease. inFlight is what the agent reports it
// holds (nil: unchanged). It answers domain.ErrNotFound for an unknown agent and
// ErrGone for an OFFLINE one, both of which mean "register again". The write
// is buffered (see Config.HeartbeatFlush); a change of context is written at
// once, as an event, because the router reads it.
func (r *Registry) Heartbeat(ctx context.Context, id, token string, inFlight *int, agentCtx map[string]any, md domain.Metadata) (*Agent, error) {
	return r.HeartbeatReport(ctx, id, token, domain.HealthReport{InFlight: inFlight}, agentCtx, md)
}

// HeartbeatReport is Heartbeat with the agent's health report (in flight,
// queue length, error rate, pool usage; domain.HealthReport, checked by
// the caller); the figures reported are kept until the next report.
func (r *Registry) HeartbeatReport(ctx context.Context, id, token string, report domain.HealthReport, agentCtx map[string]any, md domain.Metadata) (*Agent, error) {
	a, err := r.Authenticate(ctx, id, token)
	if err != nil {
		return nil, err
	}
	if a.Gone() {
		return nil, fmt.Errorf("agent %s: %w", id, ErrGone)
	}
	now := r.now().UTC()
	if agentCtx != nil && !jsonEqual(agentCtx, a.Context) {
		if err := r.setContext(ctx, a.Key(), agentCtx, md); err != nil {
			return nil, err
		}
	}
	r.heartbeats.add(a.Key(), now, report)
	a.LastSeenAt = now
	a.LeaseExpiresAt = now.Add(time.Duration(a.TTLSeconds) * time.Second)
	return a, nil
}

func jsonEqual(a, b map[string]any) bool {
	x, _ := json.Marshal(orEmpty(a))
	y, _ := json.Marshal(orEmpty(b))
	return string(x) == string(y)
}

func (r *Registry) setContext(ctx context.Context, k domain.AgentKey, agentCtx map[string]any, md domain.Metadata) error {
	err := r.store.InTx(ctx, func(tx pgx.Tx) error {
		a, err := r.load(ctx, tx, k, true)
		if err != nil {
			return err
		}
		recs, err := r.store.AppendTx(ctx, tx, domain.AgentStream(k), a.StreamVersion,
			domain.NewEvent(domain.EventAgentContextChanged, domain.AgentContextChanged{From: orEmpty(a.Context), To: agentCtx}, md))
		if err != nil {
			return err
		}
		b, _ := json.Marshal(agentCtx)
		_, err = tx.Exec(ctx, qSetAgentContext, k.Namespace, k.ID, b, recs[0].Version)
		return err
	})
	if err != nil {
		return fmt.Errorf("set context of agent %s: %w", k, err)
	}
	r.changed(ctx)
	return nil
}

// Offline takes an agent out of routing at once (graceful shutdown).
func (r *Registry) Offline(ctx context.Context, id, token, reason string, md domain.Metadata) (*Agent, error) {
	a, err := r.Authenticate(ctx, id, token)
	if err != nil {
		return nil, err
	}
	return r.signal(ctx, a.Key(), "", domain.SignalOffline, reason, md)
}

// Deregister removes an agent from the registry; its stream stays as the
// audit trail, and the same agent_id may register again.
func (r *Registry) Deregister(ctx context.Context, k domain.AgentKey, md domain.Metadata) error {
	err := r.store.InTx(ctx, func(tx pgx.Tx) error {
		a, err := r.load(ctx, tx, k, true)
		if err != nil {
			return err
		}
		if a.Deregistered {
			return noAgent(k)
		}
		evs := []domain.Event{domain.NewEvent(domain.EventAgentDeregistered, domain.AgentDeregistered{AgentID: k.ID}, md)}
		if a.State != domain.AgentOffline {
			evs = append(evs, domain.NewEvent(domain.EventAgentStateChanged,
				domain.AgentStateChanged{From: a.State, To: domain.AgentOffline, Signal: domain.SignalOffline, Reason: "deregistered"}, md))
		}
		recs, err := r.store.AppendTx(ctx, tx, domain.AgentStream(k), a.StreamVersion, evs...)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, qDeregisterAgent, k.ID, string(domain.AgentOffline), r.now().UTC(), recs[len(recs)-1].Version, k.Namespace)
		return err
	})
	if err != nil {
		return err
	}
	r.changed(ctx)
	return nil
}

// signal applies one life-cycle signal to an agent in its own transaction.
// With instance set, a signal about an earlier instance is dropped. An
// illegal pair is dropped too (a stale fact), returning the agent unchanged.
func (r *Registry) signal(ctx context.Context, k domain.AgentKey, instance string, sig domain.AgentSignal, reason string, md domain.Metadata) (*Agent, error) {
	return r.applySignal(ctx, k, instance, sig, reason, md, false)
}

// applySignal is signal; strict (an operator's action) answers a
// deregistered agent with domain.ErrNotFound and a state that refuses the signal
// with ErrNotNow, where signal drops both as stale facts.
func (r *Registry) applySignal(ctx context.Context, k domain.AgentKey, instance string, sig domain.AgentSignal, reason string,
	md domain.Metadata, strict bool) (*Agent, error) {
	var out *Agent
	changed := false
	err := r.store.InTx(ctx, func(tx pgx.Tx) error {
		a, err := r.load(ctx, tx, k, true)
		if err != nil {
			return err
		}
		out = a
		switch {
		case a.Deregistered && strict:
			return noAgent(k)
		case a.Deregistered, instance != "" && a.InstanceID != instance:
			return nil
		}
		lease, err := domain.ApplyAgentSignal(a.lease(), sig, r.now().UTC())
		switch {
		case errors.Is(err, domain.ErrIllegalAgentTransition) && strict:
			return fmt.Errorf("%s agent %s in %s: %w", sig, k, a.State, ErrNotNow)
		case errors.Is(err, domain.ErrIllegalAgentTransition):
			return nil
		case err != nil:
			return err
		case lease.State == a.State && lease.ProbeOK == a.ProbeOK && lease.Hold == a.Hold:
			return nil
		}
		out, err = r.applyStateTx(ctx, tx, a, lease, sig, reason, md)
		changed = err == nil
		return err
	})
	if err != nil {
		return nil, err
	}
	if changed {
		r.changed(ctx)
	}
	return out, nil
}

// applyStateTx records a state change: the event and the row, in tx.
func (r *Registry) applyStateTx(ctx context.Context, tx pgx.Tx, a *Agent, lease domain.AgentLease, sig domain.AgentSignal, reason string, md domain.Metadata) (*Agent, error) {
	version := a.StreamVersion
	if lease.State != a.State {
		recs, err := r.store.AppendTx(ctx, tx, domain.AgentStream(a.Key()), a.StreamVersion,
			domain.NewEvent(domain.EventAgentStateChanged, domain.AgentStateChanged{From: a.State, To: lease.State, Signal: sig, Reason: reason}, md))
		if err != nil {
			return nil, err
		}
		version = recs[0].Version
	}
	now := r.now().UTC()
	_, err := tx.Exec(ctx, qSetAgentState, a.AgentID, string(lease.State), lease.ProbeOK, version, now, a.Namespace, lease.Hold)
	if err != nil {
		return nil, fmt.Errorf("update agent %s: %w", a.Key(), err)
	}
	if lease.State != a.State {
		r.logger.InfoContext(ctx, "agent state changed", "agent_id", a.AgentID, "namespace", a.Namespace, "from", a.State, "to", lease.State, "signal", sig, "reason", reason)
	}
	b := *a
	b.State, b.ProbeOK, b.StreamVersion, b.Hold = lease.State, lease.ProbeOK, version, lease.Hold
	return &b, nil
}

// changed refreshes this process's snapshot now and tells the others.
func (r *Registry) changed(ctx context.Context) {
	if err := r.snap.Refresh(ctx); err != nil {
		r.logger.Warn("refresh registry snapshot", "err", err)
	}
	select {
	case r.pokes <- struct{}{}:
	default:
	}
}

// enqueueProbeTx inserts the probe of one agent instance in tx; a probe
// already queued for it is not duplicated.
func (r *Registry) enqueueProbeTx(ctx context.Context, tx pgx.Tx, k domain.AgentKey, instance string) error {
	_, err := r.probes.EnqueueProbesTx(ctx, tx, []Probe{{Agent: k, InstanceID: instance, Every: ProbeEvery}})
	if err != nil {
		return fmt.Errorf("enqueue probe of agent %s: %w", k, err)
	}
	return nil
}

// Recent is what happened to an agent's attempts lately, read from the log.
type Recent struct {
	Window    string  `json:"window"`
	Routed    int     `json:"routed"`
	Attempted int     `json:"attempted"`
	Delivered int     `json:"delivered"`
	Succeeded int     `json:"succeeded"`
	Failed    int     `json:"failed"`
	TimedOut  int     `json:"timed_out"`
	ReachRate float64 `json:"reach_rate"`
	Success   float64 `json:"success_rate"`
}

// RecentActivity counts an agent's routed attempts and their outcomes over
// the last window (rounded out to whole minutes), from the agent_stats
// projection of the log.
func (r *Registry) RecentActivity(ctx context.Context, k domain.AgentKey, window time.Duration) (Recent, error) {
	rec := Recent{Window: window.String()}
	err := r.pool.QueryRow(ctx, qRecentAgentActivity, k.Namespace, k.ID, r.now().Add(-window)).
		Scan(&rec.Routed, &rec.Delivered, &rec.Succeeded, &rec.Failed, &rec.TimedOut)
	if err != nil {
		return rec, fmt.Errorf("recent activity of agent %s: %w", k, err)
	}
	rec.Attempted = rec.Routed
	if rec.Attempted > 0 {
		rec.ReachRate = float64(rec.Delivered) / float64(rec.Attempted)
		rec.Success = float64(rec.Succeeded) / float64(rec.Attempted)
	}
	return rec, nil
}
