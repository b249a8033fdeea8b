package registry

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qSnapshotAgents      = queries.Must("SnapshotAgents")
	qSnapshotAttempts    = queries.Must("SnapshotAttempts")
	qSnapshotRecentStats = queries.Must("SnapshotRecentStats")
	qSnapshotInFlight    = queries.Must("SnapshotInFlight")
)

// Snapshot is the router's in-memory view of every agent, rebuilt from the
// database on every registry change (NOTIFY) and at least every
// Config.RefreshInterval, so it is never staler than that interval plus
// one refresh query. Every process builds its own from the same rows, so
// they agree within that bound.
type Snapshot struct {
	r *Registry

	refreshMu sync.Mutex // one refresh at a time

	mu       sync.RWMutex
	agents   map[domain.AgentKey]*Agent
	byTokens map[string]*Agent // by the hash of a current or previous token
	breakers map[domain.AgentKey]domain.BreakerStatus
	inFlight map[domain.AgentKey]int
	index    *domain.RouteIndex
	policies map[string]domain.RoutingPolicy // namespaces' own routing policies
	loadedAt time.Time
}

func newSnapshot(r *Registry) *Snapshot {
	return &Snapshot{r: r, agents: map[domain.AgentKey]*Agent{}, byTokens: map[string]*Agent{}, index: domain.NewRouteIndex(nil)}
}

// Refresh reloads the snapshot from the database.
func (s *Snapshot) Refresh(ctx context.Context) error {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	now := s.r.now().UTC()
	agents, byTokens, err := s.loadAgents(ctx)
	if err != nil {
		return fmt.Errorf("snapshot: load agents: %w", err)
	}
	policies, err := s.loadPolicies(ctx)
	if err != nil {
		return fmt.Errorf("snapshot: load routing policies: %w", err)
	}
	s.mu.Lock()
	s.policies = policies // the breakers below are judged by them
	s.mu.Unlock()
	tried, err := s.loadAttempts(ctx, now)
	if err != nil {
		return fmt.Errorf("snapshot: load attempts: %w", err)
	}
	recents, err := s.loadRecent(ctx, now)
	if err != nil {
		return fmt.Errorf("snapshot: load recent health: %w", err)
	}
	inFlight, err := s.loadInFlight(ctx)
	if err != nil {
		return fmt.Errorf("snapshot: load in-flight: %w", err)
	}
	breakers, index := s.routeView(now, agents, tried, recents, inFlight)

	s.mu.Lock()
	s.agents, s.byTokens, s.breakers, s.inFlight, s.index, s.loadedAt = agents, byTokens, breakers, inFlight, index, now
	s.mu.Unlock()
	return nil
}

// loadAgents reads every registered agent, with the heartbeats not written
// yet, by key and by the hash of its current and previous token.
func (s *Snapshot) loadAgents(ctx context.Context) (map[domain.AgentKey]*Agent, map[string]*Agent, error) {
	rows, err := s.r.pool.Query(ctx, qSnapshotAgents)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	agents := map[domain.AgentKey]*Agent{}
	byTokens := map[string]*Agent{}
	for rows.Next() {
		a, err := scanAgent(rows)
		if err != nil {
			return nil, nil, err
		}
		s.r.heartbeats.overlay(a)
		agents[a.Key()] = a
		byTokens[string(a.tokenHash)] = a
		if a.prevTokenHash != nil {
			byTokens[string(a.prevTokenHash)] = a
		}
	}
	return agents, byTokens, rows.Err()
}

// attempts are what the breakers are judged by: the samples of the agents
// that failed within the horizon, and of the others only how many of their
// samples fall in their window (SnapshotAttempts).
type attempts struct {
	samples   map[domain.AgentKey][]domain.AttemptSample
	successes map[domain.AgentKey]int
}

// breaker judges agent id's breaker at now.
func (a attempts) breaker(id domain.AgentKey, now time.Time, cfg domain.BreakerConfig) domain.BreakerStatus {
	if n, ok := a.successes[id]; ok {
		return domain.BreakerOfSuccesses(n)
	}
	return domain.EvaluateBreaker(a.samples[id], now, cfg)
}

