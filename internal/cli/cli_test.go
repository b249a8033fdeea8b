package cli

import (
	"bytes"
	"context"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/pgtest"
	"github.com/agentreach/agentreach/jobs"
)

// testEnv is an Env writing to buffers, with env as its whole environment.
func testEnv(env map[string]string) (Env, *bytes.Buffer, *bytes.Buffer) {
	var out, errOut bytes.Buffer
	return Env{Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return env[k] }}, &out, &errOut
}

func TestParsePositional(t *testing.T) {
	t.Parallel()
	env, _, _ := testEnv(nil)
	fs, _ := APIFlags(env, "dig")
	limit := fs.Int("limit", 0, "")
	pos, err := fs.ParsePositional([]string{"--limit", "3", "a", "--json", "b"})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, pos)
	require.True(t, fs.JSON)
	require.Equal(t, 3, *limit)

	_, err = fs.ParsePositional([]string{"a", "--nope"})
	require.Error(t, err)
}

func TestAPIFlagsDefaults(t *testing.T) {
	t.Parallel()
	env, _, _ := testEnv(map[string]string{"AGENTREACH_URL": "http://127.0.0.1:9", "AGENTREACH_KEY": "k"})
	fs, c := APIFlags(env, "jobs get")
	require.NoError(t, fs.Parse(nil))
	require.Equal(t, "http://127.0.0.1:9", c.BaseURL)
	require.Equal(t, "k", c.Key)
	require.Equal(t, "agentreach jobs get", fs.Name())
	require.Equal(t, flag.ContinueOnError, fs.ErrorHandling())

	env, _, _ = testEnv(nil)
	_, c = APIFlags(env, "jobs")
	require.Equal(t, "http://127.0.0.1:8080", c.BaseURL)
}

func TestClientDo(t *testing.T) {
	t.Parallel()
	var seen http.Header
	var body string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
		b, _ := io.ReadAll(r.Body)
		body = string(b)
		switch r.URL.Path {
		case "/v1/ok":
			require.Equal(t, "a=1", r.URL.RawQuery)
			_, _ = io.WriteString(w, `{"x":1}`)
		case "/v1/bad":
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = io.WriteString(w, `{"error":{"code":"invalid","message":"no","field":"payload"}}`)
		default:
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, "  upstream down\n")
		}
	}))
	t.Cleanup(api.Close)
	c := &Client{BaseURL: api.URL + "/", Key: "sekrit", HTTP: api.Client()}

	var out struct{ X int }
	require.NoError(t, c.Get(t.Context(), "/v1/ok", map[string][]string{"a": {"1"}}, &out))
	require.Equal(t, 1, out.X)
	require.Equal(t, "Bearer sekrit", seen.Get("Authorization"))
	require.Empty(t, seen.Get("Content-Type"), "no body, no content type")

	err := c.Do(t.Context(), http.MethodPost, "/v1/bad", map[string]int{"n": 2}, nil)
	var apiErr *APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, APIError{Status: 422, Code: "invalid", Message: "no", Field: "payload"}, *apiErr)
	require.Equal(t, "invalid (HTTP 422): no [field payload]", err.Error())
	require.Equal(t, "application/json", seen.Get("Content-Type"))
	require.JSONEq(t, `{"n":2}`, body)

	err = c.Do(t.Context(), http.MethodGet, "/v1/down", nil, nil)
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, "http_error (HTTP 502): upstream down", err.Error())

	api.Close()
	err = c.Do(t.Context(), http.MethodGet, "/v1/ok", nil, nil)
	require.ErrorContains(t, err, "cannot reach Agent-Reach at "+c.BaseURL)
}

