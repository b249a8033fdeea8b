package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	mcpclient "github.com/agentreach/agentreach/mcp/client"

	"github.com/agentreach/agentreach/a2a/adapter"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	a2aclient "github.com/agentreach/agentreach/a2a/client"
	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/telemetry"
	"github.com/agentreach/agentreach/jobs/callback"
	"github.com/agentreach/agentreach/jobs/dispatch"
	"github.com/agentreach/agentreach/jobs/inbox"
	"github.com/agentreach/agentreach/jobs/jobstore"
	"github.com/agentreach/agentreach/netguard"
	"github.com/agentreach/agentreach/registry"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qLockIdempotencyKeys = queries.Must("LockIdempotencyKeys")
	qIdempotencyKeysHeld = queries.Must("IdempotencyKeysHeld")
	qCountRootDescendant = queries.Must("CountRootDescendant")
	qLockOrderingKeys    = queries.Must("LockOrderingKeys")
	qOrderQueueLength    = queries.Must("OrderQueueLength")
	qOrderAhead          = queries.Must("OrderAhead")
)

// Errors the service returns; callers match them with errors.Is.
var (
	// ErrConflict: the request contradicts the job's state or an earlier
	// request (a reused Idempotency-Key with another body, cancelling a
	// finished job, replaying one that is not dead-lettered).
	ErrConflict = jobstore.ErrConflict
	// ErrFanout: the job's root already has the most descendants allowed.
	ErrFanout error = &domain.KindError{Kind: domain.ErrInvalid, Code: "fanout_exceeded", Field: "parent_job_id", Message: "fan-out limit exceeded"}
	// ErrForbidden: an agent reported on a job attempt that is not its own
	// (the API names neither the job's agent nor the attempt).
	ErrForbidden error = &domain.KindError{Kind: domain.ErrForbidden, Message: "not this agent's job",
		Public: "this token does not belong to the agent of that attempt"}
)

// Config tunes delivery.
type Config struct {
	// MaxPayloadBytes bounds a job's payload (default 1 MiB).
	MaxPayloadBytes int
	// MaxFanout is how many descendants a root job may have (default 15).
	MaxFanout int
	// LostAfter is how long past an attempt's deadline a routed attempt
	// that never recorded an outcome (its dispatcher died) is declared lost
	// and retried, and how long a queued dispatch may run without routing
	// before it is presumed dead and enqueued again (default 10 s).
	LostAfter time.Duration
	// DeadlineSweepInterval is how often deadlines are checked (1 s).
	DeadlineSweepInterval time.Duration
	// RepairSweepInterval is how often missing River jobs are looked for (30 s).
	RepairSweepInterval time.Duration
	// RepairAfter is how long an open job must have been quiet before the
	// repair sweep looks at it (default 30 s).
	RepairAfter time.Duration
	// PublicURL is this service's base URL as agents reach it, for
	// result_url. Required.
	PublicURL string
	// CallbackSecret signs caller callbacks ("whsec_..."); empty means the
	// secret kept in the database, created on first use.
	CallbackSecret string
	// CallbackHold, when set, says why no callback may go now (nil: they
	// may): callback.Config.Hold.
	CallbackHold func(context.Context) error
	// ReadPool, when set, serves the job lists (a hot standby).
	ReadPool *pgxpool.Pool
	// CapacityWait is how long a job waits when every candidate agent is at
	// capacity before it is routed again, spending no attempt (250 ms).
	CapacityWait time.Duration
	// RouteWait is how long an attempt of a job that names no route_wait_ms
	// waits, spending nothing, for an agent to become routable (default
	// domain.DefaultRouteWait, 30 s).
	RouteWait time.Duration
	// Watermarks are the backpressure thresholds of every namespace's lane
	// (domain.Watermarks; defaults 10,000 high, 5,000 low, 50,000 limit).
	Watermarks domain.Watermarks
	// CallbackGrace is how long a callback job may run before the
	// watchdog presumes its process died and enqueues it again (default
	// 45 s; a callback POST times out after 15 s).
	CallbackGrace time.Duration
	// ApprovalPatterns are capability patterns ('*' for any run of
	// characters) whose jobs wait for an operator's approval in every
	// namespace, besides the per-namespace policy kept in the database.
	ApprovalPatterns []string
	// ApprovalTimeout is how long a job waits for approval before it is
	// rejected (default 1 h).
	ApprovalTimeout time.Duration
	// InputTimeout is how long a job waits for the caller's input when its
	// A2A agent asks for it (AWAITING_INPUT) before it is cancelled
	// (default 1 h).
	InputTimeout time.Duration
	// Guard decides which addresses deliveries and callbacks may reach
	// (SSRF): callback URLs are checked at submit and every connection at
	// connect time. Nil means netguard.DefaultPolicy.
	Guard *netguard.Policy
	// ClaimTimeout is how long an attempt waits in a pull agent's inbox
	// before it is routed again to another agent, spending no attempt
	// (default domain.DefaultClaimTimeout, 10 s).
	ClaimTimeout time.Duration
	// InlineWait bounds how long a delivery waits for an inline answer
	// (default 5 min). An attempt whose deadline is further away and whose
	// agent has not answered by then counts as delivered: the agent must
	// post its result to result_url before the deadline.
	InlineWait time.Duration
}

