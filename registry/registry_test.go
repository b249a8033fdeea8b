package registry

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/pgtest"
)

// key names an agent of the default namespace.
func key(id string) domain.AgentKey {
	return domain.AgentKey{Namespace: domain.DefaultNamespace, ID: id}
}

// clock is a settable clock for the registry.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type bundle struct {
	r      *Registry
	clock  *clock
	ctx    context.Context
	client *river.Client[pgx.Tx]
}

// probeArgs are riverwork.ProbeArgs (which imports this package).
type probeArgs struct {
	Namespace  string `json:"namespace" river:"unique"`
	AgentID    string `json:"agent_id" river:"unique"`
	InstanceID string `json:"instance_id" river:"unique"`
}

func (probeArgs) Kind() string { return "agent_probe" }

// riverProbes queues probes in River as riverwork.Probes does.
type riverProbes struct{ c *river.Client[pgx.Tx] }

func (p riverProbes) EnqueueProbesTx(ctx context.Context, tx pgx.Tx, list []Probe) (int, error) {
	params := make([]river.InsertManyParams, len(list))
	for i, x := range list {
		params[i] = river.InsertManyParams{Args: probeArgs{Namespace: x.Agent.Namespace, AgentID: x.Agent.ID, InstanceID: x.InstanceID},
			InsertOpts: &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true, ByPeriod: x.Every}}}
	}
	res, err := p.c.InsertManyTx(ctx, tx, params)
	n := 0
	for _, x := range res {
		if !x.UniqueSkippedAsDuplicate {
			n++
		}
	}
	return n, err
}

func setup(t *testing.T) *bundle {
	t.Helper()
	pool := pgtest.NewPool(t)
	store := eventstore.New(pool)
	r := New(pool, store, slog.New(slog.NewTextHandler(io.Discard, nil)), Config{})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{}) // insert-only
	require.NoError(t, err)
	r.SetProbes(riverProbes{client})
	c := &clock{t: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	r.now = c.now
	return &bundle{r: r, clock: c, ctx: context.Background(), client: client}
}

func (b *bundle) register(t *testing.T, id string, ttl int, endpoint string) (*Agent, string) {
	t.Helper()
	a, token, err := b.r.Register(b.ctx, domain.AgentRegistration{
		AgentID: id, Capabilities: []string{"doc:parse"}, Endpoint: endpoint, TTLSeconds: ttl, RolloutPercent: 100,
	}, domain.Metadata{Actor: "test"})
	require.NoError(t, err)
	return a, token
}

func (b *bundle) state(t *testing.T, id string) domain.AgentState {
	t.Helper()
	a, err := b.r.load(b.ctx, b.r.pool, key(id), false)
	require.NoError(t, err)
	return a.State
}

func (b *bundle) events(t *testing.T, stream string) []domain.EventType {
	t.Helper()
	recs, err := b.r.store.ReadStream(b.ctx, nil, stream)
	require.NoError(t, err)
	var out []domain.EventType
	for _, r := range recs {
		out = append(out, r.Type)
	}
	return out
}

func (b *bundle) prove(t *testing.T, id string) {
	t.Helper()
	a, err := b.r.load(b.ctx, b.r.pool, key(id), false)
	require.NoError(t, err)
	_, err = b.r.signal(b.ctx, key(id), a.InstanceID, domain.SignalProbeSucceeded, "test", domain.Metadata{})
	require.NoError(t, err)
}

// queuedProbes counts the probes of agent id waiting in River.
func (b *bundle) queuedProbes(t *testing.T, id string) int {
	t.Helper()
	res, err := b.client.JobList(b.ctx, river.NewJobListParams().
		Kinds(probeArgs{}.Kind()).States(rivertype.JobStateAvailable).First(10000))
	require.NoError(t, err)
	n := 0
	for _, j := range res.Jobs {
		var args probeArgs
		require.NoError(t, json.Unmarshal(j.EncodedArgs, &args))
		if args.AgentID == id {
			n++
		}
	}
	return n
}

func (b *bundle) sweep(t *testing.T) SweepReport {
	t.Helper()
	rep, err := b.r.Sweep(b.ctx)
	require.NoError(t, err)
	return rep
}

