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

// slotLog is what a saturated fleet's agents log: when each job's
// delivery (or claim) began, and each job's span in its slot.
type slotLog struct {
	mu      sync.Mutex
	started map[string]time.Time
	spans   [][2]time.Time // each job's start and end in its slot
}

func (l *slotLog) add(jobID string, start, end time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started == nil {
		l.started = map[string]time.Time{}
	}
	l.started[jobID] = start
	l.spans = append(l.spans, [2]time.Time{start, end})
}

// busy is the slot-time the fleet's jobs held within [from, to].
func (l *slotLog) busy(from, to time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var d time.Duration
	for _, s := range l.spans {
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

// waits are how long the jobs submitted at subs waited for their slot,
// sorted, and when the first of them got one.
func (l *slotLog) waits(subs map[string]time.Time, first *time.Time) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Duration
	for id, at := range subs {
		if s, ok := l.started[id]; ok {
			out = append(out, s.Sub(at))
			if first.IsZero() || s.Before(*first) {
				*first = s
			}
		}
	}
	slices.Sort(out)
	return out
}

// slowFleet is satAgents push agents with satSlots slots each that hold
// every job satWork, logging each job's slot.
type slowFleet struct {
	slotLog
	servers []*httptest.Server
}

func newSlowFleet() *slowFleet {
	f := &slowFleet{}
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
	f.add(env.JobID, start, time.Now())
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"status":"SUCCESS","result":{"ok":true}}`)
}

func (f *slowFleet) close() {
	for _, s := range f.servers {
		s.Close()
	}
}

// saturated measures saturated fleets, push then pull: satAgents agents
// of satSlots slots each, holding each job satWork, offered satOverload
// times their capacity for --sat-for, one job in satHighEach high and the
// rest low: the slots' utilisation (busy slot-time over the slot-time
// there was, from the first delivery to the end of the offer), and how
// long the high jobs waited from submit to their delivery at an agent
// (their claim), against the low jobs' median. The backlog left is
// dropped after each.
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
	if err := r.offerFleet(ctx, "push", "bench.slow", &fleet.slotLog); err != nil {
		return err
	}
	pctx, stop, pulls, err := startSlowPullers(ctx, r.base)
	if err != nil {
		return fmt.Errorf("saturated pull fleet: %w", err)
	}
	defer stop()
	if err := harness.WaitAgentsHealthy(pctx, r.base, len(r.agents)+2*satAgents, 30*time.Second); err != nil {
		return fmt.Errorf("saturated pull fleet: %w", causeOf(pctx, err))
	}
	if err := r.offerFleet(pctx, "pull", slowPullCapability, pulls); err != nil {
		return causeOf(pctx, err)
	}
	stop()
	return nil
}

// offerFleet offers a saturated fleet of kind (push, pull), logging into
// log, its work of capability, and adds its rows.
func (r *run) offerFleet(ctx context.Context, kind, capability string, log *slotLog) error {
	capacity := float64(satAgents*satSlots) / satWork.Seconds()
	rate := satOverload * capacity
	r.progress("saturated %s fleet: %d agents × %d slots × %s, offered %.0f jobs/s (%.1f× capacity) for %s …",
		kind, satAgents, satSlots, satWork, rate, satOverload, r.o.satFor)
	high, low, end, err := offerSaturated(ctx, r.base, capability, rate, r.o.satFor)
	if err != nil {
		return err
	}
	var first time.Time
	hw, lw := log.waits(high, &first), log.waits(low, &first)
	if first.IsZero() || !end.After(first) {
		return fmt.Errorf("saturated %s fleet: no job was delivered during the offer", kind)
	}
	util := log.busy(first, end).Seconds() / (float64(satAgents*satSlots) * end.Sub(first).Seconds())
	r.res.add(fmt.Sprintf("saturated %s fleet: slot utilisation, %d agents × %d slots × %s jobs, offered %.1f× capacity for %s",
		kind, satAgents, satSlots, satWork, satOverload, r.o.satFor), fmt.Sprintf("%.1f %%", 100*util), "aim: ≥ 95 %", "")
	r.res.add(fmt.Sprintf("saturated %s fleet: a high job's wait for a slot, submit → %s (p50 / p99 ms; the low jobs' median)",
		kind, map[string]string{"push": "delivery", "pull": "claimed"}[kind]),
		fmt.Sprintf("%.0f / %.0f (%.0f)", pct(hw, 0.50), pct(hw, 0.99), pct(lw, 0.50)),
		fmt.Sprintf("aim: p99 ≤ %.0f ms", float64((satWork+50*time.Millisecond).Milliseconds())), "")
	log.mu.Lock()
	delivered := len(log.spans)
	log.mu.Unlock()
	r.progress("saturated %s fleet: %d jobs in the %s from the first delivery to the end of the offer; %.1f %% of the slots busy; high jobs waited p99 %.0f ms, low jobs median %.0f ms",
		kind, delivered, end.Sub(first).Round(time.Millisecond), 100*util, pct(hw, 0.99), pct(lw, 0.50))
	return r.svc.DropDispatchBacklog(ctx)
}

// offerSaturated submits jobs of capability at rate for d, one in
// satHighEach high, and answers when each was submitted, by priority, and
// when the offer ended. Their waits for a slot are bounded only by the
// longest route_wait_ms: the measurement is of the hand-off, not of the
// bound.
func offerSaturated(ctx context.Context, base, capability string, rate float64, d time.Duration) (high, low map[string]time.Time, end time.Time, err error) {
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
		body := fmt.Sprintf(`{"capability":%q,"payload":{},"priority":%q,"route_wait_ms":3600000,"timeout_ms":60000}`, capability, priority)
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

// slowPullCapability is the saturated pull fleet's.
const slowPullCapability = "bench.slowpull"

// startSlowPullers registers satAgents pull agents of satSlots slots each
// and starts them: each claims as many jobs as it has free slots, holds
// each satWork, reports it and claims again, logging every job's slot
// from its claim. The context ends when one fails, with that as its cause;
// stop ends them.
func startSlowPullers(ctx context.Context, base string) (context.Context, func(), *slotLog, error) {
	transport := &http.Transport{MaxIdleConnsPerHost: satAgents * (satSlots + 2)}
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}
	log := &slotLog{}
	var pullers []*puller
	for i := range satAgents {
		p := &puller{base: base, id: fmt.Sprintf("bench-slowpull-%d", i), client: client}
		body := fmt.Sprintf(`{"agent_id":%q,"capabilities":[%q],"mode":"pull","max_concurrent":%d,"ttl_seconds":%d}`,
			p.id, slowPullCapability, satSlots, agentTTLSeconds)
		var out struct {
			Token string `json:"token"`
		}
		if err := p.post(ctx, base+"/v1/agents", "", body, http.StatusCreated, &out); err != nil {
			transport.CloseIdleConnections()
			return nil, nil, nil, err
		}
		p.token = out.Token
		pullers = append(pullers, p)
	}
	lctx, cancel := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	for _, p := range pullers {
		wg.Go(func() {
			if err := p.runSlow(lctx, log); err != nil {
				cancel(fmt.Errorf("pull agent %s: %w", p.id, err))
			}
		})
	}
	var once sync.Once
	return lctx, func() {
		once.Do(func() {
			cancel(nil)
			wg.Wait()
			transport.CloseIdleConnections()
		})
	}, log, nil
}

// runSlow is a slow pull agent's loop (startSlowPullers).
func (p *puller) runSlow(ctx context.Context, log *slotLog) error {
	free := make(chan struct{}, satSlots)
	for range satSlots {
		free <- struct{}{}
	}
	var work sync.WaitGroup
	defer work.Wait()
	errs := make(chan error, 1)
	claim := p.base + "/v1/agents/" + p.id + "/claim"
	for ctx.Err() == nil {
		select { // a free slot at least
		case <-free:
		case <-ctx.Done():
			return nil
		case err := <-errs:
			return err
		}
		n := 1
		for more := true; more && n < satSlots; {
			select {
			case <-free:
				n++
			default:
				more = false
			}
		}
		var out struct {
			Deliveries []envelope `json:"deliveries"`
		}
		if err := p.post(ctx, claim, p.token, fmt.Sprintf(`{"max":%d,"wait_ms":1000}`, n), http.StatusOK, &out); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		start := time.Now()
		for range n - len(out.Deliveries) {
			free <- struct{}{}
		}
		for _, env := range out.Deliveries {
			work.Go(func() {
				defer func() { free <- struct{}{} }()
				if err := p.holdSlot(ctx, env, start, log); err != nil && ctx.Err() == nil {
					select {
					case errs <- err:
					default:
					}
				}
			})
		}
	}
	return nil
}

// holdSlot works env in one of the agent's slots (satWork), then reports
// it asking its next delivery with the report (claim_next), and works
// that one in the same slot, until a report brings none.
func (p *puller) holdSlot(ctx context.Context, env envelope, start time.Time, log *slotLog) error {
	for {
		time.Sleep(satWork) // the agent's work, while it holds the slot
		log.add(env.JobID, start, time.Now())
		var out struct {
			Deliveries []envelope `json:"deliveries"`
		}
		err := p.post(ctx, env.ResultURL, p.token, fmt.Sprintf(`{"status":"SUCCESS","result":{"ok":true},"attempt":%d,"claim_next":1}`, env.Attempt),
			http.StatusOK, &out)
		if err != nil || len(out.Deliveries) == 0 {
			return err
		}
		env, start = out.Deliveries[0], time.Now()
	}
}