// RescueAfter is how long a River job may run before River rescues it
// (after a crash): above the longest inline wait.
func (c Config) RescueAfter() time.Duration { return c.withDefaults().InlineWait + time.Minute }

func (c Config) withDefaults() Config {
	if c.MaxPayloadBytes <= 0 {
		c.MaxPayloadBytes = domain.DefaultMaxPayloadBytes
	}
	if c.MaxFanout <= 0 {
		c.MaxFanout = domain.DefaultMaxFanout
	}
	if c.LostAfter <= 0 {
		c.LostAfter = 10 * time.Second
	}
	if c.DeadlineSweepInterval <= 0 {
		c.DeadlineSweepInterval = time.Second
	}
	if c.RepairSweepInterval <= 0 {
		c.RepairSweepInterval = 30 * time.Second
	}
	if c.RepairAfter <= 0 {
		c.RepairAfter = 30 * time.Second
	}
	if c.CapacityWait <= 0 {
		c.CapacityWait = 250 * time.Millisecond
	}
	if c.RouteWait == 0 {
		c.RouteWait = domain.DefaultRouteWait
	}
	c.Watermarks = c.Watermarks.WithDefaults()
	if c.Guard == nil {
		p := netguard.DefaultPolicy()
		c.Guard = &p
	}
	if c.ApprovalTimeout <= 0 {
		c.ApprovalTimeout = time.Hour
	}
	if c.InputTimeout <= 0 {
		c.InputTimeout = time.Hour
	}
	if c.CallbackGrace <= 0 {
		c.CallbackGrace = 45 * time.Second
	}
	if c.InlineWait <= 0 {
		c.InlineWait = 5 * time.Minute
	}
	if c.ClaimTimeout <= 0 {
		c.ClaimTimeout = domain.DefaultClaimTimeout
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	return c
}

// Service submits jobs and runs their delivery.
type Service struct {
	pool     *pgxpool.Pool
	store    *eventstore.Store
	registry *registry.Registry
	logger   *slog.Logger
	cfg      Config
	client   *river.Client[pgx.Tx]
	http     *http.Client
	a2a      *adapter.Adapter // the A2A side of the jobs
	// mcpClient calls MCP server agents (deliveries, and their tasks' polls).
	mcpClient mcpclient.Client
	now       func() time.Time
	pressure  pressure
	// pressureSeen are the lanes the pressure sweep has seen, so a lane
	// that empties is lowered too.
	pressureSeen map[jobstore.Lane]bool
	tracer       trace.Tracer
	metrics      instruments
	batcher      *batcher
	jobs         *jobstore.Store  // the unit of work: every change to a job
	callbacks    *callback.Sender // calls callers back
	inbox        *inbox.Inbox     // the pull agents' inboxes
	dispatcher   *dispatch.Dispatcher
	// waiters signals the deadline sweep that a commit woke an attempt
	// waiting for a slot (jobstore.WakeWaiters).
	waiters chan struct{}
	// onEnded is handed the fold of every job a shared write ended
	// (OnEnded).
	onEnded atomic.Pointer[func(*jobstore.Loaded)]
}

// OnEnded hands f a copy of the fold of every job a shared write of this
// process ended, once it committed (jobwait.Hub.Ended answers the
// requests waiting for it).
func (s *Service) OnEnded(f func(*jobstore.Loaded)) { s.onEnded.Store(&f) }

// NewService returns a Service. Call SetClient before use.
func NewService(pool *pgxpool.Pool, store *eventstore.Store, reg *registry.Registry, logger *slog.Logger, cfg Config) *Service {
	cfg = cfg.withDefaults()
	transport := &http.Transport{
		Proxy:               nil, // a proxy would take the connection past the guard
		DialContext:         cfg.Guard.DialContext(&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}),
		MaxIdleConns:        1000,
		MaxIdleConnsPerHost: 100,
		IdleConnTimeout:     90 * time.Second,
	}
	s := &Service{pool: pool, store: store, registry: reg, logger: logger, cfg: cfg.withDefaults(),
		http: &http.Client{Transport: transport, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // deliveries never follow redirects
		}},
		now: time.Now, pressureSeen: map[jobstore.Lane]bool{}, waiters: make(chan struct{}, 1)}
	s.jobs = jobstore.New(pool, store, riverQueue{s}, jobstore.Config{Reads: cfg.ReadPool, LostAfter: cfg.LostAfter, CallbackGrace: cfg.CallbackGrace,
		QueueLimit: cfg.Watermarks.Limit, AgentsChannel: registry.NotifyChannel, Woken: s.handOver,
		Route: func(ctx context.Context, woken []jobstore.Woken, loaded map[string]*jobstore.Loaded) []jobstore.Routed {
			return s.dispatcher.RouteWoken(ctx, woken, loaded)
		},
		Now: func() time.Time { return s.now() }, Finished: s.countFinished, Ended: func(l *jobstore.Loaded) {
			if f := s.onEnded.Load(); f != nil {
				(*f)(l)
			}
		}})
	s.inbox = inbox.New(pool, store, s.jobs, logger, inbox.Config{ClaimTimeout: cfg.ClaimTimeout, ResultURL: s.resultURL,
		Now: func() time.Time { return s.now() }, Jitter: s.jitter, Claimed: func(ctx context.Context) {
			s.metrics.deliveries.Add(ctx, 1, telemetry.WithAttrs(attribute.String("outcome", string(domain.ObservedAccepted)),
				attribute.String("reason", "claimed")))
		}, Waiters: func() {
			select {
			case s.waiters <- struct{}{}:
			default: // a wake is pending already
			}
		}})
	s.a2a = adapter.New(pool, store, s.jobs, reg, &a2aclient.Client{HTTP: s.http}, s,
		func(ctx context.Context, l *jobstore.Loaded, url string, body []byte, h http.Header) (int, error) {
			return s.callbacks.Post(ctx, l, url, body, h)
		}, logger, adapter.Config{PublicURL: func() string { return s.cfg.PublicURL }, Guard: cfg.Guard, MaxPayloadBytes: cfg.MaxPayloadBytes,
			Policy: s.attemptPolicy(), Now: func() time.Time { return s.now() }, Jitter: s.jitter})
	s.callbacks = callback.New(pool, store, s.jobs, s.http, s.a2a, logger, callback.Config{Secret: cfg.CallbackSecret,
		Now: func() time.Time { return s.now() }, Hold: cfg.CallbackHold})
	s.mcpClient = mcpclient.Client{HTTP: s.http, Version: "agent-reach"}
	s.dispatcher = dispatch.New(store, s.jobs, reg, s.inbox, s.callbacks,
		dispatch.Carriers{Push: dispatch.Push{HTTP: s.http, ResultURL: s.resultURL, Now: func() time.Time { return s.now() }}, A2A: s.a2a.Carrier(),
			MCP: dispatch.MCP{Client: s.mcpClient, Endpoint: reg.MCPEndpoint}},
		logger, dispatch.Config{InlineWait: cfg.InlineWait, RouteWait: cfg.RouteWait, CapacityWait: cfg.CapacityWait, LostAfter: cfg.LostAfter,
			HoldFor: pressureEvery, Policy: s.attemptPolicy(), Now: func() time.Time { return s.now() }, Jitter: s.jitter, HoldLow: s.holdLow, HeldLow: s.heldLow})
	s.initTelemetry()
	return s
}

