package telemetry_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/internal/telemetry"
)

// An outage is told in a few lines: the first error that says the
// database is unreachable, a summary at most every ten seconds, one line
// when it answers again. Other records pass as they are.
func TestOutageIsToldInAFewLines(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	var buf bytes.Buffer
	o := telemetry.NewOutage(clock)
	log := slog.New(o.Handler(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})))
	refused := fmt.Errorf("dial: %w", syscall.ECONNREFUSED)

	log.Info("a job was submitted")
	require.False(t, o.Down())
	for i := range 1000 { // a minute of errors from every part of the service
		if i%2 == 0 {
			log.Warn("sweep failed", "err", refused)
		} else {
			log.Error("river: fetch", "err", "failed to connect to `host=127.0.0.1`: connection refused")
		}
		log.Warn("an agent answered 500", "err", errors.New("agent said no")) // not the database's: logged
		advance(60 * time.Millisecond)
	}
	require.True(t, o.Down())
	o.Back(context.Background())
	o.Back(context.Background()) // once
	require.False(t, o.Down())
	require.Equal(t, int64(1), o.Outages())

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var db []string
	for _, l := range lines {
		if !strings.Contains(l, "agent said no") {
			db = append(db, l)
		}
	}
	require.Len(t, lines, 1000+len(db), "every other record passes")
	require.Contains(t, db[0], "a job was submitted")
	require.Contains(t, db[1], "sweep failed")
	summaries := db[2 : len(db)-1]
	require.Len(t, summaries, 5, "one summary every ten seconds of the minute: %v", summaries)
	for _, s := range summaries {
		require.Contains(t, s, "the database is still unreachable")
	}
	require.Contains(t, db[len(db)-1], "the database answers again")
	require.Contains(t, db[len(db)-1], "outage=1m0s")

	require.True(t, telemetry.Unreachable(&pgconn.PgError{Code: "57P01"}))
	require.False(t, telemetry.Unreachable(&url.Error{Op: "Post", URL: "http://127.0.0.1:1/", Err: refused}),
		"an agent that cannot be reached is not a database outage")
	require.False(t, telemetry.Unreachable(&pgconn.PgError{Code: "23505"}))
}