func TestLeaseLifecycleWithSweep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, token := b.register(t, "a1", 10, "http://127.0.0.1:1/")
	require.Equal(t, domain.AgentProbing, b.state(t, "a1"))
	b.prove(t, "a1")
	require.Equal(t, domain.AgentHealthy, b.state(t, "a1"))

	b.clock.advance(4 * time.Second)
	b.sweep(t)
	require.Equal(t, domain.AgentHealthy, b.state(t, "a1"), "within half the TTL")

	b.clock.advance(2 * time.Second) // 6 s > TTL/2
	b.sweep(t)
	require.Equal(t, domain.AgentSuspect, b.state(t, "a1"))

	_, err := b.r.Heartbeat(b.ctx, "a1", token, nil, nil, domain.Metadata{})
	require.NoError(t, err)
	b.sweep(t) // flushes the buffered heartbeat first
	require.Equal(t, domain.AgentHealthy, b.state(t, "a1"))

	b.clock.advance(11 * time.Second)
	rep := b.sweep(t)
	require.Equal(t, domain.AgentDown, b.state(t, "a1"))
	require.Empty(t, rep.SelfPreservation, "a lone agent lapsing is just that agent")

	// Back from the dead: it must prove itself again.
	_, err = b.r.Heartbeat(b.ctx, "a1", token, nil, nil, domain.Metadata{})
	require.NoError(t, err)
	b.sweep(t)
	require.Equal(t, domain.AgentProbing, b.state(t, "a1"))
	b.sweep(t)
	probes := b.queuedProbes(t, "a1")
	// The registration's probe, and at most one per ProbeEvery period since
	// (the two sweeps are normally in the same period).
	require.GreaterOrEqual(t, probes, 1)
	require.LessOrEqual(t, probes, 3)

	require.Equal(t, []domain.EventType{
		domain.EventAgentRegistered, domain.EventAgentStateChanged, // → PROBING
		domain.EventAgentStateChanged, // → HEALTHY (probe)
		domain.EventAgentStateChanged, // → SUSPECT
		domain.EventAgentStateChanged, // → HEALTHY
		domain.EventAgentStateChanged, // → DOWN
		domain.EventAgentStateChanged, // → PROBING
	}, b.events(t, domain.AgentStream(key("a1"))))
}

func TestSelfPreservation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tokens := map[string]string{}
	for _, id := range []string{"s1", "s2", "s3", "s4"} {
		_, tokens[id] = b.register(t, id, 10, "http://127.0.0.1:1/")
		b.prove(t, id)
	}
	b.clock.advance(11 * time.Second)
	_, err := b.r.Heartbeat(b.ctx, "s1", tokens["s1"], nil, nil, domain.Metadata{})
	require.NoError(t, err)

	rep := b.sweep(t)
	require.Equal(t, []string{"default"}, rep.SelfPreservation)
	for _, id := range []string{"s2", "s3", "s4"} {
		require.NotEqual(t, domain.AgentDown, b.state(t, id), "%s must not be marked DOWN", id)
	}
	b.sweep(t)
	require.Equal(t, []domain.EventType{domain.EventSelfPreservation}, b.events(t, domain.RegistryStream("default")),
		"recorded once per episode, not once per sweep")

	// The others come back: the episode ends.
	for _, id := range []string{"s2", "s3", "s4"} {
		_, err := b.r.Heartbeat(b.ctx, id, tokens[id], nil, nil, domain.Metadata{})
		require.NoError(t, err)
	}
	b.clock.advance(6 * time.Second) // s1..s4 late: SUSPECT, a change without lapsing
	require.Empty(t, b.sweep(t).SelfPreservation)
	require.Equal(t, []domain.EventType{domain.EventSelfPreservation, domain.EventSelfPreservationEnded},
		b.events(t, domain.RegistryStream("default")))
}

