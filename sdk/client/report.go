package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Report is the outcome of one direct call of an agent, for its health
// figures (POST /v1/reports).
type Report struct {
	// Namespace is the agent's (a candidate's Namespace); empty is the
	// key's. Reports of several namespaces go in a batch each.
	Namespace  string `json:"-"`
	AgentID    string `json:"agent_id"`
	Capability string `json:"capability"`
	// Reached: the agent took the call and answered a result.
	Reached bool `json:"reached"`
	// OK: the result was a success.
	OK        bool      `json:"ok"`
	LatencyMS float64   `json:"latency_ms"`
	BizCode   string    `json:"biz_code,omitempty"`
	At        time.Time `json:"at"`
}

const (
	// maxReportsPerBatch is the service's bound on one POST /v1/reports.
	maxReportsPerBatch = 1000
	// reportWindow is how old a report (and the lookup of its agent) may
	// be, with a margin under the service's 10 minutes.
	reportWindow = 10*time.Minute - 30*time.Second
)

// reporter queues reports and sends them in batches: when a batch is full,
// every ReportBatch interval, and on Flush and Close.
type reporter struct {
	c       *Client
	mu      sync.Mutex
	pending []Report
	closed  bool
	started bool
	kick    chan struct{}
	sendMu  sync.Mutex // one send at a time, so Flush waits for a send under way
}

func newReporter(c *Client) *reporter { return &reporter{c: c, kick: make(chan struct{}, 1)} }

// Report queues reports of calls the caller made itself (to candidates of
// a Lookup) to be sent with Invoke's. Reports queued after Close are
// dropped.
func (c *Client) Report(reports ...Report) { c.reports.add(reports...) }

// Flush sends every report queued so far and answers when they are
// accepted; reports not sent for want of an answer stay queued. Errors:
// ErrUnreachable, the *APIError of a refused batch (reports the service
// refuses one by one, naming reports[i], are dropped and logged and the
// rest sent again).
func (c *Client) Flush(ctx context.Context) error { return c.reports.flush(ctx) }

func (r *reporter) add(rs ...Report) {
	if len(rs) == 0 {
		return
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.pending = append(r.pending, rs...)
	if over := len(r.pending) - r.c.cfg.maxPending; over > 0 {
		r.pending = slices.Delete(r.pending, 0, over)
		r.c.logger.Warn("agentreach client: too many reports pending; the oldest dropped", "dropped", over)
	}
	full := len(r.pending) >= r.c.cfg.reportBatch
	if !r.started {
		r.started = true
		r.c.wg.Go(r.loop)
	}
	r.mu.Unlock()
	if full {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
}

func (r *reporter) loop() {
	t := time.NewTicker(r.c.cfg.reportEvery)
	defer t.Stop()
	ctx := r.c.ctx
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.kick:
		}
		if err := r.flush(ctx); err != nil && ctx.Err() == nil {
			r.c.logger.Warn("agentreach client: reports not sent", "err", err)
		}
	}
}

// close refuses further reports and flushes the pending ones.
func (r *reporter) close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	return r.flush(ctx)
}

func (r *reporter) flush(ctx context.Context) error {
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	for {
		r.mu.Lock()
		batch := r.takeLocked()
		r.mu.Unlock()
		if len(batch) == 0 {
			return nil
		}
		oldest := r.c.cfg.now().Add(-reportWindow)
		batch = slices.DeleteFunc(batch, func(rep Report) bool { return rep.At.Before(oldest) })
		if len(batch) == 0 {
			continue
		}
		if err := r.send(ctx, batch); err != nil {
			if ctx.Err() != nil || unreachable(err) || errors.Is(err, ErrRateLimited) {
				r.mu.Lock()
				r.pending = append(batch, r.pending...) // try again later, in order
				r.mu.Unlock()
			}
			return err
		}
	}
}

// takeLocked takes the next batch off the queue: up to
// maxReportsPerBatch reports of the first one's namespace, in order.
func (r *reporter) takeLocked() []Report {
	if len(r.pending) == 0 {
		return nil
	}
	ns := r.pending[0].Namespace
	var batch, rest []Report
	for _, rep := range r.pending {
		if rep.Namespace == ns && len(batch) < maxReportsPerBatch {
			batch = append(batch, rep)
		} else {
			rest = append(rest, rep)
		}
	}
	r.pending = rest
	return batch
}

// reportField reads the index of a report the service refused.
var reportField = regexp.MustCompile(`^reports\[(\d+)\]`)

// send posts batch. The service takes a batch whole or not at all,
// naming the first report it refuses; that one is dropped and the rest
// sent again.
func (r *reporter) send(ctx context.Context, batch []Report) error {
	for len(batch) > 0 {
		var out struct {
			Accepted int `json:"accepted"`
		}
		body := map[string]any{"reports": batch}
		if ns := batch[0].Namespace; ns != "" {
			body["namespace"] = ns
		}
		err := r.c.do(ctx, http.MethodPost, "/v1/reports", nil, body, &out)
		var apiErr *APIError
		if errors.As(err, &apiErr) && apiErr.Status == http.StatusBadRequest {
			if m := reportField.FindStringSubmatch(apiErr.Field); m != nil {
				if i, _ := strconv.Atoi(m[1]); i < len(batch) {
					r.c.logger.Warn("agentreach client: report refused; dropped", "agent_id", batch[i].AgentID, "err", err)
					batch = slices.Delete(slices.Clone(batch), i, i+1)
					continue
				}
			}
		}
		if err != nil {
			return fmt.Errorf("send %d reports: %w", len(batch), err)
		}
		return nil
	}
	return nil
}
