package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
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

// TestDashboardInChromium drives the dashboard in headless Chromium: the
// agents table, a job's timeline with its routing explanation, and a replay
// from the dead-letter list that creates new events. It saves a screenshot
// to docs/dashboard.png. A pull agent shows its badge and its inbox.
func TestDashboardInChromium(t *testing.T) {
	t.Parallel()
	chromium := findChromium()
	if chromium == "" {
		t.Skip("Chromium is not installed (apt-get install chromium): the dashboard browser test needs it")
	}
	svc := startTuned(t, map[string]string{"DATABASE_URL": newDatabase(t)}, func(c *Config) {
		fastSweeps(c)
		c.Jobs.ClaimTimeout = time.Minute // the pull agent's job stays in its inbox while the page is read
	}, "serve", "--insecure", "--addr", "127.0.0.1:0", "--log-level", "warn")
	base := svc.m.URL()
	waitReady(t, base)
	newTestAgent(t, base, "dash-ocr", "doc.ocr", 50, answer("SUCCESS", ""))
	newTestAgent(t, base, "dash-flaky", "doc.ocr", 50, statusOnly(http.StatusServiceUnavailable))
	newTestAgent(t, base, "dash-translate", "text.translate", 50, answer("SUCCESS", ""))
	var done []string
	for range 3 {
		done = append(done, submitOK(t, base, `{"capability":"text.translate","payload":{"to":"fr"}}`))
	}
	for range 12 {
		done = append(done, submitOK(t, base, `{"capability":"doc.ocr","payload":{"page":1},"max_attempts":3,"backoff_base_ms":100}`))
	}
	dead := submitOK(t, base, `{"capability":"doc.none","payload":{},"max_attempts":1}`)
	for _, id := range append(done, dead) {
		waitTerminal(t, base, id, 20*time.Second)
	}
	waitProjected(t, svc)

	// A pull agent, HEALTHY at its first claim, with one job waiting in its inbox.
	puller := registerPull(t, base, "dash-puller", "doc.pull", "")
	require.Empty(t, puller.mustClaim(t, 1, 0))
	waitRoute(t, base, "doc.pull", func(rj routeJSON) bool { return rj.Chosen == "dash-puller" })
	waiting := submitOK(t, base, `{"capability":"doc.pull","payload":{}}`)
	waitJob(t, base, waiting, func(j jobJSON) bool { return j.AgentID == "dash-puller" }, 10*time.Second)
	require.Equal(t, 1, *listPullAgents(t, base)["dash-puller"].InboxDepth)

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true), chromedp.WindowSize(1400, 900),
		chromedp.UserDataDir(profileDir(t)))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	defer cancelTimeout()

	var agentsText, timeline string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(base+"/dashboard/"),
		chromedp.WaitVisible(`#agents-table tr[data-agent="dash-ocr"]`, chromedp.ByQuery),
		chromedp.Text(`#agents-table tbody`, &agentsText, chromedp.ByQuery),
	))
	require.Contains(t, agentsText, "dash-ocr")
	require.Contains(t, agentsText, "dash-flaky")
	require.Contains(t, agentsText, "HEALTHY")

	var pullerText, pushText string
	var pushBadges int
	require.NoError(t, chromedp.Run(ctx,
		chromedp.WaitVisible(`#agents-table tr[data-agent="dash-puller"] .pill.pull`, chromedp.ByQuery),
		chromedp.Text(`#agents-table tr[data-agent="dash-puller"]`, &pullerText, chromedp.ByQuery),
		chromedp.Text(`#agents-table tr[data-agent="dash-ocr"]`, &pushText, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll('#agents-table tr[data-agent="dash-ocr"] .pill.pull').length`, &pushBadges),
	))
	require.Contains(t, pullerText, "pull")
	require.Contains(t, pullerText, "inbox 1", "the pull agent's waiting job")
	require.NotContains(t, pushText, "inbox", "a push agent has no inbox")
	require.Zero(t, pushBadges, "a push agent has no pull badge")

	// A job's timeline, with the routing explanation of each attempt.
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Click(`nav button[data-tab="jobs"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#jobs-table tr[data-job="`+done[0]+`"]`, chromedp.ByQuery),
		chromedp.Click(`#jobs-table tr[data-job="`+done[0]+`"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#timeline li[data-type="SUCCESS"]`, chromedp.ByQuery),
		chromedp.Text(`#detail`, &timeline, chromedp.ByQuery),
	))
	for _, want := range []string{"SUBMITTED", "ROUTED", "DELIVERED", "SUCCESS", "exact_capability", "trace"} {
		require.Contains(t, timeline, want)
	}

	// Replay from the dead-letter list.
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Click(`#close-detail`, chromedp.ByQuery),
		chromedp.Click(`nav button[data-tab="dead"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#dead-table tr[data-job="`+dead+`"] button.replay`, chromedp.ByQuery),
		chromedp.Click(`#dead-table tr[data-job="`+dead+`"] button.replay`, chromedp.ByQuery),
		chromedp.WaitVisible(`#status`, chromedp.ByQuery),
	))
	deadline := time.Now().Add(15 * time.Second)
	for {
		var body struct {
			Jobs []struct {
				JobID string `json:"job_id"`
			} `json:"jobs"`
		}
		getJSON(t, base+"/v1/jobs?capability=doc.none&limit=10", http.StatusOK, &body)
		replayed := ""
		for _, j := range body.Jobs {
			if j.JobID != dead {
				replayed = j.JobID
			}
		}
		if replayed != "" {
			require.Equal(t, dead, getJob(t, base, replayed).ReplayOf, "the replay button made a new job")
			require.Equal(t, "SUBMITTED", jobEvents(t, base, replayed)[0].Type)
			break
		}
		require.True(t, time.Now().Before(deadline), "no replayed job")
		time.Sleep(50 * time.Millisecond) // poll interval while waiting on the condition
	}

	// The screenshot the README shows: the agents page.
	var png []byte
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Click(`#close-detail`, chromedp.ByQuery),
		chromedp.Click(`nav button[data-tab="agents"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#agents-table tr[data-agent="dash-ocr"]`, chromedp.ByQuery),
		// The hour of per-minute bars is drawn once the series has arrived.
		chromedp.WaitReady(`#agents-table tr[data-agent="dash-ocr"] svg.spark rect + rect`, chromedp.ByQuery),
		chromedp.CaptureScreenshot(&png),
	))
	require.Greater(t, len(png), 1000)
	out := filepath.Join("..", "..", "docs", "dashboard.png")
	if os.Getenv("CI") == "" && strings.HasSuffix(filepath.Dir(must(os.Getwd())), "cmd") {
		require.NoError(t, os.WriteFile(out, png, 0o644))
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
