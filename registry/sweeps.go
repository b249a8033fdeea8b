package registry

import (
	"context"
	"errors"

	"github.com/agentreach/agentreach/sweep"
)

// Sweeps are the registry's periodic sweeps (leases, health alerts and the
// pruning of old samples, Agent Cards) for sweep.Runner, which runs them in
// the leading process only, leaving no River job behind.
func (r *Registry) Sweeps() []sweep.Sweep {
	return []sweep.Sweep{
		{Name: "agent_sweep", Every: r.cfg.SweepInterval, Run: func(ctx context.Context) error {
			_, err := r.Sweep(ctx)
			return err
		}},
		{Name: "health_sweep", Every: r.cfg.healthInterval(), Run: func(ctx context.Context) error {
			if _, err := r.HealthSweep(ctx); err != nil {
				return err
			}
			return r.PruneAttempts(ctx)
		}},
		{Name: "agent_card_refresh", Every: r.cfg.SweepInterval, Run: func(ctx context.Context) error {
			_, err := r.RefreshCards(ctx)
			return err
		}},
		{Name: "mcp_server_refresh", Every: r.cfg.SweepInterval, Run: func(ctx context.Context) error {
			_, err := r.RefreshMCPServers(ctx)
			return errors.Join(err, r.watchMCPServers(ctx))
		}},
	}
}
