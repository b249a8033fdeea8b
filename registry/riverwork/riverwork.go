// Package riverwork is the registry's River side: the args of its River
// jobs and their thin workers, which call the registry, and the
// ProbeQueue the registry inserts its probes with.
package riverwork

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/registry"
)

// QueueRegistry is the River queue of probes, apart from job dispatch so
// a flood of jobs never delays a lease decision.
const QueueRegistry = "registry"

// ProbeArgs is the River job that probes one agent instance
// (registry.Registry.ProbeInstance).
type ProbeArgs struct {
	Namespace  string `json:"namespace" river:"unique"`
	AgentID    string `json:"agent_id" river:"unique"`
	InstanceID string `json:"instance_id" river:"unique"`
}

// Kind implements river.JobArgs.
func (ProbeArgs) Kind() string { return "agent_probe" }

// InsertOpts implements river.JobArgsWithInsertOpts: one probe per
// instance per period, on the registry's queue. By period rather than by
// state: a probe left "running" by a process that died must not block the
// next ones.
func (ProbeArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueRegistry, MaxAttempts: 1,
		UniqueOpts: river.UniqueOpts{ByArgs: true, ByPeriod: registry.ProbeEvery}}
}

type probeWorker struct {
	river.WorkerDefaults[ProbeArgs]
	r *registry.Registry
}

func (w *probeWorker) Timeout(*river.Job[ProbeArgs]) time.Duration { return 2 * w.r.ProbeTimeout() }

func (w *probeWorker) Work(ctx context.Context, job *river.Job[ProbeArgs]) error {
	return w.r.ProbeInstance(ctx, domain.AgentKey{Namespace: job.Args.Namespace, ID: job.Args.AgentID}, job.Args.InstanceID,
		fmt.Sprintf("river:%d", job.ID))
}

// The periodic jobs the sweeps used to be (they run in sweep.Runner now):
// a job of theirs left in the queue by an older version still runs.

// SweepArgs is the River job that judges every lease.
type SweepArgs struct{}

// Kind implements river.JobArgs.
func (SweepArgs) Kind() string { return "agent_sweep" }

type sweepWorker struct {
	river.WorkerDefaults[SweepArgs]
	r *registry.Registry
}

func (w *sweepWorker) Work(ctx context.Context, _ *river.Job[SweepArgs]) error {
	_, err := w.r.Sweep(ctx)
	return err
}

// HealthSweepArgs is the River job that raises and clears health alerts.
type HealthSweepArgs struct{}

// Kind implements river.JobArgs.
func (HealthSweepArgs) Kind() string { return "health_sweep" }

type healthSweepWorker struct {
	river.WorkerDefaults[HealthSweepArgs]
	r *registry.Registry
}

func (w *healthSweepWorker) Work(ctx context.Context, _ *river.Job[HealthSweepArgs]) error {
	if _, err := w.r.HealthSweep(ctx); err != nil {
		return err
	}
	return w.r.PruneAttempts(ctx)
}

// CardRefreshArgs is the River job that fetches the Agent Cards that are
// due.
type CardRefreshArgs struct{}

// Kind implements river.JobArgs.
func (CardRefreshArgs) Kind() string { return "agent_card_refresh" }

type cardRefreshWorker struct {
	river.WorkerDefaults[CardRefreshArgs]
	r *registry.Registry
}

func (w *cardRefreshWorker) Timeout(*river.Job[CardRefreshArgs]) time.Duration { return time.Minute }

func (w *cardRefreshWorker) Work(ctx context.Context, _ *river.Job[CardRefreshArgs]) error {
	_, err := w.r.RefreshCards(ctx)
	return err
}

// AddWorkers registers the registry's River workers.
func AddWorkers(workers *river.Workers, r *registry.Registry) {
	river.AddWorker(workers, &probeWorker{r: r})
	river.AddWorker(workers, &sweepWorker{r: r})
	river.AddWorker(workers, &healthSweepWorker{r: r})
	river.AddWorker(workers, &cardRefreshWorker{r: r})
}

// Probes is the registry's ProbeQueue over a River client.
func Probes(c *river.Client[pgx.Tx]) registry.ProbeQueue { return probes{c} }

type probes struct{ c *river.Client[pgx.Tx] }

func (p probes) EnqueueProbesTx(ctx context.Context, tx pgx.Tx, list []registry.Probe) (int, error) {
	params := make([]river.InsertManyParams, len(list))
	for i, x := range list {
		params[i] = river.InsertManyParams{Args: ProbeArgs{Namespace: x.Agent.Namespace, AgentID: x.Agent.ID, InstanceID: x.InstanceID}}
		if x.Every != registry.ProbeEvery {
			params[i].InsertOpts = &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true, ByPeriod: x.Every}}
		}
	}
	res, err := p.c.InsertManyTx(ctx, tx, params)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, x := range res {
		if !x.UniqueSkippedAsDuplicate {
			n++
		}
	}
	return n, nil
}
