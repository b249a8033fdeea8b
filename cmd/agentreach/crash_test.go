package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/pgtest"
	"github.com/agentreach/agentreach/jobs/callback"
	"github.com/agentreach/agentreach/webhook"
)

// serveProcess runs `agentreach serve` as a child process on addr, with
// extra flags after the test's own.
func serveProcess(t *testing.T, dsn, addr string, extra ...string) (*exec.Cmd, string, *syncBuffer) {
	t.Helper()
	cmd, out := startProcess(t, append([]string{"serve", "--insecure", "--addr", addr, "--database-url", dsn, "--log-level", "warn",
		"--deadline-sweep-interval", "200ms", "--lost-after", "2s"}, extra...)...)
	base := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		require.True(t, time.Now().Before(deadline), "serve did not get ready:\n%s", out.String())
		time.Sleep(50 * time.Millisecond) // poll interval while waiting on the condition
	}
	return cmd, base, out
}

// TestCrashConsistency SIGKILLs the service while jobs are in flight,
// starts it again on the same database, and checks that every accepted job
// reaches a terminal state with a valid event sequence.
// submitAccepted posts a job and answers its id when the service accepted
// it (202), "" when it answered anything else, and an error when it did
// not answer.
func submitAccepted(client *http.Client, base, body string) (string, error) {
	resp, err := client.Post(base+"/v1/jobs", "application/json", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		JobID string `json:"job_id"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode != http.StatusAccepted {
		return "", nil
	}
	return out.JobID, nil
}

func TestCrashConsistency(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	addr := deadAddr(t)
	first, base, _ := serveProcess(t, dsn, addr)

	// An inline agent that takes a moment, and an async one whose result
	// post is retried until the service answers again.
	newTestAgent(t, base, "slow", "t.crash", 50, func(w http.ResponseWriter, env webhook.Envelope) {
		time.Sleep(150 * time.Millisecond) // the agent's simulated work
		answer("SUCCESS", "")(w, env)
	})
	var asyncAgent *testAgent
	asyncAgent = newTestAgent(t, base, "async", "t.crash", 50, func(w http.ResponseWriter, env webhook.Envelope) {
		w.WriteHeader(http.StatusAccepted)
		go func() {
			for i := 0; i < 100 && time.Now().Before(env.Deadline); i++ {
				body := fmt.Sprintf(`{"status":"SUCCESS","result":{"async":true},"attempt":%d}`, env.Attempt)
				req, _ := http.NewRequest(http.MethodPost, env.ResultURL, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+asyncAgent.token)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
					if resp.StatusCode < 500 {
						return
					}
				}
				time.Sleep(100 * time.Millisecond) // the agent's own retry pause
			}
		}()
	})

	var (
		mu       sync.Mutex
		accepted []string
	)
	ctx, stopSubmitting := context.WithCancel(context.Background())
	submitted := make(chan struct{})
	go func() {
		defer close(submitted)
		for i := 0; ctx.Err() == nil && i < 400; i++ {
			id, err := submitAccepted(http.DefaultClient, base,
				fmt.Sprintf(`{"capability":"t.crash","payload":{"i":%d},"timeout_ms":3000,"max_attempts":6,"backoff_base_ms":200}`, i))
			if err != nil {
				time.Sleep(20 * time.Millisecond) // the service is down: a caller retries later
				continue
			}
			if id != "" {
				mu.Lock()
				accepted = append(accepted, id)
				mu.Unlock()
			}
			time.Sleep(10 * time.Millisecond) // a steady stream of submits
		}
	}()

	// Kill once jobs are both finished and in flight.
	pool, err := pgxpool.New(context.Background(), dsn)
	require.NoError(t, err)
	defer pool.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var finished, open int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT
			count(*) FILTER (WHERE type IN ('SUCCESS', 'DEAD_LETTER')), count(*) FILTER (WHERE type = 'ROUTED')
			FROM events`).Scan(&finished, &open))
		if finished >= 20 && open > finished {
			break
		}
		require.True(t, time.Now().Before(deadline), "no work in flight to crash into")
		time.Sleep(20 * time.Millisecond) // poll interval while waiting on the condition
	}
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()

	mu.Lock()
	before := len(accepted)
	mu.Unlock()
	_, _, secondOut := serveProcess(t, dsn, addr) // same address: agents and result URLs stay valid
	// Ten submits land on the new process before the stream stops.
	landed := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(accepted)
		mu.Unlock()
		if n >= before+10 {
			break
		}
		require.True(t, time.Now().Before(landed), "no submit was accepted by the restarted process")
		time.Sleep(10 * time.Millisecond) // poll interval while waiting on the condition
	}
	stopSubmitting()
	<-submitted

	mu.Lock()
	ids := append([]string(nil), accepted...)
	mu.Unlock()
	require.Greater(t, len(ids), 30)
	store := eventstore.New(pool)
	deadline = time.Now().Add(90 * time.Second)
	for _, id := range ids {
		for {
			recs, err := store.ReadStream(context.Background(), nil, domain.JobStream(id))
			require.NoError(t, err)
			require.NotEmpty(t, recs, "accepted job %s was lost", id)
			evs := make([]domain.Event, len(recs))
			for i, r := range recs {
				require.Equal(t, i+1, r.Version)
				evs[i] = r.Event()
			}
			j, err := domain.FoldJob(evs)
			require.NoError(t, err, "job %s has an invalid event sequence", id)
			if j.Status.Terminal() {
				successes := 0
				for _, e := range evs {
					if e.Type == domain.EventSuccess {
						successes++
					}
				}
				require.LessOrEqual(t, successes, 1)
				if j.Status == domain.StatusDeadLetter {
					require.Equal(t, j.MaxAttempts, j.Attempts, "DEAD_LETTER only after max_attempts")
				}
				break
			}
			if !time.Now().Before(deadline) {
				var timer, riverJobs string
				_ = pool.QueryRow(context.Background(), `SELECT coalesce((SELECT row_to_json(t)::text FROM job_timers t WHERE job_id = $1), 'none'),
					coalesce((SELECT string_agg(concat_ws(' ', id, kind, state, attempt, attempted_at, scheduled_at, args::text), '; ')
					FROM river_job WHERE args->>'job_id' = $1::text), 'none')`, id).Scan(&timer, &riverJobs)
				var types []string
				for _, e := range evs {
					types = append(types, string(e.Type))
				}
				t.Fatalf("job %s still %s after the restart: events %v; timer %s; river jobs %s\nlog of the restarted service:\n%s",
					id, j.Status, types, timer, riverJobs, truncateLines(secondOut.String(), 60))
			}
			time.Sleep(50 * time.Millisecond) // poll interval while waiting on the condition
		}
	}
	var lost, timeouts, statuses string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM events WHERE type = 'ATTEMPT_FAILED' AND data->>'reason' = 'dispatcher_lost')::text,
		(SELECT count(*) FROM events WHERE type = 'TIMEOUT')::text,
		(SELECT string_agg(type || '=' || n, ' ') FROM (SELECT type, count(*) n FROM events GROUP BY type ORDER BY type) x)`).
		Scan(&lost, &timeouts, &statuses))
	t.Logf("%d jobs accepted; recovered %s lost attempts and %s timeouts; events: %s", len(ids), lost, timeouts, statuses)
}

// TestGroupCommitKeepsThePromise: with submits gathered into shared
// transactions, a submit that got 202 survives a SIGKILL right after the
// answer; and the gathering really happens.
func TestGroupCommitKeepsThePromise(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	svc, base, _ := serveProcess(t, dsn, deadAddr(t))
	var (
		mu       sync.Mutex
		accepted []string
		killed   bool
	)
	var wg sync.WaitGroup
	for c := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Timeout: 5 * time.Second}
			for i := 0; ; i++ {
				resp, err := client.Post(base+"/v1/jobs", "application/json", strings.NewReader(
					fmt.Sprintf(`{"capability":"t.gc","payload":{"c":%d,"i":%d},"max_attempts":1}`, c, i)))
				if err != nil {
					return // the service is gone
				}
				var out struct {
					JobID string `json:"job_id"`
				}
				_ = json.NewDecoder(resp.Body).Decode(&out)
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					continue
				}
				mu.Lock()
				accepted = append(accepted, out.JobID)
				if len(accepted) == 300 && !killed {
					killed = true
					_ = svc.Process.Signal(syscall.SIGKILL) // right after this 202
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	_ = svc.Wait()
	mu.Lock()
	ids := append([]string(nil), accepted...)
	mu.Unlock()
	require.GreaterOrEqual(t, len(ids), 300)

	pool, err := pgxpool.New(context.Background(), dsn)
	require.NoError(t, err)
	defer pool.Close()
	streams := make([]string, len(ids))
	for i, id := range ids {
		streams[i] = domain.JobStream(id)
	}
	var found, txs int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT tx_id::text) FROM events
		WHERE type = 'SUBMITTED' AND stream_id = ANY($1)`, streams).Scan(&found, &txs))
	require.Equal(t, len(ids), found, "every submit that got 202 is in the log")
	require.Less(t, txs, len(ids), "submits shared transactions")
	t.Logf("%d accepted submits in %d transactions", found, txs)
}

