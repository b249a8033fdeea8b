package eventstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentreach/agentreach/domain"
)

// Expected versions with a special meaning for Append.
const (
	// Any appends at the end of the stream whatever its version.
	Any = -1
	// NoStream expects the stream to have no events yet.
	NoStream = 0
)

// ErrConflict is returned (wrapped in a *ConflictError) when a stream's
// version is not the one the appender expected.
var ErrConflict error = &domain.KindError{Kind: domain.ErrConflict, Message: "stream version conflict",
	Public: "concurrent change, try again"}

// ConflictError says which stream was appended to with which stale version.
type ConflictError struct {
	Stream   string
	Expected int
	// Stale are the appends of an AppendAll that conflicted, by index.
	Stale []int
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("append to stream %s at version %d: %v", e.Stream, e.Expected, ErrConflict)
}

// Unwrap lets errors.Is find ErrConflict.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// Querier is what the store needs to read: a pool, a connection or a tx.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// BatchQuerier is a Querier that also sends batches: a pool, a
// connection or a transaction.
type BatchQuerier interface {
	Querier
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Record is a stored event: the event plus where it sits in the log.
type Record struct {
	Position   int64
	TxID       uint64
	StreamID   string
	Version    int
	Type       domain.EventType
	Data       json.RawMessage
	Metadata   domain.Metadata
	RecordedAt time.Time
}

// Event returns the domain event the record holds.
func (r Record) Event() domain.Event {
	return domain.Event{Type: r.Type, Data: r.Data, Metadata: r.Metadata}
}

// Cursor returns the place in the global log just after r.
func (r Record) Cursor() Cursor { return Cursor{TxID: r.TxID, Position: r.Position} }

// Store appends to and reads the event log.
type Store struct {
	pool  *pgxpool.Pool
	pokes chan struct{}

	subMu sync.Mutex
	subs  map[chan struct{}]bool // subscribers: true for those of local commits too
}

// New returns a Store on pool.
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, pokes: make(chan struct{}, 1), subs: map[chan struct{}]bool{}}
}

// Pool returns the store's pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// An append's base event (its stream's last) must be of this transaction
// or of one that took its id before it: the log is read in the order of
// transaction ids (ReadAll), and a transaction that took its id (its
// first write) and then read a stream another, younger transaction had
// meanwhile committed to would put its append before that stream's
// previous event; every reader of the log would meet the stream's
// versions out of order (the jobs' projection stopped at such a job:
// ROUTED before SUBMITTED). appendSQL and appendsSQL refuse such an
// append as a conflict, the writer decides again in a new transaction,
// which is younger (TestAppendOntoAYoungerTransactionConflicts).
//
// appendSQL appends to one stream after its last event.
const appendSQL = `
WITH last AS (SELECT version, tx_id FROM events WHERE stream_id = $1 AND ` + inStream + ` ORDER BY version DESC LIMIT 1),
cur AS (SELECT coalesce((SELECT version FROM last), 0) AS v, (SELECT tx_id FROM last) AS tx)
INSERT INTO events (stream_id, version, type, data, metadata, stream_at)
SELECT $1, cur.v + u.ord, u.t, u.d::jsonb, u.m::jsonb, events_stream_at($1)
FROM cur, unnest($3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS u(t, d, m, ord)
WHERE ($2 < 0 OR cur.v = $2) AND (cur.tx IS NULL OR cur.tx <= pg_current_xact_id())
ORDER BY u.ord
RETURNING position, tx_id::text, version, recorded_at`

