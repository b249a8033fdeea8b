package main

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/registry"
)

// registerGauges publishes what is read at scrape time: queue depth per
// River queue, agents per state, and each projection's lag.
func registerGauges(a *App) error {
	m := a.tel.Meter.Meter("github.com/agentreach/agentreach")
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
	_, err = m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		if !a.migrated.Load() {
			return nil
		}
		depth, err := a.jobs.QueueDepths(ctx)
		if err != nil {
			return nil // a gauge without a reading this scrape
		}
		for q, n := range depth {
			o.ObserveInt64(queue, n, metric.WithAttributes(attribute.String("queue", q)))
		}
		counts := map[domain.AgentState]int64{}
		if list, err := a.registry.List(ctx, registry.ListFilter{}); err == nil {
			for _, ag := range list {
				counts[ag.State]++
			}
		}
		for _, st := range []domain.AgentState{domain.AgentProbing, domain.AgentHealthy, domain.AgentSuspect,
			domain.AgentDown, domain.AgentDraining, domain.AgentOffline} {
			o.ObserveInt64(agents, counts[st], metric.WithAttributes(attribute.String("state", string(st))))
		}
		if l, err := a.projector.Lag(ctx); err == nil {
			for name, n := range l {
				o.ObserveInt64(lag, n, metric.WithAttributes(attribute.String("projection", name)))
			}
		}
		return nil
	}, queue, agents, lag)
	return err
}
