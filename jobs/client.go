package jobs

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
)

// ClientConfig tunes the River client.
type ClientConfig struct {
	// Queues maps queue names to worker counts; nil gives DefaultQueues.
	Queues map[string]int
	// TestOnly turns off River's start-up jitter, for tests.
	TestOnly bool
	// Plugins are River plugins, such as otelriver's middleware.
	Plugins []rivertype.Plugin
	// RescueAfter is how long a job may run before River rescues it as
	// stuck (its process died); it must exceed every worker's timeout.
	RescueAfter time.Duration
	// Retention is the deployment's retention period: River keeps its
	// completed rows no longer (CompletedRetention).
	Retention time.Duration
}

// CompletedRetention is how long River keeps a completed row under a
// retention period: RiverCompletedRetention, or the period when shorter,
// but never under ten minutes, the longest period a unique work item
// (a probe, a poll) is unique for.
func CompletedRetention(period time.Duration) time.Duration {
	if period <= 0 {
		return RiverCompletedRetention
	}
	return min(RiverCompletedRetention, max(period, 10*time.Minute))
}

// DefaultQueues are the queues and worker counts of one process.
func DefaultQueues() map[string]int {
	return map[string]int{
		river.QueueDefault:  2,
		"registry":          10,
		QueueDispatchHigh:   40,
		QueueDispatchNormal: 40,
		QueueDispatchLow:    20,
		QueueCallbacks:      20,
		QueueSweeps:         2,
		QueueA2APoll:        10,
	}
}

// How long River keeps its finished rows: completed an hour (less under a
// shorter retention period, CompletedRetention), cancelled a day,
// discarded (a work item that failed for good) a week.
const (
	RiverCompletedRetention = time.Hour
	RiverCancelledRetention = 24 * time.Hour
	RiverDiscardedRetention = 7 * 24 * time.Hour
)

// NewClient returns a River client on pool running workers. Start it once
// the schema is migrated.
func NewClient(pool *pgxpool.Pool, logger *slog.Logger, workers *river.Workers, cfg ClientConfig) (*river.Client[pgx.Tx], error) {
	queues := cfg.Queues
	if queues == nil {
		queues = DefaultQueues()
	}
	qc := make(map[string]river.QueueConfig, len(queues))
	for name, n := range queues {
		qc[name] = river.QueueConfig{MaxWorkers: n}
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Logger:   logger,
		Queues:   qc,
		Workers:  workers,
		Plugins:  cfg.Plugins,
		TestOnly: cfg.TestOnly,
		// Workers set their own timeouts; RescueAfter covers the longest.
		JobTimeout:           time.Minute,
		RescueStuckJobsAfter: max(cfg.RescueAfter, 2*time.Minute),
		// Dispatch and probes are latency-sensitive: fetch soon after an
		// insert, and poll often when a notification is missed.
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 200 * time.Millisecond,
		// River's rows are work items, not history: the event log is the
		// audit trail. A finished one is kept long enough to look at in
		// River UI, then River's cleaner deletes it.
		CompletedJobRetentionPeriod: CompletedRetention(cfg.Retention),
		CancelledJobRetentionPeriod: RiverCancelledRetention,
		DiscardedJobRetentionPeriod: RiverDiscardedRetention,
	})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	return client, nil
}