// AppendTx appends evs to stream inside tx, expecting the stream to be at
// version expected (or Any, or NoStream). It returns the stored records. A
// stale expected version gives a *ConflictError wrapping ErrConflict; the
// caller should then roll tx back, reload and decide again. The events are
// visible to others once tx commits; call Committed after that to wake
// readers promptly.
func (s *Store) AppendTx(ctx context.Context, tx pgx.Tx, stream string, expected int, evs ...domain.Event) ([]Record, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	types, datas, metas, err := encode(stream, evs)
	if err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, appendSQL, stream, expected, types, datas, metas)
	if err != nil {
		return nil, translate(stream, expected, err)
	}
	out := make([]Record, 0, len(evs))
	for rows.Next() {
		var r Record
		var txid string
		if err := rows.Scan(&r.Position, &txid, &r.Version, &r.RecordedAt); err != nil {
			rows.Close()
			return nil, translate(stream, expected, err)
		}
		r.TxID, _ = strconv.ParseUint(txid, 10, 64)
		e := evs[len(out)]
		r.StreamID, r.Type, r.Data, r.Metadata = stream, e.Type, e.Data, e.Metadata
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(stream, expected, err)
	}
	if len(out) == 0 {
		return nil, &ConflictError{Stream: stream, Expected: expected}
	}
	return out, nil
}

// encode gives evs as the arrays the append statements take.
func encode(stream string, evs []domain.Event) (types, datas, metas []string, err error) {
	types = make([]string, len(evs))
	datas = make([]string, len(evs))
	metas = make([]string, len(evs))
	for i, e := range evs {
		types[i] = string(e.Type)
		datas[i] = string(e.Data)
		if len(e.Data) == 0 {
			datas[i] = "{}"
		}
		md, err := json.Marshal(e.Metadata)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("append to stream %s: encode metadata: %w", stream, err)
		}
		metas[i] = string(md)
	}
	return types, datas, metas, nil
}

// appendsSQL appends to many streams at explicit versions in one
// statement ($1..$6 are parallel arrays, an element an event: its stream,
// the version its append expects, its own version, type, data and
// metadata). An event whose version is taken (an append behind its
// stream's end, or a second append to one stream) is left out, as is every
// event of an append past its stream's end, or onto a base event of a
// younger transaction (see appendSQL); RETURNING says which went in.
//
// The check of an append's base event is a scalar subquery, not
// EXISTS: PostgreSQL may turn an EXISTS under OR into a hashed subplan that
// reads the whole log, and a plan cached while the log was small keeps
// doing so as it grows (35 ms a statement at 50,000 events). A scalar
// subquery is never hashed; it is one index probe a row.
//
// A row's stream_at is computed once (the LATERAL, kept apart by OFFSET 0)
// for its own column and its base's probe. Written inline, the function ran
// again for the probe's partition pruning and for its index condition in
// each partition: a third of the statement's time.
const appendsSQL = `
INSERT INTO events (stream_id, version, type, data, metadata, stream_at)
SELECT u.s, u.v, u.t, u.d::jsonb, u.m::jsonb, a.at
FROM unnest($1::text[], $2::int[], $3::int[], $4::text[], $5::text[], $6::text[]) WITH ORDINALITY AS u(s, base, v, t, d, m, ord)
CROSS JOIN LATERAL (SELECT events_stream_at(u.s) AS at OFFSET 0) a
WHERE u.base = 0 OR (SELECT e.tx_id FROM events e
    WHERE e.stream_id = u.s AND e.version = u.base AND e.stream_at IN (a.at, '-infinity')) <= pg_current_xact_id()
ORDER BY u.ord
ON CONFLICT ON CONSTRAINT events_stream_version_key DO NOTHING
RETURNING stream_id, version`