// An episode is bounded: past Config.SelfPreservationBound (5 min) the
// lapsed agents go DOWN, the end is recorded with its reason, and the
// warning is logged once at the start and once at the end, not each sweep.
func TestSelfPreservationIsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var logs syncLog
	b.r.logger = slog.New(slog.NewTextHandler(&logs, nil))
	tokens := map[string]string{}
	for _, id := range []string{"s1", "s2", "s3", "s4"} {
		_, tokens[id] = b.register(t, id, 10, "http://127.0.0.1:1/")
		b.prove(t, id)
	}
	keepAlive := func() {
		_, err := b.r.Heartbeat(b.ctx, "s1", tokens["s1"], nil, nil, domain.Metadata{})
		require.NoError(t, err)
	}
	b.clock.advance(11 * time.Second)
	keepAlive()
	require.Equal(t, []string{"default"}, b.sweep(t).SelfPreservation)
	open, err := b.r.OpenPreservation(b.ctx, "default")
	require.NoError(t, err)
	require.NotNil(t, open)
	require.Equal(t, b.clock.now(), open.Since)
	require.Equal(t, b.clock.now().Add(5*time.Minute), open.Until)
	require.Equal(t, 3, open.Lapsing)

	for range 20 { // 20 sweeps within the bound: still held, nothing more logged
		b.clock.advance(14 * time.Second)
		keepAlive()
		require.Equal(t, []string{"default"}, b.sweep(t).SelfPreservation)
	}
	require.NotEqual(t, domain.AgentDown, b.state(t, "s2"), "held back inside the bound")

	b.clock.advance(21 * time.Second) // 301 s since the start
	keepAlive()
	require.Empty(t, b.sweep(t).SelfPreservation)
	for _, id := range []string{"s2", "s3", "s4"} {
		require.Equal(t, domain.AgentDown, b.state(t, id), "%s is judged as any lapsed agent past the bound", id)
	}
	require.Equal(t, domain.AgentHealthy, b.state(t, "s1"))
	require.Equal(t, []domain.EventType{domain.EventSelfPreservation, domain.EventSelfPreservationEnded},
		b.events(t, domain.RegistryStream("default")))
	recs, err := b.r.store.ReadStream(b.ctx, nil, domain.RegistryStream("default"))
	require.NoError(t, err)
	require.JSONEq(t, `{"namespace":"default","reason":"bound","duration_ms":301000}`, string(recs[1].Data))
	open, err = b.r.OpenPreservation(b.ctx, "default")
	require.NoError(t, err)
	require.Nil(t, open)
	require.Equal(t, 1, strings.Count(logs.String(), "not marking them DOWN"), logs.String())
	require.Equal(t, 1, strings.Count(logs.String(), "self-preservation ended"), logs.String())
}

// syncLog is a log sink safe for the registry's goroutines.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestProbeAdmitsOnlyHealthyInstance(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var healthy atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "1", r.Header.Get("X-Reach-Probe"))
		if !healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()

	a, _ := b.register(t, "p1", 10, srv.URL)
	require.NoError(t, b.r.snap.Refresh(b.ctx))
	res := b.r.snap.Route(domain.RouteRequest{Namespace: "default", Capability: "doc:parse"})
	require.Empty(t, res.Chosen, "PROBING gets no traffic")
	require.Equal(t, domain.RouteRejectState, res.Rejected[0].Reason)

	probe := func() error { return b.r.ProbeInstance(b.ctx, key("p1"), a.InstanceID, "river:1") }
	require.NoError(t, probe(), "a failing health URL fails the probe: recorded, its River job completes")
	require.Equal(t, domain.AgentProbing, b.state(t, "p1"))

	healthy.Store(true)
	require.NoError(t, probe())
	require.Equal(t, domain.AgentHealthy, b.state(t, "p1"))
	res = b.r.snap.Route(domain.RouteRequest{Namespace: "default", Capability: "doc:parse"})
	require.Equal(t, "p1", res.Chosen)

	// A stale probe of the old instance changes nothing after a restart.
	b.register(t, "p1", 10, srv.URL)
	require.NoError(t, probe())
	require.Equal(t, domain.AgentProbing, b.state(t, "p1"))
}

