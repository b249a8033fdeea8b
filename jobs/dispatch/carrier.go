package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/internal/telemetry"
	"github.com/agentreach/agentreach/jobs/jobstore"
	"github.com/agentreach/agentreach/registry"
)

// A Carrier takes one routed attempt to an agent of its protocol and
// says what the agent answered. It is the delivery seam: the native push
// (Push) and A2A's SendMessage implement it; the dispatcher holds no
// transaction open while a carrier works, and records what it observed.
type Carrier interface {
	// Carry delivers at to agent a. ctx ends at at.Wait: an agent that has
	// the request (at.Wrote) but has not answered by then while its
	// deadline is further away has accepted the job.
	Carry(ctx context.Context, a *registry.Agent, at Attempt) domain.Observation
	// Span names the delivery's client span.
	Span() string
}

// Attempt is one routed attempt as a carrier delivers it.
type Attempt struct {
	L        *jobstore.Loaded // the job's fold after ROUTED
	N        int              // the attempt's number
	Deadline time.Time        // when the attempt times out
	// Wait is when the call stops waiting for an answer: the deadline, or
	// the longest inline wait if that comes first.
	Wait time.Time
	// Wrote reports whether the request went out whole, so that a timeout
	// after it means the agent has the job.
	Wrote func() bool
}

// carry calls the agent through its carrier, with no transaction open,
// bounded by the attempt's deadline or the longest inline wait, and
// counts the delivery in the metrics and the debug log.
func (d *Dispatcher) carry(ctx context.Context, a *registry.Agent, at Attempt) (domain.Observation, time.Duration) {
	c := d.carriers.Push
	switch {
	case a.Protocol == domain.ProtocolA2A:
		c = d.carriers.A2A
	case a.Protocol == domain.ProtocolMCP && d.carriers.MCP != nil:
		c = d.carriers.MCP
	}
	ctx, span := d.tracer.Start(ctx, c.Span(), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("job_id", at.L.JobID), attribute.Int("attempt", at.N),
			attribute.String("agent_id", a.AgentID), attribute.String("url.full", a.Endpoint)))
	defer span.End()
	at.Wait = at.Deadline
	if capped := d.cfg.Now().Add(d.cfg.InlineWait); capped.Before(at.Deadline) {
		at.Wait = capped
	}
	ctx, cancel := context.WithDeadline(ctx, at.Wait)
	defer cancel()
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) { wrote.Store(info.Err == nil) },
	})
	at.Wrote = wrote.Load

	start := time.Now()
	out := c.Carry(ctx, a, at)
	latency := time.Since(start)
	d.deliveries.Add(ctx, 1, telemetry.WithAttrs(attribute.String("outcome", string(out.Kind)), attribute.String("reason", out.Reason)))
	d.duration.Record(ctx, latency.Seconds(), telemetry.WithAttrs(attribute.String("outcome", string(out.Kind))))
	if d.logger.Enabled(ctx, slog.LevelDebug) { // its arguments cost allocations even when it is off
		d.logger.DebugContext(ctx, "delivery", "job_id", at.L.JobID, "trace_id", at.L.TraceID, "agent_id", a.AgentID,
			"attempt", at.N, "outcome", out.Kind, "reason", out.Reason, "latency_ms", latency.Milliseconds())
	}
	return out, latency
}

// Unanswered is what a call that failed with err tells of the attempt:
// accepted when the agent has the request and the longest inline wait
// ended before the deadline (its result comes later), hung when the
// deadline passed with no answer, failed otherwise.
func Unanswered(ctx context.Context, at Attempt, err error) domain.Observation {
	switch {
	case ctx.Err() != nil && at.Wrote() && at.Wait.Before(at.Deadline):
		return domain.Observation{Kind: domain.ObservedAccepted}
	case ctx.Err() != nil && at.Wrote():
		return domain.Observation{Kind: domain.ObservedHung, Reason: "timeout", ErrText: "no answer by the deadline"}
	}
	return domain.Observation{Kind: domain.ObservedFailed, Reason: classifyNetErr(ctx, err), ErrText: err.Error()}
}

func classifyNetErr(ctx context.Context, err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection_refused"
	case ctx.Err() != nil:
		return "timeout"
	}
	return "connection_error"
}

// RateLimited is what an agent's 429 or 503 (status) to a delivery says:
// with a Retry-After header (v) it asks for no work until then
// (ObservedPaused: not taken, not a failure); without, it is a failed
// attempt (http_429, http_503) like any other status.
func RateLimited(status int, v, body string, now time.Time) domain.Observation {
	if d := parseRetryAfter(v, now); d > 0 {
		return domain.Observation{Kind: domain.ObservedPaused, Reason: domain.ReasonAgentPaused, RetryAfter: d, HTTPStatus: status,
			ErrText: fmt.Sprintf("the agent answered %d with Retry-After %s: no work for it until then", status, v)}
	}
	return domain.Observation{Kind: domain.ObservedFailed, Reason: "http_" + strconv.Itoa(status), ErrText: Truncate(body, 256),
		HTTPStatus: status}
}

// parseRetryAfter reads seconds or an HTTP date; anything else is zero. It
// is capped at an hour.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return min(time.Duration(n)*time.Second, time.Hour)
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), time.Hour)
	}
	return 0
}

// Truncate keeps the first n bytes of an agent's text for an event, as text
// PostgreSQL can store: no NUL, valid UTF-8.
func Truncate(s string, n int) string {
	cut := len(s) > n
	if cut {
		s = s[:n]
	}
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "")
	if cut {
		s += "…"
	}
	return s
}
