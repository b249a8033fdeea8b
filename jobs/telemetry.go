package jobs

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/internal/telemetry"
)

// instruments are the service's own metrics.
type instruments struct {
	submitted  metric.Int64Counter
	deliveries metric.Int64Counter
	duration   metric.Float64Histogram
	finished   metric.Int64Counter
	callbacks  metric.Int64Counter
}

func newInstruments(mp metric.MeterProvider) instruments {
	m := mp.Meter("github.com/agentreach/agentreach/jobs")
	var in instruments
	in.submitted, _ = m.Int64Counter("agentreach.jobs.submitted", metric.WithDescription("Jobs accepted by POST /v1/jobs."))
	in.deliveries, _ = m.Int64Counter("agentreach.deliveries", metric.WithDescription("Delivery attempts to agents, by outcome."))
	in.duration, _ = m.Float64Histogram("agentreach.delivery.duration", metric.WithUnit("s"),
		metric.WithDescription("Round trip of a delivery to an agent."),
		metric.WithExplicitBucketBoundaries(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
	in.finished, _ = m.Int64Counter("agentreach.jobs.finished", metric.WithDescription("Jobs that reached a terminal status, by status."))
	in.callbacks, _ = m.Int64Counter("agentreach.callbacks", metric.WithDescription("Caller callbacks, by result."))
	return in
}

// SetTelemetry gives the service its tracer and meter providers (the
// default is no-ops).
func (s *Service) SetTelemetry(tp trace.TracerProvider, mp metric.MeterProvider) {
	s.tracer = tp.Tracer("github.com/agentreach/agentreach/jobs")
	s.metrics = newInstruments(mp)
	s.callbacks.SetTelemetry(s.tracer, s.metrics.callbacks)
	s.dispatcher.SetTelemetry(s.tracer, s.metrics.deliveries, s.metrics.duration)
	s.a2a.SetTelemetry(s.metrics.callbacks)
}

func (s *Service) initTelemetry() {
	s.tracer = tracenoop.NewTracerProvider().Tracer("")
	s.metrics = newInstruments(noop.NewMeterProvider())
	s.callbacks.SetTelemetry(s.tracer, s.metrics.callbacks)
	s.dispatcher.SetTelemetry(s.tracer, s.metrics.deliveries, s.metrics.duration)
	s.a2a.SetTelemetry(s.metrics.callbacks)
}

func (s *Service) countFinished(ctx context.Context, before, after domain.JobStatus) {
	if !before.Terminal() && after.Terminal() {
		s.metrics.finished.Add(ctx, 1, telemetry.WithAttrs(attribute.String("status", string(after))))
	}
}
