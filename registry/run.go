package registry

import (
	"context"
	"time"

	"github.com/agentreach/agentreach/eventstore"
)

// Run keeps the registry's background work going until ctx ends: it
// refreshes the snapshot on every registry NOTIFY and every
// RefreshInterval, flushes buffered heartbeats every HeartbeatFlush, and
// announces this process's changes to the others. The sweep and probes run
// as River jobs (riverwork.AddWorkers).
func (r *Registry) Run(ctx context.Context) {
	done := make(chan struct{})
	go func() { defer close(done); r.flushLoop(ctx) }()
	go eventstore.Notify(ctx, r.pool, NotifyChannel, r.pokes, r.logger)
	eventstore.Listen(ctx, r.pool, NotifyChannel, r.logger, func(ctx context.Context) (time.Duration, error) {
		return r.cfg.RefreshInterval, r.snap.Refresh(ctx)
	})
	<-done
	// A last flush so that a clean shutdown loses no heartbeat.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := r.flushHeartbeats(fctx); err != nil {
		r.logger.Warn("registry: final heartbeat flush", "err", err)
	}
}

func (r *Registry) flushLoop(ctx context.Context) {
	t := time.NewTicker(r.cfg.HeartbeatFlush)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := r.flushHeartbeats(ctx); err != nil && ctx.Err() == nil {
				r.logger.Warn("registry: flush heartbeats", "err", err)
			}
		}
	}
}
