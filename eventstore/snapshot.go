package eventstore

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/domain"
)

// Tabled is a projection whose read model is a set of tables, each with a
// snapshot table of the same columns (SnapshotTable), so that a rebuild
// can start from a snapshot rather than position 0 of the log.
type Tabled interface {
	Projection
	// Tables names the read model's tables.
	Tables() []string
}

// SnapshotTable names the table that holds the snapshot of table.
func SnapshotTable(table string) string { return "snapshot_" + table }

// Snapshot is a projection's read model as it stood at a checkpoint.
type Snapshot struct {
	Name string `json:"name"`
	// At is the checkpoint the copied rows stand at; Events how many
	// events the projection had folded then.
	At      Cursor    `json:"-"`
	Events  int64     `json:"events"`
	Rows    int64     `json:"rows"`
	TakenAt time.Time `json:"taken_at"`
	// Age is how long ago it was taken, by the database's clock.
	Age time.Duration `json:"-"`
}

// snapshotLock is the advisory lock a snapshot being taken holds, and
// that every other writer of the snapshot tables takes for its
// transaction (LockSnapshots): none writes them while a copy is made.
const snapshotLock = int64(0x61727370) // "arsp"

// LockSnapshots waits, within tx, until no snapshot is being taken, and
// keeps one from being taken until tx ends. Retention's deletes and the
// roll-ups, which write the snapshot tables, take it first.
func LockSnapshots(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, snapshotLock)
	return err
}

// snapshotChunk is how much of a table's text one of a snapshot's short
// transactions writes.
const snapshotChunk = 4 << 20

// TakeSnapshot copies proj's read model, whole, into its snapshot tables
// with the checkpoint it stands at, replacing the previous snapshot.
//
// The rows are read in one REPEATABLE READ, read-only transaction, so
// that they and the checkpoint agree (the projector moves them together),
// into temporary files as COPY text, then written into fresh tables a few
// megabytes a transaction; a short last transaction puts the fresh tables
// in the old ones' place. All of it on one connection. No
// transaction of it holds an id for long, so readers of the log (the
// projector, SSE), which wait for every transaction that began before an
// event, never wait for the copy. Meanwhile no other writer of the
// snapshot tables runs (LockSnapshots).
func (p *Projector) TakeSnapshot(ctx context.Context, proj Projection) (Snapshot, error) {
	tabled, ok := proj.(Tabled)
	if !ok {
		return Snapshot{}, fmt.Errorf("snapshot %s: its read model has no snapshot tables", proj.Name())
	}
	snap, err := p.takeSnapshot(ctx, tabled)
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot %s: %w", proj.Name(), err)
	}
	return snap, nil
}