// genericPlans and customPlans bracket AppendAll's statements: they
// run on generic plans, made once a connection. PostgreSQL kept planning
// them anew each time, at a cost above running them: the shared append
// 1.8 ms against 0.4 (a row's partition is known only as it runs, so
// every partition of the log was planned), the wake of the waiters at
// submit (WakeNewWaitersIfFree) 0.5 against 0.45. Their generic plans
// prune the partitions as they run (TestSharedAppendPlanProbesTheIndex
// pins the append's). The rest of the transaction plans as before: a
// generic plan locks every partition of the log it reads, where a read of
// one stream planned for it locks its own.
//
// A generic plan is made once, on the statistics of that moment, and kept
// until the tables' statistics change. Made while the log is small and
// analysed (a fresh database; a day's partition that autovacuum has just
// looked at), a scan of a page or two costs less than an index probe, and
// the plan kept scanning as the log grew: within one burst of 20,000 jobs
// the shared append went from 1 to 2,600 ms a statement. The bracketed
// statements are index probes by design, so the bracket also turns
// sequential scans off while their plans are made
// (TestGenericPlansProbeTheIndexOfASmallLog).
var (
	genericPlans = []string{`SET LOCAL plan_cache_mode = force_generic_plan`, `SET LOCAL enable_seqscan = off`}
	customPlans  = []string{`SET LOCAL plan_cache_mode TO DEFAULT`, `SET LOCAL enable_seqscan TO DEFAULT`}
)

// inBracket marks a statement sent between genericPlans and customPlans.
// A connection prepares each statement text once and keeps its plan (pgx
// caches the prepared statement), so a text also sent outside the bracket
// could bring in a generic plan made there, with sequential scans on; the
// mark makes the bracket's text its own (TestGenericPlansProbeTheIndexOfASmallLog).
const inBracket = "\n-- planned in AppendAll's bracket (eventstore.genericPlans)"

// queueAll queues each of sqls on b.
func queueAll(b *pgx.Batch, sqls []string) {
	for _, q := range sqls {
		b.Queue(q)
	}
}

// StreamAppend is one stream's share of AppendAll: evs at the version
// Expected (NoStream or a version the caller read).
type StreamAppend struct {
	Stream   string
	Expected int
	Events   []domain.Event
}

// Statement is a statement of the caller's that AppendAll sends in the
// round trip of its appends: a lock taken before them, the rows of their
// effects after them. Whatever rows it returns are dropped.
type Statement struct {
	SQL  string
	Args []any
	// Rows, when set, reads the statement's rows.
	Rows func(pgx.Rows) error
}

// StatementError says which statement of an AppendAll failed: before's
// first is 0, the appends' statement is len(before), after's first is
// len(before)+1.
type StatementError struct {
	Index int
	Err   error
}

func (e *StatementError) Error() string { return fmt.Sprintf("statement %d: %v", e.Index, e.Err) }

// Unwrap gives the driver's error.
func (e *StatementError) Unwrap() error { return e.Err }

// AppendAll sends on tx, in one round trip, the statements before, the
// appends of many streams at the versions they name (one statement), and
// the statements after. Appends whose expected version is stale or never
// reached (or that follow another append to the same stream at the same
// version) make it answer a *ConflictError naming the first, with Stale
// listing them all by index: some of the others may be written, so the
// caller rolls its transaction back and runs it again without them. A
// statement that fails answers a *StatementError. The events are visible
// to others once tx commits; call Committed after that.
func (s *Store) AppendAll(ctx context.Context, tx pgx.Tx, before []Statement, appends []StreamAppend, after []Statement) error {
	_, err := s.appendAll(ctx, &pgx.Batch{}, func(b *pgx.Batch) pgx.BatchResults { return tx.SendBatch(ctx, b) },
		before, appends, after)
	return err
}

// BeginAppendAll is AppendAll in a transaction it begins in the same round
// trip: begin holds BeginTx and the statements to send with it, which are
// read first. It answers the transaction (nil if it did not begin), which
// the caller commits or rolls back, and AppendAll's errors.
func (s *Store) BeginAppendAll(ctx context.Context, begin *pgx.Batch, before []Statement, appends []StreamAppend, after []Statement) (pgx.Tx, error) {
	return s.appendAll(ctx, begin, func(b *pgx.Batch) pgx.BatchResults { return s.pool.SendBatch(ctx, b) },
		before, appends, after)
}

