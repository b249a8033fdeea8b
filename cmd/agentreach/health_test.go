package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/webhook"
)

// waitProjected waits until every projection has folded the whole log.
func waitProjected(t *testing.T, svc *running) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		lag, err := svc.m.app.projector.Lag(context.Background())
		require.NoError(t, err)
		total := int64(0)
		for _, n := range lag {
			total += n
		}
		if total == 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "projections still behind: %v", lag)
		time.Sleep(20 * time.Millisecond) // poll interval while waiting on the condition
	}
}

// scriptedMix runs a known mix of outcomes through real deliveries and
// returns the job ids.
func scriptedMix(t *testing.T, base string) []string {
	t.Helper()
	var n atomic.Int64
	newTestAgent(t, base, "fast", "t.mix", 50, answer("SUCCESS", ""))
	newTestAgent(t, base, "varied", "t.varied", 50, func(w http.ResponseWriter, env webhook.Envelope) {
		time.Sleep(time.Duration(n.Add(1)%7) * 7 * time.Millisecond) // spread the latencies
		answer("SUCCESS", "")(w, env)
	})
	newTestAgent(t, base, "biz", "t.biz", 50, answer("FAILED", "no_luck"))
	newTestAgent(t, base, "broken", "t.broken", 50, statusOnly(http.StatusBadGateway))
	newTestAgent(t, base, "sleepy", "t.sleepy", 50, hang)
	var ids []string
	for i := range 12 {
		ids = append(ids, submitOK(t, base, `{"capability":"t.mix","payload":{}}`))
		ids = append(ids, submitOK(t, base, `{"capability":"t.varied","payload":{}}`))
		if i%3 == 0 {
			ids = append(ids, submitOK(t, base, `{"capability":"t.biz","payload":{}}`))
			ids = append(ids, submitOK(t, base, `{"capability":"t.broken","payload":{},"max_attempts":2,"backoff_base_ms":100}`))
		}
		if i%6 == 0 {
			ids = append(ids, submitOK(t, base, `{"capability":"t.sleepy","payload":{},"timeout_ms":200,"max_attempts":1}`))
		}
	}
	for _, id := range ids {
		waitTerminal(t, base, id, 20*time.Second)
	}
	return ids
}

