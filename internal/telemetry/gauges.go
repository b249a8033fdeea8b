package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Gauges are the readings published at scrape time, each a count per label
// value.
type Gauges struct {
	// Ready reports whether readings can be taken yet (the schema is
	// current); a scrape before has none.
	Ready func() bool
	// QueueDepths counts the River jobs waiting per queue; when it fails,
	// the scrape has no readings at all.
	QueueDepths func(context.Context) (map[string]int64, error)
	// AgentStates counts the registered agents per state, every state
	// present.
	AgentStates func(context.Context) map[string]int64
	// Lag counts the events each projection has not folded; when it fails,
	// the scrape has no lag.
	Lag func(context.Context) (map[string]int64, error)
}

// RegisterGauges publishes g on mp as agentreach.queue.depth (per queue),
// agentreach.agents (per state) and agentreach.projector.lag (per
// projection).
func RegisterGauges(mp metric.MeterProvider, g Gauges) error {
	m := mp.Meter("github.com/agentreach/agentreach")
	queue, err := m.Int64ObservableGauge("agentreach.queue.depth",
		metric.WithDescription("River jobs waiting (available, scheduled or retryable), per queue."))
	if err != nil {
		return err
	}
	agents, err := m.Int64ObservableGauge("agentreach.agents", metric.WithDescription("Registered agents, per state."))
	if err != nil {
		return err
	}
	lag, err := m.Int64ObservableGauge("agentreach.projector.lag",
		metric.WithDescription("Events of the log a projection has not folded yet."))
	if err != nil {
		return err
	}
	observe := func(o metric.Observer, g metric.Int64Observable, key string, counts map[string]int64) {
		for v, n := range counts {
			o.ObserveInt64(g, n, metric.WithAttributes(attribute.String(key, v)))
		}
	}
	_, err = m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		if !g.Ready() {
			return nil
		}
		depth, err := g.QueueDepths(ctx)
		if err != nil {
			return nil // a gauge without a reading this scrape
		}
		observe(o, queue, "queue", depth)
		observe(o, agents, "state", g.AgentStates(ctx))
		if l, err := g.Lag(ctx); err == nil {
			observe(o, lag, "projection", l)
		}
		return nil
	}, queue, agents, lag)
	return err
}
