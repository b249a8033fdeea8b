package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/webhook"
)

// findChromium returns Debian's Chromium, or "".
func findChromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// keyedProxy forwards to base, adding key as the bearer credential of
// every request that carries none, so the harness's helpers (written for a
// service without authentication) set up a service that has it on, while
// the browser meets the service itself.
func keyedProxy(t *testing.T, base, key string) string {
	t.Helper()
	target, err := url.Parse(base)
	require.NoError(t, err)
	proxy := &httputil.ReverseProxy{FlushInterval: -1, Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host
		if r.Out.Header.Get("Authorization") == "" {
			r.Out.Header.Set("Authorization", "Bearer "+key)
		}
	}}
	return newHTTPTestServer(t, proxy).URL
}

// browser starts headless Chromium (its own profile, no network but ours)
// and answers a context that ends with the test.
func browser(t *testing.T, chromium string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true), chromedp.WindowSize(1400, 900),
		chromedp.UserDataDir(profileDir(t)))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	// chromedp's complaints (events of newer Chromiums it does not know)
	// go to the test's log, shown when it fails.
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	ctx, cancelTimeout := context.WithTimeout(ctx, 120*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	return ctx
}

// dashboardFleet is what the browser test looks at: agents in every
// lease state it can reach quickly, jobs with one and two attempts, a dead
// letter with no agent, a pull agent's waiting job, and a health alert.
type dashboardFleet struct {
	done    []string // succeeded at once
	retried string   // failed at dash-wobbly (HTTP 503), then succeeded
	dead    string   // no agent offers its capability
}

func newDashboardFleet(t *testing.T, svc *running, api string) dashboardFleet {
	t.Helper()
	var f dashboardFleet
	newTestAgent(t, api, "dash-ocr", "doc.ocr", 50, answer("SUCCESS", ""))
	newTestAgent(t, api, "dash-flaky", "doc.ocr", 50, statusOnly(http.StatusServiceUnavailable))
	newTestAgent(t, api, "dash-translate", "text.translate", 50, answer("SUCCESS", ""))
	var calls atomic.Int32
	newTestAgent(t, api, "dash-wobbly", "doc.wobbly", 50, func(w http.ResponseWriter, env webhook.Envelope) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "warming up, try again")
			return
		}
		answer("SUCCESS", "")(w, env)
	})
	for range 3 {
		f.done = append(f.done, submitOK(t, api, `{"capability":"text.translate","payload":{"to":"fr"}}`))
	}
	for range 12 {
		f.done = append(f.done, submitOK(t, api, `{"capability":"doc.ocr","payload":{"page":1},"max_attempts":3,"backoff_base_ms":100}`))
	}
	f.retried = submitOK(t, api, `{"capability":"doc.wobbly","payload":{},"max_attempts":3,"backoff_base_ms":100}`)
	f.dead = submitOK(t, api, `{"capability":"doc.none","payload":{},"max_attempts":1}`)
	for _, id := range append(f.done, f.retried, f.dead) {
		waitTerminal(t, api, id, 20*time.Second)
	}
	require.Equal(t, "SUCCESS", getJob(t, api, f.retried).Status)
	// dash-flaky's failures cross the health thresholds: HEALTH_DEGRADED.
	for range 6 {
		code, out := submit(t, api, `{"capability":"doc.flaky-only","payload":{},"max_attempts":1}`)
		require.Equal(t, http.StatusAccepted, code, "%v", out)
	}
	waitProjected(t, svc)
	_, err := svc.m.app.registry.HealthSweep(context.Background())
	require.NoError(t, err)

	// A pull agent, HEALTHY at its first claim, with one job waiting in its inbox.
	puller := registerPull(t, api, "dash-puller", "doc.pull", "")
	require.Empty(t, puller.mustClaim(t, 1, 0))
	waitRoute(t, api, "doc.pull", func(rj routeJSON) bool { return rj.Chosen == "dash-puller" })
	waiting := submitOK(t, api, `{"capability":"doc.pull","payload":{}}`)
	waitJob(t, api, waiting, func(j jobJSON) bool { return j.AgentID == "dash-puller" }, 10*time.Second)
	require.Equal(t, 1, *listPullAgents(t, api)["dash-puller"].InboxDepth)
	waitProjected(t, svc)
	return f
}

