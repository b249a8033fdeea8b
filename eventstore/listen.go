package eventstore

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Listen holds one pooled connection LISTENing on channel until ctx ends.
// It calls step at once, then after every notification or when the wait
// step returned has passed (0 waits for a notification alone). When the
// connection or step fails it logs, pauses a second and listens again, so
// a reader that also polls loses nothing to a dropped connection.
func Listen(ctx context.Context, pool *pgxpool.Pool, channel string, logger *slog.Logger,
	step func(ctx context.Context) (wait time.Duration, err error)) {
	keepListening(ctx, channel, logger, func() error { return listenOnce(ctx, pool, channel, step) })
}

// keepListening runs once until ctx ends, again a second after each
// failure, which it logs.
func keepListening(ctx context.Context, channel string, logger *slog.Logger, once func() error) {
	for ctx.Err() == nil {
		err := once()
		if ctx.Err() != nil {
			return
		}
		logger.Warn("listener restarting", "channel", channel, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func listenOnce(ctx context.Context, pool *pgxpool.Pool, channel string,
	step func(ctx context.Context) (time.Duration, error)) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		return err
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "UNLISTEN *") }()
	for {
		wait, err := step(ctx)
		if err != nil {
			return err
		}
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if wait > 0 {
			wctx, cancel = context.WithTimeout(ctx, wait)
		}
		_, err = conn.Conn().WaitForNotification(wctx)
		cancel()
		if err != nil && (ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded)) {
			return err
		}
	}
}

// notifyGap is the least time between two NOTIFYs of one Notify: under
// load, the commits of that time share one (each is a transaction).
const notifyGap = 5 * time.Millisecond

// Notify sends one NOTIFY on channel for every receive from pokes until ctx
// ends; pokes that arrive while one is being sent, or within notifyGap of
// it, collapse into the next. Readers also poll, so a lost notification
// only delays them.
func Notify(ctx context.Context, pool *pgxpool.Pool, channel string, pokes <-chan struct{}, logger *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-pokes:
		}
		pause := notifyGap
		if _, err := pool.Exec(ctx, `SELECT pg_notify($1, '')`, channel); err != nil && ctx.Err() == nil {
			logger.Warn("notify listeners", "channel", channel, "err", err)
			pause = 100 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
	}
}

// ListenPayloads holds one pooled connection LISTENing on channel until ctx
// ends and hands each notification's payload to got. After the connection
// fails (and once at start, when nothing can have been missed yet) it
// calls got with "" : "anything may have been missed", so readers look
// again. It pauses a second between attempts.
func ListenPayloads(ctx context.Context, pool *pgxpool.Pool, channel string, logger *slog.Logger, got func(payload string)) {
	keepListening(ctx, channel, logger, func() error { return listenPayloadsOnce(ctx, pool, channel, got) })
}

func listenPayloadsOnce(ctx context.Context, pool *pgxpool.Pool, channel string, got func(string)) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		return err
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "UNLISTEN *") }()
	got("")
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			return err
		}
		got(n.Payload)
	}
}
