package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/agentreach/agentreach/health"
	"github.com/agentreach/agentreach/internal/devdb"
)

const demoHelp = `agentreach demo: a guided run on this machine

It starts agentreach dev (authentication off), a fleet of agents with a mix
of behaviours (fast, slow, flaky, asynchronous, and one that refuses every
delivery), submits --jobs jobs with a progress bar, waits for every one to
finish, and prints the health of each agent as GET /v1/metrics/agents reports
it, with the dashboard's URL. With --keep it keeps serving afterwards.

`

func (m *Main) runDemo(ctx context.Context, args []string) error {
	fs := m.newFlagSet("demo")
	fs.Usage = func() { fmt.Fprint(fs.Output(), demoHelp); fs.PrintDefaults() }
	jobsN := fs.Int("jobs", 2000, "jobs to submit")
	keep := fs.Bool("keep", false, "keep serving after the run (Ctrl-C to stop)")
	addr := fs.String("addr", "127.0.0.1:0", "where the service listens")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// A fresh database on whatever PostgreSQL dev finds, dropped afterwards.
	db, err := devdb.Open(ctx, devdb.Options{DatabaseURL: m.Getenv("DATABASE_URL")})
	if err != nil {
		return err
	}
	defer db.Close()
	dsn, drop, err := scratchDatabase(ctx, db.DSN, "agentreach_demo_"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err != nil {
		return err
	}
	defer drop()
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	svc := NewMain()
	svc.Stdout, svc.Stderr, svc.Getenv = io.Discard, io.Discard, m.Getenv
	done := make(chan error, 1)
	go func() {
		done <- svc.Run(sctx, []string{"dev", "--insecure", "--addr", *addr, "--database-url", dsn, "--log-level", "error"})
	}()
	select {
	case <-svc.Started():
	case err := <-done:
		return fmt.Errorf("start agentreach dev: %w", err)
	}
	base := svc.URL()
	if err := waitHTTP(ctx, base+"/readyz", 60*time.Second); err != nil {
		return err
	}
	fmt.Fprintf(m.Stderr, "demo: Agent-Reach at %s\n", base)

	fleet := []struct {
		id, capability, behaviour string
	}{
		{"ocr-fast", "document.ocr", "fast"}, {"ocr-slow", "document.ocr", "slow"}, {"ocr-flaky", "document.ocr", "flaky"},
		{"translate-async", "text.translate", "async"}, {"translate-dead", "text.translate", "dead"},
		{"summarize", "text.summarize", "fast"},
	}
	client := &http.Client{Timeout: 10 * time.Second}
	for _, a := range fleet {
		var token atomic.Value
		token.Store("")
		b := a.behaviour
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet {
				return
			}
			var env struct {
				Attempt   int    `json:"attempt"`
				ResultURL string `json:"result_url"`
			}
			_ = json.NewDecoder(r.Body).Decode(&env)
			switch b {
			case "slow":
				time.Sleep(time.Duration(80+rand.IntN(120)) * time.Millisecond) // the agent's work
			case "flaky":
				if rand.IntN(10) < 3 {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
			case "dead":
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			case "async":
				w.WriteHeader(http.StatusAccepted)
				go func() {
					time.Sleep(time.Duration(20+rand.IntN(60)) * time.Millisecond) // the agent's work
					req, _ := http.NewRequest(http.MethodPost, env.ResultURL, strings.NewReader(
						fmt.Sprintf(`{"status":"SUCCESS","result":{"translated":true},"attempt":%d}`, env.Attempt)))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Authorization", "Bearer "+token.Load().(string))
					if resp, err := client.Do(req); err == nil {
						resp.Body.Close()
					}
				}()
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"status":"SUCCESS","result":{"ok":true}}`)
		}))
		defer srv.Close()
		var reg struct {
			Token string `json:"token"`
		}
		resp, err := client.Post(base+"/v1/agents", "application/json", strings.NewReader(fmt.Sprintf(
			`{"agent_id":%q,"capabilities":[%q],"endpoint":%q,"ttl_seconds":60}`, a.id, a.capability, srv.URL)))
		if err != nil {
			return err
		}
		_ = json.NewDecoder(resp.Body).Decode(&reg)
		resp.Body.Close()
		token.Store(reg.Token)
	}
	if err := waitAgentsHealthy(ctx, base, len(fleet), 30*time.Second); err != nil {
		return err
	}

	caps := []string{"document.ocr", "document.ocr", "text.translate", "text.summarize"}
	ids := make([]string, *jobsN)
	var next, finished atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	bar := progressBar{w: m.Stderr, label: "demo: submitting", unit: "jobs"}
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= *jobsN {
					return
				}
				id, err := benchPost(base+"/v1/jobs", fmt.Sprintf(`{"capability":%q,"payload":{"n":%d},"max_attempts":3,"backoff_base_ms":200,"timeout_ms":5000}`, caps[i%len(caps)], i))
				if err != nil {
					firstErr.Store(err)
					return
				}
				ids[i] = id
				if n := finished.Add(1); n%50 == 0 || n == int64(*jobsN) {
					bar.update(n, int64(*jobsN))
				}
			}
		}()
	}
	wg.Wait()
	bar.done()
	if err, ok := firstErr.Load().(error); ok {
		return err
	}
	bar = progressBar{w: m.Stderr, label: "demo: finishing ", unit: "jobs"}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var open int
		if err := svc.app.pool.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE finished_at IS NULL`).Scan(&open); err != nil {
			return err
		}
		lag, err := svc.app.projector.Lag(ctx)
		if err != nil {
			return err
		}
		var behind int64
		for _, n := range lag {
			behind += n
		}
		bar.update(int64(*jobsN-open), int64(*jobsN))
		if open == 0 && behind == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d jobs still open after 5 minutes", open)
		}
		time.Sleep(200 * time.Millisecond) // poll interval while waiting on the condition
	}
	bar.done()

	var metrics struct {
		Agents []health.AgentHealth `json:"agents"`
	}
	raw, err := demoGet(base + "/v1/metrics/agents?window=1h")
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, &metrics); err != nil {
		return err
	}
	f := func(v *float64, scale float64, format string) string {
		if v == nil {
			return "–"
		}
		return fmt.Sprintf(format, *v*scale)
	}
	tw := tabwriter.NewWriter(m.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tATTEMPTED\tDELIVERED\tSUCCEEDED\tFAILED\tTIMED OUT\tREACH\tSUCCESS\tHEALTH\tP50 ms\tP95 ms")
	for _, a := range metrics.Agents {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", a.AgentID, a.Attempted, a.Delivered, a.Succeeded, a.Failed, a.TimedOut,
			f(a.ReachRate, 100, "%.1f%%"), f(a.SuccessRate, 100, "%.1f%%"), f(a.HealthScore, 1, "%.2f"), f(a.LatencyP50MS, 1, "%.1f"), f(a.LatencyP95MS, 1, "%.1f"))
	}
	_ = tw.Flush()
	// The table is GET /v1/metrics/agents; a second read must agree, now
	// that every job is finished and every projection caught up.
	again, err := demoGet(base + "/v1/metrics/agents?window=1h")
	if err != nil {
		return err
	}
	if string(again) != string(raw) {
		return fmt.Errorf("the health table changed after the run: %s", again)
	}
	fmt.Fprintf(m.Stdout, "\n%d jobs done. The table above is GET %s/v1/metrics/agents?window=1h.\nDashboard: %s/dashboard/\n",
		*jobsN, base, base)
	if *keep {
		fmt.Fprintln(m.Stdout, "Still serving; Ctrl-C to stop.")
		<-ctx.Done()
	}
	stop()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(m.Stderr, "demo: the service stopped with:", err)
	}
	return nil
}

func demoGet(u string) ([]byte, error) {
	resp, err := http.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	return b, err
}
