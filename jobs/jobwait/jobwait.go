// Package jobwait lets a request wait for jobs to end (wait_ms on a
// submit or a read of a job) without a database connection of its own
// and without polling: every process hears of commits, its own and other
// processes', through the event store's notification (Subscribe), and
// then asks once, for all the jobs its requests wait for, which of them
// have ended.
package jobwait

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentreach/agentreach/jobs/jobstore"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
)

// qEnded answers which of the streams $1 hold an event of the types $2
// (domain.EndingEvents): the waited jobs that have ended.
const qEnded = `SELECT DISTINCT stream_id FROM events WHERE stream_id = ANY($1::text[]) AND type = ANY($2::text[])`

// ErrTooManyWaits: the key waits for as many jobs at once as it may
// (429): the request is refused before anything is written.
var ErrTooManyWaits error = &domain.KindError{Kind: domain.ErrUnavailable, Code: "rate_limited",
	Message: "this key already waits for as many jobs as it may at once (wait_ms): wait for fewer, or poll"}

// MaxWait is the longest wait a request may ask for (wait_ms).
const MaxWait = 60 * time.Second

// Hub holds the waits of one process. Its watcher runs while any request
// waits, and stops when none does.
type Hub struct {
	store  *eventstore.Store
	q      eventstore.Querier
	perKey int
	logger *slog.Logger

	mu      sync.Mutex
	waits   map[string]map[*Wait]struct{} // by job stream
	keys    map[string]int                // waits held, by key
	running bool
	idle    chan struct{} // a signal when the last wait went: the watcher stops
	drained chan struct{} // closed by Drain: every wait answers at once
	drain   sync.Once
}

// New returns the waits of a process: q (the primary) answers which jobs
// ended, store's notification says when to ask; perKey bounds the waits
// one key holds at once.
func New(store *eventstore.Store, q eventstore.Querier, perKey int, logger *slog.Logger) *Hub {
	return &Hub{store: store, q: q, perKey: perKey, logger: logger,
		waits: map[string]map[*Wait]struct{}{}, keys: map[string]int{}, idle: make(chan struct{}, 1), drained: make(chan struct{})}
}

// A Wait is one request's wait for one job: Reserve it for the request's
// key (before anything is written), Watch the job, read the job (the
// read sees any end committed before Watch), then Until.
type Wait struct {
	h      *Hub
	key    string
	stream string
	ended  chan struct{} // a signal when the job may have ended
	fold   atomic.Pointer[jobstore.Loaded]
}

// Reserve takes one of key's waits, or answers ErrTooManyWaits.
func (h *Hub) Reserve(key string) (*Wait, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.keys[key] >= h.perKey {
		return nil, ErrTooManyWaits
	}
	h.keys[key]++
	return &Wait{h: h, key: key, ended: make(chan struct{}, 1)}, nil
}

// Watch starts watching job id: from now on, its end signals the wait
// (instead of the end of the job it watched before, if any).
func (w *Wait) Watch(id string) {
	h := w.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.stream != "" { // what the job watched before handed over is not this one's
		h.unwatch(w)
		w.fold.Store(nil)
		select {
		case <-w.ended:
		default:
		}
	}
	w.stream = domain.JobStream(id)
	if h.waits[w.stream] == nil {
		h.waits[w.stream] = map[*Wait]struct{}{}
	}
	h.waits[w.stream][w] = struct{}{}
	if !h.running {
		h.running = true
		go h.watch()
	}
}

// Until waits until the job may have ended (true: read it again) or
// deadline passes, ctx ends or the hub is drained (false).
func (w *Wait) Until(ctx context.Context, deadline time.Time) bool {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-w.h.drained:
		return false
	default:
	}
	select {
	case <-w.ended:
		return true
	case <-t.C:
	case <-ctx.Done():
	case <-w.h.drained:
	}
	return false
}

// Ended hands l, the fold of a job a commit of this process just ended,
// to the waits for it, and wakes them: they answer from it (Fold) without
// reading the job again.
func (h *Hub) Ended(l *jobstore.Loaded) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.waits[domain.JobStream(l.JobID)] {
		w.fold.Store(l)
		select {
		case w.ended <- struct{}{}:
		default:
		}
	}
}

// Fold is the ended job's fold its commit handed over (Ended), or nil:
// then read the job again.
func (w *Wait) Fold() *jobstore.Loaded { return w.fold.Load() }

// Drain ends every wait, now and later, at once: each answers the job as
// it is (a 202, or the job not yet ended), so that a shutdown does not
// wait for them.
func (h *Hub) Drain() { h.drain.Do(func() { close(h.drained) }) }

// Draining is closed by Drain: a long wait (a stream) ends at once.
func (h *Hub) Draining() <-chan struct{} { return h.drained }

// Close gives the wait back.
func (w *Wait) Close() {
	h := w.h
	h.mu.Lock()
	defer h.mu.Unlock()
	h.unwatch(w)
	if h.keys[w.key]--; h.keys[w.key] <= 0 {
		delete(h.keys, w.key)
	}
}

// unwatch stops w's watch, if it has one; the watcher stops when it was
// the last. h.mu is held.
func (h *Hub) unwatch(w *Wait) {
	if w.stream == "" {
		return
	}
	delete(h.waits[w.stream], w)
	if len(h.waits[w.stream]) == 0 {
		delete(h.waits, w.stream)
	}
	w.stream = ""
	if len(h.waits) == 0 {
		select {
		case h.idle <- struct{}{}:
		default:
		}
	}
}

// watch asks which waited jobs have ended once when it starts (a job
// watched before the subscription) and after every commit notification,
// until nothing is waited for.
func (h *Hub) watch() {
	wake, stop := h.store.SubscribeCommits()
	defer stop()
	ending := make([]string, 0, len(domain.EndingEvents()))
	for _, e := range domain.EndingEvents() {
		ending = append(ending, string(e))
	}
	for {
		streams := h.watched()
		if streams == nil {
			return
		}
		h.signal(h.ended(streams, ending))
		select {
		case <-wake:
		case <-h.idle:
		}
	}
}

// watched returns the streams waited for, or nil (and the watcher stops)
// when there are none.
func (h *Hub) watched() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.waits) == 0 {
		h.running = false
		return nil
	}
	out := make([]string, 0, len(h.waits))
	for s := range h.waits {
		out = append(out, s)
	}
	return out
}

// ended returns which of streams hold an ending event. Should the query
// fail, it answers all of them: each wait reads its job again, and waits
// on if it has not ended.
func (h *Hub) ended(streams, ending []string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := h.q.Query(ctx, qEnded, streams, ending)
	if err != nil {
		h.logger.Warn("jobwait: which waited jobs ended", "err", err)
		return streams
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return streams
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil && !errors.Is(err, context.Canceled) {
		h.logger.Warn("jobwait: which waited jobs ended", "err", err)
		return streams
	}
	return out
}

// signal wakes the waits of streams.
func (h *Hub) signal(streams []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range streams {
		for w := range h.waits[s] {
			select {
			case w.ended <- struct{}{}:
			default:
			}
		}
	}
}
