package jobs

import (
	"context"

	"github.com/agentreach/agentreach/sweep"
)

// Sweeps are the compensation sweeps (deadlines, repairs, watermarks) for
// sweep.Runner, which runs them in the leading process only, leaving no
// River job behind.
func (s *Service) Sweeps() []sweep.Sweep {
	return []sweep.Sweep{
		{Name: "deadline_sweep", Every: s.cfg.DeadlineSweepInterval, Run: func(ctx context.Context) error {
			_, err := s.SweepDeadlines(ctx)
			return err
		}, Wake: s.waiters}, // a slot given back to a waiting attempt: dispatch it now
		{Name: "repair_sweep", Every: s.cfg.RepairSweepInterval, Run: func(ctx context.Context) error {
			_, err := s.SweepRepairs(ctx)
			return err
		}},
		{Name: "pressure_sweep", Every: pressureEvery, Run: s.SweepPressure},
	}
}