// SetClient gives the service its River client (built after the service,
// because the client needs the service's workers).
func (s *Service) SetClient(c *river.Client[pgx.Tx]) { s.client = c }

// SetPublicURL sets the base URL agents post results to, once the
// listener's address is known.
func (s *Service) SetPublicURL(u string) {
	if s.cfg.PublicURL == "" {
		s.cfg.PublicURL = strings.TrimRight(u, "/")
	}
}

// Inbox returns the pull agents' inboxes: claims and releases, and what
// was cancelled of what they hold. Run it (Inbox.Run) beside the service.
func (s *Service) Inbox() *inbox.Inbox { return s.inbox }

// resultURL is where an agent posts the result of job id.
func (s *Service) resultURL(id string) string { return s.cfg.PublicURL + "/v1/jobs/" + id + "/result" }

// Callbacks returns the sender that calls callers back, and the secrets
// that sign their callbacks.
func (s *Service) Callbacks() *callback.Sender { return s.callbacks }

// Dispatcher returns the dispatch room: it makes attempts, run by River's
// dispatch worker and directly by the process that committed a submit.
func (s *Service) Dispatcher() *dispatch.Dispatcher { return s.dispatcher }

// Config returns the service's configuration, defaults filled in.
func (s *Service) Config() Config { return s.cfg }