func TestHeartbeatAuthAndOffline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, token := b.register(t, "h1", 10, "http://127.0.0.1:1/")
	// The token is the agent's identity: one no agent holds means
	// "register again", whatever the id.
	_, err := b.r.Heartbeat(b.ctx, "h1", "art_wrong", nil, nil, domain.Metadata{})
	require.ErrorIs(t, err, domain.ErrNotFound)
	_, err = b.r.Heartbeat(b.ctx, "nobody", "art_wrong", nil, nil, domain.Metadata{})
	require.ErrorIs(t, err, domain.ErrNotFound)
	_, err = b.r.Heartbeat(b.ctx, "nobody", token, nil, nil, domain.Metadata{})
	require.ErrorIs(t, err, ErrUnauthenticated, "h1's token does not speak for another id")
	_, err = b.r.Heartbeat(b.ctx, "h1", "", nil, nil, domain.Metadata{})
	require.ErrorIs(t, err, ErrUnauthenticated)

	// A re-registration replaces the token: the old instance is told so,
	// not asked to register again.
	_, token2 := b.register(t, "h1", 10, "http://127.0.0.1:1/")
	_, err = b.r.Heartbeat(b.ctx, "h1", token, nil, nil, domain.Metadata{})
	require.ErrorIs(t, err, ErrUnauthenticated)

	// A context change is an event the router honours at once.
	b.prove(t, "h1")
	_, err = b.r.Heartbeat(b.ctx, "h1", token2, nil, map[string]any{"accepting": false}, domain.Metadata{})
	require.NoError(t, err)
	res := b.r.snap.Route(domain.RouteRequest{Namespace: "default", Capability: "doc:parse"})
	require.Empty(t, res.Chosen)
	require.Equal(t, domain.RouteRejectNotAccepting, res.Rejected[0].Reason)

	_, err = b.r.Offline(b.ctx, "h1", token2, "bye", domain.Metadata{})
	require.NoError(t, err)
	require.Equal(t, domain.AgentOffline, b.state(t, "h1"))
	_, err = b.r.Heartbeat(b.ctx, "h1", token2, nil, nil, domain.Metadata{})
	require.ErrorIs(t, err, ErrGone)

	require.NoError(t, b.r.Deregister(b.ctx, key("h1"), domain.Metadata{}))
	_, err = b.r.Get(b.ctx, key("h1"))
	require.ErrorIs(t, err, domain.ErrNotFound)
	require.ErrorIs(t, b.r.Deregister(b.ctx, key("h1"), domain.Metadata{}), domain.ErrNotFound)
}

func TestBreakerFromAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.register(t, "b1", 10, "http://127.0.0.1:1/")
	b.prove(t, "b1")
	now := b.clock.now()
	batch := &pgx.Batch{}
	for i := range 12 {
		batch.Queue(`INSERT INTO agent_attempts (namespace, agent_id, at, ok) VALUES ('default', 'b1', $1, $2)`, now.Add(time.Duration(i-20)*time.Second), i%2 == 0)
	}
	require.NoError(t, b.r.pool.SendBatch(b.ctx, batch).Close())
	require.NoError(t, b.r.snap.Refresh(b.ctx))
	require.Equal(t, domain.BreakerOpen, b.r.snap.Breaker(key("b1")).State)

	// Samples are a working set: an hour later they are pruned.
	_, err := b.r.pool.Exec(b.ctx, `INSERT INTO agent_attempts (namespace, agent_id, at, ok) VALUES ('default', 'b1', $1, false)`, now.Add(-2*time.Hour))
	require.NoError(t, err)
	require.NoError(t, b.r.PruneAttempts(b.ctx))
	var n int
	require.NoError(t, b.r.pool.QueryRow(b.ctx, `SELECT count(*) FROM agent_attempts`).Scan(&n))
	require.Equal(t, 12, n, "only the old sample went")
	res := b.r.snap.Route(domain.RouteRequest{Namespace: "default", Capability: "doc:parse"})
	require.Empty(t, res.Chosen)
	require.Equal(t, domain.RouteRejectBreakerOpen, res.Rejected[0].Reason)
}

