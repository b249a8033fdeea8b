package jobs

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/agentreach/agentreach/jobs/jobstore"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qRiverQueueDepths = queries.Must("RiverQueueDepths")
	qDropAllJobTimers = queries.Must("DropAllJobTimers")
	qDropAllSlots     = queries.Must("DropAllAgentSlots")
	qZeroLaneDepths   = queries.Must("ZeroLaneDepths")
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
// timer and every agent slot, and sets every lane's depth to zero (the
// jobs dropped wait for nothing now): for benchmarks that measure submits alone and then the end to end
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
	if _, err := s.pool.Exec(ctx, qZeroLaneDepths); err != nil {
		return fmt.Errorf("zero the lanes' depths: %w", err)
	}
	return nil
}

// riverQueue inserts the River jobs the unit of work's writes ask for
// (jobstore.Queue): their args are this package's.
type riverQueue struct{ s *Service }

func (q riverQueue) InsertTx(ctx context.Context, tx pgx.Tx, jobs []jobstore.Enqueued) ([]int64, error) {
	params := make([]river.InsertManyParams, len(jobs))
	for i, j := range jobs {
		switch j.Kind {
		case jobstore.EnqueueDispatch:
			params[i] = river.InsertManyParams{Args: DispatchArgs{JobID: j.JobID, Attempt: j.Attempt, WaitingSince: j.WaitingSince, Prefer: j.Agent},
				InsertOpts: dispatchOpts(j.Priority)}
		case jobstore.EnqueueCallback:
			params[i] = river.InsertManyParams{Args: CallbackArgs{JobID: j.JobID}}
		case jobstore.EnqueuePoll:
			params[i] = river.InsertManyParams{Args: A2APollArgs{JobID: j.JobID, Attempt: j.Attempt}}
		default:
			return nil, fmt.Errorf("enqueue job %s: unknown kind %d", j.JobID, j.Kind)
		}
	}
	res, err := q.s.client.InsertManyTx(ctx, tx, params)
	if err != nil {
		return nil, err
	}
	ids := make([]int64, len(res))
	for i, r := range res {
		ids[i] = r.Job.ID
	}
	return ids, nil
}