// AddWorkers registers the delivery workers, and the sweeps' workers: the
// sweeps run in the sweep leader (Sweeps), but a sweep job an older
// release queued in River still runs.
func (s *Service) AddWorkers(workers *river.Workers) {
	river.AddWorker(workers, &dispatchWorker{s: s})
	river.AddWorker(workers, &callbackWorker{s: s})
	river.AddWorker(workers, &deadlineSweepWorker{s: s})
	river.AddWorker(workers, &pressureSweepWorker{s: s})
	river.AddWorker(workers, &repairSweepWorker{s: s})
	river.AddWorker(workers, &a2aPollWorker{s: s})
}

// Load folds a job's stream; domain.ErrNotFound if it has none.
func (s *Service) Load(ctx context.Context, q eventstore.Querier, id string) (*jobstore.Loaded, error) {
	return s.jobs.Load(ctx, q, id)
}

// Submit validates a job, dedupes it on its idempotency key, checks the
// fan-out of its root, and appends SUBMITTED with its first attempt's
// dispatch in one transaction (group commit's, shared with concurrent
// submits). When it returns without error the job is committed.
func (s *Service) Submit(ctx context.Context, sub domain.Submitted, md domain.Metadata) (domain.SubmitResult, error) {
	return s.SubmitWatching(ctx, sub, md, nil)
}

