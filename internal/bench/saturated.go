package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"time"

	"github.com/agentreach/agentreach/internal/harness"
)

// The saturated fleet: few agents with few slots, slow jobs, more work
// than they can take.
const (
	satAgents   = 4
	satSlots    = 2
	satWork     = 100 * time.Millisecond
	satOverload = 1.5
	satHighEach = 20 // one job in satHighEach is high, the rest low
)

// slowFleet is satAgents push agents with satSlots slots each that hold
// every job satWork, recording when each job's delivery began and how
// long the slots were busy within a window.
type slowFleet struct {
	servers []*httptest.Server
	mu      sync.Mutex
	started map[string]time.Time
	spans   [][2]time.Time // each delivery's start and end
}

func newSlowFleet() *slowFleet {
	f := &slowFleet{started: map[string]time.Time{}}
	for range satAgents {
		f.servers = append(f.servers, httptest.NewServer(http.HandlerFunc(f.serve)))
	}
	return f
}

func (f *slowFleet) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		return
	}
	start := time.Now()
	var env struct {
		JobID string `json:"job_id"`
	}
	_ = json.NewDecoder(r.Body).Decode(&env)
	_, _ = io.Copy(io.Discard, r.Body)
	time.Sleep(satWork) // the agent's work, while it holds the slot
	f.mu.Lock()
	f.started[env.JobID] = start
	f.spans = append(f.spans, [2]time.Time{start, time.Now()})
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"status":"SUCCESS","result":{"ok":true}}`)
}

func (f *slowFleet) close() {
	for _, s := range f.servers {
		s.Close()
	}
}

// busy is the slot-time the fleet's deliveries held within [from, to].
func (f *slowFleet) busy(from, to time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	var d time.Duration
	for _, s := range f.spans {
		b, e := s[0], s[1]
		if b.Before(from) {
			b = from
		}
		if e.After(to) {
			e = to
		}
		if e.After(b) {
			d += e.Sub(b)
		}
	}
	return d
}

// saturated measures a saturated fleet: satAgents push agents of satSlots
// slots each, holding each job satWork, offered satOverload times their
// capacity for --sat-for, one job in satHighEach high and the rest low:
// the slots' utilisation (busy slot-time over the slot-time there was,
// from the first delivery to the end of the offer), and how long the high
// jobs waited from submit to their delivery at an agent, against the low
// jobs' median. The backlog left is dropped.
func (r *run) saturated(ctx context.Context) error {
	fleet := newSlowFleet()
	defer fleet.close()
	for i, s := range fleet.servers {
		body := fmt.Sprintf(`{"agent_id":"bench-slow-%d","capabilities":["bench.slow"],"endpoint":%q,"max_concurrent":%d,"ttl_seconds":%d}`,
			i, s.URL, satSlots, agentTTLSeconds)
		if _, err := harness.Submit(ctx, r.base+"/v1/agents", body); err != nil {
			return err
		}
	}
	if err := harness.WaitAgentsHealthy(ctx, r.base, len(r.agents)+satAgents, 30*time.Second); err != nil {
		return err
	}
	capacity := float64(satAgents*satSlots) / satWork.Seconds()
	rate := satOverload * capacity
	r.progress("saturated fleet: %d agents × %d slots × %s, offered %.0f jobs/s (%.1f× capacity) for %s …",
		satAgents, satSlots, satWork, rate, satOverload, r.o.satFor)
	high, low, end, err := offerSaturated(ctx, r.base, rate, r.o.satFor)
	if err != nil {
		return err
	}
	var first time.Time
	waits := func(subs map[string]time.Time) []time.Duration {
		fleet.mu.Lock()
		defer fleet.mu.Unlock()
		var out []time.Duration
		for id, at := range subs {
			if s, ok := fleet.started[id]; ok {
				out = append(out, s.Sub(at))
				if first.IsZero() || s.Before(first) {
					first = s
				}
			}
		}
		slices.Sort(out)
		return out
	}
	hw, lw := waits(high), waits(low)
	if first.IsZero() || !end.After(first) {
		return errors.New("saturated fleet: no job was delivered during the offer")
	}
	util := fleet.busy(first, end).Seconds() / (float64(satAgents*satSlots) * end.Sub(first).Seconds())
	r.res.add(fmt.Sprintf("saturated fleet: slot utilisation, %d push agents × %d slots × %s jobs, offered %.1f× capacity for %s",
		satAgents, satSlots, satWork, satOverload, r.o.satFor), fmt.Sprintf("%.1f %%", 100*util), "aim: ≥ 95 %", "")
	r.res.add("saturated fleet: a high job's wait for a slot, submit → delivery (p50 / p99 ms; the low jobs' median)",
		fmt.Sprintf("%.0f / %.0f (%.0f)", pct(hw, 0.50), pct(hw, 0.99), pct(lw, 0.50)),
		fmt.Sprintf("aim: p99 ≤ %.0f ms", float64((satWork+50*time.Millisecond).Milliseconds())), "")
	r.progress("saturated fleet: %d jobs delivered in the %s from the first delivery to the end of the offer", len(fleet.spans), end.Sub(first).Round(time.Millisecond))
	r.progress("saturated fleet: %.1f %% of the slots busy; high jobs waited p99 %.0f ms, low jobs median %.0f ms", 100*util, pct(hw, 0.99), pct(lw, 0.50))
	return r.svc.DropDispatchBacklog(ctx)
}

// offerSaturated submits jobs of bench.slow at rate for d, one in
// satHighEach high, and answers when each was submitted, by priority, and
// when the offer ended. Their waits for a slot are bounded only by the
// longest route_wait_ms: the measurement is of the hand-off, not of the
// bound.
func offerSaturated(ctx context.Context, base string, rate float64, d time.Duration) (high, low map[string]time.Time, end time.Time, err error) {
	n := max(int(rate*d.Seconds()), 1)
	client, done := newClient(256)
	defer done()
	high, low = map[string]time.Time{}, map[string]time.Time{}
	var mu sync.Mutex
	errs := make([]error, n)
	err = paced(ctx, rate, n, func(i int) {
		priority, into := "low", low
		if i%satHighEach == satHighEach-1 {
			priority, into = "high", high
		}
		at := time.Now()
		body := fmt.Sprintf(`{"capability":"bench.slow","payload":{},"priority":%q,"route_wait_ms":3600000,"timeout_ms":60000}`, priority)
		id, err := submitJob(ctx, client, base, body)
		errs[i] = err
		mu.Lock()
		into[id] = at
		mu.Unlock()
	})
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	return high, low, time.Now(), errors.Join(errs...)
}

// pct is the q-quantile of sorted durations, in milliseconds (0 for none).
func pct(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return float64(sorted[min(int(q*float64(len(sorted))), len(sorted)-1)].Microseconds()) / 1000
}
