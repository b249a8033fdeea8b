package eventstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// Projection folds the log into a read model. Apply and Reset run inside
// the projector's transaction, the same one that moves the checkpoint, so a
// read model is never ahead of or behind its checkpoint.
type Projection interface {
	// Name identifies the projection's checkpoint; it never changes.
	Name() string
	// Apply folds a batch of events, in log order, into the read model.
	Apply(ctx context.Context, tx pgx.Tx, batch []Record) error
	// Reset empties the read model before a rebuild from position 0.
	Reset(ctx context.Context, tx pgx.Tx) error
}

// Projector keeps projections up to date with the log.
type Projector struct {
	store       *Store
	logger      *slog.Logger
	projections []Projection    // every projection folded, followers too
	followers   map[string]bool // the names of those with no read model (Follow)

	// BatchSize is how many events one transaction folds (default 5,000:
	// a job whose events fall in two batches has its read model written
	// twice, and a job's events lie a few hundred apart under load).
	BatchSize int
	// BatchBytes ends a batch early once its events' data reach it
	// (default 4 MiB; at least one event), so that a backlog of large
	// payloads is folded in bounded memory. 5,000 events of a job's
	// usual size are about 2 MiB; a batch of direct-call reports, each
	// event tens of KiB and decoded into many values, ends sooner.
	BatchBytes int
	// PollInterval bounds how stale a projection gets when a notification
	// is lost (default 1 s).
	PollInterval time.Duration
	// Gather is how long Run waits after a cycle that folded events before
	// the next (default 300 ms): while commits keep coming, the events of
	// that time are folded together, so a job whose whole life falls within
	// it is written to its read model once, not once an event.
	Gather time.Duration
}

// NewProjector returns a projector for projections over store's log.
func NewProjector(store *Store, logger *slog.Logger, projections ...Projection) *Projector {
	return &Projector{store: store, logger: logger, projections: projections, BatchSize: 5000, BatchBytes: 4 << 20, PollInterval: time.Second,
		Gather: 300 * time.Millisecond}
}

// Projections returns the read models the projector keeps (not its
// followers).
func (p *Projector) Projections() []Projection {
	out := make([]Projection, 0, len(p.projections))
	for _, proj := range p.projections {
		if !p.followers[proj.Name()] {
			out = append(out, proj)
		}
	}
	return out
}

// Follow adds f to what the projector folds: a projection with no read
// model of its own, which acts on what it reads (the alert notifier sends
// alerts). It moves its checkpoint like any projection but is not among
// Projections: never snapshotted, rebuilt or compared with a rebuild (a
// rebuild would act on the past again).
func (p *Projector) Follow(f Projection) {
	if p.followers == nil {
		p.followers = map[string]bool{}
	}
	p.projections = append(p.projections, f)
	p.followers[f.Name()] = true
}

// Step folds at most one batch into proj and returns how many events it
// folded. Several processes may step the same projection: the checkpoint
// row's lock makes them take turns, and each starts where the last left off.
func (p *Projector) Step(ctx context.Context, proj Projection) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, p.store.pool, func(tx pgx.Tx) error {
		cur, err := lockCheckpoint(ctx, tx, proj.Name())
		if err != nil {
			return err
		}
		batch, _, err := p.store.readAllWithin(ctx, tx, cur, p.BatchSize, p.BatchBytes)
		if err != nil || len(batch) == 0 {
			return err
		}
		if err := proj.Apply(ctx, tx, batch); err != nil {
			return fmt.Errorf("projection %s at position %d: %w", proj.Name(), batch[0].Position, err)
		}
		n = len(batch)
		return moveCheckpoint(ctx, tx, proj.Name(), batch)
	})
	return n, err
}