// TestDashboardInChromium drives the dashboard in headless Chromium with
// authentication on: a shared job address opened without a key asks for
// one, refuses a wrong one, and shows the job once signed in (no browser
// login dialog on the way); the timeline groups events by attempt with
// the time between steps, what the agent answered each attempt, the
// routing table, and the raw JSON folded away; a dead letter with no agent
// says why it had no candidates; the dead letters are replayed by
// selection; the alerts view shows a HEALTH_DEGRADED; the agents table
// sorts, and its agent page draws the minutes and drains, brings up and
// reweighs the agent, each after a confirmation; River UI opens with the
// sign-in. It saves the screenshots dashboard.png (agents),
// dashboard-job.png (a timeline) and dashboard-agent.png under
// build/screenshots; `make screenshots` copies them into docs/ (the suite
// never changes a tracked file).
func TestDashboardInChromium(t *testing.T) {
	t.Parallel()
	chromium := findChromium()
	if chromium == "" {
		t.Skip("Chromium is not installed (apt-get install chromium): the dashboard browser test needs it")
	}
	svc := startTuned(t, map[string]string{"DATABASE_URL": newDatabase(t)}, func(c *Config) {
		fastSweeps(c)
		c.Jobs.ClaimTimeout = time.Minute // the pull agent's job stays in its inbox while the page is read
	}, "serve", "--admin-key", testAdminKey, "--addr", "127.0.0.1:0", "--log-level", "warn")
	base := svc.m.URL()
	waitReady(t, base)
	api := keyedProxy(t, base, testAdminKey)
	// dash-flaky alone offers doc.flaky-only, so its failures are its own.
	newTestAgent(t, api, "dash-bad", "doc.flaky-only", 50, statusOnly(http.StatusServiceUnavailable))
	// An operator's receiver of AGENT_DOWN alerts.
	receiver, receiverURL := newAlertReceiver(t, 0)
	code, out := call(t, http.MethodPut, api+"/v1/policies/alerts", "", `{"namespace":"default","webhooks":[{"url":"`+receiverURL+`","kinds":["AGENT_DOWN"]}]}`)
	require.Equal(t, http.StatusOK, code, out)
	f := newDashboardFleet(t, svc, api)
	ctx := browser(t, chromium)
	shot := func(name string) {
		var png []byte
		require.NoError(t, chromedp.Run(ctx, chromedp.CaptureScreenshot(&png)))
		require.Greater(t, len(png), 1000)
		if strings.HasSuffix(filepath.Dir(must(os.Getwd())), "cmd") {
			dir := filepath.Join("..", "..", "build", "screenshots")
			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
		}
	}
	text := func(sel string) string {
		var s string
		require.NoError(t, chromedp.Run(ctx, chromedp.Text(sel, &s, chromedp.ByQuery)))
		return s
	}
	eval := func(js string, into any) { require.NoError(t, chromedp.Run(ctx, chromedp.Evaluate(js, into))) }

	// A shared job address, opened without a key: the page asks for one.
	jobURL := base + "/dashboard/jobs/" + f.retried
	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(jobURL), chromedp.WaitVisible(`#signin`, chromedp.ByQuery)))
	require.Contains(t, text(`#signin-msg`), "An API key is needed")
	require.NoError(t, chromedp.Run(ctx, chromedp.SendKeys(`#key`, "ark_not_a_key_0000000000", chromedp.ByQuery),
		chromedp.Click(`#signin-form button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#signin-msg`, chromedp.ByQuery)))
	waitText(t, ctx, `#signin-msg`, "That key was refused: API key not recognised")
	require.NoError(t, chromedp.Run(ctx, chromedp.SendKeys(`#key`, testAdminKey, chromedp.ByQuery),
		chromedp.Click(`#signin-form button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#timeline section[data-group="attempt-2"]`, chromedp.ByQuery)))
	var loc string
	eval(`location.href`, &loc)
	require.Equal(t, jobURL, loc, "the shared address is where the sign-in lands")
	var keyInPage bool
	eval(`document.documentElement.outerHTML.includes(`+strconvQuote(testAdminKey)+`) || Object.values(localStorage).some(v => v.includes(`+strconvQuote(testAdminKey)+`))`, &keyInPage)
	require.False(t, keyInPage, "the page keeps no key")
	require.Contains(t, text(`#who`), "key bootstrap")

	// The timeline: grouped by attempt, the time between steps, what the
	// agent answered, the routing table, the raw JSON folded away.
	first, second := text(`section[data-group="attempt-1"]`), text(`section[data-group="attempt-2"]`)
	require.Contains(t, first, "Attempt 1 → dash-wobbly")
	require.Contains(t, first, "HTTP 503")
	require.Contains(t, first, "warming up, try again")
	require.Contains(t, first, "exact_capability")
	require.Contains(t, second, "HTTP 200")
	require.Regexp(t, `\+\d+(\.\d+)? (ms|s)`, second, "the time since the step before")
	require.Contains(t, text(`section[data-group="submitted"]`), "SUBMITTED")
	require.Contains(t, text(`section[data-group="submitted"] h3`), "· 1 event", "one event, not \"1 events\"")
	require.NotContains(t, text(`section[data-group="submitted"] h3`), "1 events")
	var rawOpen int
	eval(`document.querySelectorAll('#timeline details.raw[open]').length`, &rawOpen)
	require.Zero(t, rawOpen, "the raw events are folded")
	shot("dashboard-job.png")

	// A dead letter that found no agent says why its candidates are empty.
	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(base+"/dashboard/jobs/"+f.dead),
		chromedp.WaitVisible(`[data-why="no-candidates"]`, chromedp.ByQuery)))
	require.Contains(t, text(`[data-why="no-candidates"]`), "no agent of namespace default offers doc.none")

	// A job or agent the key cannot see: a not-found view, a way back, and
	// no action buttons.
	const noJob = "0190abcd-0000-7000-8000-000000000000"
	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(base+"/dashboard/jobs/"+noJob),
		chromedp.WaitVisible(`[data-not-found="job"]`, chromedp.ByQuery)))
	require.Contains(t, text(`[data-not-found="job"]`), noJob+": no such job in the namespaces of this key.")
	noActions := func() {
		t.Helper()
		var buttons int
		eval(`document.querySelectorAll('#view button').length`, &buttons)
		require.Zero(t, buttons, "no action on something missing")
	}
	noActions()
	time.Sleep(2500 * time.Millisecond) // a refresh (every 2 s) keeps the view
	noActions()
	require.NoError(t, chromedp.Run(ctx, chromedp.WaitVisible(`[data-not-found="job"] a[href="/dashboard/jobs"]`, chromedp.ByQuery)))
	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(base+"/dashboard/agents/default/dash-nobody"),
		chromedp.WaitVisible(`[data-not-found="agent"]`, chromedp.ByQuery)))
	require.Contains(t, text(`[data-not-found="agent"]`), "default/dash-nobody: no such agent in the namespaces of this key.")
	noActions()
	require.NoError(t, chromedp.Run(ctx, chromedp.WaitVisible(`[data-not-found="agent"] a[href="/dashboard/agents?namespace=default"]`, chromedp.ByQuery)))

	// The jobs view searches by a job id prefix, into its address.
	prefix := f.retried[:23] // UUIDv7: the first digits are the submit time, shared by jobs of the same moment
	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(base+"/dashboard/jobs"),
		chromedp.WaitVisible(`#jobs-table tr[data-job="`+f.done[0]+`"]`, chromedp.ByQuery),
		chromedp.SendKeys(`#f-q`, prefix, chromedp.ByQuery)))
	waitEval(t, ctx, `location.search`, func(v string) bool { return v == "?q="+prefix })
	waitEval(t, ctx, `Array.from(document.querySelectorAll('#jobs-table tbody tr')).map(r => r.dataset.job).join(",")`,
		func(v string) bool { return v == f.retried })
	require.NoError(t, chromedp.Run(ctx, chromedp.SetValue(`#f-since`, "24h", chromedp.ByQuery)))
	eval(`document.querySelector('#f-since').dispatchEvent(new Event('change')), true`, new(bool))
	waitEval(t, ctx, `location.search`, func(v string) bool { return v == "?q="+prefix+"&since=24h" })
	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(base+"/dashboard/jobs?q="+prefix+"&since=1h"),
		chromedp.WaitVisible(`#jobs-table tr[data-job="`+f.retried+`"]`, chromedp.ByQuery)))
	var since string
	eval(`document.querySelector('#f-since').value`, &since)
	require.Equal(t, "1h", since, "the range, from the address")
	// Error text, within a range: the dead letter's reason finds it.
	var dead jobJSON
	getJSON(t, api+"/v1/jobs/"+f.dead, http.StatusOK, &dead)
	require.NotEmpty(t, dead.Error)
	words := strings.Fields(dead.Error)
	needle := words[len(words)-1]
	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(base+"/dashboard/jobs?since=1h&q="+url.QueryEscape(needle)),
		chromedp.WaitVisible(`#jobs-table tr[data-job="`+f.dead+`"]`, chromedp.ByQuery)))
	var found string
	eval(`Array.from(document.querySelectorAll('#jobs-table tbody tr')).map(r => r.dataset.job).join(",")`, &found)
	require.NotContains(t, found, f.done[0], "a job without that error is not found")
	// The API's refusal is shown, not an empty list.
	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(base+"/dashboard/jobs?q=warming&since=yesterday"),
		chromedp.WaitVisible(`#jobs-error`, chromedp.ByQuery)))
	require.Contains(t, text(`#jobs-error`), "since must be an RFC 3339 time")
	// Pages follow next_cursor, and back to the first.
	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(base+"/dashboard/jobs?limit=5"),
		chromedp.WaitVisible(`#jobs-table tbody tr[data-job]`, chromedp.ByQuery)))
	waitEval(t, ctx, `String(document.querySelector('#page-next').disabled)+document.querySelector('#page-first').disabled`,
		func(v string) bool { return v == "falsetrue" })
	var page1, page2 string
	eval(`Array.from(document.querySelectorAll('#jobs-table tbody tr')).map(r => r.dataset.job).join(",")`, &page1)
	require.Len(t, strings.Split(page1, ","), 5)
	require.NoError(t, chromedp.Run(ctx, chromedp.Click(`#page-next`, chromedp.ByQuery)))
	waitEval(t, ctx, `location.search`, func(v string) bool { return strings.HasPrefix(v, "?limit=5&cursor=") })
	waitEval(t, ctx, `Array.from(document.querySelectorAll('#jobs-table tbody tr')).map(r => r.dataset.job).join(",")`,
		func(v string) bool { page2 = v; return v != page1 && v != "" })
	require.NotContains(t, page1, strings.Split(page2, ",")[0])
	require.NoError(t, chromedp.Run(ctx, chromedp.Click(`#page-first`, chromedp.ByQuery)))
	waitEval(t, ctx, `location.search`, func(v string) bool { return v == "?limit=5" })

	// River UI opens with the sign-in cookie.
	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(base+"/riverui/"), chromedp.WaitReady(`body`, chromedp.ByQuery)))
	var riverTitle string
	waitEval(t, ctx, `document.title`, func(v string) bool { riverTitle = v; return strings.Contains(v, "River") })
	require.Contains(t, riverTitle, "River")

	// The alerts view, its own address.
	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(base+"/dashboard/alerts?kind=health"),
		chromedp.WaitVisible(`#alerts-table tr[data-kind="HEALTH_DEGRADED"]`, chromedp.ByQuery)))
	require.Contains(t, text(`#alerts-table tbody`), "dash-bad")

	// Dead letters: the list with its agent column, replay by selection.
	require.NoError(t, chromedp.Run(ctx, chromedp.Click(`nav a[data-nav="dead"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#dead-table tr[data-job="`+f.dead+`"] input.pick`, chromedp.ByQuery)))
	require.Contains(t, text(`#dead-table tr[data-job="`+f.dead+`"] td.agent`), "no agent")
	require.NoError(t, chromedp.Run(ctx, chromedp.Click(`#dead-table tr[data-job="`+f.dead+`"] input.pick`, chromedp.ByQuery),
		chromedp.Click(`#replay-selected`, chromedp.ByQuery), chromedp.WaitVisible(`#confirm`, chromedp.ByQuery)))
	require.Contains(t, text(`#confirm-title`), "Replay 1 dead letter?")
	require.NoError(t, chromedp.Run(ctx, chromedp.Click(`#confirm-ok`, chromedp.ByQuery)))
	waitText(t, ctx, `#status`, "replayed 1 of 1")
	replayed := replayOf(t, api, f.dead)
	require.Equal(t, "SUBMITTED", jobEvents(t, api, replayed)[0].Type)
	// The replay finds no agent either: now two dead letters of doc.none,
	// replayed together by their filter.
	require.Equal(t, "DEAD_LETTER", waitTerminal(t, api, replayed, 20*time.Second).Status)
	waitProjected(t, svc)
	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(base+"/dashboard/dead?capability=doc.none"),
		chromedp.WaitVisible(`#dead-table tr[data-job="`+replayed+`"]`, chromedp.ByQuery),
		chromedp.Click(`#replay-filter`, chromedp.ByQuery), chromedp.WaitVisible(`#confirm`, chromedp.ByQuery)))
	require.Contains(t, text(`#confirm-title`), "Replay 2 dead letters?")
	require.Contains(t, text(`#confirm-text`), "every dead letter matching the filters")
	require.NoError(t, chromedp.Run(ctx, chromedp.Click(`#confirm-ok`, chromedp.ByQuery)))
	waitText(t, ctx, `#status`, "replayed 2 of 2")
	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(base+"/dashboard/dead?capability=doc.ocr"),
		chromedp.WaitVisible(`#dead-table td.empty`, chromedp.ByQuery)))
	require.Contains(t, text(`#dead-table td.empty`), "No dead letter matches these filters.")

	// The agents table: lease and health apart, sorting in the address.
	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(base+"/dashboard/agents"),
		chromedp.WaitVisible(`#agents-table tr[data-agent="dash-ocr"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#agents-table tr[data-agent="dash-puller"] .pill.pull`, chromedp.ByQuery)))
	require.Contains(t, text(`#agents-table thead`), "LEASE")
	require.Contains(t, text(`#agents-table thead`), "HEALTH")
	require.Contains(t, text(`#agents-table tr[data-agent="dash-puller"]`), "inbox 1")
	require.NotContains(t, text(`#agents-table tr[data-agent="dash-ocr"]`), "inbox")
	// No attempt of the puller has ended: its health is no number.
	require.Equal(t, "—", strings.TrimSpace(text(`#agents-table tr[data-agent="dash-puller"] td.health`)))
	require.NoError(t, chromedp.Run(ctx, chromedp.WaitVisible(`#agents-table tr[data-agent="dash-puller"] td.health span[title^="no attempts in the window"]`, chromedp.ByQuery)))
	require.Contains(t, text(`#agents-table thead`), "OK OF ATTEMPTS")
	var rawEnum bool
	eval(`document.querySelector('#agents-table').innerText.includes('half_open')`, &rawEnum)
	require.False(t, rawEnum, "breaker states in words")
	var halfOpen string
	eval(`breakerText("half_open") + "," + breakerText("open") + "," + breakerText("closed")`, &halfOpen)
	require.Equal(t, "half-open,open,closed", halfOpen)
	require.NoError(t, chromedp.Run(ctx, chromedp.Click(`#agents-table th[data-sort="success"]`, chromedp.ByQuery)))
	waitEval(t, ctx, `location.search`, func(v string) bool { return v == "?sort=success&dir=asc" })
	waitEval(t, ctx, `document.querySelector('#agents-table tbody tr').dataset.agent`, func(v string) bool { return v == "dash-bad" || v == "dash-flaky" })
	waitEval(t, ctx, `document.querySelector('#agents-table tbody tr:last-child').dataset.agent`,
		func(v string) bool { return v == "dash-puller" }) // no success rate yet (n/a) sorts last
	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(base+"/dashboard/agents?q=translate"),
		chromedp.WaitVisible(`#agents-table tr[data-agent="dash-translate"]`, chromedp.ByQuery)))
	var rows int
	eval(`document.querySelectorAll('#agents-table tbody tr').length`, &rows)
	require.Equal(t, 1, rows, "the text filter, from the address")
	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(base+"/dashboard/agents"),
		chromedp.WaitVisible(`#agents-table tr[data-agent="dash-ocr"] svg.spark rect + rect + rect`, chromedp.ByQuery)))
	// The fleet: throughput, error rate and latency over the window.
	require.NoError(t, chromedp.Run(ctx, chromedp.WaitVisible(`figure[data-chart="fleet-throughput"] svg rect`, chromedp.ByQuery),
		chromedp.WaitVisible(`figure[data-chart="fleet-errors"] polyline`, chromedp.ByQuery),
		chromedp.WaitVisible(`figure[data-chart="fleet-latency"] polyline`, chromedp.ByQuery)))
	require.Regexp(t, `Throughput\s+\d+ attempts in 1h`, text(`figure[data-chart="fleet-throughput"] figcaption`))
	shot("dashboard.png")
	require.NoError(t, chromedp.Run(ctx, chromedp.SetValue(`#fleet-window`, "7d", chromedp.ByQuery)))
	eval(`document.querySelector('#fleet-window').dispatchEvent(new Event('change')), true`, new(bool))
	waitEval(t, ctx, `location.search`, func(v string) bool { return v == "?fleet=7d" })
	waitText(t, ctx, `figure[data-chart="fleet-throughput"] figcaption`, "attempts in 7d")

	// The agent's page: its minutes drawn, and operator actions, each
	// after a confirmation.
	require.NoError(t, chromedp.Run(ctx, chromedp.Click(`#agents-table tr[data-agent="dash-ocr"] a`, chromedp.ByQuery),
		chromedp.WaitVisible(`figure[data-chart="attempts"] svg rect`, chromedp.ByQuery),
		chromedp.WaitVisible(`figure[data-chart="success"] circle`, chromedp.ByQuery)))
	eval(`location.pathname`, &loc)
	require.Equal(t, "/dashboard/agents/default/dash-ocr", loc)
	// One name per figure: the header's and the charts' are the same
	// words, each with what it counts in its tooltip.
	figures := text(`#agent-figures`)
	require.Contains(t, figures, "answered OK of attempts 100.0%")
	require.Contains(t, figures, "business success of answered 100.0%")
	require.NotContains(t, figures, "success 100")
	require.Contains(t, text(`figure[data-chart="success"] figcaption`), "Answered OK of attempts 1h: 100.0%")
	require.Contains(t, text(`figure[data-chart="business"] figcaption`), "Business success of answered 1h: 100.0%")
	var tip string
	eval(`document.querySelector('#agent-figures [data-figure="success"]').title`, &tip)
	require.Contains(t, tip, "success_rate")
	eval(`document.querySelector('#agent-figures [data-figure="business"]').title`, &tip)
	require.Contains(t, tip, "business_success_rate")
	act := func(button, reason string) {
		require.NoError(t, chromedp.Run(ctx, chromedp.Click(button, chromedp.ByQuery), chromedp.WaitVisible(`#confirm`, chromedp.ByQuery)))
		if reason != "" {
			require.NoError(t, chromedp.Run(ctx, chromedp.SendKeys(`#confirm-reason`, reason, chromedp.ByQuery)))
		}
		require.NoError(t, chromedp.Run(ctx, chromedp.Click(`#confirm-ok`, chromedp.ByQuery), chromedp.WaitNotVisible(`#confirm`, chromedp.ByQuery)))
	}
	// A confirmation declined does nothing.
	require.NoError(t, chromedp.Run(ctx, chromedp.Click(`button[data-action="down"]`, chromedp.ByQuery), chromedp.WaitVisible(`#confirm`, chromedp.ByQuery),
		chromedp.Click(`#confirm-cancel`, chromedp.ByQuery), chromedp.WaitNotVisible(`#confirm`, chromedp.ByQuery)))
	act(`button[data-action="down"]`, "maintenance window")
	waitText(t, ctx, `#status`, "dash-ocr is DOWN (hold: down)")
	var a struct {
		State  string `json:"state"`
		Weight int    `json:"weight"`
	}
	getJSON(t, api+"/v1/agents/dash-ocr", http.StatusOK, &a)
	require.Equal(t, "DOWN", a.State)
	evs := dumpTable(t, svc, `SELECT data->>'reason', metadata->>'actor' FROM events WHERE stream_id = 'agent:default/dash-ocr' AND type = 'AGENT_STATE_CHANGED' ORDER BY version DESC LIMIT 1`)
	require.Equal(t, []string{"[maintenance window key:bootstrap]"}, evs, "the reason and the key that acted")
	// The operator's receiver is told, with a link to the agent's page.
	waitFor(t, 30*time.Second, "the AGENT_DOWN alert at the receiver", func() bool { return len(receiver.received()) > 0 })
	alert := string(receiver.received()[0].body)
	require.Contains(t, alert, `"kind":"AGENT_DOWN"`)
	require.Contains(t, alert, `"url":"`+base+`/dashboard/agents/default/dash-ocr"`)
	act(`button[data-action="up"]`, "")
	waitText(t, ctx, `#status`, "dash-ocr is ")
	require.NoError(t, chromedp.Run(ctx, chromedp.SetValue(`#op-weight`, "80", chromedp.ByQuery)))
	eval(`document.querySelector('#op-weight').dispatchEvent(new Event('input')), true`, new(bool))
	act(`#op-apply`, "")
	waitText(t, ctx, `#status`, "weight 80")
	getJSON(t, api+"/v1/agents/dash-ocr", http.StatusOK, &a)
	require.NotEqual(t, "DOWN", a.State, "brought up")
	require.Equal(t, 80, a.Weight)
	waitText(t, ctx, `dl.facts`, "Weight80")
	shot("dashboard-agent.png")

	// dash-bad answered every attempt 503: a lease that may be HEALTHY, a
	// health of 0.00, and the page says why.
	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(base+"/dashboard/agents/default/dash-bad"),
		chromedp.WaitVisible(`#agent-figures`, chromedp.ByQuery)))
	require.Contains(t, text(`#agent-figures`), "health 0.00")
	require.Contains(t, text(`#agent-figures`), "answered OK of attempts 0.0%")
	if strings.Contains(text(`.page-head h2`), "HEALTHY") {
		require.Regexp(t, `HEALTHY \(lease: heartbeats on time\) · health 0\.00: none of its \d+ attempts reached it \(delivery failures\)`, text(`#health-note`))
	}

	// A drain, from another agent's own address.
	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(base+"/dashboard/agents/default/dash-translate"),
		chromedp.WaitVisible(`figure[data-chart="attempts"]`, chromedp.ByQuery)))
	act(`button[data-action="drain"]`, "")
	waitText(t, ctx, `#status`, "dash-translate is DRAINING")
	// The agent registers again (a restart): the drain holds, and the page
	// says so until an operator's up.
	var translate struct {
		Endpoint string `json:"endpoint"`
	}
	getJSON(t, api+"/v1/agents/dash-translate", http.StatusOK, &translate)
	code, out = call(t, http.MethodPost, api+"/v1/agents", "",
		`{"agent_id":"dash-translate","capabilities":["text.translate"],"endpoint":"`+translate.Endpoint+`","ttl_seconds":20}`)
	require.Equal(t, http.StatusCreated, code, out)
	require.Contains(t, []string{"DRAINING", "OFFLINE"}, agentState(t, api, "dash-translate"), "registered again, still drained")
	require.NoError(t, chromedp.Run(ctx, chromedp.Reload()))
	waitText(t, ctx, `.page-head h2`, "hold: drain")
	require.NotContains(t, text(`.page-head h2`), "HEALTHY")
	require.NoError(t, chromedp.Run(ctx, chromedp.WaitVisible(`button[data-action="up"]`, chromedp.ByQuery)))
}

