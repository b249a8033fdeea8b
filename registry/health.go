package registry

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/health"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qPruneAgentAttempts  = queries.Must("PruneAgentAttempts")
	qLockAgentsForHealth = queries.Must("LockAgentsForHealth")
	qSetAgentHealth      = queries.Must("SetAgentHealth")
)

// attemptsKept is how long attempt samples are kept: the breaker reads the
// last Window+CoolDown (90 s by default); the rest is the log's business.
const attemptsKept = time.Hour

// PruneAttempts deletes attempt samples older than an hour; they are a
// working set for the breaker, not the audit trail (that is the log).
func (r *Registry) PruneAttempts(ctx context.Context) error {
	_, err := r.pool.Exec(ctx, qPruneAgentAttempts, r.now().Add(-attemptsKept))
	if err != nil {
		return fmt.Errorf("prune attempt samples: %w", err)
	}
	return nil
}

// HealthReport says which alerts one health sweep raised and cleared.
type HealthReport struct {
	Degraded  []string
	Recovered []string
}

// HealthSweep compares every agent with the alert thresholds of
// health_settings over the alert window and appends HEALTH_DEGRADED when an
// agent falls below them, HEALTH_RECOVERED when one with enough attempts is
// above them again: once per crossing, however often it runs. An agent with
// too few attempts in the window keeps its standing.
func (r *Registry) HealthSweep(ctx context.Context) (HealthReport, error) {
	var rep HealthReport
	verdicts, err := health.Judge(ctx, r.pool)
	if err != nil {
		return rep, err
	}
	err = r.store.InTx(ctx, func(tx pgx.Tx) error {
		rep = HealthReport{}
		rows, err := tx.Query(ctx, qLockAgentsForHealth)
		if err != nil {
			return err
		}
		type row struct {
			id       domain.AgentKey
			degraded bool
			version  int
		}
		var agents []row
		var a row
		if _, err := pgx.ForEachRow(rows, []any{&a.id.Namespace, &a.id.ID, &a.degraded, &a.version}, func() error {
			agents = append(agents, a)
			return nil
		}); err != nil {
			return err
		}
		for _, a := range agents {
			v, ok := verdicts[a.id]
			if !ok || v.Below == a.degraded {
				continue
			}
			t := domain.EventHealthRecovered
			if v.Below {
				t = domain.EventHealthDegraded
				rep.Degraded = append(rep.Degraded, a.id.ID)
			} else {
				rep.Recovered = append(rep.Recovered, a.id.ID)
			}
			recs, err := r.store.AppendTx(ctx, tx, domain.AgentStream(a.id), a.version,
				domain.NewEvent(t, v, domain.Metadata{Actor: "health"}))
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, qSetAgentHealth, a.id.Namespace, a.id.ID, v.Below, recs[0].Version); err != nil {
				return err
			}
			r.logger.WarnContext(ctx, "agent health "+map[bool]string{true: "degraded", false: "recovered"}[v.Below],
				"agent_id", a.id.ID, "namespace", a.id.Namespace, "window", v.Window, "attempted", v.Attempted, "reach_rate", v.ReachRate, "success_rate", v.SuccessRate)
		}
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("health sweep: %w", err)
	}
	return rep, nil
}

// healthInterval is how often the health sweep runs.
func (c Config) healthInterval() time.Duration {
	if c.HealthInterval > 0 {
		return c.HealthInterval
	}
	return 10 * time.Second
}
