package main

import (
	"context"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/internal/telemetry"
	"github.com/agentreach/agentreach/registry"
)

// registerGauges publishes what is read at scrape time: the database's
// reachability and standbys, queue depth per River queue, agents per
// state, and each projection's lag.
func registerGauges(a *App) error {
	if err := telemetry.RegisterOutage(a.tel.Meter, a.outage); err != nil {
		return err
	}
	if err := registerReplication(a); err != nil {
		return err
	}
	return telemetry.RegisterGauges(a.tel.Meter, telemetry.Gauges{Ready: a.migrated.Load, QueueDepths: a.jobs.QueueDepths,
		AgentStates: a.agentStates, Lag: a.projector.Lag})
}

// agentStates counts the registered agents per state, every state present
// (all zero when they cannot be listed).
func (a *App) agentStates(ctx context.Context) map[string]int64 {
	counts := map[string]int64{}
	for _, st := range []domain.AgentState{domain.AgentProbing, domain.AgentHealthy, domain.AgentSuspect,
		domain.AgentDown, domain.AgentDraining, domain.AgentOffline} {
		counts[string(st)] = 0
	}
	if list, err := a.registry.List(ctx, registry.ListFilter{}); err == nil {
		for _, ag := range list {
			if _, known := counts[string(ag.State)]; known {
				counts[string(ag.State)]++
			}
		}
	}
	return counts
}
