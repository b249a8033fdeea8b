package eventstore_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/pgtest"
)

func setup(t *testing.T) (*eventstore.Store, context.Context) {
	t.Helper()
	return eventstore.New(pgtest.NewPool(t)), context.Background()
}

func ev(t domain.EventType, n int) domain.Event {
	return domain.NewEvent(t, map[string]int{"n": n}, domain.Metadata{TraceID: "trace-1", Actor: "test", CausationID: "c-1"})
}

func TestAppendAndReadStream(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)

	recs, err := s.Append(ctx, "job:a", eventstore.NoStream, ev("A", 1), ev("B", 2))
	require.NoError(t, err)
	require.Len(t, recs, 2)
	require.Equal(t, []int{1, 2}, []int{recs[0].Version, recs[1].Version})
	require.Less(t, recs[0].Position, recs[1].Position)

	_, err = s.Append(ctx, "job:a", 2, ev("C", 3))
	require.NoError(t, err)

	got, err := s.ReadStream(ctx, nil, "job:a")
	require.NoError(t, err)
	require.Len(t, got, 3)
	for i, r := range got {
		require.Equal(t, i+1, r.Version)
		require.Equal(t, "job:a", r.StreamID)
		require.Equal(t, domain.Metadata{TraceID: "trace-1", Actor: "test", CausationID: "c-1"}, r.Metadata)
		require.JSONEq(t, fmt.Sprintf(`{"n":%d}`, i+1), string(r.Data))
	}

	// Stale, future and "no stream" expectations are all conflicts.
	for _, expected := range []int{1, 5, eventstore.NoStream} {
		_, err = s.Append(ctx, "job:a", expected, ev("X", 0))
		require.ErrorIs(t, err, eventstore.ErrConflict, "expected %d", expected)
		var ce *eventstore.ConflictError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "job:a", ce.Stream)
	}
	recs, err = s.Append(ctx, "job:a", eventstore.Any, ev("D", 4))
	require.NoError(t, err)
	require.Equal(t, 4, recs[0].Version)

	none, err := s.ReadStream(ctx, nil, "job:missing")
	require.NoError(t, err)
	require.Empty(t, none)
}