// TestHealthFiguresEqualTheLog recomputes every figure of reach_health
// straight from the events table and finds them equal (latency
// percentiles within one histogram bucket).
func TestHealthFiguresEqualTheLog(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	scriptedMix(t, base)
	waitProjected(t, svc)
	ctx := context.Background()

	type figures struct {
		attempted, delivered, succeeded, failed, timedOut, deadLettered int
		reach, success, score                                           float64
		p50, p95, p99                                                   float64
	}
	fromLog := map[string]figures{}
	rows, err := svc.m.app.pool.Query(ctx, `
		WITH a AS (
			SELECT type, data->>'agent_id' AS agent, (data->>'latency_ms')::float8 AS ms, data->>'reason' AS reason
			FROM events WHERE stream_id LIKE 'job:%' AND coalesce(data->>'agent_id', '') <> '')
		SELECT agent,
			count(*) FILTER (WHERE type = 'ROUTED'),
			count(*) FILTER (WHERE type = 'DELIVERED'),
			count(*) FILTER (WHERE type = 'SUCCESS'),
			count(*) FILTER (WHERE type = 'FAILED' OR (type = 'ATTEMPT_FAILED' AND reason = 'business_failure')),
			count(*) FILTER (WHERE type = 'TIMEOUT'),
			count(*) FILTER (WHERE type = 'DEAD_LETTER'),
			coalesce(percentile_disc(0.50) WITHIN GROUP (ORDER BY ms) FILTER (WHERE type IN ('SUCCESS', 'FAILED')), -1),
			coalesce(percentile_disc(0.95) WITHIN GROUP (ORDER BY ms) FILTER (WHERE type IN ('SUCCESS', 'FAILED')), -1),
			coalesce(percentile_disc(0.99) WITHIN GROUP (ORDER BY ms) FILTER (WHERE type IN ('SUCCESS', 'FAILED')), -1)
		FROM a GROUP BY agent`)
	require.NoError(t, err)
	var id string
	var f figures
	_, err = pgx.ForEachRow(rows, []any{&id, &f.attempted, &f.delivered, &f.succeeded, &f.failed, &f.timedOut, &f.deadLettered,
		&f.p50, &f.p95, &f.p99}, func() error {
		f.reach = float64(f.delivered) / float64(f.attempted)
		f.success = float64(f.succeeded) / float64(f.attempted)
		f.score = 0.4*f.reach + 0.6*f.success
		fromLog[id] = f
		return nil
	})
	require.NoError(t, err)
	require.Len(t, fromLog, 5)

	for _, window := range []string{"1h", "24h"} {
		var body struct {
			Agents []struct {
				AgentID      string   `json:"agent_id"`
				Attempted    int      `json:"attempted"`
				Delivered    int      `json:"delivered"`
				Succeeded    int      `json:"succeeded"`
				Failed       int      `json:"failed"`
				TimedOut     int      `json:"timed_out"`
				DeadLettered int      `json:"dead_lettered"`
				ReachRate    float64  `json:"reach_rate"`
				SuccessRate  float64  `json:"success_rate"`
				HealthScore  float64  `json:"health_score"`
				P50          *float64 `json:"latency_p50_ms"`
				P95          *float64 `json:"latency_p95_ms"`
				P99          *float64 `json:"latency_p99_ms"`
			} `json:"agents"`
		}
		getJSON(t, base+"/v1/metrics/agents?window="+window, http.StatusOK, &body)
		require.Len(t, body.Agents, len(fromLog), window)
		for _, h := range body.Agents {
			want := fromLog[h.AgentID]
			msg := window + " " + h.AgentID
			require.Equal(t, []int{want.attempted, want.delivered, want.succeeded, want.failed, want.timedOut, want.deadLettered},
				[]int{h.Attempted, h.Delivered, h.Succeeded, h.Failed, h.TimedOut, h.DeadLettered}, msg)
			require.InDelta(t, want.reach, h.ReachRate, 1e-9, msg)
			require.InDelta(t, want.success, h.SuccessRate, 1e-9, msg)
			require.InDelta(t, want.score, h.HealthScore, 1e-9, msg)
			for _, p := range []struct {
				exact float64
				got   *float64
			}{{want.p50, h.P50}, {want.p95, h.P95}, {want.p99, h.P99}} {
				if p.exact < 0 {
					require.Nil(t, p.got, msg)
					continue
				}
				require.NotNil(t, p.got, msg)
				// The histogram answers the upper bound of the bucket holding
				// the exact value: within one bucket (a factor of 1.25).
				require.LessOrEqual(t, math.Max(p.exact, 1), *p.got*(1+1e-9), msg)
				require.Greater(t, math.Max(p.exact, 1)*1.25, *p.got*(1-1e-9), msg)
			}
		}
	}
	var e struct{ Error struct{ Field string } }
	getJSON(t, base+"/v1/metrics/agents?window=2d", http.StatusBadRequest, &e)
	require.Equal(t, "window", e.Error.Field)
}

func dumpTable(t *testing.T, svc *running, sql string) []string {
	t.Helper()
	rows, err := svc.m.app.pool.Query(context.Background(), sql)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		v, err := r.Values()
		return fmt.Sprint(v), err
	})
	require.NoError(t, err)
	return out
}