func lockCheckpoint(ctx context.Context, tx pgx.Tx, name string) (Cursor, error) {
	if _, err := tx.Exec(ctx, `INSERT INTO projection_checkpoints (name) VALUES ($1) ON CONFLICT DO NOTHING`, name); err != nil {
		return Cursor{}, fmt.Errorf("checkpoint %s: %w", name, err)
	}
	var cur Cursor
	var txid string
	err := tx.QueryRow(ctx, `SELECT tx_id::text, position FROM projection_checkpoints WHERE name = $1 FOR UPDATE`, name).Scan(&txid, &cur.Position)
	if err != nil {
		return Cursor{}, fmt.Errorf("checkpoint %s: %w", name, err)
	}
	cur.TxID, _ = strconv.ParseUint(txid, 10, 64)
	return cur, nil
}

// stepAll folds at most one batch into every projection in one
// transaction. The checkpoints are taken in name order (so two processes
// take turns, and a Step holding one of them waits for none), and the
// projections that stand at the same place, as they all do once caught up,
// share one read of the log.
func (p *Projector) stepAll(ctx context.Context) (n int, full bool, err error) {
	names := make([]string, len(p.projections))
	for i, proj := range p.projections {
		names[i] = proj.Name()
	}
	err = pgx.BeginFunc(ctx, p.store.pool, func(tx pgx.Tx) error {
		curs, err := lockCheckpoints(ctx, tx, names)
		if err != nil {
			return err
		}
		type read struct {
			batch  []Record
			capped bool
		}
		reads := map[Cursor]read{}
		for _, proj := range p.projections {
			cur := curs[proj.Name()]
			rd, ok := reads[cur]
			if !ok {
				if rd.batch, rd.capped, err = p.store.readAllWithin(ctx, tx, cur, p.BatchSize, p.BatchBytes); err != nil {
					return err
				}
				reads[cur] = rd
			}
			batch := rd.batch
			if len(batch) == 0 {
				continue
			}
			if err := proj.Apply(ctx, tx, batch); err != nil {
				return fmt.Errorf("projection %s at position %d: %w", proj.Name(), batch[0].Position, err)
			}
			if err := moveCheckpoint(ctx, tx, proj.Name(), batch); err != nil {
				return err
			}
			n += len(batch)
			full = full || len(batch) == p.BatchSize || rd.capped
		}
		return nil
	})
	return n, full, err
}

func lockCheckpoints(ctx context.Context, tx pgx.Tx, names []string) (map[string]Cursor, error) {
	if _, err := tx.Exec(ctx, `INSERT INTO projection_checkpoints (name) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING`, names); err != nil {
		return nil, fmt.Errorf("checkpoints: %w", err)
	}
	rows, err := tx.Query(ctx, `SELECT name, tx_id::text, position FROM projection_checkpoints
		WHERE name = ANY($1::text[]) ORDER BY name FOR UPDATE`, names)
	if err != nil {
		return nil, fmt.Errorf("checkpoints: %w", err)
	}
	curs := make(map[string]Cursor, len(names))
	var name, txid string
	var pos int64
	_, err = pgx.ForEachRow(rows, []any{&name, &txid, &pos}, func() error {
		id, _ := strconv.ParseUint(txid, 10, 64)
		curs[name] = Cursor{TxID: id, Position: pos}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("checkpoints: %w", err)
	}
	return curs, nil
}

// moveCheckpoint records that the projection called name folded batch.
func moveCheckpoint(ctx context.Context, tx pgx.Tx, name string, batch []Record) error {
	last := batch[len(batch)-1]
	_, err := tx.Exec(ctx, `UPDATE projection_checkpoints
		SET tx_id = $2::text::xid8, position = $3, events = events + $4, updated_at = now()
		WHERE name = $1`, name, strconv.FormatUint(last.TxID, 10), last.Position, len(batch))
	return err
}

// CatchUp folds into every projection until none has anything left (a
// read of the log comes back short of a batch: what commits meanwhile is
// the next cycle's), and returns how many events were folded in all. The
// projections are stepped together (stepAll); should that fail, each is
// stepped on its own, so one projection's failure holds back none of the
// others.
func (p *Projector) CatchUp(ctx context.Context) (int, error) {
	total := 0
	for {
		n, full, err := p.stepAll(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return total, err
			}
			// Each on its own, below, says which failed and why.
			p.logger.DebugContext(ctx, "projections stepped together failed; stepping each on its own", "err", err)
			break
		}
		total += n
		if !full {
			return total, nil
		}
	}
	var first error
	for _, proj := range p.projections {
		for {
			n, err := p.Step(ctx, proj)
			total += n
			if err != nil {
				if first == nil {
					first = err
				}
				break
			}
			if n == 0 {
				break
			}
		}
	}
	return total, first
}