// appendAll queues AppendAll's statements on b after what it holds, sends
// it with send and answers the transaction the batch began (if it began
// one) and AppendAll's errors.
func (s *Store) appendAll(ctx context.Context, b *pgx.Batch, send func(*pgx.Batch) pgx.BatchResults,
	before []Statement, appends []StreamAppend, after []Statement) (pgx.Tx, error) {
	own := len(b.QueuedQueries)     // b's own statements (BeginAppendAll's BEGIN and what goes with it)
	lead := own + len(genericPlans) // statements before the caller's: b's own and generic plans
	queueAll(b, genericPlans)
	for _, st := range before {
		queueStatement(b, st)
	}
	var stale []int
	if err := queueAppends(b, appends, &stale); err != nil {
		return nil, err
	}
	appendsAt := len(before)
	if len(b.QueuedQueries) == lead+len(before) {
		appendsAt = -1 // no events: after follows before
	}
	for _, st := range after {
		queueStatement(b, st)
	}
	if len(b.QueuedQueries) == lead && own == 0 {
		return nil, nil // nothing to send (a batch that begins a transaction goes all the same)
	}
	n := len(b.QueuedQueries) - lead // the caller's statements and the appends'
	queueAll(b, customPlans)
	failed := -1 // of those n, from 0
	for i, qq := range b.QueuedQueries[lead : lead+n] {
		fn := qq.Fn
		qq.Fn = func(br pgx.BatchResults) error {
			var err error
			if fn != nil {
				err = fn(br)
			} else {
				_, err = br.Exec()
			}
			if err != nil && failed < 0 {
				failed = i
			}
			return err
		}
	}
	br := send(b)
	err := br.Close()
	tx := br.Tx()
	switch {
	case err == nil:
		return tx, nil
	case failed == appendsAt && len(stale) > 0:
		a := appends[stale[0]]
		return tx, &ConflictError{Stream: a.Stream, Expected: a.Expected, Stale: stale}
	case failed == appendsAt && errors.Is(err, ErrConflict):
		return tx, err
	case failed < 0:
		return tx, err // not a statement's: the connection's, or one sent before them
	}
	index := failed
	if appendsAt < 0 && failed >= len(before) {
		index++ // after's statements keep their places
	}
	return tx, &StatementError{Index: index, Err: err}
}

// queueStatement queues st on b, reading its rows with st.Rows if set.
func queueStatement(b *pgx.Batch, st Statement) {
	q := b.Queue(st.SQL+inBracket, st.Args...)
	if st.Rows != nil {
		q.Query(st.Rows)
	}
}

// queueAppends queues on b, as one statement, the appends of many streams
// at the versions they name; reading its result fills stale (AppendAll).
// When every append creates its stream, the statement is a plain insert,
// and a stream that exists fails it with a *ConflictError naming none.
func queueAppends(b *pgx.Batch, appends []StreamAppend, stale *[]int) error {
	var streams, types, datas, metas []string
	var bases, versions []int32
	fresh := true
	for _, a := range appends {
		if a.Expected < 0 {
			return fmt.Errorf("append to stream %s: AppendAll needs the expected version", a.Stream)
		}
		fresh = fresh && a.Expected == NoStream
		t, d, m, err := encode(a.Stream, a.Events)
		if err != nil {
			return err
		}
		for i := range a.Events {
			streams, bases, versions = append(streams, a.Stream), append(bases, int32(a.Expected)), append(versions, int32(a.Expected+i+1))
		}
		types, datas, metas = append(types, t...), append(datas, d...), append(metas, m...)
	}
	if len(streams) == 0 {
		return nil
	}
	if fresh {
		b.Queue(appendNewSQL, streams, versions, types, datas, metas).Fn = func(br pgx.BatchResults) error {
			if _, err := br.Exec(); err != nil {
				return translate(streams[0], NoStream, err)
			}
			return nil
		}
		return nil
	}
	b.Queue(appendsSQL, streams, bases, versions, types, datas, metas).Fn = func(br pgx.BatchResults) error {
		rows, err := br.Query()
		if err != nil {
			return fmt.Errorf("append to %d streams: %w", len(appends), err)
		}
		type key struct {
			stream  string
			version int
		}
		in := map[key]bool{}
		var k key
		if _, err := pgx.ForEachRow(rows, []any{&k.stream, &k.version}, func() error { in[k] = true; return nil }); err != nil {
			return fmt.Errorf("append to %d streams: %w", len(appends), err)
		}
		for i, a := range appends { // the first append to claim a version has it
			whole := true
			for v := a.Expected + 1; v <= a.Expected+len(a.Events); v++ {
				whole = whole && in[key{a.Stream, v}]
				delete(in, key{a.Stream, v})
			}
			if !whole {
				*stale = append(*stale, i)
			}
		}
		if len(*stale) > 0 {
			return ErrConflict
		}
		return nil
	}
	return nil
}

