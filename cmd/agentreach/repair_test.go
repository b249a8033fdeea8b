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

// TestRepairSweep: an open job whose River job and timer vanished is
// dispatched again, a finished job whose callback job vanished is called
// back, and the sweep records what it repaired.
func TestRepairSweep(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	ctx := context.Background()
	pool := svc.m.app.pool

	var calls atomic.Int32
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer receiver.Close()

	// A job waiting 10 minutes for its retry loses its timer.
	open := submitOK(t, base, `{"capability":"t.later","payload":{},"max_attempts":3,"backoff_base_ms":600000}`)
	waitJob(t, base, open, func(j jobJSON) bool { return j.Attempts == 1 && j.Error != "" }, 10*time.Second)
	_, err := pool.Exec(ctx, `DELETE FROM job_timers WHERE job_id = $1`, open)
	require.NoError(t, err)

	// A finished job loses its callback before it ran.
	_, err = pool.Exec(ctx, `SELECT 1`) // keep the pool warm
	require.NoError(t, err)
	finished := submitOK(t, base, fmt.Sprintf(`{"capability":"t.later","payload":{},"max_attempts":1,"callback_url":%q}`, receiver.URL))
	waitTerminal(t, base, finished, 10*time.Second)
	_, err = pool.Exec(ctx, `DELETE FROM river_job WHERE kind = 'callback_job' AND args->>'job_id' = $1 AND state <> 'running'`, finished)
	require.NoError(t, err)

	// An agent appears, so the redispatched attempt succeeds.
	newTestAgent(t, base, "later", "t.later", 50, answer("SUCCESS", ""))
	j := waitTerminal(t, base, open, 20*time.Second)
	require.Equal(t, "SUCCESS", j.Status)
	require.Equal(t, []string{"SUBMITTED", "ROUTED", "ATTEMPT_FAILED", "ROUTED", "DELIVERED", "SUCCESS"}, types(jobEvents(t, base, open)))
	waitJob(t, base, finished, func(j jobJSON) bool { return j.Callback != nil && j.Callback.Acknowledged }, 20*time.Second)
	require.GreaterOrEqual(t, calls.Load(), int32(1))

	var reports int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE stream_id = 'sweep:repair' AND type = 'SWEEP_REPORT'
		AND (data->'redispatched' ? $1 OR data->'callbacks_requeued' ? $2)`, open, finished).Scan(&reports))
	require.GreaterOrEqual(t, reports, 1, "the repair is recorded")
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
