package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/agentreach/agentreach/internal/harness"
)

// waitJobWork is how long the wait phase's agent works on a job.
const waitJobWork = 1500 * time.Microsecond

// work takes d, as a job of that length would. Go's timers wake at about
// a millisecond's granularity on this machine kind (a sleep of 1.5 ms
// takes 2.2, one of 0.2 ms takes 1.1): it sleeps the whole milliseconds
// that leave 0.4 ms to spare, then spins to the end.
func work(d time.Duration) {
	end := time.Now().Add(d)
	if s := (d - 400*time.Microsecond).Truncate(time.Millisecond); s > 0 {
		time.Sleep(s)
	}
	for time.Now().Before(end) {
		runtime.Gosched()
	}
}

// waitRoundTrips measures a caller's blocking call as the SDKs make it: one
// client submits jobs one at a time with wait_ms, each answered 200 with
// the ended job, to an agent that works 1.5 ms a job.
func (r *run) waitRoundTrips(ctx context.Context) error {
	var arrived, answered atomic.Int64 // the last delivery's, in Unix nanoseconds
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet {
			return
		}
		arrived.Store(time.Now().UnixNano())
		_, _ = io.Copy(io.Discard, req.Body)
		work(waitJobWork)
		w.Header().Set("Content-Type", "application/json")
		answered.Store(time.Now().UnixNano())
		_, _ = io.WriteString(w, `{"status":"SUCCESS","result":{"ok":true}}`)
	}))
	r.agents = append(r.agents, agent)
	body := fmt.Sprintf(`{"agent_id":"bench-wait","capabilities":["bench.wait"],"endpoint":%q,"ttl_seconds":%d}`, agent.URL, agentTTLSeconds)
	if _, err := harness.Submit(ctx, r.base+"/v1/agents", body); err != nil {
		return err
	}
	if err := harness.WaitAgentsHealthy(ctx, r.base, len(r.agents), 30*time.Second); err != nil {
		return err
	}
	r.progress("a blocking call (submit with wait_ms) of a 1.5 ms job, one client …")
	client, done := newClient(1)
	defer done()
	lat, err := benchWait(ctx, client, r.base, "bench.wait", 300, func() (time.Time, time.Time) {
		return time.Unix(0, arrived.Load()), time.Unix(0, answered.Load())
	})
	if err != nil {
		return err
	}
	r.res.add("a blocking call: submit with wait_ms → 200 with the ended job, a 1.5 ms job, one client (p50 / p95 / p99 ms)",
		fmt.Sprintf("%.2f / %.2f / %.2f", ms(lat.total, 0.50), ms(lat.total, 0.95), ms(lat.total, 0.99)), "aim: p50 ≤ 5 ms",
		fmt.Sprintf("p50 %.2f ms submit → delivered, %.2f ms the agent's, %.2f ms its answer → the caller's",
			ms(lat.in, 0.50), ms(lat.work, 0.50), ms(lat.out, 0.50)))
	return nil
}

// waitTimes are a blocking call's round trips (total) and, when the agent
// stamps its deliveries, their parts: from the submit to the delivery's
// arrival (in), the agent's own time (work), from the agent's answer to
// the caller's (out). Each is sorted on its own.
type waitTimes struct{ total, in, work, out []time.Duration }

// benchWait submits n jobs of capability one at a time with wait_ms and
// answers the round trips; an answer that is not 200 with the job ended
// SUCCESS is an error. stamps, if not nil, answers when the agent got the
// last delivery and when it answered it.
func benchWait(ctx context.Context, client *http.Client, base, capability string, n int, stamps func() (time.Time, time.Time)) (waitTimes, error) {
	body := fmt.Sprintf(`{"capability":%q,"payload":{"wait":true},"wait_ms":5000}`, capability)
	var lat waitTimes
	for range n {
		req, err := harness.NewRequest(ctx, http.MethodPost, base+"/v1/jobs", body)
		if err != nil {
			return waitTimes{}, err
		}
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return waitTimes{}, err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t1 := time.Now()
		var job struct {
			Status string `json:"status"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &job) != nil || job.Status != "SUCCESS" {
			return waitTimes{}, fmt.Errorf("a submit with wait_ms answered %d %.200s", resp.StatusCode, b)
		}
		lat.total = append(lat.total, t1.Sub(t0))
		if stamps != nil {
			arrived, answered := stamps()
			lat.in = append(lat.in, arrived.Sub(t0))
			lat.work = append(lat.work, answered.Sub(arrived))
			lat.out = append(lat.out, t1.Sub(answered))
		}
	}
	for _, l := range [][]time.Duration{lat.total, lat.in, lat.work, lat.out} {
		slices.Sort(l)
	}
	return lat, nil
}