// TestConcurrentAppendsToOneStream races 50 writers for each version of one
// stream: each version is won exactly once, versions are gap-free, and every
// loser gets the conflict error.
// AppendAll writes each stream at the version it names, many streams in
// one statement; any other version (behind the stream's end, past it, no
// stream for one that exists, or a second append at one version) is
// reported by index as a conflict, and the transaction writes nothing. The
// caller's statements run before and after the appends, in order, and one
// that fails is named by its place.
func TestAppendAll(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	send := func(appends ...eventstore.StreamAppend) ([]int, error) {
		var stale []int
		err := pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
			err := s.AppendAll(ctx, tx, nil, appends, nil)
			if ce := (*eventstore.ConflictError)(nil); errors.As(err, &ce) {
				stale = ce.Stale
			}
			return err
		})
		return stale, err
	}
	at := func(stream string, expected int, evs ...domain.Event) eventstore.StreamAppend {
		return eventstore.StreamAppend{Stream: stream, Expected: expected, Events: evs}
	}
	stale, err := send(at("job:q", eventstore.NoStream, ev("A", 1), ev("B", 2)), at("job:r", eventstore.NoStream, ev("A", 1)))
	require.NoError(t, err)
	require.Empty(t, stale)
	_, err = send(at("job:q", eventstore.NoStream, ev("A", 1)))
	require.ErrorIs(t, err, eventstore.ErrConflict, "a stream created twice")
	_, err = send(at("job:q", 2, ev("C", 3)), at("job:r", 1, ev("B", 2), ev("C", 3)))
	require.NoError(t, err)
	for _, expected := range []int{1, 2, 7, eventstore.NoStream} {
		stale, err := send(at("job:r", 3, ev("D", 4)), at("job:q", expected, ev("X", 0), ev("Y", 0)))
		require.ErrorIs(t, err, eventstore.ErrConflict, "expected %d", expected)
		var ce *eventstore.ConflictError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, eventstore.ConflictError{Stream: "job:q", Expected: expected, Stale: []int{1}}, *ce)
		require.Equal(t, []int{1}, stale, "only job:q's append is stale")
	}
	stale, err = send(at("job:q", 3, ev("D", 4)), at("job:q", 3, ev("E", 4)))
	require.ErrorIs(t, err, eventstore.ErrConflict)
	require.Equal(t, []int{1}, stale, "the first append at a version has it")
	for stream, want := range map[string][]domain.EventType{"job:q": {"A", "B", "C"}, "job:r": {"A", "B", "C"}} {
		got, err := s.ReadStream(ctx, nil, stream)
		require.NoError(t, err)
		var types []domain.EventType
		for i, r := range got {
			require.Equal(t, i+1, r.Version)
			if i > 0 {
				require.Less(t, got[i-1].Position, r.Position, "positions follow versions")
			}
			types = append(types, r.Type)
		}
		require.Equal(t, want, types, "%s: nothing of a refused transaction", stream)
	}
	require.NoError(t, pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
		require.Error(t, s.AppendAll(ctx, tx, nil, []eventstore.StreamAppend{at("job:q", eventstore.Any, ev("Z", 0))}, nil),
			"an append names its version")
		return nil
	}))

	// The caller's statements: before, in order, then the appends, then after.
	_, err = s.Pool().Exec(ctx, `CREATE TABLE seen (n int)`)
	require.NoError(t, err)
	stmt := func(sql string, args ...any) eventstore.Statement { return eventstore.Statement{SQL: sql, Args: args} }
	require.NoError(t, pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
		return s.AppendAll(ctx, tx, []eventstore.Statement{stmt(`INSERT INTO seen VALUES ($1)`, 1)},
			[]eventstore.StreamAppend{at("job:q", 3, ev("D", 4))},
			[]eventstore.Statement{stmt(`INSERT INTO seen SELECT count(*) FROM events WHERE stream_id = $1`, "job:q")})
	}))
	var seen []int
	rows, err := s.Pool().Query(ctx, `SELECT n FROM seen ORDER BY n`)
	require.NoError(t, err)
	seen, err = pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	require.Equal(t, []int{1, 4}, seen, "after sees the appended events")
	for _, c := range []struct {
		before, after []eventstore.Statement
		appends       []eventstore.StreamAppend
		index         int
	}{
		{before: []eventstore.Statement{stmt(`SELECT 1`), stmt(`SELECT 1/0`)}, index: 1},
		{after: []eventstore.Statement{stmt(`SELECT 1`), stmt(`SELECT 1/0`)}, appends: []eventstore.StreamAppend{at("job:q", 4, ev("E", 5))}, index: 2},
		{before: []eventstore.Statement{stmt(`SELECT 1`)}, after: []eventstore.Statement{stmt(`SELECT 1/0`)}, index: 2}, // after's first is len(before)+1, events or not
	} {
		err := pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error { return s.AppendAll(ctx, tx, c.before, c.appends, c.after) })
		var se *eventstore.StatementError
		require.ErrorAs(t, err, &se)
		require.Equal(t, c.index, se.Index)
	}
	got, err := s.ReadStream(ctx, nil, "job:q")
	require.NoError(t, err)
	require.Len(t, got, 4, "a failed statement leaves no event")
}

func TestConcurrentAppendsToOneStream(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	const writers, rounds = 50, 4

	for round := range rounds {
		var (
			wg        sync.WaitGroup
			mu        sync.Mutex
			winners   []int
			conflicts int
			others    []error
		)
		start := make(chan struct{})
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := s.Append(ctx, "job:race", round, ev("RACE", w))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					winners = append(winners, w)
				case errors.Is(err, eventstore.ErrConflict):
					conflicts++
				default:
					others = append(others, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		require.Empty(t, others)
		require.Len(t, winners, 1, "round %d", round)
		require.Equal(t, writers-1, conflicts, "round %d", round)
	}

	got, err := s.ReadStream(ctx, nil, "job:race")
	require.NoError(t, err)
	require.Len(t, got, rounds)
	for i, r := range got {
		require.Equal(t, i+1, r.Version, "gap-free versions")
	}
}

func TestEventsAreImmutable(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	_, err := s.Append(ctx, "job:i", eventstore.NoStream, ev("A", 1))
	require.NoError(t, err)

	for _, stmt := range []string{
		`UPDATE events SET type = 'B'`,
		`UPDATE events SET data = '{}' WHERE stream_id = 'job:i'`,
		`DELETE FROM events`,
		`DELETE FROM events WHERE stream_id = 'job:i'`,
		`TRUNCATE events`,
	} {
		_, err := s.Pool().Exec(ctx, stmt)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, stmt)
		require.Equal(t, "23001", pgErr.Code, stmt) // restrict_violation
	}
	got, err := s.ReadStream(ctx, nil, "job:i")
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, domain.EventType("A"), got[0].Type)
}