func (p *Projector) takeSnapshot(ctx context.Context, proj Tabled) (Snapshot, error) {
	// One connection from start to end: a copy that waited for a second
	// one while holding the first could starve a small pool.
	conn, err := p.store.pool.Acquire(ctx)
	if err != nil {
		return Snapshot{}, err
	}
	defer conn.Release()
	// The lock before the read transaction's view is taken: a delete that
	// held it is in that view.
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, snapshotLock); err != nil {
		return Snapshot{}, err
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, snapshotLock) }()

	snap, texts, err := readSnapshot(ctx, conn.Conn(), proj)
	defer func() {
		for _, f := range texts {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if err != nil {
		return Snapshot{}, err
	}
	for i, t := range proj.Tables() {
		n, err := writeSnapshotTable(ctx, conn.Conn(), t, texts[i])
		if err != nil {
			return Snapshot{}, err
		}
		snap.Rows += n
	}
	// The fresh tables take the old ones' place: snapshot tables are
	// locked first, as everywhere (restoreSnapshot), and the swap is DDL
	// only.
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "LOCK TABLE "+snapshotTables(proj)+" IN ACCESS EXCLUSIVE MODE"); err != nil {
			return err
		}
		for _, t := range proj.Tables() {
			old, fresh := pgx.Identifier{SnapshotTable(t)}.Sanitize(), pgx.Identifier{SnapshotTable(t) + "_next"}.Sanitize()
			if _, err := tx.Exec(ctx, "DROP TABLE "+old); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "ALTER TABLE "+fresh+" RENAME TO "+old); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO projection_snapshots (name, tx_id, position, events, rows, taken_at)
			VALUES ($1, $2::text::xid8, $3, $4, $5, $6)
			ON CONFLICT (name) DO UPDATE SET tx_id = excluded.tx_id, position = excluded.position,
				events = excluded.events, rows = excluded.rows, taken_at = excluded.taken_at`,
			snap.Name, strconv.FormatUint(snap.At.TxID, 10), snap.At.Position, snap.Events, snap.Rows, snap.TakenAt)
		return err
	})
	return snap, err
}

// readSnapshot reads proj's checkpoint and its tables' rows, as COPY text
// into a temporary file a table, in one REPEATABLE READ, read-only
// transaction on conn (no transaction id: the log's readers never wait
// for it).
func readSnapshot(ctx context.Context, conn *pgx.Conn, proj Tabled) (Snapshot, []*os.File, error) {
	var texts []*os.File
	read, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return Snapshot{}, nil, err
	}
	defer func() { _ = read.Rollback(context.WithoutCancel(ctx)) }()
	snap := Snapshot{Name: proj.Name()}
	var txid string
	err = read.QueryRow(ctx, `SELECT tx_id::text, position, events, now() FROM projection_checkpoints WHERE name = $1`,
		proj.Name()).Scan(&txid, &snap.At.Position, &snap.Events, &snap.TakenAt)
	if errors.Is(err, pgx.ErrNoRows) {
		txid = "0" // never stepped: an empty read model at the start of the log
		err = read.QueryRow(ctx, `SELECT now()`).Scan(&snap.TakenAt)
	}
	if err != nil {
		return Snapshot{}, nil, err
	}
	snap.At.TxID, _ = strconv.ParseUint(txid, 10, 64)
	for _, t := range proj.Tables() {
		f, err := os.CreateTemp("", "agentreach-snapshot-*.copy")
		if err != nil {
			return Snapshot{}, texts, err
		}
		texts = append(texts, f)
		cols, err := sharedColumns(ctx, read, t, SnapshotTable(t))
		if err != nil {
			return Snapshot{}, texts, err
		}
		w := bufio.NewWriterSize(f, 1<<20)
		if _, err := read.Conn().PgConn().CopyTo(ctx, w, "COPY (SELECT "+strings.Join(cols, ", ")+" FROM "+pgx.Identifier{t}.Sanitize()+") TO STDOUT"); err != nil {
			return Snapshot{}, texts, fmt.Errorf("copy %s: %w", t, err)
		}
		if err := w.Flush(); err != nil {
			return Snapshot{}, texts, err
		}
	}
	return snap, texts, read.Commit(ctx)
}

// writeSnapshotTable writes the COPY text of table in text into a fresh
// snapshot_<table>_next (its snapshot table's columns, indexes and
// defaults), snapshotChunk bytes a transaction, and says how many rows it
// wrote.
func writeSnapshotTable(ctx context.Context, conn *pgx.Conn, table string, text *os.File) (int64, error) {
	snapTable := SnapshotTable(table)
	fresh := pgx.Identifier{snapTable + "_next"}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP TABLE IF EXISTS "+fresh); err != nil {
		return 0, err
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE "+fresh+" (LIKE "+pgx.Identifier{snapTable}.Sanitize()+" INCLUDING ALL)"); err != nil {
		return 0, err
	}
	shared, err := sharedColumns(ctx, conn, table, snapTable)
	if err != nil {
		return 0, err
	}
	if _, err := text.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	copyFrom := "COPY " + fresh + " (" + strings.Join(shared, ", ") + ") FROM STDIN"
	var rows int64
	var chunk bytes.Buffer
	flush := func() error {
		if chunk.Len() == 0 {
			return nil
		}
		tag, err := conn.PgConn().CopyFrom(ctx, bytes.NewReader(chunk.Bytes()), copyFrom)
		if err != nil {
			return fmt.Errorf("copy %s: %w", table, err)
		}
		rows += tag.RowsAffected()
		chunk.Reset()
		return nil
	}
	in := bufio.NewReaderSize(text, 64<<10)
	for {
		line, err := in.ReadBytes('\n') // COPY text escapes a newline in a value
		chunk.Write(line)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("copy %s: %w", table, err)
		}
		if chunk.Len() >= snapshotChunk {
			if err := flush(); err != nil {
				return 0, err
			}
		}
	}
	return rows, flush()
}

// snapshotTables lists, quoted, the snapshot tables of proj, in the order
// of its tables.
func snapshotTables(proj Tabled) string {
	var snaps []string
	for _, t := range proj.Tables() {
		snaps = append(snaps, pgx.Identifier{SnapshotTable(t)}.Sanitize())
	}
	return strings.Join(snaps, ", ")
}

// LatestSnapshot is proj's snapshot, if one was taken.
func (p *Projector) LatestSnapshot(ctx context.Context, name string) (Snapshot, bool, error) {
	snap := Snapshot{Name: name}
	var txid string
	err := p.store.pool.QueryRow(ctx, `SELECT tx_id::text, position, events, rows, taken_at,
			(extract(epoch FROM now() - taken_at) * 1e9)::bigint FROM projection_snapshots WHERE name = $1`,
		name).Scan(&txid, &snap.At.Position, &snap.Events, &snap.Rows, &snap.TakenAt, &snap.Age)
	if errors.Is(err, pgx.ErrNoRows) {
		return Snapshot{}, false, nil
	}
	if err != nil {
		return Snapshot{}, false, fmt.Errorf("snapshot of %s: %w", name, err)
	}
	snap.At.TxID, _ = strconv.ParseUint(txid, 10, 64)
	return snap, true, nil
}

// restoreSnapshot empties proj's read model, fills it from its snapshot
// and moves its checkpoint (locked by the caller) to where the snapshot
// stands. It reports false, changing nothing, when there is no snapshot.
func restoreSnapshot(ctx context.Context, tx pgx.Tx, proj Projection) (Snapshot, bool, error) {
	tabled, ok := proj.(Tabled)
	if !ok {
		return Snapshot{}, false, nil
	}
	// Snapshot tables before read models, as every statement that touches
	// both takes them (TakeSnapshot, retention's deletes, the roll-ups):
	// one order, no deadlock. And before the snapshot's checkpoint is
	// read: a snapshot being taken commits first, and its rows and its
	// checkpoint are read together.
	if _, err := tx.Exec(ctx, "LOCK TABLE "+snapshotTables(tabled)+" IN SHARE MODE"); err != nil {
		return Snapshot{}, false, err
	}
	snap := Snapshot{Name: proj.Name()}
	var txid string
	err := tx.QueryRow(ctx, `SELECT tx_id::text, position, events, rows, taken_at FROM projection_snapshots WHERE name = $1`,
		proj.Name()).Scan(&txid, &snap.At.Position, &snap.Events, &snap.Rows, &snap.TakenAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Snapshot{}, false, nil
	}
	if err != nil {
		return Snapshot{}, false, err
	}
	snap.At.TxID, _ = strconv.ParseUint(txid, 10, 64)
	if err := proj.Reset(ctx, tx); err != nil {
		return Snapshot{}, false, fmt.Errorf("reset projection %s: %w", proj.Name(), err)
	}
	for _, t := range tabled.Tables() {
		if _, err := copyRows(ctx, tx, SnapshotTable(t), t); err != nil {
			return Snapshot{}, false, err
		}
	}
	_, err = tx.Exec(ctx, `UPDATE projection_checkpoints SET tx_id = $2::text::xid8, position = $3, events = $4, updated_at = now() WHERE name = $1`,
		proj.Name(), txid, snap.At.Position, snap.Events)
	return snap, true, err
}

// copyRows copies every row of from into to, column by name (the columns
// both have, in to's order), and says how many it copied.
func copyRows(ctx context.Context, tx pgx.Tx, from, to string) (int64, error) {
	cols, err := sharedColumns(ctx, tx, from, to)
	if err != nil {
		return 0, err
	}
	list := strings.Join(cols, ", ")
	tag, err := tx.Exec(ctx, "INSERT INTO "+pgx.Identifier{to}.Sanitize()+" ("+list+") SELECT "+list+" FROM "+pgx.Identifier{from}.Sanitize())
	if err != nil {
		return 0, fmt.Errorf("copy %s to %s: %w", from, to, err)
	}
	return tag.RowsAffected(), nil
}

// Columns names table's columns in their order.
func Columns(ctx context.Context, q Querier, table string) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT attname::text FROM pg_attribute
		WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, pgx.Identifier{table}.Sanitize())
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", table, err)
	}
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", table, err)
	}
	return cols, nil
}

// sharedColumns names, quoted, the columns of to that from has too.
func sharedColumns(ctx context.Context, q Querier, from, to string) ([]string, error) {
	fromCols, err := Columns(ctx, q, from)
	if err != nil {
		return nil, err
	}
	toCols, err := Columns(ctx, q, to)
	if err != nil {
		return nil, err
	}
	var shared []string
	for _, c := range toCols {
		if slices.Contains(fromCols, c) {
			shared = append(shared, pgx.Identifier{c}.Sanitize())
		}
	}
	return shared, nil
}

// Covered says whether the snapshots of every projection named stand past
// every event table holds of the jobs submitted in r: whether those
// events may leave the log without a rebuild from the snapshots missing
// them. A projection with no snapshot covers nothing.
func (s *Store) Covered(ctx context.Context, table string, r domain.TimeRange, names []string) (bool, error) {
	var covered bool
	err := s.pool.QueryRow(ctx, `SELECT last IS NULL OR NOT EXISTS (
			SELECT 1 FROM unnest($3::text[]) AS n(name) LEFT JOIN projection_snapshots s USING (name)
			WHERE s.name IS NULL OR (s.tx_id, s.position) < last) FROM (SELECT
		(SELECT (e.tx_id, e.position) FROM `+pgx.Identifier{table}.Sanitize()+` e
		 WHERE e.stream_at >= $1 AND e.stream_at < $2 ORDER BY e.tx_id DESC, e.position DESC LIMIT 1) AS last) AS x`,
		r.Low, r.High, names).Scan(&covered)
	if err != nil {
		return false, fmt.Errorf("covered by snapshots, %s: %w", table, err)
	}
	return covered, nil
}

// Dropped says whether retention has dropped a partition of the log: a
// rebuild from position 0 then lacks what the dropped jobs contributed,
// and only a rebuild from the snapshots gives back the live read models.
func (s *Store) Dropped(ctx context.Context) (bool, error) {
	var dropped bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM event_partitions WHERE dropped_at IS NOT NULL)`).Scan(&dropped)
	if err != nil {
		return false, fmt.Errorf("dropped partitions: %w", err)
	}
	return dropped, nil
}
