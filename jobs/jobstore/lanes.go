package jobstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qLockLanes      = queries.Must("LockLanes")
	qLaneDepths     = queries.Must("LaneDepths")
	qRecountLanes   = queries.Must("RecountLanes")
	qAllLanes       = queries.Must("AllLanes")
	qAddLaneDepths  = queries.Must("AddLaneDepths")
	qAddLaneEntries = queries.Must("AddLaneEntries")
)

// Lane is one namespace's lane (a priority): what backpressure counts.
type Lane struct {
	Namespace string
	Priority  domain.Priority
}

// Exact backpressure. A lane's depth (the jobs waiting for an attempt) is
// kept by the transactions that change it (migration 0023): a submit
// takes its lane's row, so no two submits to a lane decide on the same
// count, and adds the jobs it admits; a job that comes back to waiting
// adds an entry row, taking no lock. Jobs leaving the wait are not
// subtracted, so the count is never below the truth; a recount (of the
// waiting timers, which name their lane) brings it down, when a submit
// would pass the limit and every second in the pressure sweep. So the
// limit's next job is refused exactly, and a refusal is never made on a
// count that a recount would lower.

// laneView is lanes taken and read in a transaction (queueLaneLock).
type laneView struct {
	locked []Lane
	depth  map[Lane]int
}

// queueLaneLock queues on b the taking and reading of lanes' rows.
func queueLaneLock(b *pgx.Batch, lanes []Lane) *laneView {
	v := &laneView{locked: slices.Clone(lanes), depth: map[Lane]int{}}
	slices.SortFunc(v.locked, compareLanes)
	v.locked = slices.Compact(v.locked)
	nss, prs := laneArrays(v.locked)
	b.Queue(qLockLanes, nss, prs)
	b.Queue(qLaneDepths, nss, prs).Query(func(rows pgx.Rows) error { return scanLanes(rows, v.depth) })
	return v
}

// admit counts the new jobs of ws that wait for an attempt into their
// lanes under the lanes' locks, in the order the writes came; those past
// the limit fail alone with ErrOverloaded. pre holds the lanes taken and
// read already, if any were.
func (s *Store) admit(ctx context.Context, tx pgx.Tx, ws []*Write, pre *laneView) error {
	want := map[Lane][]*Write{}
	for _, w := range ws {
		w.admitted = false
		if w.Err == nil && w.L.Status == domain.StatusNone && w.After.Status.Waiting() && len(w.Events) > 0 {
			k := Lane{w.After.Namespace, w.After.Priority}
			want[k] = append(want[k], w)
		}
	}
	if len(want) == 0 {
		return nil
	}
	lanes := sortedLanes(want)
	var depth map[Lane]int
	if pre != nil && !slices.ContainsFunc(lanes, func(k Lane) bool { return !slices.Contains(pre.locked, k) }) {
		depth = pre.depth // every lane wanted was taken with BEGIN
	} else {
		b := &pgx.Batch{}
		v := queueLaneLock(b, lanes)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("lane depths: %w", err)
		}
		depth = v.depth
	}
	var over []Lane
	for _, k := range lanes {
		if domain.Admit(depth[k], len(want[k]), s.cfg.QueueLimit) < len(want[k]) {
			over = append(over, k)
		}
	}
	if len(over) > 0 { // the count may hold jobs gone since: count again
		nss, prs := laneArrays(over)
		b := &pgx.Batch{}
		b.Queue(qRecountLanes, nss, prs)
		b.Queue(qLaneDepths, nss, prs).Query(func(rows pgx.Rows) error { return scanLanes(rows, depth) })
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("recount lanes: %w", err)
		}
	}
	for k, ws := range want {
		slices.SortFunc(ws, func(a, b *Write) int { return cmp.Compare(a.arrival, b.arrival) })
		n := domain.Admit(depth[k], len(ws), s.cfg.QueueLimit)
		for i, w := range ws {
			if i < n {
				w.admitted = true
			} else {
				w.Err = ErrOverloaded
			}
		}
	}
	return nil
}

// RecountLanes sets every lane's depth to the jobs waiting in it, under
// the lanes' locks (the pressure sweep's, every second).
func (s *Store) RecountLanes(ctx context.Context) error {
	return s.events.InTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, qAllLanes)
		if err != nil {
			return fmt.Errorf("lanes: %w", err)
		}
		lanes, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Lane, error) {
			var k Lane
			return k, row.Scan(&k.Namespace, &k.Priority)
		})
		if err != nil || len(lanes) == 0 {
			return err
		}
		nss, prs := laneArrays(lanes)
		b := &pgx.Batch{}
		b.Queue(qLockLanes, nss, prs)
		b.Queue(qRecountLanes, nss, prs)
		return tx.SendBatch(ctx, b).Close()
	})
}

// LaneDepths answers how many jobs wait in each lane that has had any:
// never fewer than the truth, and no more than those that left since the
// last recount.
func (s *Store) LaneDepths(ctx context.Context) (map[Lane]int, error) {
	rows, err := s.pool.Query(ctx, qLaneDepths, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("lane depths: %w", err)
	}
	depth := map[Lane]int{}
	return depth, scanLanes(rows, depth)
}

func scanLanes(rows pgx.Rows, into map[Lane]int) error {
	var k Lane
	var n int
	_, err := pgx.ForEachRow(rows, []any{&k.Namespace, &k.Priority, &n}, func() error { into[k] = n; return nil })
	return err
}

func sortedLanes(m map[Lane][]*Write) []Lane {
	out := make([]Lane, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, compareLanes)
	return out
}

func compareLanes(a, b Lane) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Priority, b.Priority))
}

func laneArrays(lanes []Lane) (nss, prs []string) {
	for _, k := range lanes {
		nss, prs = append(nss, k.Namespace), append(prs, string(k.Priority))
	}
	return nss, prs
}

// laneRows are the lanes' changes of a transaction's writes: jobs a
// submit admitted (under the lane's lock), and jobs that came back to
// waiting (entries).
type laneRows struct {
	admitted, entered laneCounts
}

func (r *laneRows) add(namespace, lane string, admitted bool) {
	if admitted {
		r.admitted.add(namespace, lane)
	} else {
		r.entered.add(namespace, lane)
	}
}

// laneCounts are counts per lane, as AddLaneDepths' and AddLaneEntries' arrays.
type laneCounts struct {
	namespaces, lanes []string
	n                 []int32
}

func (c *laneCounts) add(namespace, lane string) {
	for i := range c.n {
		if c.namespaces[i] == namespace && c.lanes[i] == lane {
			c.n[i]++
			return
		}
	}
	c.namespaces, c.lanes, c.n = append(c.namespaces, namespace), append(c.lanes, lane), append(c.n, 1)
}