func readAllFrom(t *testing.T, s *eventstore.Store, cur *eventstore.Cursor) []eventstore.Record {
	t.Helper()
	recs, err := s.ReadAll(context.Background(), nil, *cur, 1000)
	require.NoError(t, err)
	if len(recs) > 0 {
		*cur = recs[len(recs)-1].Cursor()
	}
	return recs
}

// readN reads from cur until n events have arrived. Transaction ids are
// cluster-wide, so a transaction of a parallel test in another database can
// hold the snapshot's xmin back for a moment: the reader then sees events
// later, never fewer and never twice.
func readN(t *testing.T, s *eventstore.Store, cur *eventstore.Cursor, n int) []eventstore.Record {
	t.Helper()
	var got []eventstore.Record
	deadline := time.Now().Add(15 * time.Second)
	for len(got) < n {
		require.True(t, time.Now().Before(deadline), "read %d of %d events before the deadline", len(got), n)
		recs := readAllFrom(t, s, cur)
		if len(recs) == 0 {
			runtime.Gosched()
			time.Sleep(5 * time.Millisecond) // poll interval while waiting on the condition, not synchronisation
		}
		got = append(got, recs...)
	}
	require.Len(t, got, n, "no more than expected")
	return got
}

// TestReadAllNeverSkipsLateCommit holds an append transaction open while a
// later one commits. The reader moves past the later event (its position is
// higher), and still receives the late one once it commits, exactly once.
func TestReadAllNeverSkipsLateCommit(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	_, err := s.Append(ctx, "job:first", eventstore.NoStream, ev("FIRST", 0))
	require.NoError(t, err)

	// txB takes its transaction id first, txA second; then txA appends
	// (the lower position) and stays open while txB appends and commits.
	txB, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	defer txB.Rollback(ctx) //nolint:errcheck
	_, err = txB.Exec(ctx, `SELECT pg_current_xact_id()`)
	require.NoError(t, err)
	txA, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	defer txA.Rollback(ctx) //nolint:errcheck
	lateRecs, err := s.AppendTx(ctx, txA, "job:late", eventstore.NoStream, ev("LATE", 1))
	require.NoError(t, err)
	laterRecs, err := s.AppendTx(ctx, txB, "job:later", eventstore.NoStream, ev("LATER", 2))
	require.NoError(t, err)
	require.NoError(t, txB.Commit(ctx))
	require.Less(t, lateRecs[0].Position, laterRecs[0].Position)

	var cur eventstore.Cursor
	got := readN(t, s, &cur, 2)
	require.Equal(t, []string{"job:first", "job:later"}, streams(got))
	require.Equal(t, laterRecs[0].Position, cur.Position, "the reader moved past the late event's position")

	// A naive reader by position alone would now skip the late event.
	var naive int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM events WHERE position > $1`, cur.Position).Scan(&naive))
	require.Zero(t, naive)

	require.NoError(t, txA.Commit(ctx))
	got = readN(t, s, &cur, 1)
	require.Equal(t, []string{"job:late"}, streams(got))
	require.Empty(t, readAllFrom(t, s, &cur), "exactly once")
}

// TestReadAllWaitsForOpenTransaction: while an older transaction is open,
// later commits are held back, then all arrive in order, each once.
func TestReadAllWaitsForOpenTransaction(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	txA, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	defer txA.Rollback(ctx) //nolint:errcheck
	_, err = s.AppendTx(ctx, txA, "job:open", eventstore.NoStream, ev("OPEN", 1))
	require.NoError(t, err)
	for i := range 5 {
		_, err := s.Append(ctx, fmt.Sprintf("job:c%d", i), eventstore.NoStream, ev("C", i))
		require.NoError(t, err)
	}
	var cur eventstore.Cursor
	require.Empty(t, readAllFrom(t, s, &cur))
	require.NoError(t, txA.Commit(ctx))
	got := readN(t, s, &cur, 6)
	require.Equal(t, []string{"job:open", "job:c0", "job:c1", "job:c2", "job:c3", "job:c4"}, streams(got))
	require.Empty(t, readAllFrom(t, s, &cur))

	// The public cursor is a position: resuming from any returned position
	// yields exactly the rest.
	c2, err := s.CursorAt(ctx, got[2].Position)
	require.NoError(t, err)
	rest, err := s.ReadAll(ctx, nil, c2, 100)
	require.NoError(t, err)
	require.Equal(t, streams(got[3:]), streams(rest))
	_, err = s.CursorAt(ctx, 999999)
	require.ErrorIs(t, err, domain.ErrNotFound)
}

func TestReadAllBatchesInOrder(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	const n = 250
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Append(ctx, fmt.Sprintf("job:%d", i), eventstore.NoStream, ev("E", i))
			require.NoError(t, err)
		}()
	}
	wg.Wait()
	seen := map[int64]bool{}
	var cur eventstore.Cursor
	deadline := time.Now().Add(15 * time.Second)
	for len(seen) < n {
		require.True(t, time.Now().Before(deadline), "read %d of %d", len(seen), n)
		recs, err := s.ReadAll(ctx, nil, cur, 7)
		require.NoError(t, err)
		if len(recs) == 0 {
			time.Sleep(5 * time.Millisecond) // poll interval while waiting on the condition
			continue
		}
		for i, r := range recs {
			require.False(t, seen[r.Position], "position %d read twice", r.Position)
			seen[r.Position] = true
			if i > 0 {
				prev := recs[i-1]
				require.True(t, prev.TxID < r.TxID || prev.TxID == r.TxID && prev.Position < r.Position,
					"log order is (transaction id, position) as numbers: %v then %v", prev.Cursor(), r.Cursor())
			}
		}
		cur = recs[len(recs)-1].Cursor()
	}
	require.Len(t, seen, n)
}

// TestReadAllOrdersTransactionIDsAsNumbers: transaction ids of different
// lengths must sort as numbers (999 before 1000), not as text. The rows
// carry chosen, long-finished transaction ids.
func TestReadAllOrdersTransactionIDsAsNumbers(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	_, err := s.Pool().Exec(ctx, `INSERT INTO events (tx_id, stream_id, version, type)
		VALUES ('1000', 'job:b', 1, 'B'), ('999', 'job:a', 1, 'A'), ('10', 'job:c', 1, 'C')`)
	require.NoError(t, err)
	var cur eventstore.Cursor
	got := readN(t, s, &cur, 3)
	require.Equal(t, []string{"job:c", "job:a", "job:b"}, streams(got))
	// And resuming after 999 still yields 1000.
	c, err := s.CursorAt(ctx, got[1].Position)
	require.NoError(t, err)
	rest, err := s.ReadAll(ctx, nil, c, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"job:b"}, streams(rest))
}

func streams(recs []eventstore.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.StreamID
	}
	return out
}

// TestSharedAppendPlanProbesTheIndex pins the plan a connection caches for
// the shared append while the log is still empty: it must probe the
// (stream_id, version) index (and read the base event's transaction id) of the partitions a row's stream can be in,
// never scan or hash the log, or every later append reads the whole log as
// it grows.
func TestSharedAppendPlanProbesTheIndex(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	conn, err := s.Pool().Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()

	_, err = conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "PREPARE shared_append AS "+eventstore.AppendsSQL)
	require.NoError(t, err)
	rows, err := conn.Query(ctx, `EXPLAIN EXECUTE shared_append('{job:a}', '{1}', '{2}', '{A}', '{"{}"}', '{"{}"}')`)
	require.NoError(t, err)
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	text := strings.Join(plan, "\n")
	require.Regexp(t, `Index Scan using events_kept_stream_id_version_stream_at_key`, text)
	require.Regexp(t, `Index Scan using events_p\d{8}_\d{6}_stream_id_version_stream_at_key`, text)
	require.NotContains(t, text, "Seq Scan on events", text)
	require.NotContains(t, text, "hashed SubPlan", text)
}

// TestGenericPlansProbeTheIndexOfASmallLog: the plans a connection caches
// under AppendAll's settings, made while the log is small and analysed (a
// fresh database, or a day's partition just after autovacuum first looked
// at it), must still probe the (stream_id, version) index. On such
// statistics a scan of a page or two costs less than an index probe, and
// a generic plan that scans keeps scanning as the log grows: the shared
// append went from 1 to 2,600 ms a statement within one 20,000-job burst.
func TestGenericPlansProbeTheIndexOfASmallLog(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	for i := range 40 {
		_, err := s.Append(ctx, fmt.Sprintf("job:%019d", i), eventstore.NoStream, ev("A", i), ev("B", i))
		require.NoError(t, err)
	}
	_, err := s.Pool().Exec(ctx, "VACUUM (ANALYZE) events")
	require.NoError(t, err)

	for _, q := range []struct{ name, prepared, sql, args string }{
		{"the shared append", "shared_append", eventstore.AppendsSQL, `('{job:a}', '{1}', '{2}', '{A}', '{"{}"}', '{"{}"}')`},
		{"a stream's read", "read_stream", eventstore.ReadStreamSQL, `('job:a')`},
	} {
		t.Run(q.name, func(t *testing.T) {
			tx, err := s.Pool().Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			for _, set := range eventstore.GenericPlans {
				_, err = tx.Exec(ctx, set)
				require.NoError(t, err)
			}
			_, err = tx.Exec(ctx, "PREPARE "+q.prepared+" AS "+q.sql)
			require.NoError(t, err)
			rows, err := tx.Query(ctx, "EXPLAIN EXECUTE "+q.prepared+q.args)
			require.NoError(t, err)
			plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
			require.NoError(t, err)
			text := strings.Join(plan, "\n")
			require.Regexp(t, `(Index (Only )?Scan using|Bitmap Index Scan on) events_kept_stream_id_version_stream_at_key`, text)
			require.NotContains(t, text, "Seq Scan on events", text)
		})
	}
}

// readInto is a statement sql of AppendAll's that reads its one text
// column into dst.
func readInto(sql string, dst *string) eventstore.Statement {
	return eventstore.Statement{SQL: sql, Rows: func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{dst}, func() error { return nil })
		return err
	}}
}

// TestBracketStatementsHaveTheirOwnText: what runs on generic plans made
// in the bracket is sent under a text of its own, so that a plan the
// connection made for the same statement outside it (with sequential
// scans on, kept after five runs) is never the one used inside.
func TestBracketStatementsHaveTheirOwnText(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	for _, generic := range []bool{false, true} {
		b := &pgx.Batch{}
		eventstore.QueueReadStreams(b, []string{"job:a"}, generic)
		var reads []string
		for _, q := range b.QueuedQueries {
			if strings.HasPrefix(q.SQL, eventstore.ReadStreamSQL) {
				reads = append(reads, q.SQL)
			}
		}
		want := eventstore.ReadStreamSQL
		if generic {
			want += eventstore.InBracket
		}
		require.Equal(t, []string{want}, reads, "generic %v", generic)
	}

	tx, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	var text string
	require.NoError(t, s.AppendAll(ctx, tx, []eventstore.Statement{readInto("SELECT current_query()", &text)},
		[]eventstore.StreamAppend{{Stream: "job:own", Expected: eventstore.NoStream, Events: []domain.Event{ev("A", 0)}}}, nil))
	require.Equal(t, "SELECT current_query()"+eventstore.InBracket, text)
}

// TestAppendAllRunsOnGenericPlans: AppendAll's statements run on generic
// plans (their custom plans cost more to make than to run), and the rest
// of the transaction, and the connection after it, plan as before.
func TestAppendAllRunsOnGenericPlans(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	conn, err := s.Pool().Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	mode := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) (m string) {
		require.NoError(t, q.QueryRow(ctx, "SHOW plan_cache_mode").Scan(&m))
		return m
	}
	appendIn := func(expected int) string {
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		var m string
		show := readInto("SHOW plan_cache_mode", &m)
		require.NoError(t, s.AppendAll(ctx, tx, nil, []eventstore.StreamAppend{{Stream: "job:g", Expected: expected, Events: []domain.Event{ev("A", 0)}}},
			[]eventstore.Statement{show}))
		require.Equal(t, "auto", mode(tx), "the rest of the transaction")
		require.NoError(t, tx.Commit(ctx))
		return m
	}
	require.Equal(t, "force_generic_plan", appendIn(eventstore.NoStream), "a new stream's append")
	require.Equal(t, "force_generic_plan", appendIn(1), "the shared append")
}

// TestAppendOntoAYoungerTransactionConflicts: a transaction that took its
// id, then meets a stream whose last event a younger transaction committed
// meanwhile, may not append after it (its event would come first in the
// log's order, before the version it follows); both appends answer a
// conflict, and a new transaction appends.
func TestAppendOntoAYoungerTransactionConflicts(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	_, err := s.Append(ctx, "job:y", eventstore.NoStream, ev("A", 1))
	require.NoError(t, err)
	for name, appendOnto := range map[string]func(tx pgx.Tx, expected int) error{
		"AppendTx": func(tx pgx.Tx, expected int) error {
			_, err := s.AppendTx(ctx, tx, "job:y", expected, ev("OLD", 0))
			return err
		},
		"AppendAll": func(tx pgx.Tx, expected int) error {
			return s.AppendAll(ctx, tx, nil, []eventstore.StreamAppend{{Stream: "job:y", Expected: expected, Events: []domain.Event{ev("OLD", 0)}}}, nil)
		},
	} {
		older, err := s.Pool().Begin(ctx)
		require.NoError(t, err)
		defer older.Rollback(ctx) //nolint:errcheck // a failed check leaves it open
		_, err = older.Exec(ctx, `INSERT INTO events (stream_id, version, type, data, metadata, stream_at)
			VALUES ('other:'||pg_current_xact_id()::text, 1, 'X', '{}', '{}', '-infinity')`) // its first write takes its id
		require.NoError(t, err)
		got, err := s.ReadStream(ctx, nil, "job:y")
		require.NoError(t, err)
		last := len(got)
		_, err = s.Append(ctx, "job:y", last, ev("YOUNG", 0)) // a younger transaction commits
		require.NoError(t, err)
		require.ErrorIs(t, appendOnto(older, last+1), eventstore.ErrConflict, "%s onto the younger event", name)
		require.NoError(t, older.Rollback(ctx))
		require.NoError(t, pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error { return appendOnto(tx, last+1) }), "%s in a new transaction", name)
	}
	got, err := s.ReadStream(ctx, nil, "job:y")
	require.NoError(t, err)
	for i := 1; i < len(got); i++ {
		require.Less(t, got[i-1].TxID, got[i].TxID, "each version of a later transaction")
	}
	require.Len(t, got, 5)
}

// TestRetryTxRunsAgainAfterAYoungerAppend: a transaction that wrote
// before it appends at Any to a stream a younger transaction appended to
// meanwhile is refused; RetryTx runs it again in a new transaction, where
// the append goes in after the younger one's.
func TestRetryTxRunsAgainAfterAYoungerAppend(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	_, err := s.Append(ctx, "policy:ns", eventstore.NoStream, ev("A", 1))
	require.NoError(t, err)
	runs := 0
	require.NoError(t, s.RetryTx(ctx, func(tx pgx.Tx) error {
		runs++
		if _, err := tx.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil { // its first write
			return err
		}
		if runs == 1 {
			if _, err := s.Append(ctx, "policy:ns", eventstore.Any, ev("YOUNG", 2)); err != nil {
				return err
			}
		}
		_, err := s.AppendTx(ctx, tx, "policy:ns", eventstore.Any, ev("MINE", 3))
		return err
	}))
	require.Equal(t, 2, runs, "refused once, then in a new transaction")
	got, err := s.ReadStream(ctx, nil, "policy:ns")
	require.NoError(t, err)
	require.Equal(t, []string{"A", "YOUNG", "MINE"}, []string{string(got[0].Type), string(got[1].Type), string(got[2].Type)})
	require.Less(t, got[1].TxID, got[2].TxID)
}