// waitText waits until the text of sel contains want.
func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	waitEval(t, ctx, `(document.querySelector(`+strconvQuote(sel)+`) || {}).textContent || ""`, func(v string) bool { return strings.Contains(v, want) })
}

// waitEval waits until js evaluates to a string ok accepts.
func waitEval(t *testing.T, ctx context.Context, js string, ok func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var v string
	for {
		require.NoError(t, chromedp.Run(ctx, chromedp.Evaluate(js, &v)))
		if ok(v) {
			return
		}
		require.True(t, time.Now().Before(deadline), "%s is still %q", js, v)
		time.Sleep(50 * time.Millisecond) // poll interval while waiting on the condition
	}
}

func strconvQuote(s string) string { return strconv.Quote(s) }

// replayOf waits for the job replaying id and answers its id.
func replayOf(t *testing.T, api, id string) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var body struct {
			Jobs []struct {
				JobID string `json:"job_id"`
			} `json:"jobs"`
		}
		getJSON(t, api+"/v1/jobs?limit=100", http.StatusOK, &body)
		for _, j := range body.Jobs {
			if j.JobID != id && getJob(t, api, j.JobID).ReplayOf == id {
				return j.JobID
			}
		}
		require.True(t, time.Now().Before(deadline), "no job replays %s", id)
		time.Sleep(50 * time.Millisecond) // poll interval while waiting on the condition
	}
}

