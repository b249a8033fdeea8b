package jobs

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/jobs/jobstore"
)

// ErrOverloaded: the lane's queue is at its hard limit; the submit is
// refused and nothing is written (429 overloaded, Retry-After). The unit
// of work decides it on the lane's exact count (jobstore.Store.admit).
var ErrOverloaded = jobstore.ErrOverloaded

// pressureEvery is how old the queue depths a process judges its
// watermarks by may be.
const pressureEvery = time.Second

// pressure is this process's view of the queue depths, read at most once
// per pressureEvery, and of which lanes are high (with the watermarks'
// hysteresis).
type pressure struct {
	mu    sync.Mutex
	at    time.Time
	depth map[jobstore.Lane]int
	high  map[jobstore.Lane]bool
	// reading: a read of the depths is under way for heldLow.
	reading atomic.Bool
}

// depths refreshes the view when it is older than pressureEvery.
func (s *Service) depths(ctx context.Context) (map[jobstore.Lane]int, map[jobstore.Lane]bool, error) {
	p := &s.pressure
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.depth != nil && s.now().Sub(p.at) < pressureEvery {
		return p.depth, p.high, nil
	}
	depth, err := s.jobs.LaneDepths(ctx)
	if err != nil {
		return nil, nil, err
	}
	high := map[jobstore.Lane]bool{}
	w := s.cfg.Watermarks
	for k, was := range p.high {
		if w.QueueHigh(was, depth[k]) {
			high[k] = true
		}
	}
	for k, n := range depth {
		if w.QueueHigh(p.high[k], n) {
			high[k] = true
		}
	}
	p.depth, p.high, p.at = depth, high, s.now()
	return depth, high, nil
}

// holdLow reports whether low work of namespace ns is held back: one of its
// lanes is above the high watermark.
func (s *Service) holdLow(ctx context.Context, ns string) bool {
	_, high, err := s.depths(ctx)
	if err != nil {
		return false // the depths are a hint; a database problem shows elsewhere
	}
	return highIn(high, ns)
}

// highIn reports whether a lane of namespace ns is among the high ones.
func highIn(high map[jobstore.Lane]bool, ns string) bool {
	for k := range high {
		if k.Namespace == ns {
			return true
		}
	}
	return false
}

// heldLow is holdLow from the depths read last, for a transaction that
// holds locks and must not wait on a read: known is false when they are
// too old (or were never read), and a read starts in the background.
func (s *Service) heldLow(ns string) (held, known bool) {
	p := &s.pressure
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.depth == nil || s.now().Sub(p.at) >= pressureEvery {
		if p.reading.CompareAndSwap(false, true) {
			go func() {
				defer p.reading.Store(false)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_, _, _ = s.depths(ctx) // a failure shows elsewhere; the next caller tries again
			}()
		}
		return false, false
	}
	return highIn(p.high, ns), true
}

// SweepPressure records each lane's crossing of a watermark once: QUEUE_HIGH
// above the high one, QUEUE_NORMAL under the low one again, on the lane's
// stream (whose last event says its level, for every process), with one
// warning in the log.
func (s *Service) SweepPressure(ctx context.Context) error {
	if err := s.jobs.RecountLanes(ctx); err != nil {
		return err
	}
	depth, _, err := s.depths(ctx)
	if err != nil {
		return err
	}
	s.pressure.mu.Lock()
	lanes := map[jobstore.Lane]bool{}
	for k := range depth {
		lanes[k] = true
		s.pressureSeen[k] = true
	}
	for k := range s.pressureSeen {
		lanes[k] = true
	}
	s.pressure.mu.Unlock()
	w := s.cfg.Watermarks
	for k := range lanes {
		stream := domain.QueueStream(k.Namespace, k.Priority)
		last, _, err := eventstore.Last(ctx, s.pool, stream)
		if err != nil {
			return err
		}
		was := last.Type == domain.EventQueueHigh
		now := w.QueueHigh(was, depth[k])
		if now == was {
			continue
		}
		typ, mark := domain.EventQueueNormal, w.Low
		if now {
			typ, mark = domain.EventQueueHigh, w.High
			s.logger.WarnContext(ctx, "queue above its high watermark: low work is held back", "namespace", k.Namespace,
				"lane", k.Priority, "depth", depth[k], "high", w.High, "limit", w.Limit)
		} else {
			s.logger.InfoContext(ctx, "queue under its low watermark again", "namespace", k.Namespace, "lane", k.Priority, "depth", depth[k])
		}
		if _, err := s.store.Append(ctx, stream, last.Version, domain.NewEvent(typ,
			domain.QueueLevelChanged{Namespace: k.Namespace, Lane: k.Priority, Depth: depth[k], Mark: mark},
			domain.Metadata{Actor: "sweep:pressure"})); err != nil {
			return err
		}
	}
	return nil
}

// PressureSweepArgs is the periodic job that records watermark crossings.
type PressureSweepArgs struct{}

// Kind implements river.JobArgs.
func (PressureSweepArgs) Kind() string { return "pressure_sweep" }

type pressureSweepWorker struct {
	river.WorkerDefaults[PressureSweepArgs]
	s *Service
}

func (w *pressureSweepWorker) Work(ctx context.Context, _ *river.Job[PressureSweepArgs]) error {
	return w.s.SweepPressure(ctx)
}