// SubmitWatching is Submit, handing the new job's id to watch (if not
// nil) before its transaction commits: a wait that watches the job there
// misses nothing of its end, and needs no read of it. The job answered
// is another when the submit's Idempotency-Key names an earlier one
// (SubmitResult.Existing).
func (s *Service) SubmitWatching(ctx context.Context, sub domain.Submitted, md domain.Metadata, watch func(jobID string)) (domain.SubmitResult, error) {
	if err := s.prepare(ctx, &sub); err != nil {
		return domain.SubmitResult{}, err
	}
	if watch != nil {
		watch(sub.JobID)
	}
	var res domain.SubmitResult
	var err error
	if s.batcher != nil {
		res, err = s.batcher.submit(ctx, sub, md)
	} else { // a batch of one
		it := newBatchItem(ctx, sub, md)
		s.commitSubmits(ctx, []*batchItem{it})
		r := <-it.done
		res, err = r.res, r.err
	}
	if err != nil {
		return domain.SubmitResult{}, err
	}
	if !res.Existing {
		s.metrics.submitted.Add(ctx, 1, telemetry.WithAttrs(attribute.String("namespace", sub.Namespace),
			attribute.String("priority", string(sub.Priority))))
	}
	return res, nil
}

// prepare validates and normalizes a submission and gives it its job id.
func (s *Service) prepare(ctx context.Context, sub *domain.Submitted) error {
	if err := domain.NormalizeSubmission(sub, s.cfg.MaxPayloadBytes); err != nil {
		return err
	}
	if sub.ParentJobID != "" {
		if _, err := uuid.Parse(sub.ParentJobID); err != nil {
			return &domain.FieldError{Field: "parent_job_id", Message: "must be a job id"}
		}
	}
	if err := registry.CheckURLs(ctx, s.cfg.Guard, map[string]string{"callback_url": sub.CallbackURL}); err != nil {
		return err
	}
	sub.JobID = uuid.Must(uuid.NewV7()).String()
	return nil
}

// submittedEvents are the first events of a job's stream.
func (s *Service) submittedEvents(sub domain.Submitted, md domain.Metadata, patterns approvalPatterns) ([]domain.Event, domain.SubmitResult) {
	evs, status := domain.SubmitEvents(sub, patterns.match(sub.Namespace, sub.Capability, s.cfg.ApprovalPatterns),
		s.now(), s.cfg.ApprovalTimeout, md)
	return evs, domain.SubmitResult{JobID: sub.JobID, TraceID: md.TraceID, Status: status}
}

// requestHash identifies what a submit asked for, to tell a retry of the
// same submit from another request reusing its Idempotency-Key.
func requestHash(sub domain.Submitted) []byte {
	sub.JobID = ""
	if sub.Intent != "" {
		sub.Capability = "" // the request named the intent; what it resolves to may move with the catalogue
	}
	b, _ := json.Marshal(sub)
	h := sha256.Sum256(b)
	return h[:]
}

// heldKey answers a submit sub (its request's hash) whose
// Idempotency-Key an earlier submit holds (h): the job that one created,
// or ErrConflict if it asked for something else.
func (s *Service) heldKey(ctx context.Context, tx pgx.Tx, sub domain.Submitted, h keyHolder, hash []byte) (domain.SubmitResult, error) {
	if string(h.hash) != string(hash) {
		return domain.SubmitResult{}, fmt.Errorf("Idempotency-Key %q was used for another request (job %s): %w", sub.IdempotencyKey, h.jobID, ErrConflict)
	}
	l, err := s.Load(ctx, tx, h.jobID)
	if err != nil {
		return domain.SubmitResult{}, err
	}
	return domain.SubmitResult{JobID: h.jobID, TraceID: l.TraceID, Status: l.Status, Existing: true}, nil
}

// keyHolder is the job an earlier submit with an Idempotency-Key
// created, and the hash of its request.
type keyHolder struct {
	jobID string
	hash  []byte
}