const (
	fakeJob = `{"job_id":"j1","status":"SUCCESS","capability":"c","agent_id":"a1","attempts":1,"max_attempts":3,
		"result":{"ok":true},"trace_id":"t1","submitted_at":"2026-01-02T03:04:05Z","finished_at":"2026-01-02T03:04:06Z"}`
	fakeDeadJob = `{"job_id":"j2","status":"DEAD_LETTER","capability":"dead","attempts":1,"max_attempts":1,
		"error":"no routable agent","trace_id":"t2","submitted_at":"2026-01-02T03:04:05Z","finished_at":"2026-01-02T03:04:06Z"}`
	fakeEvents = `{"events":[{"version":1,"type":"SUBMITTED","data":{"namespace":"default","capability":"c","long":"` + "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" + `"},"recorded_at":"2026-01-02T03:04:05Z"},
		{"version":2,"type":"ROUTED","data":{"attempt":1,"agent_id":"a1","route":{"chosen":"a1","candidates":[
			{"agent_id":"a1","score":120.5,"terms":[{"name":"exact_capability","value":100},{"name":"weight","value":20.5},{"name":"load","value":0}]},
			{"agent_id":"a2","score":90,"terms":[{"name":"exact_capability","value":100},{"name":"suspect","value":-25},{"name":"weight","value":15}]}],
			"rejected":[{"agent_id":"a3","reason":"state DOWN"}]}},"recorded_at":"2026-01-02T03:04:05.010Z"},
		{"version":3,"type":"ATTEMPT_FAILED","data":{"error":"warming up,\n try again","reason":"http_503","attempt":1,"agent_id":"a1",
			"retry_at":"2026-01-02T03:04:05.100Z","latency_ms":2.061,"http_status":503},"recorded_at":"2026-01-02T03:04:05.020Z"},
		{"version":4,"type":"ROUTED","data":{"attempt":2,"agent_id":"","route":{"chosen":"","candidates":[],"rejected":[]}},"recorded_at":"2026-01-02T03:04:06Z"},
		{"version":5,"type":"DELIVERED","data":{"async":true,"attempt":3,"agent_id":"a2","latency_ms":4.6,"http_status":202},"recorded_at":"2026-01-02T03:04:07Z"}]}`
)

