package registry

import (
	"context"
	"errors"
	"time"
)

// Run keeps the registry's background work going until ctx ends: it
// refreshes the snapshot on every registry NOTIFY and every
// RefreshInterval, flushes buffered heartbeats every HeartbeatFlush, and
// announces this process's changes to the others. The sweep and probes run
// as River jobs (AddWorkers, PeriodicJobs).
func (r *Registry) Run(ctx context.Context) {
	done := make(chan struct{})
	go func() { defer close(done); r.flushLoop(ctx) }()
	go r.notifyLoop(ctx)
	for ctx.Err() == nil {
		if err := r.listen(ctx); err != nil && ctx.Err() == nil {
			r.logger.Warn("registry: listen for changes", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
	<-done
	// A last flush so that a clean shutdown loses no heartbeat.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := r.flushHeartbeats(fctx); err != nil {
		r.logger.Warn("registry: final heartbeat flush", "err", err)
	}
}

func (r *Registry) listen(ctx context.Context) error {
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+NotifyChannel); err != nil {
		return err
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "UNLISTEN *") }()
	for {
		if err := r.snap.Refresh(ctx); err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, r.cfg.RefreshInterval)
		_, err := conn.Conn().WaitForNotification(wctx)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
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

func (r *Registry) notifyLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.pokes:
		}
		if _, err := r.pool.Exec(ctx, `SELECT pg_notify($1, '')`, NotifyChannel); err != nil && ctx.Err() == nil {
			r.logger.Warn("registry: notify", "err", err)
		}
	}
}