// TestSharedWritesSurviveSIGKILL: the dispatch side's writes (ROUTED with
// the slot it takes, a delivery's outcome, a callback's acknowledgement)
// share transactions under load; a SIGKILL while they are being written
// loses nothing and doubles nothing. After a restart every accepted job
// ends with one SUCCESS and one acknowledged callback, every stream folds
// by the state machine with gap-free versions, and an agent that takes two
// attempts at a time was never sent more.
func TestSharedWritesSurviveSIGKILL(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	addr := deadAddr(t)
	first, base, _ := serveProcess(t, dsn, addr)

	var mu sync.Mutex
	called := map[string]int{} // callbacks received, by job
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var cb callback.Body
		_ = json.NewDecoder(r.Body).Decode(&cb)
		mu.Lock()
		called[cb.JobID]++
		mu.Unlock()
	}))
	t.Cleanup(receiver.Close)
	var inFlight, most atomic.Int64 // at the bounded agent
	for i, maxConcurrent := range []int{0, 0, 2} {
		agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet {
				return // a probe
			}
			var env webhook.Envelope
			_ = json.NewDecoder(r.Body).Decode(&env)
			if maxConcurrent > 0 {
				n := inFlight.Add(1)
				defer inFlight.Add(-1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(50 * time.Millisecond) // the bounded agent's work: it is often full
			}
			answer("SUCCESS", "")(w, env)
		}))
		t.Cleanup(agent.Close)
		id := fmt.Sprintf("shared-%d", i)
		postJSON(t, base+"/v1/agents", fmt.Sprintf(`{"agent_id":%q,"capabilities":["t.shared"],"endpoint":%q,"max_concurrent":%d,"ttl_seconds":600}`,
			id, agent.URL, maxConcurrent), http.StatusCreated, nil)
		waitState(t, base, id, "HEALTHY", 20*time.Second)
	}

	var accepted []string
	ctx, stopSubmitting := context.WithCancel(context.Background())
	var submitters sync.WaitGroup
	body := fmt.Sprintf(`{"capability":"t.shared","payload":{},"timeout_ms":3000,"max_attempts":6,"backoff_base_ms":200,"callback_url":%q}`, receiver.URL)
	for range 32 {
		submitters.Go(func() {
			client := &http.Client{Timeout: 5 * time.Second}
			for ctx.Err() == nil {
				id, err := submitAccepted(client, base, body)
				if err != nil {
					time.Sleep(20 * time.Millisecond) // the service is down: a caller retries later
					continue
				}
				if id != "" {
					mu.Lock()
					accepted = append(accepted, id)
					mu.Unlock()
				}
			}
		})
	}

	// Kill once outcomes are being written in shared transactions and
	// attempts are under way.
	pool, err := pgxpool.New(context.Background(), dsn)
	require.NoError(t, err)
	defer pool.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var shared, routed, finished int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT
			count(*) FILTER (WHERE type = 'SUCCESS') - count(DISTINCT tx_id::text) FILTER (WHERE type = 'SUCCESS'),
			count(*) FILTER (WHERE type = 'ROUTED'), count(*) FILTER (WHERE type = 'SUCCESS') FROM events`).Scan(&shared, &routed, &finished))
		if shared >= 50 && routed > finished {
			break
		}
		require.True(t, time.Now().Before(deadline), "no outcomes written in shared transactions to crash into (%d shared)", shared)
		time.Sleep(10 * time.Millisecond) // poll interval while waiting on the condition
	}
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	mu.Lock()
	before := len(accepted)
	mu.Unlock()
	_, _, secondOut := serveProcess(t, dsn, addr) // same address: result URLs stay valid
	landed := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(accepted)
		mu.Unlock()
		if n >= before+50 {
			break
		}
		require.True(t, time.Now().Before(landed), "no submit was accepted by the restarted process")
		time.Sleep(10 * time.Millisecond) // poll interval while waiting on the condition
	}
	stopSubmitting()
	submitters.Wait()

	mu.Lock()
	ids := append([]string(nil), accepted...)
	mu.Unlock()
	store := eventstore.New(pool)
	// A callback in flight at the kill is sent again after the callback
	// grace (45 s).
	deadline = time.Now().Add(150 * time.Second)
	for _, id := range ids {
		for {
			recs, err := store.ReadStream(context.Background(), nil, domain.JobStream(id))
			require.NoError(t, err)
			require.NotEmpty(t, recs, "accepted job %s was lost", id)
			evs := make([]domain.Event, len(recs))
			count := map[domain.EventType]int{}
			for i, r := range recs {
				require.Equal(t, i+1, r.Version, "job %s", id)
				evs[i] = r.Event()
				count[r.Type]++
			}
			j, err := domain.FoldJob(evs)
			require.NoError(t, err, "job %s has an invalid event sequence", id)
			if j.Status.Terminal() && j.CallbackAcked {
				require.Equal(t, domain.StatusSuccess, j.Status, "job %s", id)
				require.Equal(t, 1, count[domain.EventSuccess], "job %s", id)
				require.Equal(t, 1, count[domain.EventCallbackSent], "job %s", id)
				break
			}
			require.True(t, time.Now().Before(deadline), "job %s still %s (callback acknowledged: %v) after the restart; log of the restarted service:\n%s",
				id, j.Status, j.CallbackAcked, truncateLines(secondOut.String(), 60))
			time.Sleep(50 * time.Millisecond) // poll interval while waiting on the condition
		}
	}
	mu.Lock()
	for _, id := range ids {
		require.Positive(t, called[id], "job %s was never called back", id)
	}
	mu.Unlock()
	require.LessOrEqual(t, most.Load(), int64(2), "the bounded agent was sent more attempts at once than it takes")

	var doubled, txs, outcomes, lost int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM (SELECT stream_id FROM events WHERE type IN ('SUCCESS', 'CALLBACK_DELIVERED')
			GROUP BY stream_id, type HAVING count(*) > 1) d),
		count(DISTINCT tx_id::text), count(*),
		(SELECT count(*) FROM events WHERE type = 'ATTEMPT_FAILED' AND data->>'reason' = 'dispatcher_lost')
		FROM events WHERE type = 'SUCCESS'`).Scan(&doubled, &txs, &outcomes, &lost))
	require.Zero(t, doubled, "no job of the log (acknowledged or not) has two successes or two acknowledged callbacks")
	t.Logf("%d jobs accepted; %d outcomes in %d transactions; %d attempts lost to the kill and retried; bounded agent's most at once: %d",
		len(ids), outcomes, txs, lost, most.Load())
}