// Settle catches every projection up to the whole committed log: it folds
// until nothing is left, waiting while committed events sit behind a
// transaction that holds the horizon back, until ctx ends. Run it when no
// writer is running, to compare a read model with its rebuild at the same
// place in the log.
func (p *Projector) Settle(ctx context.Context) error {
	for {
		if _, err := p.CatchUp(ctx); err != nil {
			return err
		}
		behind, err := p.behind(ctx)
		if err != nil || !behind {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// RebuildFrom is where a rebuild starts.
type RebuildFrom int

const (
	// FromStart folds the whole log from position 0: it checks the fold
	// itself, but after retention dropped part of the log it cannot bring
	// back what the dropped part contributed.
	FromStart RebuildFrom = iota
	// FromSnapshot refills the read model from its latest snapshot and
	// folds only the log after it (from position 0 when there is none).
	FromSnapshot
)

// Rebuilt is what a rebuild did: the events it folded, and the snapshot it
// started from, if any.
type Rebuilt struct {
	Events   int64
	Snapshot *Snapshot
}

// Rebuild empties proj's read model and folds the log into it again, from
// position 0 or from its latest snapshot, calling progress (if not nil)
// after each batch with the events folded so far and the log's size (what
// is left of it past the snapshot). Readers of the read model see it
// refill.
func (p *Projector) Rebuild(ctx context.Context, proj Projection, from RebuildFrom, progress func(done, total int64)) (Rebuilt, error) {
	var total int64
	var out Rebuilt
	err := pgx.BeginFunc(ctx, p.store.pool, func(tx pgx.Tx) error {
		if _, err := lockCheckpoint(ctx, tx, proj.Name()); err != nil {
			return err
		}
		if from == FromSnapshot {
			snap, ok, err := restoreSnapshot(ctx, tx, proj)
			if err != nil {
				return err
			}
			if ok {
				out.Snapshot = &snap
				total, err = countEventsAfter(ctx, tx, snap.At)
				return err
			}
		}
		if err := proj.Reset(ctx, tx); err != nil {
			return fmt.Errorf("reset projection %s: %w", proj.Name(), err)
		}
		if _, err := tx.Exec(ctx, `UPDATE projection_checkpoints SET tx_id = '0', position = 0, events = 0, updated_at = now() WHERE name = $1`, proj.Name()); err != nil {
			return err
		}
		var err error
		total, err = CountEvents(ctx, tx)
		return err
	})
	if err != nil {
		return out, fmt.Errorf("rebuild %s: %w", proj.Name(), err)
	}
	var done int64
	for {
		n, err := p.Step(ctx, proj)
		if err != nil {
			out.Events = done
			return out, fmt.Errorf("rebuild %s: %w", proj.Name(), err)
		}
		done += int64(n)
		if progress != nil && n > 0 {
			progress(done, max(total, done))
		}
		if n > 0 {
			continue
		}
		// Nothing readable: done, unless committed events wait behind a
		// transaction that holds the horizon back.
		behind, err := p.projectionBehind(ctx, proj)
		if err != nil {
			out.Events = done
			return out, fmt.Errorf("rebuild %s: %w", proj.Name(), err)
		}
		if !behind {
			out.Events = done
			return out, nil
		}
		select {
		case <-ctx.Done():
			out.Events = done
			return out, ctx.Err()
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// Run keeps the projections caught up until ctx ends. It wakes on NOTIFY
// from RunNotifier and polls every PollInterval in case a notification was
// lost. Errors are logged and retried after a pause; Run returns nil when
// ctx ends.
func (p *Projector) Run(ctx context.Context) error {
	Listen(ctx, p.store.pool, NotifyChannel, p.logger, p.step)
	return nil
}

// step catches every projection up and says how long to wait for the next
// notification before looking again.
func (p *Projector) step(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	n, err := p.CatchUp(ctx)
	if err != nil {
		return 0, err
	}
	if wait := p.Gather - time.Since(start); n > 0 && wait > 0 {
		select { // gather what commits meanwhile; its notifications wait
		case <-ctx.Done():
			return 0, nil
		case <-time.After(wait):
		}
	}
	// Events committed but not yet readable (an older transaction anywhere
	// in the cluster holds the horizon back) bring no new notification:
	// look again soon instead of waiting for one.
	behind, err := p.behind(ctx)
	if err != nil {
		return 0, err
	}
	if behind {
		return min(p.PollInterval, 25*time.Millisecond), nil
	}
	return p.PollInterval, nil
}

// behind reports whether any projection has committed events after its
// checkpoint.
func (p *Projector) behind(ctx context.Context) (bool, error) {
	for _, proj := range p.projections {
		if b, err := p.projectionBehind(ctx, proj); err != nil || b {
			return b, err
		}
	}
	return false, nil
}

// countEventsAfter counts the events of the log after cur.
func countEventsAfter(ctx context.Context, q Querier, cur Cursor) (int64, error) {
	var n int64
	err := q.QueryRow(ctx, `SELECT count(*) FROM events WHERE (tx_id, position) > ($1::text::xid8, $2)`,
		strconv.FormatUint(cur.TxID, 10), cur.Position).Scan(&n)
	return n, err
}

func (p *Projector) projectionBehind(ctx context.Context, proj Projection) (bool, error) {
	cur, err := p.checkpoint(ctx, proj.Name())
	if err != nil {
		return false, err
	}
	// The first event after the cursor, on the (tx_id, position) index: a
	// bare EXISTS over a row comparison is planned as a scan of the log.
	var b bool
	err = p.store.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM (SELECT 1 FROM events
		WHERE (tx_id, position) > ($1::text::xid8, $2) ORDER BY tx_id, position LIMIT 1) AS next)`,
		strconv.FormatUint(cur.TxID, 10), cur.Position).Scan(&b)
	return b, err
}

// checkpoint returns where the projection called name stands (the start
// of the log when it has no checkpoint yet), without locking it.
func (p *Projector) checkpoint(ctx context.Context, name string) (Cursor, error) {
	var cur Cursor
	var txid string
	err := p.store.pool.QueryRow(ctx, `SELECT tx_id::text, position FROM projection_checkpoints WHERE name = $1`, name).Scan(&txid, &cur.Position)
	if errors.Is(err, pgx.ErrNoRows) {
		return Cursor{}, nil
	}
	if err != nil {
		return Cursor{}, fmt.Errorf("checkpoint %s: %w", name, err)
	}
	cur.TxID, _ = strconv.ParseUint(txid, 10, 64)
	return cur, nil
}

// Lag returns, per projection, how many events of the log it has not
// folded yet.
func (p *Projector) Lag(ctx context.Context) (map[string]int64, error) {
	out := make(map[string]int64, len(p.projections))
	for _, proj := range p.projections {
		cur, err := p.checkpoint(ctx, proj.Name())
		if err != nil {
			return nil, err
		}
		var lag int64
		err = p.store.pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE (tx_id, position) > ($1::text::xid8, $2)`,
			strconv.FormatUint(cur.TxID, 10), cur.Position).Scan(&lag)
		if err != nil {
			return nil, fmt.Errorf("lag of %s: %w", proj.Name(), err)
		}
		out[proj.Name()] = lag
	}
	return out, nil
}