// loadAttempts reads the attempts of the breaker's window plus its
// cool-down, so that an opening and its cool-down are never forgotten (see
// EvaluateBreaker).
func (s *Snapshot) loadAttempts(ctx context.Context, now time.Time) (attempts, error) {
	base := s.r.cfg.Breaker.WithDefaults()
	horizon := base.Window + base.CoolDown
	var namespaces []string
	var since []time.Time
	s.mu.RLock()
	for ns, p := range s.policies {
		b := p.Breaker().WithDefaults()
		horizon = max(horizon, b.Window+b.CoolDown)
		namespaces, since = append(namespaces, ns), append(since, now.Add(-b.Window))
	}
	s.mu.RUnlock()
	out := attempts{samples: map[domain.AgentKey][]domain.AttemptSample{}, successes: map[domain.AgentKey]int{}}
	var id domain.AgentKey
	var at *time.Time
	var ok bool
	var n int
	rows, err := s.r.pool.Query(ctx, qSnapshotAttempts, now.Add(-horizon), namespaces, since, now.Add(-base.Window), now)
	if err == nil {
		_, err = pgx.ForEachRow(rows, []any{&id.Namespace, &id.ID, &at, &ok, &n}, func() error {
			if at == nil {
				out.successes[id] = n
				return nil
			}
			out.samples[id] = append(out.samples[id], domain.AttemptSample{At: *at, OK: ok})
			return nil
		})
	}
	return out, err
}

// recentStats are an agent's attempts and successes of the last minutes.
type recentStats struct{ attempted, succeeded int }

// loadRecent reads recent outcomes from the health projection, which feed
// the router's failure term: an agent whose success collapses loses
// traffic.
func (s *Snapshot) loadRecent(ctx context.Context, now time.Time) (map[domain.AgentKey]recentStats, error) {
	// One read as far back as the longest namespace window; each
	// namespace then counts its own window (its routing policy's).
	s.mu.RLock()
	policies := s.policies
	s.mu.RUnlock()
	longest := defaultFailureWindow
	for _, p := range policies {
		longest = max(longest, p.FailureWindow())
	}
	minute := now.Truncate(time.Minute)
	recents := map[domain.AgentKey]recentStats{}
	var id domain.AgentKey
	var bucket time.Time
	var attempted, succeeded int
	rows, err := s.r.pool.Query(ctx, qSnapshotRecentStats, now, int(longest.Seconds()))
	if err == nil {
		_, err = pgx.ForEachRow(rows, []any{&id.Namespace, &id.ID, &bucket, &attempted, &succeeded}, func() error {
			window := defaultFailureWindow
			if p, ok := policies[id.Namespace]; ok {
				window = p.FailureWindow()
			}
			if bucket.Before(minute.Add(-window)) {
				return nil
			}
			rc := recents[id]
			rc.attempted, rc.succeeded = rc.attempted+attempted, rc.succeeded+succeeded
			recents[id] = rc
			return nil
		})
	}
	return recents, err
}

// defaultFailureWindow is how far back the failure term looks for a
// namespace without a routing policy of its own.
const defaultFailureWindow = 5 * time.Minute

// loadInFlight counts the jobs each agent holds delivered.
func (s *Snapshot) loadInFlight(ctx context.Context) (map[domain.AgentKey]int, error) {
	return slotsHeld(ctx, s.r.pool)
}

// slotsHeld counts the attempts holding a slot of each agent.
func slotsHeld(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) (map[domain.AgentKey]int, error) {
	inFlight := map[domain.AgentKey]int{}
	var id domain.AgentKey
	var n int
	rows, err := q.Query(ctx, qSnapshotInFlight)
	if err == nil {
		_, err = pgx.ForEachRow(rows, []any{&id.Namespace, &id.ID, &n}, func() error {
			inFlight[id] = n
			return nil
		})
	}
	return inFlight, err
}

// routeView judges every agent's breaker and builds the router's index.
// An agent's load is the service's own count of the attempts it holds
// (its slots); the in_flight a heartbeat reports shows beside it, never
// in its place. The attempts it holds are pending, not failures: the
// failure term counts only the recent attempts that settled.
func (s *Snapshot) routeView(now time.Time, agents map[domain.AgentKey]*Agent, tried attempts,
	recents map[domain.AgentKey]recentStats, inFlight map[domain.AgentKey]int) (map[domain.AgentKey]domain.BreakerStatus, *domain.RouteIndex) {
	breakers := make(map[domain.AgentKey]domain.BreakerStatus, len(agents))
	view := make([]domain.RouteAgent, 0, len(agents))
	for id, a := range agents {
		b := tried.breaker(id, now, s.breakerConfig(a.Namespace))
		breakers[id] = b
		n := inFlight[id]
		// The state is the sweep's: it writes lease changes every
		// SweepInterval and may hold them back in self-preservation.
		state := a.State
		failureRate, attempts := b.ErrorRate, b.Attempts
		if rc, ok := recents[id]; ok {
			if settled := rc.attempted - n; settled > 0 {
				failureRate, attempts = max(0, 1-float64(rc.succeeded)/float64(settled)), settled
			}
		}
		view = append(view, domain.RouteAgent{
			ID: id.ID, Namespace: a.Namespace, Capabilities: a.Capabilities, Aliases: a.Aliases,
			Protocol: a.Protocol, ProtocolVersion: a.ProtocolVersion, Version: a.Version, Weight: a.Weight, MaxConcurrent: a.MaxConcurrent,
			InFlight: n, Queued: a.ReportedQueueLength, RolloutPercent: a.RolloutPercent, Context: a.Context, State: state,
			Breaker: b.State, FailureRate: failureRate, RecentAttempts: attempts,
			FlapPenalty: domain.FlapPenalty(a.RecentRestarts, a.RegisteredAt, now), PausedUntil: pausedUntil(a),
		})
	}
	return breakers, domain.NewRouteIndex(view)
}