// profileDir is a Chromium profile folder, removed when the test ends;
// Chromium may still be writing to it for a moment after it was told to quit.
func profileDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "agentreach-chromium-")
	require.NoError(t, err)
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for os.RemoveAll(dir) != nil && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond) // poll interval while waiting on the condition
		}
	})
	return dir
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestDashboardDevSignInAfterRestart: dev keeps its admin key across a
// restart (its key file), so a browser signed in before the restart is
// still signed in after it, on the same address, with no new key to find.
func TestDashboardDevSignInAfterRestart(t *testing.T) {
	t.Parallel()
	chromium := findChromium()
	if chromium == "" {
		t.Skip("Chromium is not installed (apt-get install chromium): the dashboard browser test needs it")
	}
	env := map[string]string{"DATABASE_URL": newDatabase(t), "AGENTREACH_DEV_KEY_FILE": filepath.Join(t.TempDir(), "dev-admin-key")}
	addr := deadAddr(t)
	first := start(t, env, "dev", "--addr", addr, "--log-level", "warn")
	base := first.m.URL()
	waitReady(t, base)
	key := strings.TrimSpace(string(must(os.ReadFile(env["AGENTREACH_DEV_KEY_FILE"]))))
	require.Contains(t, first.out.String(), "Admin key: "+key, "dev prints the key it keeps")

	ctx := browser(t, chromium)
	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(base+"/dashboard/agents"), chromedp.WaitVisible(`#signin`, chromedp.ByQuery),
		chromedp.SendKeys(`#key`, key, chromedp.ByQuery), chromedp.Click(`#signin-form button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#agents-table`, chromedp.ByQuery)))

	first.stop(t)
	second := start(t, env, "dev", "--addr", addr, "--log-level", "warn")
	require.Equal(t, base, second.m.URL())
	waitReady(t, base)
	require.Contains(t, second.out.String(), "Admin key: "+key, "the same key after the restart")
	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(base+"/dashboard/jobs"), chromedp.WaitVisible(`#jobs-table`, chromedp.ByQuery)))
	var signIn bool
	require.NoError(t, chromedp.Run(ctx, chromedp.Evaluate(`!!document.querySelector('#signin') && document.querySelector('#signin').offsetParent !== null`, &signIn)))
	require.False(t, signIn, "still signed in after the restart")
	var who string
	require.NoError(t, chromedp.Run(ctx, chromedp.Text(`#who`, &who, chromedp.ByQuery)))
	require.Contains(t, who, "bootstrap")
}
