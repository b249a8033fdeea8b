// Package adapter is where A2A meets the job rooms, both ways. As an A2A
// server's job side (server.Jobs, through A2A): jobs submitted by
// SendMessage, their push-notification configs, and the pushes of a
// job's task when it ends (callback.A2APushes). As a client of A2A
// agents: the carrier that delivers their attempts (dispatch.Carrier),
// the pushes they send about their tasks (ReportA2APush), the poller's
// looks at those tasks (Poll), the caller's input (ProvideInput) and a
// cancel at the agent (CancelAt). River's poll worker stays in jobs: this
// package knows nothing of River.
package adapter

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	a2aclient "github.com/agentreach/agentreach/a2a/client"
	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/jobs/dispatch"
	"github.com/agentreach/agentreach/jobs/jobstore"
	"github.com/agentreach/agentreach/netguard"
	"github.com/agentreach/agentreach/registry"
)

// Core is what the adapter needs of the jobs service.
type Core interface {
	// SubmitA2A checks and commits sub as any submit, its callback_url
	// callbackURL(its namespace) (never posted to), and runs with in its
	// SUBMITTED transaction; it answers the job's id.
	SubmitA2A(ctx context.Context, sub domain.Submitted, md domain.Metadata, callbackURL func(ns string) string,
		with func(ctx context.Context, tx pgx.Tx, jobID string) error) (string, error)
	// Cancel ends a job that is not terminal (jobstore.ErrConflict if it
	// is).
	Cancel(ctx context.Context, id, reason string, md domain.Metadata) (*jobstore.Loaded, error)
}

// Post sends one request of a job's callback (callback.Sender.Post).
type Post func(ctx context.Context, l *jobstore.Loaded, url string, body []byte, header http.Header) (int, error)

// Config is what the adapter needs of the service's configuration.
type Config struct {
	// PublicURL is the service's base URL, read when needed (it may be
	// known only once the listener is).
	PublicURL func() string
	// Guard decides which addresses push configs may name.
	Guard *netguard.Policy
	// MaxPayloadBytes bounds the caller's input.
	MaxPayloadBytes int
	// Policy is what the attempt decisions need of the configuration.
	Policy domain.AttemptPolicy
	// Now and Jitter are the clock and the retry jitter.
	Now    func() time.Time
	Jitter func() float64
}

// Adapter is the A2A side of the jobs.
type Adapter struct {
	pool     *pgxpool.Pool
	events   *eventstore.Store
	jobs     *jobstore.Store
	registry *registry.Registry
	client   *a2aclient.Client
	core     Core
	post     Post
	logger   *slog.Logger
	cfg      Config
	tries    metric.Int64Counter // callbacks, by result

	legacyMu    sync.Mutex
	legacy      bool      // legacyPushes' answer,
	legacyUntil time.Time // good until then
}

// New returns an Adapter that delivers over client and posts pushes with
// post.
func New(pool *pgxpool.Pool, events *eventstore.Store, jobs *jobstore.Store, reg *registry.Registry, client *a2aclient.Client,
	core Core, post Post, logger *slog.Logger, cfg Config) *Adapter {
	tries, _ := noop.NewMeterProvider().Meter("").Int64Counter("")
	return &Adapter{pool: pool, events: events, jobs: jobs, registry: reg, client: client, core: core, post: post,
		logger: logger, cfg: cfg, tries: tries}
}

// SetTelemetry gives the adapter the callbacks counter its pushes count in.
func (ad *Adapter) SetTelemetry(callbacks metric.Int64Counter) { ad.tries = callbacks }

// Carrier is the A2A carrier of the dispatch room.
func (ad *Adapter) Carrier() dispatch.Carrier { return carrier{ad} }