// Agent returns a copy of the snapshot's agent k, or nil.
func (s *Snapshot) Agent(k domain.AgentKey) *Agent {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return copyOf(s.agents[k])
}

// byToken returns a copy of the agent whose current or previous token has
// hash h, or nil.
func (s *Snapshot) byToken(h []byte) *Agent {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return copyOf(s.byTokens[string(h)])
}

func copyOf(a *Agent) *Agent {
	if a == nil {
		return nil
	}
	c := *a
	return &c
}

// Breaker returns an agent's breaker as of the last refresh.
func (s *Snapshot) Breaker(id domain.AgentKey) domain.BreakerStatus {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if b, ok := s.breakers[id]; ok {
		return b
	}
	return domain.BreakerStatus{State: domain.BreakerClosed}
}

// InFlight returns how many jobs an agent holds, as of the last refresh.
func (s *Snapshot) InFlight(id domain.AgentKey) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.inFlight[id]
}

// LoadedAt is when the snapshot was last refreshed.
func (s *Snapshot) LoadedAt() time.Time {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.loadedAt
}

// Route ranks the agents for req with the registry's scoring; every term of
// every candidate is in the result.
func (s *Snapshot) Route(req domain.RouteRequest) domain.RouteResult {
	if req.Now.IsZero() {
		req.Now = s.r.now()
	}
	s.mu.RLock()
	ix := s.index
	cfg, version := s.r.cfg.Route, 0
	if p, ok := s.policies[req.Namespace]; ok {
		cfg, version = p.Route(), p.Version
	}
	s.mu.RUnlock()
	res := ix.Route(req, cfg, rand.IntN)
	res.PolicyVersion = version
	return res
}

// breakerConfig is the breaker configuration of namespace ns.
func (s *Snapshot) breakerConfig(ns string) domain.BreakerConfig {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if p, ok := s.policies[ns]; ok {
		return p.Breaker()
	}
	return s.r.cfg.Breaker
}

// Skill is a capability that healthy agents of a namespace offer, with
// their aliases.
type Skill struct {
	Capability string
	Aliases    []string
	Agents     int
}

// Skills lists the capabilities of a namespace's HEALTHY agents, sorted.
func (s *Snapshot) Skills(namespace string) []Skill {
	s.mu.RLock()
	byCap := map[string]*Skill{}
	for _, a := range s.agents {
		if a.Namespace != namespace || a.State != domain.AgentHealthy || a.Deregistered {
			continue
		}
		for _, c := range a.Capabilities {
			sk := byCap[c]
			if sk == nil {
				sk = &Skill{Capability: c}
				byCap[c] = sk
			}
			sk.Agents++
			for _, al := range a.Aliases {
				if !slices.Contains(sk.Aliases, al) {
					sk.Aliases = append(sk.Aliases, al)
				}
			}
		}
	}
	s.mu.RUnlock()
	out := make([]Skill, 0, len(byCap))
	for _, sk := range byCap {
		slices.Sort(sk.Aliases)
		out = append(out, *sk)
	}
	slices.SortFunc(out, func(a, b Skill) int { return strings.Compare(a.Capability, b.Capability) })
	return out
}

// pausedUntil is when a's pause (a 429 or 503 with Retry-After) ends;
// zero when it has none.
func pausedUntil(a *Agent) time.Time {
	if a.PausedUntil == nil {
		return time.Time{}
	}
	return *a.PausedUntil
}

// Serving answers the capabilities of namespace's agents that are in
// service or coming to it (not OFFLINE, DOWN or deregistered): what the
// MCP face lists as tools.
func (s *Snapshot) Serving(namespace string) map[string]bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string]bool{}
	for _, a := range s.agents {
		if a.Namespace != namespace || a.Deregistered || a.State == domain.AgentOffline || a.State == domain.AgentDown {
			continue
		}
		for _, c := range a.Capabilities {
			out[c] = true
		}
	}
	return out
}