// TestBreakerOfAgentsThatNeverFailed: an agent with no failure in the
// breaker's horizon is closed, and its attempts are those of its
// namespace's own window, up to now; an agent that failed is replayed
// sample by sample, as before.
func TestBreakerOfAgentsThatNeverFailed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := domain.DefaultRoutingPolicy()
	p.BreakerWindowS = 20 // the namespace "short"; "default" keeps 60 s
	_, err := b.r.SetRoutingPolicy(b.ctx, "short", p, domain.Metadata{})
	require.NoError(t, err)
	for _, a := range []domain.AgentKey{key("clean"), {Namespace: "short", ID: "clean"}, key("failing")} {
		_, _, err := b.r.Register(b.ctx, domain.AgentRegistration{AgentID: a.ID, Namespace: a.Namespace, Capabilities: []string{"doc:parse"},
			Endpoint: "http://127.0.0.1:1/", TTLSeconds: 60, RolloutPercent: 100}, domain.Metadata{Actor: "test"})
		require.NoError(t, err)
	}
	now := b.clock.now()
	batch := &pgx.Batch{}
	sample := func(ns, agent string, secondsAgo int, ok bool) {
		batch.Queue(`INSERT INTO agent_attempts (namespace, agent_id, at, ok) VALUES ($1, $2, $3, $4)`,
			ns, agent, now.Add(-time.Duration(secondsAgo)*time.Second), ok)
	}
	for _, ago := range []int{80, 70, 50, 30, 10, 1, 0, -5} { // in the horizon, before and in the window, now, past now
		sample("default", "clean", ago, true)
		sample("short", "clean", ago, true)
	}
	for i := range 12 {
		sample("default", "failing", 20-i, i%2 == 0)
	}
	require.NoError(t, b.r.pool.SendBatch(b.ctx, batch).Close())
	require.NoError(t, b.r.snap.Refresh(b.ctx))

	require.Equal(t, domain.BreakerStatus{State: domain.BreakerClosed, Attempts: 5}, b.r.snap.Breaker(key("clean")), "50, 30, 10, 1 and 0 s ago")
	require.Equal(t, domain.BreakerStatus{State: domain.BreakerClosed, Attempts: 3},
		b.r.snap.Breaker(domain.AgentKey{Namespace: "short", ID: "clean"}), "10, 1 and 0 s ago")
	failing := b.r.snap.Breaker(key("failing"))
	require.Equal(t, domain.BreakerOpen, failing.State)
	require.Equal(t, 12, failing.Attempts)
	require.InDelta(t, 0.5, failing.ErrorRate, 1e-9)
}

// TestTokenRotationOverlap: inside the overlap both tokens work and sign;
// after it only the new one does.
func TestTokenRotationOverlap(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, old := b.register(t, "rot-1", 10, "http://127.0.0.1:1/")
	fresh, until, err := b.r.RotateToken(b.ctx, key("rot-1"), "", domain.Metadata{Actor: "test"})
	require.NoError(t, err)
	require.NotEqual(t, old, fresh)
	require.Equal(t, b.clock.now().Add(24*time.Hour), until)

	for _, tok := range []string{old, fresh} {
		_, err := b.r.Authenticate(b.ctx, "rot-1", tok)
		require.NoError(t, err)
		a, err := b.r.AgentByToken(b.ctx, tok)
		require.NoError(t, err)
		require.Equal(t, "rot-1", a.AgentID)
	}
	a, err := b.r.load(b.ctx, b.r.pool, key("rot-1"), false)
	require.NoError(t, err)
	require.Len(t, a.SigningKeys(b.clock.now()), 2, "deliveries carry a signature for each token")

	b.clock.advance(24*time.Hour - time.Second)
	_, err = b.r.Authenticate(b.ctx, "rot-1", old)
	require.NoError(t, err, "still inside the overlap")

	b.clock.advance(2 * time.Second)
	_, err = b.r.Authenticate(b.ctx, "rot-1", old)
	require.ErrorIs(t, err, ErrUnauthenticated)
	_, err = b.r.AgentByToken(b.ctx, old)
	require.ErrorIs(t, err, ErrUnauthenticated)
	_, err = b.r.Authenticate(b.ctx, "rot-1", fresh)
	require.NoError(t, err)
	require.Len(t, a.SigningKeys(b.clock.now()), 1)
	require.Contains(t, b.events(t, domain.AgentStream(key("rot-1"))), domain.EventAgentTokenRotated)
}

