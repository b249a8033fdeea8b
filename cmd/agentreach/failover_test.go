package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/internal/devdb"
	"github.com/agentreach/agentreach/webhook"
)

// The failover drill (make ha-test): a pg_auto_failover formation on
// loopback (a monitor, two data nodes), serve on its multi-host URL with
// --require-sync-standby, and a steady submit load through a planned
// failover and then a SIGKILL of the new primary's postmaster. Every
// accepted job ends SUCCESS and is still there after both, each is called
// back once (one webhook-id), no submit answers 500, and no job exists
// whose submit was refused. The outages, as submitters saw them, are
// printed. AGENTREACH_HA_NODE_LOSS=1 adds the loss of a whole node (about
// a minute more), run by hand for the docs' figures.
func TestFailoverDrill(t *testing.T) {
	if os.Getenv("AGENTREACH_HA_DRILL") != "1" {
		t.Skip("the failover drill runs with make ha-test (AGENTREACH_HA_DRILL=1)")
	}
	if devdb.FindAutoctl() == "" {
		t.Fatal("pg_autoctl is missing: .ci/run installs it (Debian: postgresql-15-auto-failover pg-auto-failover-cli)")
	}
	ctx := t.Context()
	began := time.Now()
	f, err := devdb.StartFormation(ctx, "agentreach", slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("pg_autoctl logs:\n%s", f.Logs())
		}
		require.NoError(t, f.Close())
	})
	t.Logf("formation: a monitor and two nodes, primary and secondary after %s", time.Since(began).Round(100*time.Millisecond))
	dsn := f.URL("postgres", "agentreach")
	svc := startTuned(t, map[string]string{"DATABASE_URL": dsn}, fastSweeps,
		"serve", "--insecure", "--addr", "127.0.0.1:0", "--log-level", "warn", "--require-sync-standby",
		"--rate-limit", "0") // the drill's reads of every job are not what it measures
	base := svc.m.URL()
	waitReady(t, base)

	agent := newCountingAgent(t)
	postJSON(t, base+"/v1/agents", fmt.Sprintf(`{"agent_id":"drill","capabilities":["t.drill"],"endpoint":%q,"ttl_seconds":300}`, agent.srv.URL),
		http.StatusCreated, &agentJSON{})
	waitState(t, base, "drill", "HEALTHY", 30*time.Second)
	callbacks := newWebhookCounter(t)
	load := startSubmitLoad(base, fmt.Sprintf(`{"capability":"t.drill","payload":{},"callback_url":%q,"max_attempts":10}`, callbacks.srv.URL))
	defer load.stop()
	load.waitAccepted(t, 100)

	primary, err := f.Primary(ctx)
	require.NoError(t, err)
	failoverAt := time.Now()
	require.NoError(t, f.Failover(ctx))
	require.NoError(t, f.WaitRoles(ctx, 60*time.Second, "primary", "secondary"))
	t.Logf("perform failover: %s → the other node in %s", primary.Name, time.Since(failoverAt).Round(100*time.Millisecond))
	load.waitAccepted(t, load.acceptedCount()+100)

	primary, err = f.Primary(ctx)
	require.NoError(t, err)
	killAt := time.Now()
	require.NoError(t, f.KillPostmaster(primary.Name))
	require.NoError(t, f.WaitRoles(ctx, 60*time.Second, "primary", "secondary"))
	load.waitAccepted(t, load.acceptedCount()+100)
	events := []drillEvent{{"perform failover", failoverAt}, {"SIGKILL of the primary's postmaster", killAt}}

	lostAt := time.Now()
	held := standbyLossHoldsCallbacks(t, f, base, callbacks)
	load.waitAccepted(t, load.acceptedCount()+100)
	events = append(events, drillEvent{"loss of the standby node", lostAt})

	if os.Getenv("AGENTREACH_HA_NODE_LOSS") == "1" {
		primary, err = f.Primary(ctx)
		require.NoError(t, err)
		lossAt := time.Now()
		require.NoError(t, f.KillNode(primary.Name))
		other := "node_1"
		if primary.Name == other {
			other = "node_2"
		}
		require.NoError(t, f.WaitNode(ctx, 180*time.Second, other, "wait_primary"), "the other node promoted")
		t.Logf("node loss: %s killed; the other node promoted after %s; writes stay refused until a synchronous standby streams again",
			primary.Name, time.Since(lossAt).Round(100*time.Millisecond))
		rejoinAt := time.Now()
		require.NoError(t, f.RestartNode(primary.Name))
		require.NoError(t, f.WaitRoles(ctx, 180*time.Second, "primary", "secondary"))
		t.Logf("node loss: %s back as secondary %s after its restart", primary.Name, time.Since(rejoinAt).Round(100*time.Millisecond))
		load.waitAccepted(t, load.acceptedCount()+100)
		events = append(events, drillEvent{"loss of the primary node", lossAt})
	}
	load.stop()

	accepted, answers := load.results()
	for _, a := range answers {
		require.Contains(t, []int{http.StatusAccepted, http.StatusServiceUnavailable}, a.status,
			"a submit answered %d at %s: %s", a.status, a.at.Format(time.TimeOnly), a.body)
	}
	accepted = append(accepted, held...)
	for _, id := range accepted {
		require.Equal(t, "SUCCESS", waitDrillJob(t, base, dsn, id, 120*time.Second), "job %s", id)
	}
	deadline := time.Now().Add(120 * time.Second)
	for callbacks.distinct() < len(accepted) {
		require.True(t, time.Now().Before(deadline), "%d of %d jobs called back within 120 s", callbacks.distinct(), len(accepted))
		time.Sleep(50 * time.Millisecond) // poll interval while waiting on the condition
	}
	for _, id := range accepted {
		require.Len(t, callbacks.ids(id), 1, "job %s called back under one webhook-id", id)
	}
	require.Equal(t, len(accepted), callbacks.distinct(), "no callback for a job that was not accepted")

	// No ghost: every job in the log is one whose submit was accepted.
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT DISTINCT substr(stream_id, 5) FROM events WHERE starts_with(stream_id, 'job:')`)
	require.NoError(t, err)
	logged, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	slices.Sort(logged)
	slices.Sort(accepted)
	require.Equal(t, accepted, logged, "the jobs in the log are exactly the accepted ones")

	refused := len(answers) - len(accepted)
	t.Logf("drill: %d submits, %d accepted (each SUCCESS, called back under one webhook-id), %d refused with 503, none answered 500, no ghost; %d deliveries for %d jobs",
		len(answers), len(accepted), refused, agent.count(), agent.distinct())
	for i, e := range events {
		to := time.Now()
		if i+1 < len(events) {
			to = events[i+1].at
		}
		o := outageIn(answers, e.at, to)
		t.Logf("outage at %s: no submit accepted for %s, %d answered 503, the slowest answer took %s",
			e.what, o.stall.Round(10*time.Millisecond), o.refused, o.slowest.Round(10*time.Millisecond))
	}
}

// standbyLossHoldsCallbacks loses the standby node while an agent holds
// five jobs: once pg_auto_failover gives up on it, writes are refused;
// the jobs then end SUCCESS, and no callback goes until the node is back
// and streams. It returns the five jobs.
func standbyLossHoldsCallbacks(t *testing.T, f *devdb.Formation, base string, callbacks *webhookCounter) []string {
	t.Helper()
	ctx := t.Context()
	release := make(chan struct{})
	agent := newTestAgent(t, base, "drill-hold", "t.hold", 50, func(w http.ResponseWriter, env webhook.Envelope) {
		<-release
		answer("SUCCESS", "")(w, env)
	})
	var ids []string
	for range 5 {
		ids = append(ids, submitOK(t, base, fmt.Sprintf(`{"capability":"t.hold","payload":{},"callback_url":%q,"timeout_ms":300000}`, callbacks.srv.URL)))
	}
	deadline := time.Now().Add(30 * time.Second)
	for agent.hits.Load() < int32(len(ids)) {
		require.True(t, time.Now().Before(deadline), "%d of %d jobs at the agent within 30 s", agent.hits.Load(), len(ids))
		time.Sleep(20 * time.Millisecond) // poll interval while waiting on the condition
	}
	nodes, err := f.State(ctx)
	require.NoError(t, err)
	standby := ""
	for _, n := range nodes {
		if n.Reported == "secondary" {
			standby = n.Name
		}
	}
	require.NotEmpty(t, standby, "a secondary: %+v", nodes)
	lostAt := time.Now()
	require.NoError(t, f.KillNode(standby))
	close(release) // the jobs end as the standby goes: their callbacks must wait for it
	deadline = time.Now().Add(120 * time.Second)
	for {
		_, body := call(t, http.MethodGet, base+"/readyz", "", "")
		if strings.Contains(body, `"writes":"refused"`) {
			break
		}
		require.True(t, time.Now().Before(deadline), "writes not refused within 120 s of the standby's loss: %s", body)
		time.Sleep(50 * time.Millisecond) // poll interval while waiting on the condition
	}
	t.Logf("standby loss: %s killed; writes refused after %s", standby, time.Since(lostAt).Round(100*time.Millisecond))
	for _, id := range ids {
		require.Equal(t, "SUCCESS", waitTerminal(t, base, id, 120*time.Second).Status, "job %s", id)
	}
	// A callback made at once, or by River, would come within a few
	// seconds of the end: none comes while no standby streams.
	for quiet := time.Now().Add(5 * time.Second); time.Now().Before(quiet); {
		for _, id := range ids {
			require.Empty(t, callbacks.ids(id), "job %s called back while its end rests on one node", id)
		}
		time.Sleep(50 * time.Millisecond) // poll interval over the quiet window
	}
	backAt := time.Now()
	require.NoError(t, f.RestartNode(standby))
	require.NoError(t, f.WaitRoles(ctx, 120*time.Second, "primary", "secondary"))
	deadline = time.Now().Add(60 * time.Second)
	for _, id := range ids {
		for len(callbacks.ids(id)) == 0 {
			require.True(t, time.Now().Before(deadline), "job %s not called back within 60 s of the standby's return", id)
			time.Sleep(50 * time.Millisecond) // poll interval while waiting on the condition
		}
	}
	t.Logf("standby loss: %s back as secondary, the held jobs called back %s after its restart", standby, time.Since(backAt).Round(100*time.Millisecond))
	return ids
}

type drillEvent struct {
	what string
	at   time.Time
}

// submitAnswer is one submit as its client saw it.
type submitAnswer struct {
	at     time.Time     // when the answer came
	took   time.Duration // since the request was sent
	status int           // 0: no answer
	id     string
	body   string
}

// submitLoad submits body at about 50 a second from five clients until
// stopped, and keeps every answer.
type submitLoad struct {
	mu      sync.Mutex
	answers []submitAnswer
	done    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
}

func startSubmitLoad(base, body string) *submitLoad {
	l := &submitLoad{done: make(chan struct{})}
	client := &http.Client{Timeout: 30 * time.Second}
	for range 5 {
		l.wg.Go(func() {
			for {
				select {
				case <-l.done:
					return
				default:
				}
				sent := time.Now()
				resp, err := client.Post(base+"/v1/jobs", "application/json", strings.NewReader(body))
				a := submitAnswer{at: time.Now(), took: time.Since(sent)}
				if err != nil {
					a.body = err.Error()
				} else {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					a.status, a.body = resp.StatusCode, string(b)
					var j struct {
						JobID string `json:"job_id"`
					}
					if json.Unmarshal(b, &j) == nil {
						a.id = j.JobID
					}
				}
				l.mu.Lock()
				l.answers = append(l.answers, a)
				l.mu.Unlock()
				time.Sleep(100 * time.Millisecond) // pacing: about ten submits a second per client
			}
		})
	}
	return l
}

func (l *submitLoad) stop() {
	l.once.Do(func() { close(l.done) })
	l.wg.Wait()
}

func (l *submitLoad) acceptedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, a := range l.answers {
		if a.status == http.StatusAccepted {
			n++
		}
	}
	return n
}

// waitAccepted waits until n submits in all were accepted.
func (l *submitLoad) waitAccepted(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(180 * time.Second)
	for l.acceptedCount() < n {
		require.True(t, time.Now().Before(deadline), "%d of %d submits accepted within 180 s", l.acceptedCount(), n)
		time.Sleep(50 * time.Millisecond) // poll interval while waiting on the condition
	}
}

// results returns the accepted jobs' ids and every answer, in the order
// they came.
func (l *submitLoad) results() (accepted []string, answers []submitAnswer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	answers = slices.Clone(l.answers)
	slices.SortFunc(answers, func(a, b submitAnswer) int { return a.at.Compare(b.at) })
	for _, a := range answers {
		if a.status == http.StatusAccepted {
			accepted = append(accepted, a.id)
		}
	}
	return accepted, answers
}

// outage is what submitters saw of one disruption, from it until the
// next one (or the end of the load).
type outage struct {
	stall   time.Duration // the longest span without an accepted submit
	refused int           // submits answered 503
	slowest time.Duration // the longest a submit waited for its answer
}

// outageIn measures the answers that came in [from, to), counting the
// stall from the last acceptance before from.
func outageIn(answers []submitAnswer, from, to time.Time) outage {
	var o outage
	last := from
	for _, a := range answers {
		if a.at.Before(from) {
			if a.status == http.StatusAccepted {
				last = a.at
			}
			continue
		}
		if !a.at.Before(to) {
			break
		}
		o.slowest = max(o.slowest, a.took)
		switch a.status {
		case http.StatusAccepted:
			o.stall = max(o.stall, a.at.Sub(last))
			last = a.at
		case http.StatusServiceUnavailable:
			o.refused++
		}
	}
	return o
}

// webhookCounter acknowledges callbacks and keeps each job's webhook-ids.
type webhookCounter struct {
	mu   sync.Mutex
	jobs map[string]map[string]bool
	srv  *httptest.Server
}

func newWebhookCounter(t *testing.T) *webhookCounter {
	t.Helper()
	c := &webhookCounter{jobs: map[string]map[string]bool{}}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			JobID string `json:"job_id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.jobs[body.JobID] == nil {
			c.jobs[body.JobID] = map[string]bool{}
		}
		c.jobs[body.JobID][r.Header.Get(webhook.HeaderID)] = true
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *webhookCounter) distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.jobs)
}

