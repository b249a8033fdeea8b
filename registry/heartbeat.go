package registry

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/sql/queries"
)

var qFlushHeartbeats = queries.Must("FlushHeartbeats")

// heartbeatBuffer collects heartbeats between flushes: for each agent only
// the latest one matters.
type heartbeatBuffer struct {
	mu      sync.Mutex
	pending map[domain.AgentKey]heartbeat
	// flushing holds what flushes took until their statement ends: a read
	// of an agent between a flush's take and its commit finds the
	// heartbeat in neither pending nor the table, and showed the figures
	// before it.
	flushing map[domain.AgentKey]heartbeat
}

type heartbeat struct {
	at     time.Time
	report domain.HealthReport
}

func newHeartbeatBuffer() *heartbeatBuffer {
	return &heartbeatBuffer{pending: map[domain.AgentKey]heartbeat{}, flushing: map[domain.AgentKey]heartbeat{}}
}

func (b *heartbeatBuffer) add(id domain.AgentKey, at time.Time, report domain.HealthReport) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if prev, ok := b.pending[id]; ok {
		report = withFigures(report, prev.report)
	}
	b.pending[id] = heartbeat{at: at, report: report}
}

// withFigures is report with each figure it does not give taken from
// older: a figure not reported again keeps its last value.
func withFigures(report, older domain.HealthReport) domain.HealthReport {
	report.InFlight = cmp.Or(report.InFlight, older.InFlight)
	report.QueueLength = cmp.Or(report.QueueLength, older.QueueLength)
	report.ErrorRate = cmp.Or(report.ErrorRate, older.ErrorRate)
	report.PoolUsage = cmp.Or(report.PoolUsage, older.PoolUsage)
	return report
}

// forget drops a buffered heartbeat of an agent that registered again: it
// belonged to the previous instance.
func (b *heartbeatBuffer) forget(id domain.AgentKey) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.pending, id)
	delete(b.flushing, id)
}

// overlay shows the heartbeats that are not written yet on a: one a flush
// is writing, then a later one still pending.
func (b *heartbeatBuffer) overlay(a *Agent) {
	b.mu.Lock()
	fl, flushing := b.flushing[a.Key()]
	hb, pending := b.pending[a.Key()]
	b.mu.Unlock()
	if flushing {
		fl.overlay(a)
	}
	if pending {
		hb.overlay(a)
	}
}

// overlay shows hb on a, unless a's table row is as recent already.
func (hb heartbeat) overlay(a *Agent) {
	if !hb.at.After(a.LastSeenAt) {
		return
	}
	a.LastSeenAt = hb.at
	a.LeaseExpiresAt = hb.at.Add(time.Duration(a.TTLSeconds) * time.Second)
	if n := hb.report.InFlight; n != nil {
		a.ReportedInFlight = *n
	}
	if n := hb.report.QueueLength; n != nil {
		a.ReportedQueueLength = *n
	}
	a.ReportedErrorRate = cmp.Or(hb.report.ErrorRate, a.ReportedErrorRate)
	a.ReportedPoolUsage = cmp.Or(hb.report.PoolUsage, a.ReportedPoolUsage)
}

// take hands the pending heartbeats to a flush; they are shown from
// flushing until it calls done.
func (b *heartbeatBuffer) take() map[domain.AgentKey]heartbeat {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.pending
	b.pending = map[domain.AgentKey]heartbeat{}
	for id, hb := range out {
		if cur, ok := b.flushing[id]; !ok || cur.at.Before(hb.at) {
			b.flushing[id] = hb
		}
	}
	return out
}

// done ends the flush of batch: written, its heartbeats are in the table;
// failed, they go back to pending (the next flush retries), merged as add
// merges: the newest heartbeat, with the figures it does not give from the
// other. A heartbeat of an agent that registered again meanwhile (forget)
// belonged to the instance before, and does not go back.
func (b *heartbeatBuffer) done(batch map[domain.AgentKey]heartbeat, failed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, hb := range batch {
		cur, kept := b.flushing[id]
		if kept && cur.at.Equal(hb.at) {
			delete(b.flushing, id)
		}
		if !failed || !kept {
			continue
		}
		switch cur, ok := b.pending[id]; {
		case !ok:
			b.pending[id] = hb
		case cur.at.Before(hb.at):
			b.pending[id] = heartbeat{at: hb.at, report: withFigures(hb.report, cur.report)}
		default:
			b.pending[id] = heartbeat{at: cur.at, report: withFigures(cur.report, hb.report)}
		}
	}
}

// flushHeartbeats writes every buffered heartbeat in one statement. A
// heartbeat never moves last_seen_at backwards, and never touches an agent
// that registered again since (its instance changed: the sweep judges the
// new instance by its own registration time).
func (r *Registry) flushHeartbeats(ctx context.Context) error {
	batch := r.heartbeats.take()
	if len(batch) == 0 {
		return nil
	}
	namespaces := make([]string, 0, len(batch))
	ids := make([]string, 0, len(batch))
	ats := make([]time.Time, 0, len(batch))
	inflight := make([]*int32, 0, len(batch))
	queues := make([]*int32, 0, len(batch))
	errRates := make([]*float64, 0, len(batch))
	pools := make([]*float64, 0, len(batch))
	for id, hb := range batch {
		namespaces, ids = append(namespaces, id.Namespace), append(ids, id.ID)
		ats = append(ats, hb.at)
		inflight = append(inflight, int32Of(hb.report.InFlight))
		queues = append(queues, int32Of(hb.report.QueueLength))
		errRates, pools = append(errRates, hb.report.ErrorRate), append(pools, hb.report.PoolUsage)
	}
	r.beforeFlush()
	_, err := r.pool.Exec(ctx, qFlushHeartbeats, namespaces, ids, ats, inflight, queues, errRates, pools)
	r.heartbeats.done(batch, err != nil)
	return err
}

// int32Of is n as the int4 PostgreSQL stores, or nil.
func int32Of(n *int) *int32 {
	if n == nil {
		return nil
	}
	v := int32(*n) // bounded by domain.HealthReport.Validate
	return &v
}