// queueKeyLocks queues on b the locks of the Idempotency-Keys of batch
// (LockIdempotencyKeys) and the read of those earlier submits hold, into
// held.
func queueKeyLocks(b *pgx.Batch, batch []*batchItem, held map[[2]string]keyHolder) {
	var nss, keys []string
	for _, it := range batch {
		if it.sub.IdempotencyKey != "" {
			nss, keys = append(nss, it.sub.Namespace), append(keys, it.sub.IdempotencyKey)
		}
	}
	if len(keys) == 0 {
		return
	}
	b.Queue(qLockIdempotencyKeys, nss, keys)
	b.Queue(qIdempotencyKeysHeld, nss, keys).Query(func(rows pgx.Rows) error {
		var k [2]string
		var h keyHolder
		_, err := pgx.ForEachRow(rows, []any{&k[0], &k[1], &h.jobID, &h.hash}, func() error {
			held[k] = h
			return nil
		})
		return err
	})
}

// countDescendant finds the job's root through its parent and counts the
// job against it: more than MaxFanout descendants is ErrFanout.
func (s *Service) countDescendant(ctx context.Context, tx pgx.Tx, sub *domain.Submitted) error {
	parent, err := s.Load(ctx, tx, sub.ParentJobID)
	if errors.Is(err, domain.ErrNotFound) || err == nil && parent.Namespace != sub.Namespace {
		return &domain.FieldError{Field: "parent_job_id", Message: "no such job in namespace " + sub.Namespace}
	}
	if err != nil {
		return err
	}
	sub.RootJobID = parent.RootJobID
	if sub.RootJobID == "" {
		sub.RootJobID = parent.JobID
	}
	var n int
	err = tx.QueryRow(ctx, qCountRootDescendant, sub.RootJobID).Scan(&n)
	if err != nil {
		return fmt.Errorf("count descendants of %s: %w", sub.RootJobID, err)
	}
	if n > s.cfg.MaxFanout {
		return fmt.Errorf("root job %s already has %d descendants, the most allowed: %w", sub.RootJobID, s.cfg.MaxFanout, ErrFanout)
	}
	return nil
}

// List returns jobs newest first, from the jobs read model
// (jobstore.Store.List).
func (s *Service) List(ctx context.Context, f jobstore.ListFilter) ([]jobstore.Summary, error) {
	return s.jobs.List(ctx, f)
}

// Cancel ends a job that is not terminal. A job already at an agent is
// not recalled; its late result will be recorded as a duplicate.
func (s *Service) Cancel(ctx context.Context, id, reason string, md domain.Metadata) (*jobstore.Loaded, error) {
	var held *jobstore.Loaded // the job as an A2A agent holds it, if one does
	err := s.jobs.RetryTx(ctx, func(tx pgx.Tx) error {
		l, err := s.Load(ctx, tx, id)
		if err != nil {
			return err
		}
		evs, fx, err := domain.Cancel(&l.Job, reason, md)
		if err != nil {
			return fmt.Errorf("job %s: %v: %w", id, err, ErrConflict) //nolint:errorlint // the kind is ErrConflict's
		}
		if held = nil; l.SlotHolder != "" { // an agent holds the attempt: it is told
			c := *l
			held = &c
		}
		return s.jobs.AppendTx(ctx, tx, l, fx, evs...)
	})
	if err != nil {
		return nil, err
	}
	if held != nil {
		s.cancelAtAgent(ctx, held)
	}
	return s.Load(ctx, nil, id)
}

// Replay submits a dead-lettered job again as a new job (a new attempt
// series) that names the old one in replay_of. The old job stays
// DEAD_LETTER: a terminal status never changes.
func (s *Service) Replay(ctx context.Context, id string, md domain.Metadata) (domain.SubmitResult, error) {
	l, err := s.Load(ctx, nil, id)
	if err != nil {
		return domain.SubmitResult{}, err
	}
	if l.Status != domain.StatusDeadLetter {
		return domain.SubmitResult{}, fmt.Errorf("job %s is %s; only DEAD_LETTER jobs can be replayed: %w", id, l.Status, ErrConflict)
	}
	sub := l.Submitted
	sub.ReplayOf, sub.IdempotencyKey, sub.ParentJobID, sub.RootJobID = id, "", "", ""
	return s.Submit(ctx, sub, md)
}
