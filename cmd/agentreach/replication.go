package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qReplication = queries.Must("Replication")
	qReadLag     = queries.Must("ReadLag")
)

// replicationRead is the primary's standbys as last read, and when.
type replicationRead struct {
	r  domain.Replication
	at time.Time
}

// replicationStale is how old a read of the standbys may be and still
// vouch for durability: a few of the reads made every second.
const replicationStale = 5 * time.Second

// watchReplication reads the primary's standbys every second, for
// /metrics, /readyz and, with --require-sync-standby, the refusal of
// writes.
func (a *App) watchReplication(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	refused := false
	for {
		_ = a.readReplication(ctx) // a failed read keeps the last one, which goes stale
		refused = a.sayRefusal(ctx, refused)
		if a.readPool != nil {
			var lag float64
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			if a.readPool.QueryRow(rctx, qReadLag).Scan(&lag) == nil {
				a.readLag.Store(math.Float64bits(lag))
			}
			cancel()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// readReplication reads the primary's standbys now and keeps the read.
func (a *App) readReplication(ctx context.Context) error {
	var r domain.Replication
	var lag float64
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := a.pool.QueryRow(rctx, qReplication).Scan(&r.InRecovery, &r.SyncNames, &r.Standbys, &r.SyncStandbys, &lag); err != nil {
		return err
	}
	r.ReplayLag = time.Duration(lag * float64(time.Second))
	a.replication.Store(&replicationRead{r: r, at: time.Now()})
	return nil
}

// callbackHeld says why no callback may go now (nil: it may): with
// --require-sync-standby, from a read of the standbys made now, after the
// commit that ended the job, so that a standby lost since the watcher's
// last read (up to a second ago) holds it too. A commit made while no
// synchronous standby streamed is on two nodes once one streams again.
func (a *App) callbackHeld(ctx context.Context) error {
	if !a.cfg.RequireSyncStandby {
		return nil
	}
	if err := a.readReplication(ctx); err != nil {
		return fmt.Errorf("the primary's standbys could not be read: %w", err) // held: River tries again
	}
	return a.writesRefused()
}

// sayRefusal logs when writes begin to be refused, and when they are
// accepted again, and answers whether they are refused now.
func (a *App) sayRefusal(ctx context.Context, was bool) bool {
	err := a.writesRefused()
	switch {
	case err != nil && !was:
		a.logger.WarnContext(ctx, "writes refused", "why", err.Error())
	case err == nil && was:
		a.logger.WarnContext(ctx, "writes accepted again: a synchronous standby streams")
	}
	return err != nil
}

// writesRefused says why writes are refused now (nil: they are not):
// with --require-sync-standby, while the primary has no synchronous
// standby streaming, so that no commit is acknowledged that one node's
// loss would erase.
func (a *App) writesRefused() error {
	if !a.cfg.RequireSyncStandby {
		return nil
	}
	read := a.replication.Load()
	if read == nil || time.Since(read.at) > replicationStale {
		return errors.New("the primary's standbys are not known: writes wait until they are (--require-sync-standby)")
	}
	if ok, why := read.r.Durable(); !ok {
		return fmt.Errorf("%s: writes are refused until one streams (--require-sync-standby)", why)
	}
	return nil
}

// replicationDetails is what /readyz says of the primary's standbys and of
// writes: the service stays ready for reads while it refuses writes.
func (a *App) replicationDetails() map[string]any {
	out := map[string]any{"writes": "accepted"}
	if err := a.writesRefused(); err != nil {
		out["writes"], out["writes_refused_because"] = "refused", err.Error()
	}
	if read := a.replication.Load(); read != nil {
		// Counts only: /readyz needs no key, and the standbys' names are
		// the deployment's own.
		out["replication"] = map[string]any{"standbys": read.r.Standbys, "sync_standbys": read.r.SyncStandbys,
			"replay_lag_seconds": read.r.ReplayLag.Seconds()}
	}
	if a.readPool != nil {
		out["read_database_lag_seconds"] = math.Float64frombits(a.readLag.Load())
	}
	return out
}

// registerReplication publishes the standbys as last read:
// agentreach.database.standbys, .sync_standbys, .replay_lag (seconds) and
// .writes_refused (1 while --require-sync-standby refuses writes).
func registerReplication(a *App) error {
	m := a.tel.Meter.Meter("github.com/agentreach/agentreach")
	standbys, err := m.Int64ObservableGauge("agentreach.database.standbys",
		metric.WithDescription("Standbys streaming from the primary, as last read."))
	if err != nil {
		return err
	}
	syncStandbys, err := m.Int64ObservableGauge("agentreach.database.sync_standbys",
		metric.WithDescription("Synchronous standbys streaming from the primary, as last read."))
	if err != nil {
		return err
	}
	lag, err := m.Float64ObservableGauge("agentreach.database.replay_lag", metric.WithUnit("s"),
		metric.WithDescription("The largest replay lag of the primary's standbys, as last read."))
	if err != nil {
		return err
	}
	readLag, err := m.Float64ObservableGauge("agentreach.database.read_lag", metric.WithUnit("s"),
		metric.WithDescription("How far behind its primary the read database (--read-database-url) is, as last read."))
	if err != nil {
		return err
	}
	refused, err := m.Int64ObservableGauge("agentreach.database.writes_refused",
		metric.WithDescription("1 while writes are refused for want of a synchronous standby (--require-sync-standby)."))
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		if read := a.replication.Load(); read != nil {
			obs.ObserveInt64(standbys, int64(read.r.Standbys))
			obs.ObserveInt64(syncStandbys, int64(read.r.SyncStandbys))
			obs.ObserveFloat64(lag, read.r.ReplayLag.Seconds())
		}
		n := int64(0)
		if a.writesRefused() != nil {
			n = 1
		}
		obs.ObserveInt64(refused, n)
		if a.readPool != nil {
			obs.ObserveFloat64(readLag, math.Float64frombits(a.readLag.Load()))
		}
		return nil
	}, standbys, syncStandbys, lag, readLag, refused)
	return err
}
