package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRepairSweep: an open job whose timer vanished is dispatched again by
// the repair sweep, and the sweep records what it repaired.
func TestRepairSweep(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	ctx := context.Background()
	pool := svc.m.app.pool

	// A job waiting 10 minutes for its retry loses its timer.
	open := submitOK(t, base, `{"capability":"t.later","payload":{},"max_attempts":3,"backoff_base_ms":600000}`)
	waitJob(t, base, open, func(j jobJSON) bool { return j.Attempts == 1 && j.Error != "" }, 10*time.Second)
	_, err := pool.Exec(ctx, `DELETE FROM job_timers WHERE job_id = $1`, open)
	require.NoError(t, err)

	// An agent appears, so the redispatched attempt succeeds.
	newTestAgent(t, base, "later", "t.later", 50, answer("SUCCESS", ""))
	j := waitTerminal(t, base, open, 20*time.Second)
	require.Equal(t, "SUCCESS", j.Status)
	require.Equal(t, []string{"SUBMITTED", "ROUTED", "ATTEMPT_FAILED", "ROUTED", "DELIVERED", "SUCCESS"}, types(jobEvents(t, base, open)))

	var reports int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE stream_id = 'sweep:repair' AND type = 'SWEEP_REPORT'
		AND data->'redispatched' ? $1`, open).Scan(&reports))
	require.Equal(t, 1, reports, "the repair is recorded once")

	// The repair sweep also forgets idempotency keys after a day.
	_, err = pool.Exec(ctx, `INSERT INTO idempotency_keys (namespace, key, job_id, request_hash, created_at)
		VALUES ('default', 'old', $1, '\x00', now() - interval '25 hours'), ('default', 'new', $1, '\x00', now())`, open)
	require.NoError(t, err)
	_, err = svc.m.app.jobs.SweepRepairs(ctx)
	require.NoError(t, err)
	var keys []string
	rows, err := pool.Query(ctx, `SELECT key FROM idempotency_keys ORDER BY key`)
	require.NoError(t, err)
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		keys = append(keys, k)
	}
	require.Equal(t, []string{"new"}, keys)
}

// TestWatchdogRequeuesStuckWork: River jobs left "running" by a process
// that died (a dispatch and a callback) are noticed by their timers and
// enqueued again.
func TestWatchdogRequeuesStuckWork(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	ctx := context.Background()
	pool := svc.m.app.pool
	// What a dead process leaves behind: running, attempted long ago. The
	// job's queue is paused meanwhile, and the job must not be running for
	// real, so River does not overwrite the stranded state.
	strand := func(queue string, riverJobID int64) {
		require.NoError(t, svc.m.app.river.QueuePause(ctx, queue, nil))
		deadline := time.Now().Add(10 * time.Second)
		for {
			var state string
			require.NoError(t, pool.QueryRow(ctx, `SELECT state::text FROM river_job WHERE id = $1`, riverJobID).Scan(&state))
			if state != "running" {
				break
			}
			require.True(t, time.Now().Before(deadline))
			time.Sleep(10 * time.Millisecond) // poll interval while waiting on the condition
		}
		_, err := pool.Exec(ctx, `UPDATE river_job SET state = 'running', attempted_at = now() - interval '1 hour',
			attempt = greatest(attempt, 1) WHERE id = $1`, riverJobID)
		require.NoError(t, err)
		require.NoError(t, svc.m.app.river.QueueResume(ctx, queue, nil))
	}
	timerJob := func(jobID string) (int64, string) {
		var id int64
		var phase string
		require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(river_job_id, 0), phase FROM job_timers WHERE job_id = $1`, jobID).Scan(&id, &phase))
		return id, phase
	}

	var ok atomic.Bool
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ok.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer receiver.Close()

	// A callback whose worker "died" while its receiver was down.
	cb := submitOK(t, base, fmt.Sprintf(`{"capability":"t.none","payload":{},"max_attempts":1,"callback_url":%q}`, receiver.URL))
	waitJob(t, base, cb, func(j jobJSON) bool { return j.Callback != nil && j.Callback.Attempts >= 1 }, 10*time.Second)
	rid, phase := timerJob(cb)
	require.Equal(t, "callback", phase)
	strand("callbacks", rid)
	ok.Store(true)
	waitJob(t, base, cb, func(j jobJSON) bool { return j.Callback.Acknowledged }, 20*time.Second)

	// A dispatch that "died" before routing: only the watchdog can move
	// the job. (A submit with an Idempotency-Key is dispatched by River.)
	newTestAgent(t, base, "wd", "t.wd", 50, answer("SUCCESS", ""))
	require.NoError(t, svc.m.app.river.QueuePause(ctx, "dispatch_low", nil))
	stuck := submitOK(t, base, `{"capability":"t.wd","payload":{},"priority":"low"}`, "Idempotency-Key", "wd-1")
	rid, phase = timerJob(stuck)
	require.Equal(t, "queued", phase)
	strand("dispatch_low", rid)
	require.Equal(t, "SUCCESS", waitTerminal(t, base, stuck, 20*time.Second).Status)

	// Direct dispatches whose process "died" right after the submit
	// committed. A job no agent offers yet is not routed at submit: its
	// queued timer names no River job, and the watchdog enqueues the
	// attempt in River. One routed with its submit: its routed timer
	// declares the attempt lost after its deadline, and it is retried.
	svc.m.app.jobs.Dispatcher().HoldDirect(true)
	queued := submitOK(t, base, `{"capability":"t.wd2","payload":{}}`)
	routed := submitOK(t, base, `{"capability":"t.wd","payload":{},"timeout_ms":1000,"backoff_base_ms":100}`) // the retry has a second to be answered, even on a loaded machine
	svc.m.app.jobs.Dispatcher().HoldDirect(false)
	newTestAgent(t, base, "wd2", "t.wd2", 50, answer("SUCCESS", ""))
	rid, phase = timerJob(queued)
	require.Equal(t, "queued", phase)
	require.Zero(t, rid, "a direct dispatch has no River job")
	_, phase = timerJob(routed)
	require.Equal(t, "routed", phase)
	require.Equal(t, "SUCCESS", waitTerminal(t, base, queued, 20*time.Second).Status)
	j := waitTerminal(t, base, routed, 20*time.Second)
	require.Equal(t, "SUCCESS", j.Status)
	require.Equal(t, 2, j.Attempts, "the lost attempt was retried")

	var requeued, redispatched, redispatchedDirect, lost int
	require.NoError(t, pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM events WHERE stream_id = 'sweep:deadline' AND data->'callbacks_requeued' ? $1),
		(SELECT count(*) FROM events WHERE stream_id = 'sweep:deadline' AND data->'redispatched' ? $2),
		(SELECT count(*) FROM events WHERE stream_id = 'sweep:deadline' AND data->'redispatched' ? $3),
		(SELECT count(*) FROM events WHERE stream_id = 'sweep:deadline' AND data->'lost' ? $4)`, cb, stuck, queued, routed).
		Scan(&requeued, &redispatched, &redispatchedDirect, &lost))
	require.Equal(t, 1, requeued)
	require.Equal(t, 1, redispatched)
	require.Equal(t, 1, redispatchedDirect)
	require.Equal(t, 1, lost)
}

// TestListJobs pages through jobs newest first with filters.
func TestListJobs(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	var ids []string
	for i := range 5 {
		ids = append(ids, submitOK(t, base, fmt.Sprintf(`{"capability":"t.list%d","payload":{},"max_attempts":1}`, i%2)))
	}
	for _, id := range ids {
		waitTerminal(t, base, id, 10*time.Second)
	}
	type page struct {
		Jobs []struct {
			JobID      string `json:"job_id"`
			Status     string `json:"status"`
			Capability string `json:"capability"`
		} `json:"jobs"`
		NextCursor string `json:"next_cursor"`
	}
	deadline := time.Now().Add(10 * time.Second)
	var p page
	for { // the list reads the projection, which trails the log briefly
		getJSON(t, base+"/v1/jobs?status=DEAD_LETTER&limit=10", http.StatusOK, &p)
		if len(p.Jobs) == 5 {
			break
		}
		require.True(t, time.Now().Before(deadline))
		time.Sleep(20 * time.Millisecond) // poll interval while waiting on the condition
	}
	getJSON(t, base+"/v1/jobs?status=DEAD_LETTER&limit=2", http.StatusOK, &p)
	var got []string
	for {
		for _, j := range p.Jobs {
			require.Equal(t, "DEAD_LETTER", j.Status)
			got = append(got, j.JobID)
		}
		if p.NextCursor == "" {
			break
		}
		getJSON(t, base+"/v1/jobs?status=DEAD_LETTER&limit=2&cursor="+p.NextCursor, http.StatusOK, &p)
	}
	require.Equal(t, []string{ids[4], ids[3], ids[2], ids[1], ids[0]}, got, "newest first, every job once")
	getJSON(t, base+"/v1/jobs?capability=t.list1", http.StatusOK, &p)
	require.Len(t, p.Jobs, 2)
	var e struct{ Error struct{ Field string } }
	getJSON(t, base+"/v1/jobs?status=NOPE", http.StatusBadRequest, &e)
	require.Equal(t, "status", e.Error.Field)
}