func (c *webhookCounter) ids(job string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []string
	for id := range c.jobs[job] {
		ids = append(ids, id)
	}
	return ids
}

// waitDrillJob waits up to within for job id to end and answers its
// status. A job that does not end fails the test after logging what the
// database holds of it (its timer, the locks on the timers and the open
// transactions): a drill that fails once in many runs must say why the
// first time.
func waitDrillJob(t *testing.T, base, dsn, id string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if j := getJob(t, base, id); terminal[j.Status] {
			return j.Status
		}
		time.Sleep(50 * time.Millisecond) // poll interval while waiting on the condition
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx, dsn); err != nil {
		t.Logf("the database's state of job %s: %v", id, err)
	} else {
		defer func() { _ = conn.Close(ctx) }()
		for _, q := range []string{
			`SELECT job_id::text, attempt, phase, due_at::text, now()::text, coalesce(agent_id, ''), river_job_id FROM job_timers WHERE job_id = $1::uuid`,
			`SELECT job_id::text, agent_id, attempt FROM agent_slots WHERE job_id = $1::uuid`,
			`SELECT version, type, recorded_at::text FROM events WHERE stream_id = 'job:' || $1 ORDER BY version`,
			`SELECT count(*), min(due_at)::text FROM job_timers WHERE due_at <= now() AND $1 <> ''`,
			`SELECT l.locktype, l.mode, l.granted, a.pid, a.state, coalesce(a.xact_start::text, ''), left(a.query, 160)
			   FROM pg_locks l JOIN pg_stat_activity a USING (pid)
			  WHERE (l.relation = 'job_timers'::regclass OR l.locktype = 'advisory') AND $1 <> ''`,
			`SELECT pid, state, coalesce(xact_start::text, ''), coalesce(wait_event, ''), left(query, 160)
			   FROM pg_stat_activity WHERE datname = current_database() AND state <> 'idle' AND pid <> pg_backend_pid() AND $1 <> ''`,
		} {
			rows, err := conn.Query(ctx, q, id)
			if err != nil {
				t.Logf("%s: %v", q, err)
				continue
			}
			for rows.Next() {
				v, _ := rows.Values()
				t.Logf("%s\n  → %v", strings.Join(strings.Fields(q), " "), v)
			}
			rows.Close()
		}
	}
	evs := jobEvents(t, base, id)
	require.Fail(t, "job not done in time", "job %s not ended after %s: %v", id, within, types(evs))
	return ""
}