// TestRebuildEveryProjection rebuilds each projection from position 0 and
// compares it row for row with the live one.
func TestRebuildEveryProjection(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	scriptedMix(t, svc.m.URL())
	waitProjected(t, svc)
	_, err := svc.m.app.registry.HealthSweep(context.Background()) // the mix's failing agents raise alerts
	require.NoError(t, err)
	waitProjected(t, svc)
	tables := map[string][]string{
		"jobs":        {`SELECT * FROM jobs ORDER BY job_id`},
		"agent_stats": {`SELECT * FROM agent_stats_minute ORDER BY 1, 2, 3`, `SELECT * FROM agent_stats_hour ORDER BY 1, 2, 3`},
		"alerts":      {`SELECT * FROM alerts ORDER BY position`},
	}
	for _, proj := range svc.m.app.projector.Projections() {
		queries := tables[proj.Name()]
		require.NotEmpty(t, queries, "a test for projection %s", proj.Name())
		var live [][]string
		for _, q := range queries {
			live = append(live, dumpTable(t, svc, q))
			require.NotEmpty(t, live[len(live)-1])
		}
		// The live projector may fold some of the batches itself while the
		// rebuild runs; what matters is the result.
		_, err := svc.m.app.projector.Rebuild(context.Background(), proj, eventstore.FromStart, nil)
		require.NoError(t, err)
		for i, q := range queries {
			require.Equal(t, live[i], dumpTable(t, svc, q), "%s after rebuild", proj.Name())
		}
	}
}

