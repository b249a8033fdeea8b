package telemetry

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/metric"
)

// OutageSummaryEvery is how often, while the database is unreachable, the
// errors it causes are summed up in one line.
const OutageSummaryEvery = 10 * time.Second

// Outage tells a database outage in a few lines, not thousands: the first
// error that says the database is unreachable is logged, the ones after it
// are counted and summed up at most every OutageSummaryEvery, and Back logs
// one line when it answers again. Every part of the service fails while
// the database is down, and each would log its own error every time.
type Outage struct {
	now func() time.Time

	mu         sync.Mutex
	down       bool
	since      time.Time // when the outage began
	suppressed int       // errors not logged since the last line
	last       time.Time // when the last line was logged
	outages    int64
	out        slog.Handler // where the summaries go
}

// NewOutage returns an outage tracker on the clock now (time.Now if nil).
func NewOutage(now func() time.Time) *Outage {
	if now == nil {
		now = time.Now
	}
	return &Outage{now: now}
}

// Handler wraps h so that its records go through the tracker.
func (o *Outage) Handler(h slog.Handler) slog.Handler {
	o.mu.Lock()
	if o.out == nil {
		o.out = h
	}
	o.mu.Unlock()
	return outageHandler{Handler: h, o: o}
}

// Down reports whether the database is unreachable, as far as the errors
// logged tell.
func (o *Outage) Down() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.down
}

// Outages is how many outages began since the process started.
func (o *Outage) Outages() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.outages
}

// Back ends an outage (the database answered): one line says how long it
// lasted and how many errors went unlogged since the last line. It
// answers how long the outage lasted (0: there was none).
func (o *Outage) Back(ctx context.Context) time.Duration {
	o.mu.Lock()
	if !o.down {
		o.mu.Unlock()
		return 0
	}
	o.down = false
	now := o.now()
	lasted := now.Sub(o.since)
	r := slog.NewRecord(now, slog.LevelWarn, "the database answers again", 0)
	r.AddAttrs(slog.Duration("outage", lasted), slog.Int("errors_suppressed", o.suppressed))
	o.suppressed, o.last = 0, now
	out := o.out
	o.mu.Unlock()
	if out != nil {
		_ = out.Handle(ctx, r)
	}
	return lasted
}

// admit decides whether a record of level l with an error unreachable (a
// database outage's) is logged as it is, and answers a summary to log
// instead when one is due.
func (o *Outage) admit(l slog.Level, unreachable bool) (pass bool, summary *slog.Record) {
	if l < slog.LevelWarn || !unreachable {
		return true, nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	if !o.down {
		o.down, o.since, o.last, o.suppressed = true, now, now, 0
		o.outages++
		return true, nil
	}
	o.suppressed++
	if now.Sub(o.last) < OutageSummaryEvery {
		return false, nil
	}
	r := slog.NewRecord(now, slog.LevelWarn, "the database is still unreachable", 0)
	r.AddAttrs(slog.Time("since", o.since), slog.Int("errors_suppressed", o.suppressed))
	o.suppressed, o.last = 0, now
	return false, &r
}

type outageHandler struct {
	slog.Handler
	o *Outage
}

func (h outageHandler) Handle(ctx context.Context, r slog.Record) error {
	pass, summary := h.o.admit(r.Level, unreachableRecord(r))
	if summary != nil {
		return h.Handler.Handle(ctx, *summary)
	}
	if !pass {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h outageHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return outageHandler{Handler: h.Handler.WithAttrs(attrs), o: h.o}
}

func (h outageHandler) WithGroup(name string) slog.Handler {
	return outageHandler{Handler: h.Handler.WithGroup(name), o: h.o}
}

// unreachableRecord reports whether r carries an error that says the
// database cannot be reached.
func unreachableRecord(r slog.Record) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		switch v := a.Value.Any().(type) {
		case error:
			found = Unreachable(v)
		case string:
			found = (a.Key == "err" || a.Key == "error") && unreachableText(v)
		}
		return !found
	})
	return found
}

// Unreachable reports whether err says the database cannot be reached:
// a connection refused, reset or closed, or a server going away.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	var ce *pgconn.ConnectError
	var ne *net.OpError
	var pe *pgconn.PgError
	var ue *url.Error
	switch {
	case errors.As(err, &ue):
		return false // an HTTP call's (an agent's, a callback's), not the database's
	case errors.As(err, &ce), errors.As(err, &ne), errors.Is(err, pgconn.ErrConnClosed), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET):
		return true
	case errors.As(err, &pe):
		// admin_shutdown, crash_shutdown, cannot_connect_now
		return pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	return unreachableText(err.Error())
}

// unreachableText is Unreachable for an error already turned into text
// (River logs its errors so).
func unreachableText(s string) bool {
	for _, p := range []string{"connection refused", "failed to connect", "conn closed", "connection reset",
		"unexpected EOF", "the database system is", "terminating connection", "server closed the connection"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// RegisterOutage publishes o on mp as agentreach.database.reachable (1 or
// 0) and agentreach.database.outages (outages begun since start).
func RegisterOutage(mp metric.MeterProvider, o *Outage) error {
	m := mp.Meter("github.com/agentreach/agentreach")
	up, err := m.Int64ObservableGauge("agentreach.database.reachable",
		metric.WithDescription("1 while the database answers, 0 during an outage (as the service's errors tell)."))
	if err != nil {
		return err
	}
	outages, err := m.Int64ObservableCounter("agentreach.database.outages",
		metric.WithDescription("Database outages begun since the process started."))
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		reachable := int64(1)
		if o.Down() {
			reachable = 0
		}
		obs.ObserveInt64(up, reachable)
		obs.ObserveInt64(outages, o.Outages())
		return nil
	}, up, outages)
	return err
}