// fakeAPI answers the jobs routes with fixed jobs and records requests.
type fakeAPI struct {
	mu   sync.Mutex
	reqs []string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, strings.TrimSpace(r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("Idempotency-Key")+" "+string(b)))
	f.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/jobs" && strings.Contains(string(b), `"capability":"dead"`):
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"job_id":"j2","status":"SUBMITTED","trace_id":"t2"}`)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/jobs":
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"job_id":"j1","status":"SUBMITTED","trace_id":"t1"}`)
	case r.URL.Path == "/v1/jobs/j1", r.URL.Path == "/v1/jobs/j1/cancel":
		_, _ = io.WriteString(w, fakeJob)
	case r.URL.Path == "/v1/jobs/j2":
		_, _ = io.WriteString(w, fakeDeadJob)
	case r.URL.Path == "/v1/jobs":
		_, _ = io.WriteString(w, `{"jobs":[`+fakeJob+`]}`)
	case r.URL.Path == "/v1/jobs/j1/events":
		_, _ = io.WriteString(w, fakeEvents)
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"no such job"}}`)
	}
}

func TestJobs(t *testing.T) {
	t.Parallel()
	f := &fakeAPI{}
	api := httptest.NewServer(f)
	t.Cleanup(api.Close)
	run := func(args ...string) (string, string, error) {
		env, out, errOut := testEnv(map[string]string{"AGENTREACH_URL": api.URL})
		err := Jobs(context.Background(), env, args)
		return out.String(), errOut.String(), err
	}

	out, _, err := run("submit", "--capability", "c", "--payload", `{"x":1}`, "--idempotency-key", "k1")
	require.NoError(t, err)
	require.Equal(t, "j1 SUBMITTED (trace t1)\n", out)
	out, _, err = run("submit", "--capability", "c", "--json")
	require.NoError(t, err)
	require.JSONEq(t, `{"job_id":"j1","status":"SUBMITTED","trace_id":"t1"}`, out)
	require.Equal(t, "{\n  \"job_id\": \"j1\",\n  \"status\": \"SUBMITTED\",\n  \"trace_id\": \"t1\"\n}\n", out,
		"--json is the service's answer, indented by two spaces")
	out, _, err = run("submit", "--capability", "c", "--wait")
	require.NoError(t, err)
	require.Equal(t, ExitOK, ExitCode(err))
	require.Contains(t, out, "attempts    1 of 3")
	require.Contains(t, out, `result      {"ok":true}`)

	// --wait on a job that ends other than SUCCESS: shown, and exit 3.
	out, _, err = run("submit", "--capability", "dead", "--wait")
	require.ErrorIs(t, err, ErrNotSucceeded)
	require.EqualError(t, err, "the job did not succeed: job j2 ended DEAD_LETTER")
	require.Equal(t, ExitNotSucceeded, ExitCode(err))
	require.Contains(t, out, "status      DEAD_LETTER")
	out, _, err = run("submit", "--capability", "dead", "--wait", "--json")
	require.Equal(t, ExitNotSucceeded, ExitCode(err))
	require.JSONEq(t, fakeDeadJob, out)

	// --json everywhere is the service's answer as it is.
	out, _, err = run("get", "j1", "--json")
	require.NoError(t, err)
	require.JSONEq(t, fakeJob, out)
	out, _, err = run("list", "--json")
	require.NoError(t, err)
	require.JSONEq(t, `{"jobs":[`+fakeJob+`],"next_cursor":""}`, out, "the pages followed, as one page of the API")
	out, _, err = run("events", "j1", "--json")
	require.NoError(t, err)
	require.JSONEq(t, fakeEvents, out)
	out, _, err = run("cancel", "j1", "--json")
	require.NoError(t, err)
	require.JSONEq(t, fakeJob, out)

	out, _, err = run("get", "j1")
	require.NoError(t, err)
	require.Contains(t, out, "agent       a1")
	out, _, err = run("list", "--status", "SUCCESS")
	require.NoError(t, err)
	require.Regexp(t, `(?m)^JOB\s+STATUS\s+CAPABILITY\s+AGENT\s+ATTEMPTS\s+VIA\s+SUBMITTED\nj1\s+SUCCESS\s+c\s+a1\s+1/3\s+rest\s`, out)
	out, _, err = run("events", "j1")
	require.NoError(t, err)
	require.Contains(t, out, `SUBMITTED           {"namespace":"default","capability":"c","long":"xxxxxxxx`)
	require.Contains(t, out, "…\n", "a long event is cut, and says so")
	// The routing explanation is a table, whole: every candidate with every
	// term, the chosen one, the ruled out with their reason.
	require.Contains(t, out, "  2  03:04:05.010  ROUTED              attempt 1 to a1\n")
	require.Regexp(t, `(?m)^\s+CANDIDATE\s+SCORE\s+TERMS$`, out)
	require.Regexp(t, `(?m)^\s+a1 \(chosen\)\s+120\.5\s+exact_capability \+100\.0, weight \+20\.5$`, out)
	require.Regexp(t, `(?m)^\s+a2\s+90\.0\s+exact_capability \+100\.0, suspect -25\.0, weight \+15\.0$`, out)
	require.Regexp(t, `(?m)^\s+a3\s+-\s+ruled out: state DOWN$`, out)
	require.Contains(t, out, "attempt 2 to no agent\n       no candidate: no agent of namespace default offers c\n")
	// What the agent answered each attempt, on its line.
	require.Contains(t, out, "ATTEMPT_FAILED      attempt 1 at a1: HTTP 503 in 2.06 ms: warming up, try again [http_503], retry at 03:04:05.100\n")
	require.Contains(t, out, "DELIVERED           attempt 3 at a2: HTTP 202 in 4.60 ms, accepted: the result comes later\n")
	out, _, err = run("cancel", "j1", "--reason", "changed my mind")
	require.NoError(t, err)
	require.Equal(t, "j1 SUCCESS\n", out)

	_, _, err = run("submit", "--capability", "c", "--hint", "h", "--priority", "high", "--callback-url", "http://127.0.0.1:9/cb",
		"--timeout", "2s", "--max-attempts", "4")
	require.NoError(t, err)
	f.mu.Lock()
	require.Equal(t, "POST /v1/jobs  "+`{"capability":"c","payload":{},"hint":"h","priority":"high","timeout_ms":2000,"max_attempts":4,"callback_url":"http://127.0.0.1:9/cb"}`,
		f.reqs[len(f.reqs)-1])
	f.mu.Unlock()

	_, _, err = run("get", "nope")
	var apiErr *APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, "not_found", apiErr.Code)

	f.mu.Lock()
	require.Equal(t, "POST /v1/jobs k1 "+`{"capability":"c","payload":{"x":1}}`, f.reqs[0], "unset flags are left to the service's defaults")
	require.Equal(t, "POST /v1/jobs  "+`{"capability":"c","payload":{}}`, f.reqs[1], "no key, no Idempotency-Key")
	require.Contains(t, f.reqs, "GET /v1/jobs?limit=50&status=SUCCESS")
	require.Contains(t, f.reqs, `POST /v1/jobs/j1/cancel  {"reason":"changed my mind"}`)
	f.mu.Unlock()
}