// TestHealthAlertsOncePerCrossing: falling below the thresholds appends one
// HEALTH_DEGRADED however often the sweep runs, and recovering one
// HEALTH_RECOVERED; the router's failure term reacts meanwhile.
func TestHealthAlertsOncePerCrossing(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	ctx := context.Background()
	var healthy atomic.Bool
	newTestAgent(t, base, "sick", "t.sick", 50, func(w http.ResponseWriter, env webhook.Envelope) {
		if healthy.Load() {
			answer("SUCCESS", "")(w, env)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	healthEvents := func() []string {
		var out []string
		for _, e := range dumpTable(t, svc, `SELECT type FROM events WHERE stream_id = 'agent:default/sick' AND type LIKE 'HEALTH_%' ORDER BY version`) {
			out = append(out, strings.Trim(e, "[]"))
		}
		return out
	}
	sweep := func() {
		_, err := svc.m.app.registry.HealthSweep(ctx)
		require.NoError(t, err)
	}
	for range 6 {
		waitTerminal(t, base, submitOK(t, base, `{"capability":"t.sick","payload":{},"max_attempts":1}`), 10*time.Second)
	}
	waitProjected(t, svc)
	sweep()
	sweep()
	sweep()
	require.Equal(t, []string{"HEALTH_DEGRADED"}, healthEvents())

	require.NoError(t, svc.m.app.registry.Snapshot().Refresh(ctx))
	rj := route(t, base, "t.sick")
	require.Len(t, rj.Candidates, 1)
	var failureTerm float64
	for _, term := range rj.Candidates[0].Terms {
		if term.Name == "failure_rate" {
			failureTerm = term.Value
		}
	}
	require.Equal(t, -50.0, failureTerm, "recent failures cost the agent routing score")

	// The thresholds are configuration: relax them, and recover.
	_, err := svc.m.app.pool.Exec(ctx, `UPDATE health_settings SET reach_alert = 0.5, success_alert = 0.5`)
	require.NoError(t, err)
	healthy.Store(true)
	for range 10 {
		waitTerminal(t, base, submitOK(t, base, `{"capability":"t.sick","payload":{},"max_attempts":1}`), 10*time.Second)
	}
	// Recovery needs the successes in the window: on a loaded machine the
	// agent's breaker may still hold some of them back, so more come until
	// the sweep sees it recovered (once).
	deadline := time.Now().Add(60 * time.Second)
	for {
		waitProjected(t, svc)
		sweep()
		sweep()
		if evs := healthEvents(); len(evs) > 1 {
			require.Equal(t, []string{"HEALTH_DEGRADED", "HEALTH_RECOVERED"}, evs)
			break
		}
		require.True(t, time.Now().Before(deadline), "not recovered within 60 s: %v", healthEvents())
		waitTerminal(t, base, submitOK(t, base, `{"capability":"t.sick","payload":{},"max_attempts":1}`), 10*time.Second)
	}
	sweep()
	require.Equal(t, []string{"HEALTH_DEGRADED", "HEALTH_RECOVERED"}, healthEvents(), "recovered once")

	// The alerts view has both turns, newest first, with their times; a
	// kind filter and another namespace narrow it.
	waitProjected(t, svc)
	var alerts struct {
		Alerts []struct {
			Namespace  string          `json:"namespace"`
			Kind       string          `json:"kind"`
			Subject    string          `json:"subject"`
			Data       json.RawMessage `json:"data"`
			RecordedAt time.Time       `json:"recorded_at"`
		} `json:"alerts"`
	}
	getJSON(t, base+"/v1/alerts?subject=sick", http.StatusOK, &alerts)
	var kinds []string
	for _, a := range alerts.Alerts {
		if strings.HasPrefix(a.Kind, "HEALTH_") {
			kinds = append(kinds, a.Kind)
			require.Equal(t, "default", a.Namespace)
			require.False(t, a.RecordedAt.IsZero())
		}
	}
	require.Equal(t, []string{"HEALTH_RECOVERED", "HEALTH_DEGRADED"}, kinds)
	getJSON(t, base+"/v1/alerts?kind=HEALTH_DEGRADED", http.StatusOK, &alerts)
	require.Len(t, alerts.Alerts, 1)
	require.Contains(t, string(alerts.Alerts[0].Data), `"below":true`)
	getJSON(t, base+"/v1/alerts?namespace=elsewhere", http.StatusOK, &alerts)
	require.Empty(t, alerts.Alerts)
	code, out := call(t, http.MethodGet, base+"/v1/alerts?kind=NOPE", "", "")
	require.Equal(t, http.StatusBadRequest, code, out)

	// The agent's page draws its minutes: the same attempts as the hour's
	// figures (the breaker may have sent some of the later jobs to no one).
	var series struct {
		Minutes []struct {
			Attempted    int      `json:"attempted"`
			Succeeded    int      `json:"succeeded"`
			Failed       int      `json:"failed"`
			LatencyP50MS *float64 `json:"latency_p50_ms"`
		} `json:"minutes"`
	}
	getJSON(t, base+"/v1/agents/sick/series", http.StatusOK, &series)
	attempted, succeeded := 0, 0
	for _, m := range series.Minutes {
		attempted, succeeded = attempted+m.Attempted, succeeded+m.Succeeded
	}
	var hour struct {
		Agents []struct {
			AgentID   string `json:"agent_id"`
			Attempted int    `json:"attempted"`
			Succeeded int    `json:"succeeded"`
		} `json:"agents"`
	}
	getJSON(t, base+"/v1/metrics/agents?window=1h", http.StatusOK, &hour)
	require.Len(t, hour.Agents, 1)
	require.GreaterOrEqual(t, attempted, 10, "%+v", series)
	require.Equal(t, hour.Agents[0].Attempted, attempted)
	require.Equal(t, hour.Agents[0].Succeeded, succeeded)
	require.Positive(t, succeeded)
	code, out = call(t, http.MethodGet, base+"/v1/agents/nosuch/series", "", "")
	require.Equal(t, http.StatusNotFound, code, out)
	require.NotContains(t, out, "register it", "an operator's question is not the agent's")
}

// metricValue finds one sample in a Prometheus exposition.
func metricValue(t *testing.T, exposition, name string, labels ...string) float64 {
	t.Helper()
	for _, line := range strings.Split(exposition, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if ok {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			require.NoError(t, err, line)
			return v
		}
	}
	t.Fatalf("no sample %s%v in /metrics; ours:\n%s", name, labels, truncateLines(grepLines(exposition, "agentreach_"), 40))
	return 0
}

func truncateLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = append(lines[:n], "…")
	}
	return strings.Join(lines, "\n")
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestPrometheusMetrics reads /metrics after a known workload.
func TestPrometheusMetrics(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	newTestAgent(t, base, "m-ok", "t.ok", 50, answer("SUCCESS", ""))
	newTestAgent(t, base, "m-bad", "t.bad", 50, statusOnly(http.StatusServiceUnavailable))
	for range 3 {
		waitTerminal(t, base, submitOK(t, base, `{"capability":"t.ok","payload":{}}`), 10*time.Second)
	}
	for range 2 {
		waitTerminal(t, base, submitOK(t, base, `{"capability":"t.bad","payload":{},"max_attempts":1,"priority":"low"}`), 10*time.Second)
	}
	waitProjected(t, svc)
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	m := string(b)
	require.Equal(t, 3.0, metricValue(t, m, "agentreach_jobs_submitted_total", `priority="normal"`))
	require.Equal(t, 2.0, metricValue(t, m, "agentreach_jobs_submitted_total", `priority="low"`))
	require.Equal(t, 3.0, metricValue(t, m, "agentreach_deliveries_total", `outcome="result"`))
	require.Equal(t, 2.0, metricValue(t, m, "agentreach_deliveries_total", `outcome="failed"`, `reason="http_503"`))
	require.Equal(t, 3.0, metricValue(t, m, "agentreach_delivery_duration_seconds_count", `outcome="result"`))
	require.Equal(t, 2.0, metricValue(t, m, "agentreach_delivery_duration_seconds_count", `outcome="failed"`))
	require.Equal(t, 3.0, metricValue(t, m, "agentreach_jobs_finished_total", `status="SUCCESS"`))
	require.Equal(t, 2.0, metricValue(t, m, "agentreach_jobs_finished_total", `status="DEAD_LETTER"`))
	require.Equal(t, 2.0, metricValue(t, m, "agentreach_agents", `state="HEALTHY"`))
	require.Equal(t, 0.0, metricValue(t, m, "agentreach_projector_lag", `projection="jobs"`))
	require.Equal(t, 0.0, metricValue(t, m, "agentreach_queue_depth", `queue="dispatch_high"`))
	require.True(t, regexp.MustCompile(`(?m)^river_work_count(_total)?\{`).MatchString(m), "River's own metrics")
}

// TestOneTracePerJob: the submit's trace id is the job's, and the
// delivery, the agent's traceparent, the callback and the caller's
// traceparent all carry it.
func TestOneTracePerJob(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewInMemoryExporter()
	dsn := newDatabase(t)
	svc := startTuned(t, map[string]string{"DATABASE_URL": dsn}, func(c *Config) {
		fastSweeps(c)
		c.SpanExporter = spans
	}, "serve", "--insecure", "--addr", "127.0.0.1:0", "--log-level", "warn")
	waitReady(t, svc.m.URL())
	base := svc.m.URL()

	var mu sync.Mutex
	var agentParent, callbackParent string
	newTestAgentWithHeaders(t, base, "traced", "t.trace", func(h http.Header) {
		mu.Lock()
		agentParent = h.Get("traceparent")
		mu.Unlock()
	})
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		callbackParent = r.Header.Get("traceparent")
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer receiver.Close()

	code, out := submit(t, base, fmt.Sprintf(`{"capability":"t.trace","payload":{},"callback_url":%q}`, receiver.URL),
		"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	require.Equal(t, http.StatusAccepted, code)
	id := out["job_id"].(string)
	traceID := out["trace_id"].(string)
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", traceID, "the caller's trace is the job's")
	waitJob(t, base, id, func(j jobJSON) bool { return j.Callback != nil && j.Callback.Acknowledged }, 10*time.Second)

	mu.Lock()
	require.Contains(t, agentParent, "-"+traceID+"-")
	require.Contains(t, callbackParent, "-"+traceID+"-")
	mu.Unlock()
	names := map[string]bool{}
	for _, s := range spans.GetSpans() {
		if s.SpanContext.TraceID().String() == traceID {
			names[s.Name] = true
		}
	}
	for _, want := range []string{"/v1/jobs", "dispatch", "deliver", "callback"} {
		found := false
		for n := range names {
			found = found || strings.Contains(n, want)
		}
		require.True(t, found, "span %q in the job's trace; got %v", want, names)
	}
	require.Equal(t, traceID, getJob(t, base, id).TraceID)
}

// TestProjectionsRebuildCommand runs `agentreach projections rebuild`
// against a database with history and checks its report.
func TestProjectionsRebuildCommand(t *testing.T) {
	t.Parallel()
	svc, dsn := service(t)
	base := svc.m.URL()
	newTestAgent(t, base, "cmd-agent", "t.cmd", 50, answer("SUCCESS", ""))
	for range 3 {
		waitTerminal(t, base, submitOK(t, base, `{"capability":"t.cmd","payload":{}}`), 10*time.Second)
	}
	waitProjected(t, svc)
	// The service stops first: its live projector would otherwise fold the
	// log itself as soon as the rebuild emptied the read model.
	svc.stop(t)
	out := &syncBuffer{}
	m := NewMain()
	m.Stdout, m.Stderr = out, out
	m.Getenv = func(string) string { return "" }
	require.NoError(t, m.Run(context.Background(), []string{"projections", "rebuild", "--from-start", "--database-url", dsn, "jobs", "agent_stats"}))
	require.Regexp(t, `rebuilt jobs: \d+ events folded into jobs 3 rows in `, out.String())
	require.Regexp(t, `rebuilt agent_stats: \d+ events folded into agent_stats_minute [1-9]\d* rows, agent_stats_hour [1-9]\d* rows`, out.String())
	require.Contains(t, out.String(), "100%")

	// A snapshot now, then a rebuild from it folds nothing more.
	out.Reset()
	require.NoError(t, m.Run(context.Background(), []string{"projections", "snapshot", "--database-url", dsn, "jobs"}))
	require.Equal(t, "snapshot jobs: 3 rows", strings.SplitN(out.String(), ",", 2)[0])
	out.Reset()
	require.NoError(t, m.Run(context.Background(), []string{"projections", "rebuild", "--database-url", dsn, "jobs"}))
	require.Regexp(t, `rebuilt jobs from the snapshot of \S+ \(3 rows\): 0 events folded into jobs 3 rows in `, out.String())
	require.ErrorIs(t, m.Run(context.Background(), []string{"projections", "rebuild", "--database-url", dsn, "nope"}), errUsage)
	require.ErrorIs(t, m.Run(context.Background(), []string{"projections", "snapshot", "--from-start", "--database-url", dsn}), errUsage)
}

// TestEventStream reads the global log as Server-Sent Events, including an
// event committed after the stream opened.
func TestEventStream(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	first := submitOK(t, base, `{"capability":"t.sse","payload":{},"max_attempts":1}`)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/events/stream?after=0", nil)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	second := ""
	seen := map[string]bool{}
	buf := make([]byte, 64<<10)
	var acc strings.Builder
	for !(seen[first] && second != "" && seen[second]) {
		n, err := resp.Body.Read(buf)
		require.NoError(t, err)
		acc.Write(buf[:n])
		for _, id := range []string{first, second} {
			if id != "" && strings.Contains(acc.String(), `"stream_id":"job:`+id+`"`) {
				seen[id] = true
			}
		}
		if seen[first] && second == "" {
			second = submitOK(t, base, `{"capability":"t.sse","payload":{},"max_attempts":1}`)
		}
	}
	require.Contains(t, acc.String(), "event: SUBMITTED")
	require.Regexp(t, `(?m)^id: \d+$`, acc.String())
}

// TestDemo runs `agentreach demo` with few jobs and --keep=false: it
// completes unattended, prints the health table that GET /v1/metrics/agents
// gives, and its fleet shows the outcomes and states the dashboard is for:
// a business-failing agent (its success under its reach), dead letters,
// timeouts, and agents PROBING, DRAINING and OFFLINE. By default it keeps
// serving until Ctrl-C, so the dashboard it names stays up.
func TestDemo(t *testing.T) {
	t.Parallel()
	out := &syncBuffer{}
	m := NewMain()
	m.Stdout, m.Stderr = out, out
	m.Getenv = func(string) string { return "" }
	require.NoError(t, m.Run(context.Background(), []string{"demo", "--jobs", "120", "--keep=false"}), out.String())
	for _, want := range []string{"AGENT", "ocr-fast", "translate-dead", "summarize-picky", "120 jobs done", "/v1/metrics/agents",
		"Dashboard:    http://", "/dashboard/dead", "/dashboard/alerts", "100%"} {
		require.Contains(t, out.String(), want)
	}
	require.Regexp(t, `(?m)^  PROBING\s+describe-probing$`, out.String())
	require.Regexp(t, `(?m)^  DRAINING\s+report-long$`, out.String())
	require.Regexp(t, `(?m)^  OFFLINE\s+summarize-retired$`, out.String())
	picky := regexp.MustCompile(`(?m)^summarize-picky\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+\d+\s+([\d.]+)%\s+([\d.]+)%`).FindStringSubmatch(out.String())
	require.NotNil(t, picky, out.String())
	require.Equal(t, "100.0", picky[5], "the picky agent is reached every time")
	require.NotEqual(t, "0", picky[4], "and fails some work on business grounds: %s", out.String())
	require.NotEqual(t, picky[5], picky[6], "so its success is under its reach")
	dead := regexp.MustCompile(`(?m)^resize-dead\s+(\d+)\s+0\s`).FindStringSubmatch(out.String())
	require.NotNil(t, dead, "the capability only a dead agent serves: %s", out.String())

	var help syncBuffer
	h := NewMain()
	h.Stdout, h.Stderr = &help, &help
	h.Getenv = func(string) string { return "" }
	_ = h.Run(context.Background(), []string{"demo", "-h"})
	require.Contains(t, help.String(), "keeps serving until Ctrl-C")
	require.Contains(t, help.String(), "(default true)")
}

// An agent going DOWN is an alert (AGENT_DOWN), and coming out of DOWN
// another (AGENT_BACK), in /v1/alerts as the other kinds are, and a
// rebuild of the alerts read model folds the same ones.
func TestAgentDownIsAnAlert(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	newTestAgent(t, base, "downed", "t.downed", 50, answer("SUCCESS", ""))
	waitState(t, base, "downed", "HEALTHY", 20*time.Second)
	code, out := call(t, http.MethodPost, base+"/v1/agents/downed/down", "", `{"reason":"disk failed"}`)
	require.Equal(t, http.StatusOK, code, out)
	code, out = call(t, http.MethodPost, base+"/v1/agents/downed/up", "", `{"reason":"disk replaced"}`)
	require.Equal(t, http.StatusOK, code, out)

	type alert struct {
		Kind    string          `json:"kind"`
		Subject string          `json:"subject"`
		Data    json.RawMessage `json:"data"`
	}
	var alerts struct {
		Alerts []alert `json:"alerts"`
	}
	waitFor(t, 10*time.Second, "both alerts in the read model", func() bool {
		getJSON(t, base+"/v1/alerts?kind=AGENT_DOWN,AGENT_BACK", http.StatusOK, &alerts)
		return len(alerts.Alerts) == 2
	})
	require.Equal(t, "AGENT_BACK", alerts.Alerts[0].Kind, "newest first")
	require.Equal(t, "AGENT_DOWN", alerts.Alerts[1].Kind)
	require.Equal(t, "downed", alerts.Alerts[1].Subject)
	require.Contains(t, string(alerts.Alerts[1].Data), "disk failed")
}