// appendNewSQL creates streams, each with its events from version 1, in
// one statement: group commit's submits.
const appendNewSQL = `INSERT INTO events (stream_id, version, type, data, metadata, stream_at)
SELECT id, v, t, d::jsonb, m::jsonb, events_stream_at(id) FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::text[]) AS u(id, v, t, d, m)`

// inStream narrows a read of stream $1 to the partitions it can be in:
// its own (a job's time partition) and events_kept, where the streams of
// every other kind live and where events written before the log was
// partitioned stay (sql/migrations/0028_partitioned_events.sql).
const inStream = `stream_at IN (events_stream_at($1), '-infinity')`

// qReadStream reads the events of stream $1 in version order. Its generic
// plan prunes the partitions as it starts, so a connection plans it once.
const qReadStream = `SELECT ` + recordColumns + ` FROM events WHERE stream_id = $1 AND ` + inStream + ` ORDER BY version`

// streamVersionKey reports whether constraint is the log's unique (stream,
// version) key: the parent's, or its index on a partition, which
// PostgreSQL names after the partition (events_kept_…, events_p…_…).
func streamVersionKey(constraint string) bool {
	return constraint == "events_stream_version_key" ||
		(strings.HasPrefix(constraint, "events_") && strings.HasSuffix(constraint, "_stream_id_version_stream_at_key"))
}

// translate maps driver errors to the store's kinds, by SQLSTATE and
// constraint name, never by message text.
func translate(stream string, expected int, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && streamVersionKey(pgErr.ConstraintName) {
		return &ConflictError{Stream: stream, Expected: expected}
	}
	return fmt.Errorf("append to stream %s: %w", stream, err)
}

// Append appends evs to stream in a transaction of its own, then wakes
// readers. See AppendTx.
func (s *Store) Append(ctx context.Context, stream string, expected int, evs ...domain.Event) ([]Record, error) {
	var out []Record
	err := s.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = s.AppendTx(ctx, tx, stream, expected, evs...)
		return err
	})
	return out, err
}

// RetryTx runs fn in a transaction like InTx, again (up to 5 times, each
// in a new transaction) when an append conflicts or PostgreSQL gives up
// on the transaction (class 40: a deadlock, a serialization failure): fn
// reads and decides anew. A write that takes its transaction id before
// it appends at Any needs it: its append is refused when another,
// younger transaction appended to the stream meanwhile (see appendSQL).
func (s *Store) RetryTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	var err error
	for range 5 {
		err = s.InTx(ctx, fn)
		if !errors.Is(err, ErrConflict) && !transientTx(err) {
			return err
		}
	}
	return err
}

// transientTx reports whether err is PostgreSQL giving up on a
// transaction that may well succeed when run again (class 40).
func transientTx(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "40")
}

// InTx runs fn in a transaction, commits it when fn returns nil (rolls back
// otherwise) and then wakes readers of the log. Should the connection die
// during COMMIT, it finds out what became of the transaction
// (CommitOutcome): nil if it committed, ErrAborted if it did not (fn may
// run again), ErrCommitUnknown if that could not be told.
func (s *Store) InTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // after a commit: nothing to do
	if err := fn(tx); err != nil {
		return err
	}
	return s.Commit(ctx, tx)
}