func TestJobsUsage(t *testing.T) {
	t.Parallel()
	for _, help := range []string{"-h", "--help", "help"} {
		env, out, _ := testEnv(nil)
		require.NoError(t, Jobs(context.Background(), env, []string{help}), "jobs %s is help, not an unknown command", help)
		require.Contains(t, out.String(), "agentreach jobs submit --capability C")
	}
	env, _, _ := testEnv(nil)
	err := Jobs(context.Background(), env, []string{"submit", "-h"})
	require.ErrorIs(t, err, flag.ErrHelp)
	require.Equal(t, ExitOK, ExitCode(err))
	err = Jobs(context.Background(), env, []string{"get", "--nope", "x"})
	var flagErr *FlagError
	require.ErrorAs(t, err, &flagErr)
	require.ErrorIs(t, err, ErrUsage)
	require.Equal(t, ExitUsage, ExitCode(err))
	for _, args := range [][]string{
		nil,
		{"frobnicate"},
		{"submit"},
		{"submit", "--capability", "c", "--payload", "{nope"},
		{"get"},
		{"events", "a", "b"},
	} {
		env, _, errOut := testEnv(map[string]string{"AGENTREACH_URL": "http://127.0.0.1:1"})
		err := Jobs(context.Background(), env, args)
		require.ErrorIs(t, err, ErrUsage, "%v", args)
		if len(args) < 2 && (len(args) == 0 || args[0] == "frobnicate") {
			require.Contains(t, errOut.String(), "agentreach jobs submit --capability C", "%v prints the help", args)
		}
	}
}

func TestProgressBar(t *testing.T) {
	t.Parallel()
	var b termBuffer // redrawn in place on a terminal only (TestProgressBarOffATerminal)
	bar := ProgressBar{W: &b, Label: "rebuild"}
	bar.Done()
	require.Empty(t, b.String(), "a bar never drawn ends no line")
	bar.Update(5, 10)
	bar.Update(10, 10)
	bar.Done()
	require.Equal(t, "\rrebuild [###############...............]  50% 5/10 events"+
		"\rrebuild [##############################] 100% 10/10 events\n", b.String())
	b.Reset()
	jobsBar := ProgressBar{W: &b, Label: "x", Unit: "jobs"}
	jobsBar.Update(0, 0)
	require.Equal(t, "\rx [..............................]   0% 0/1 jobs", b.String())
}

func TestSplitList(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"a", "b c"}, SplitList(" a, ,b c ,"))
	require.Nil(t, SplitList(""))
}

func TestChooseProjections(t *testing.T) {
	t.Parallel()
	all, err := ChooseProjections(nil)
	require.NoError(t, err)
	require.Len(t, all, len(ProjectionNames()))
	names := ProjectionNames()
	one, err := ChooseProjections([]string{names[len(names)-1]})
	require.NoError(t, err)
	require.Len(t, one, 1)
	require.Equal(t, names[len(names)-1], one[0].Name())
	_, err = ChooseProjections([]string{"nope"})
	require.ErrorIs(t, err, ErrUsage)
	require.ErrorContains(t, err, `no projection "nope" (there are: `+strings.Join(names, ", ")+")")
}

func TestFormatVerify(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	require.NoError(t, PrintVerify(&b, jobs.VerifyReport{Jobs: 2, Terminal: 2}))
	require.Equal(t, "jobs: 2, terminal: 2, by status: map[]\nall invariants hold\n", b.String())
	b.Reset()
	err := PrintVerify(&b, jobs.VerifyReport{Jobs: 1, Violations: []string{"job x: two successes"}})
	require.EqualError(t, err, "1 invariant violations")
	require.Equal(t, "jobs: 1, terminal: 0, by status: map[]\nVIOLATION: job x: two successes\n", b.String())
}

// On a fresh database, verify finds nothing wrong and a rebuild folds
// nothing into empty read models.
func TestVerifyAndRebuildOnAnEmptyLog(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	rep, err := Verify(t.Context(), pool)
	require.NoError(t, err)
	require.True(t, rep.OK(), FormatVerify(rep))
	require.Zero(t, rep.Jobs)

	env, out, _ := testEnv(nil)
	chosen, err := ChooseProjections(nil)
	require.NoError(t, err)
	rebuilt, err := RebuildProjections(t.Context(), env, pool, env.Logger(), chosen, eventstore.FromSnapshot)
	require.NoError(t, err)
	require.NoError(t, PrintRebuild(out, rebuilt))
	require.Regexp(t, `^rebuilt jobs: 0 events folded into jobs 0 rows in \d+ms\n`+
		`rebuilt agent_stats: 0 events folded into agent_stats_minute 0 rows, agent_stats_hour 0 rows, agent_stats_day 0 rows in \d+ms\n`+
		`rebuilt alerts: 0 events folded into alerts 0 rows in \d+ms\n$`, out.String())
}
