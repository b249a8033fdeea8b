package eventstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/domain"
)

// Reads beyond one stream, for the projections, the verifier and the
// tools: the event table is read here and nowhere else.

// ReadStreams calls fn for every event of every stream whose id starts with
// prefix, stream by stream and each in version order, reading in pages so
// that the log need not fit in memory. fn's error stops the read.
func (s *Store) ReadStreams(ctx context.Context, q Querier, prefix string, fn func(Record) error) error {
	if q == nil {
		q = s.pool
	}
	const page = 5000
	lastStream, lastVersion := "", 0
	for {
		rows, err := q.Query(ctx, `SELECT `+recordColumns+` FROM events
			WHERE starts_with(stream_id, $1) AND (stream_id, version) > ($2, $3)
			ORDER BY stream_id, version LIMIT $4`, prefix, lastStream, lastVersion, page)
		if err != nil {
			return fmt.Errorf("read streams %s*: %w", prefix, err)
		}
		recs, err := scanRecords(rows)
		if err != nil {
			return fmt.Errorf("read streams %s*: %w", prefix, err)
		}
		for _, r := range recs {
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(recs) < page {
			return nil
		}
		lastStream, lastVersion = recs[len(recs)-1].StreamID, recs[len(recs)-1].Version
	}
}

// FirstOfType returns, for each of streams, its first event of type t
// (version 1 when t is the stream's opening event); streams without one are
// absent. Each stream is read from its start in version order, so the
// cost grows with the streams asked for and how far into them t comes,
// not with the log (a filter on type alone would read every event of
// type t ever appended).
func FirstOfType(ctx context.Context, q Querier, streams []string, t domain.EventType) (map[string]Record, error) {
	rows, err := q.Query(ctx, `SELECT e.* FROM unnest($1::text[]) AS s(stream_id),
		LATERAL (SELECT `+recordColumns+` FROM events WHERE stream_id = s.stream_id AND type = $2
			AND stream_at IN (events_stream_at(s.stream_id), '-infinity') ORDER BY version LIMIT 1) e`,
		streams, string(t))
	if err != nil {
		return nil, fmt.Errorf("first %s of %d streams: %w", t, len(streams), err)
	}
	recs, err := scanRecords(rows)
	if err != nil {
		return nil, fmt.Errorf("first %s of %d streams: %w", t, len(streams), err)
	}
	out := make(map[string]Record, len(recs))
	for _, r := range recs {
		out[r.StreamID] = r
	}
	return out, nil
}

// ReadStreamsOf reads every event of each of streams, each stream in
// version order, in one round trip (QueueReadStreams); a stream with none
// is absent.
func ReadStreamsOf(ctx context.Context, q BatchQuerier, streams []string) (map[string][]Record, error) {
	b := &pgx.Batch{}
	_, inTx := q.(pgx.Tx)
	out := QueueReadStreams(b, streams, inTx)
	if b.Len() > 0 {
		if err := q.SendBatch(ctx, b).Close(); err != nil {
			return nil, fmt.Errorf("read %d streams: %w", len(streams), err)
		}
	}
	for stream, recs := range out {
		if len(recs) == 0 {
			delete(out, stream)
		}
	}
	return out, nil
}

// QueueReadStreams queues in b a read of each of streams (ReadStream's
// query), and answers the map each stream's events go into, in version
// order, once b is sent (a stream with none has none there). Each read
// sees the log as of its own statement, not all at one instant: a writer
// that decides on them appends at the versions it read, as every writer
// does. With generic (in a transaction only) they run on the query's
// generic plan, made once a connection, as AppendAll's statements do
// (whose generic plans lock every partition of the log already).
//
// One query over unnest($1) with a LATERAL read of each stream was planned
// afresh at every run: its generic plan, not knowing the array's length,
// looks dearer than a custom one, so PostgreSQL never kept it, and a plan
// of a read of every partition took 1 ms with a handful of them, more
// than the read.
func QueueReadStreams(b *pgx.Batch, streams []string, generic bool) map[string][]Record {
	out := make(map[string][]Record, len(streams))
	if len(streams) == 0 {
		return out
	}
	if generic {
		queueAll(b, genericPlans)
	}
	for _, stream := range streams {
		if _, queued := out[stream]; queued {
			continue
		}
		out[stream] = nil
		sql := qReadStream
		if generic {
			sql += inBracket
		}
		b.Queue(sql, stream).Query(func(rows pgx.Rows) error {
			recs, err := scanRecords(rows)
			out[stream] = recs
			return err
		})
	}
	if generic {
		queueAll(b, customPlans)
	}
	return out
}

// Last returns the newest event of stream, and false when it has none.
func Last(ctx context.Context, q Querier, stream string) (Record, bool, error) {
	rows, err := q.Query(ctx, `SELECT `+recordColumns+` FROM events WHERE stream_id = $1 AND `+inStream+` ORDER BY version DESC LIMIT 1`, stream)
	if err != nil {
		return Record{}, false, fmt.Errorf("last event of %s: %w", stream, err)
	}
	recs, err := scanRecords(rows)
	if err != nil || len(recs) == 0 {
		return Record{}, false, err
	}
	return recs[0], true, nil
}

// CountEvents counts the events of the whole log, as q sees it.
func CountEvents(ctx context.Context, q Querier) (int64, error) {
	var n int64
	if err := q.QueryRow(ctx, `SELECT count(*) FROM events`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count events: %w", err)
	}
	return n, nil
}

// CountStreams counts the streams whose id starts with prefix.
func CountStreams(ctx context.Context, q Querier, prefix string) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT count(DISTINCT stream_id) FROM events WHERE starts_with(stream_id, $1)`, prefix).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count streams %s*: %w", prefix, err)
	}
	return n, nil
}

// LastPosition is the position of the log's latest event (0 when empty):
// where a reader that wants only what comes next starts.
func LastPosition(ctx context.Context, q Querier) (int64, error) {
	var p int64
	if err := q.QueryRow(ctx, `SELECT coalesce(max(position), 0) FROM events`).Scan(&p); err != nil {
		return 0, fmt.Errorf("last position: %w", err)
	}
	return p, nil
}

// ReadStreamVersions reads stream's events from version from to version
// to, in version order, in q.
func ReadStreamVersions(ctx context.Context, q Querier, stream string, from, to int) ([]Record, error) {
	rows, err := q.Query(ctx, `SELECT `+recordColumns+` FROM events WHERE stream_id = $1 AND `+inStream+`
		AND version BETWEEN $2 AND $3 ORDER BY version`, stream, from, to)
	if err != nil {
		return nil, fmt.Errorf("read stream %s versions %d to %d: %w", stream, from, to, err)
	}
	recs, err := scanRecords(rows)
	if err != nil {
		return nil, fmt.Errorf("read stream %s versions %d to %d: %w", stream, from, to, err)
	}
	return recs, nil
}