// Commit commits tx as InTx does: should the connection die during
// COMMIT, it finds out what became of the transaction (CommitOutcome),
// and once committed it wakes readers of the log. For a transaction begun
// otherwise than by InTx (with the first statements in BEGIN's round
// trip, pgx.Batch.BeginTx); the caller still rolls tx back on its way
// out (after a commit, nothing to do).
func (s *Store) Commit(ctx context.Context, tx pgx.Tx) error {
	// The transaction's id, if it wrote anything, and whether it appended
	// events, for CommitOutcome: a committed one that did is checked in the
	// log too.
	var xid string
	var appended bool
	if err := tx.QueryRow(ctx, qTxOwn).Scan(&xid, &appended); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		if err := CommitOutcome(ctx, s.pool, xid, appended, err); err != nil {
			return err
		}
	}
	s.Committed()
	return nil
}

// Committed tells the store that events were committed, so that a notifier
// (RunNotifier) wakes every reader, in this process or another. It never
// blocks; many calls close together make one notification. This
// process's SubscribeCommits subscribers are signalled at once too,
// without waiting for the notification's round trip.
func (s *Store) Committed() {
	select {
	case s.pokes <- struct{}{}:
	default:
	}
	s.signal(true)
}

// recordColumns are a Record's columns. The transaction id is read as text
// under another name: an output column named tx_id would make ORDER BY
// tx_id sort the text ("1001" before "999").
// The metadata's fields are read as text, so that no JSON is decoded for
// them.
const recordColumns = `position, tx_id::text AS tx_id_text, stream_id, version, type, data,
	coalesce(metadata->>'trace_id', '') AS trace_id, coalesce(metadata->>'actor', '') AS actor,
	coalesce(metadata->>'causation_id', '') AS causation_id, recorded_at`

func scanRecords(rows pgx.Rows) ([]Record, error) {
	out, _, err := scanRecordsWithin(rows, 0)
	return out, err
}

// scanRecordsWithin reads rows until their data reach maxBytes (0: no
// bound), at least one, and reports whether it stopped there: the rest
// are read off the connection and dropped.
func scanRecordsWithin(rows pgx.Rows, maxBytes int) ([]Record, bool, error) {
	defer rows.Close()
	var out []Record
	size := 0
	// One set of destinations for every row, copied out: destinations made
	// in the loop would each go to the heap, a row at a time.
	var (
		r         Record
		txid, typ string
		data      []byte // as stored: a json.RawMessage would be decoded (validated) again
	)
	md := &r.Metadata
	dest := []any{&r.Position, &txid, &r.StreamID, &r.Version, &typ, &data, &md.TraceID, &md.Actor, &md.CausationID, &r.RecordedAt}
	for rows.Next() {
		if maxBytes > 0 && size >= maxBytes {
			return out, true, nil
		}
		r, data = Record{}, nil
		if err := rows.Scan(dest...); err != nil {
			return nil, false, err
		}
		r.Data = data
		r.TxID, _ = strconv.ParseUint(txid, 10, 64)
		r.Type = domain.EventType(typ)
		out = append(out, r)
		size += len(data)
	}
	return out, false, rows.Err()
}

// ReadStream returns a stream's events in version order; an unknown stream
// has none (no error).
func (s *Store) ReadStream(ctx context.Context, q Querier, stream string) ([]Record, error) {
	if q == nil {
		q = s.pool
	}
	rows, err := q.Query(ctx, qReadStream, stream)
	if err != nil {
		return nil, fmt.Errorf("read stream %s: %w", stream, err)
	}
	recs, err := scanRecords(rows)
	if err != nil {
		return nil, fmt.Errorf("read stream %s: %w", stream, err)
	}
	return recs, nil
}
