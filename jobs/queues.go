package jobs

import (
	"context"
	"fmt"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qRiverQueueDepths = queries.Must("RiverQueueDepths")
	qDropAllJobTimers = queries.Must("DropAllJobTimers")
	qDropAllSlots     = queries.Must("DropAllAgentSlots")
)

// QueueDepths counts, per River queue, the jobs waiting to run (available,
// scheduled or retryable). River has no count call, so this is the one
// read of River's table outside River (RiverQueueDepths in jobs.sql says
// why); the states are rivertype's names, not spelled in the SQL.
func (s *Service) QueueDepths(ctx context.Context) (map[string]int64, error) {
	depth := map[string]int64{}
	for q := range DefaultQueues() {
		depth[q] = 0
	}
	waiting := []string{string(rivertype.JobStateAvailable), string(rivertype.JobStateScheduled), string(rivertype.JobStateRetryable)}
	rows, err := s.pool.Query(ctx, qRiverQueueDepths, waiting)
	if err != nil {
		return nil, fmt.Errorf("queue depths: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var q string
		var n int64
		if err := rows.Scan(&q, &n); err != nil {
			return nil, fmt.Errorf("queue depths: %w", err)
		}
		depth[q] = n
	}
	return depth, rows.Err()
}

// DropDispatchBacklog deletes every dispatch waiting in River, every
// timer and every agent slot: for benchmarks that measure submits alone and then the end to end
// path on a clean queue. It loses the work it drops; never call it on a
// service that serves callers.
func (s *Service) DropDispatchBacklog(ctx context.Context) error {
	for {
		res, err := s.client.JobDeleteMany(ctx, river.NewJobDeleteManyParams().
			Kinds(DispatchArgs{}.Kind()).States(rivertype.JobStateAvailable).First(10000))
		if err != nil {
			return fmt.Errorf("drop dispatches: %w", err)
		}
		if len(res.Jobs) == 0 {
			break
		}
	}
	if _, err := s.pool.Exec(ctx, qDropAllJobTimers); err != nil {
		return fmt.Errorf("drop timers: %w", err)
	}
	if _, err := s.pool.Exec(ctx, qDropAllSlots); err != nil {
		return fmt.Errorf("drop slots: %w", err)
	}
	return nil
}
