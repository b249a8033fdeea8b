package bench

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentreach/agentreach/sdk/client"
)

// lookupCalls is how many lookups each latency row measures.
const lookupCalls = 500

// Report ingestion: batches of reportBatch, from reportClients at once.
const (
	reportBatch   = 500
	reportClients = 8
)

// lookups measures lookup mode with the caller's Go client: a lookup that
// asks the registry (uncached) and one the client's cache answers, p50 and
// p99 each; then how many outcome reports a second the service takes, in
// batches, beside pgbench -N's transactions a second.
func (r *run) lookups(ctx context.Context) error {
	r.progress("lookup latency, %d lookups uncached and cached …", lookupCalls)
	c, err := client.New(r.base, "", client.Retry(0, 0))
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	measure := func(noCache bool) ([]time.Duration, error) {
		lat := make([]time.Duration, 0, lookupCalls)
		for range lookupCalls {
			start := time.Now()
			res, err := c.Lookup(ctx, "bench.echo", client.LookupOptions{NoCache: noCache, Limit: 3})
			if err != nil {
				return nil, err
			}
			if len(res.Candidates) == 0 {
				return nil, fmt.Errorf("lookup of bench.echo found no candidate")
			}
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		return lat, nil
	}
	uncached, err := measure(true)
	if err != nil {
		return err
	}
	cached, err := measure(false)
	if err != nil {
		return err
	}
	r.res.add("lookup, uncached: POST /v1/lookup (p50 / p99 ms)", fmt.Sprintf("%.2f / %.2f", ms(uncached, 0.50), ms(uncached, 0.99)), "", "")
	r.res.add("lookup, cached in the Go client (p50 / p99 µs)", fmt.Sprintf("%.1f / %.1f", us(cached, 0.50), us(cached, 0.99)), "", "")

	r.progress("report ingestion, %d clients, batches of %d, %s …", reportClients, reportBatch, r.o.duration)
	rate, err := benchReports(ctx, r.base, r.o.duration)
	if err != nil {
		return err
	}
	ratio := "n/a"
	if r.tps8 > 0 {
		ratio = fmt.Sprintf("%.1f × pgbench", rate/r.tps8)
	}
	r.res.add(fmt.Sprintf("direct-call reports ingested/s (POST /v1/reports, batches of %d, %d clients)", reportBatch, reportClients),
		fmt.Sprintf("%.0f", rate), fmt.Sprintf("pgbench -N %s tps", fmtRate(r.tps8)), ratio)
	return nil
}

// benchReports posts batches of reports on the bench's agents from
// reportClients clients for d and answers the reports accepted a second.
func benchReports(ctx context.Context, base string, d time.Duration) (float64, error) {
	hc := &http.Client{Timeout: 30 * time.Second}
	if code, err := post(ctx, hc, base+"/v1/lookup", `{"capability":"bench.echo","limit":4}`); err != nil {
		return 0, fmt.Errorf("lookup before reports: %w", err)
	} else if code != http.StatusOK {
		return 0, fmt.Errorf("lookup before reports answered %d", code)
	}
	reps := make([]string, reportBatch)
	for i := range reps {
		reps[i] = fmt.Sprintf(`{"agent_id":"bench-%d","capability":"bench.echo","reached":true,"ok":%t,"latency_ms":%d}`, i%4, i%10 != 0, i%50)
	}
	body := `{"reports":[` + strings.Join(reps, ",") + `]}`
	var accepted atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, reportClients)
	start := time.Now()
	end := start.Add(d)
	for range reportClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				code, err := post(ctx, hc, base+"/v1/reports", body)
				if err != nil {
					errs <- fmt.Errorf("reports: %w", err)
					return
				}
				if code != http.StatusAccepted {
					errs <- fmt.Errorf("reports answered %d", code)
					return
				}
				accepted.Add(reportBatch)
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return float64(accepted.Load()) / time.Since(start).Seconds(), nil
}

// post sends a JSON body and answers the status.
func post(ctx context.Context, hc *http.Client, url, body string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// us is the q quantile of the sorted latencies, in microseconds.
func us(lat []time.Duration, q float64) float64 {
	if len(lat) == 0 {
		return 0
	}
	return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Nanoseconds()) / 1000
}