// TestTokenRotationOnlyCurrent: a token in its overlap still authenticates
// but cannot rotate; the current one can, and nothing changes on refusal.
func TestTokenRotationOnlyCurrent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, t0 := b.register(t, "rot-2", 10, "http://127.0.0.1:1/")
	t1, _, err := b.r.RotateToken(b.ctx, key("rot-2"), t0, domain.Metadata{Actor: "agent:rot-2"})
	require.NoError(t, err)
	before, err := b.r.load(b.ctx, b.r.pool, key("rot-2"), false)
	require.NoError(t, err)

	_, _, err = b.r.RotateToken(b.ctx, key("rot-2"), t0, domain.Metadata{Actor: "agent:rot-2"})
	require.ErrorIs(t, err, ErrUnauthenticated, "a rotated-out token mints nothing")
	after, err := b.r.load(b.ctx, b.r.pool, key("rot-2"), false)
	require.NoError(t, err)
	require.Equal(t, before.StreamVersion, after.StreamVersion, "no event appended")
	_, err = b.r.Authenticate(b.ctx, "rot-2", t1)
	require.NoError(t, err, "the real current token is not demoted")

	_, _, err = b.r.RotateToken(b.ctx, key("rot-2"), t1, domain.Metadata{Actor: "agent:rot-2"})
	require.NoError(t, err)
}

// TestRegistrationSSRFGuard: endpoints in denied networks are refused.
func TestRegistrationSSRFGuard(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, endpoint := range []string{"http://169.254.169.254/latest/meta-data", "http://[fd00:ec2::254]/", "http://[::ffff:169.254.169.254]/",
		"http://0.0.0.0:80/", "http://224.0.0.1/", "http://0xa9fea9fe/"} {
		_, _, err := b.r.Register(b.ctx, domain.AgentRegistration{AgentID: "ssrf", Capabilities: []string{"x"},
			Endpoint: endpoint, RolloutPercent: 100}, domain.Metadata{})
		var fe *domain.FieldError
		require.ErrorAs(t, err, &fe, endpoint)
		require.Equal(t, "endpoint", fe.Field)
	}
	_, _, err := b.r.Register(b.ctx, domain.AgentRegistration{AgentID: "ssrf", Capabilities: []string{"x"},
		Endpoint: "http://127.0.0.1:9/", HealthURL: "http://169.254.169.254/", RolloutPercent: 100}, domain.Metadata{})
	var fe *domain.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "health_url", fe.Field)
	_, err = b.r.Get(b.ctx, key("ssrf"))
	require.ErrorIs(t, err, domain.ErrNotFound, "nothing was written")
}

// TestProbeRedirectsBounded: a health URL that redirects for ever is
// followed at most MaxRedirects times, and the probe fails.
func TestProbeRedirectsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, "/again", http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	err := b.r.probe(b.ctx, &Agent{AgentRegistration: domain.AgentRegistration{Endpoint: srv.URL}})
	require.ErrorContains(t, err, "redirects")
	require.Equal(t, int32(MaxRedirects+1), hits.Load(), "the first request and %d redirects", MaxRedirects)
}

// TestAgentQueriesReturnAgentColumns: every query scanAgent reads returns
// the same columns, of the same types, in the same order, so the copies of
// the column list in registry.sql cannot drift apart.
func TestAgentQueriesReturnAgentColumns(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	type column struct {
		Name string
		OID  uint32
	}
	columns := func(query string) []column {
		sd, err := conn.Conn().Prepare(ctx, "", query)
		require.NoError(t, err)
		out := make([]column, 0, len(sd.Fields))
		for _, f := range sd.Fields {
			out = append(out, column{f.Name, f.DataTypeOID})
		}
		return out
	}
	want := columns(qLoadAgent)
	require.Len(t, want, 39)
	for name, q := range map[string]string{
		"LoadAgentForUpdate": qLoadAgentForUpdate, "ListAgents": qListAgents, "AgentByToken": qAgentByToken,
		"LockLiveAgents": qLockLiveAgents, "SnapshotAgents": qSnapshotAgents,
	} {
		require.Equal(t, want, columns(q), name)
	}
}

// A slot handed to a woken waiter (its timer queued, naming the agent) is
// taken in the snapshot as the unit of work counts it: a newcomer sees
// the agent full and waits, rather than trying a slot it would be
// refused.
func TestSnapshotCountsSlotsBeingHandedOver(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, _, err := b.r.Register(b.ctx, domain.AgentRegistration{AgentID: "two", Capabilities: []string{"doc:parse"},
		Endpoint: "http://127.0.0.1:1/", TTLSeconds: 30, RolloutPercent: 100, MaxConcurrent: 2}, domain.Metadata{Actor: "test"})
	require.NoError(t, err)
	b.prove(t, "two")
	_, err = b.r.pool.Exec(b.ctx, `INSERT INTO agent_slots (job_id, namespace, agent_id, attempt) VALUES (gen_random_uuid(), 'default', 'two', 1)`)
	require.NoError(t, err)
	route := func() domain.RouteResult {
		t.Helper()
		require.NoError(t, b.r.Snapshot().Refresh(b.ctx))
		return b.r.Snapshot().Route(domain.RouteRequest{JobID: "j", Namespace: domain.DefaultNamespace, Capability: "doc:parse"})
	}
	require.Equal(t, "two", route().Chosen, "one of two slots held: one free")

	_, err = b.r.pool.Exec(b.ctx, `INSERT INTO job_timers (job_id, attempt, agent_id, phase, due_at, namespace, capability, rank_at)
		VALUES (gen_random_uuid(), 1, 'two', 'queued', now() + interval '10 seconds', 'default', 'doc:parse', now())`)
	require.NoError(t, err)
	r := route()
	require.Empty(t, r.Chosen, "the other is being handed to a woken waiter")
	require.True(t, r.AllAtCapacity)
}

// A failed probe is recorded on the agent (its error, its time) and
// answers no error (its River job completes); a probe that passes clears
// the error.
func TestProbeOutcomeIsRecorded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ok atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !ok.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	a, _ := b.register(t, "probed", 30, srv.URL+"/")
	require.NoError(t, b.r.ProbeInstance(b.ctx, a.Key(), a.InstanceID, "test"), "a failed probe is a finished probe")
	got, err := b.r.Get(b.ctx, a.Key())
	require.NoError(t, err)
	require.Equal(t, domain.AgentProbing, got.State)
	require.Contains(t, got.LastProbeError, "answered 503")
	require.NotNil(t, got.LastProbeAt)

	ok.Store(true)
	require.NoError(t, b.r.ProbeInstance(b.ctx, a.Key(), a.InstanceID, "test"))
	got, err = b.r.Get(b.ctx, a.Key())
	require.NoError(t, err)
	require.Equal(t, domain.AgentHealthy, got.State)
	require.Empty(t, got.LastProbeError)
}

// TestHeartbeatShownWhileItsFlushWrites: an agent read while a flush has
// taken its heartbeat and not yet written it shows that heartbeat's
// figures, as a read before the flush and a read after it do (the table's
// row, the figures kept while later heartbeats report none).
func TestHeartbeatShownWhileItsFlushWrites(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, token := b.register(t, "f1", 60, "http://127.0.0.1:1/")
	beat := func(report domain.HealthReport) {
		t.Helper()
		b.clock.advance(time.Second)
		_, err := b.r.HeartbeatReport(b.ctx, "f1", token, report, nil, domain.Metadata{})
		require.NoError(t, err)
	}
	figures := func() (queue, inFlight int) {
		t.Helper()
		a, err := b.r.Get(b.ctx, key("f1"))
		require.NoError(t, err)
		return a.ReportedQueueLength, a.ReportedInFlight
	}
	two, one := 2, 1
	beat(domain.HealthReport{QueueLength: &two, InFlight: &one})
	queue, inFlight := figures()
	require.Equal(t, []int{2, 1}, []int{queue, inFlight}, "pending, before any flush")

	held := false
	b.r.beforeFlush = func() { // taken from pending, not yet in the table
		held = true
		queue, inFlight = figures()
		require.Equal(t, []int{2, 1}, []int{queue, inFlight}, "while its flush writes it")
		beat(domain.HealthReport{}) // a later heartbeat reports nothing
		queue, inFlight = figures()
		require.Equal(t, []int{2, 1}, []int{queue, inFlight}, "nor does a later one hide it")
	}
	require.NoError(t, b.r.flushHeartbeats(b.ctx))
	require.True(t, held)
	b.r.beforeFlush = func() {}
	queue, inFlight = figures()
	require.Equal(t, []int{2, 1}, []int{queue, inFlight}, "written")
	require.NoError(t, b.r.flushHeartbeats(b.ctx))
	queue, inFlight = figures()
	require.Equal(t, []int{2, 1}, []int{queue, inFlight}, "kept by the heartbeat that reported nothing")
	require.Empty(t, b.r.heartbeats.flushing, "nothing left shown from a flush")
	require.Empty(t, b.r.heartbeats.pending)
}
