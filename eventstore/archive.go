package eventstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/domain"
)

// StoredEvent is an event exactly as the log holds it: its data and
// metadata as stored, for archives of the log and their import.
type StoredEvent struct {
	Position   int64
	TxID       uint64
	StreamID   string
	Version    int
	Type       string
	Data       json.RawMessage
	Metadata   json.RawMessage
	RecordedAt time.Time
}

// ReadSubmitted calls fn for each event of the jobs submitted in r held
// in table (the log, or one of its partitions, detached or not), in log
// position order.
func (s *Store) ReadSubmitted(ctx context.Context, table string, r domain.TimeRange, fn func(StoredEvent) error) error {
	rows, err := s.pool.Query(ctx, `SELECT position, tx_id::text, stream_id, version, type, data::text, metadata::text, recorded_at
		FROM `+pgx.Identifier{table}.Sanitize()+` WHERE stream_at >= $1 AND stream_at < $2 ORDER BY position`, r.Low, r.High)
	if err != nil {
		return fmt.Errorf("read the jobs submitted from %s to %s: %w", r.Low, r.High, err)
	}
	var e StoredEvent
	var txid, data, md string
	_, err = pgx.ForEachRow(rows, []any{&e.Position, &txid, &e.StreamID, &e.Version, &e.Type, &data, &md, &e.RecordedAt}, func() error {
		e.TxID, _ = strconv.ParseUint(txid, 10, 64)
		e.Data, e.Metadata = json.RawMessage(data), json.RawMessage(md)
		return fn(e)
	})
	if err != nil {
		return fmt.Errorf("read the jobs submitted from %s to %s: %w", r.Low, r.High, err)
	}
	return nil
}

// importSQL loads events at their own positions, in the importing
// transaction (which readers of the log see them as of); one the log
// holds already is skipped.
const importSQL = `
INSERT INTO events (position, stream_id, version, type, data, metadata, recorded_at, stream_at)
OVERRIDING SYSTEM VALUE
SELECT u.p, u.s, u.v, u.t, u.d::jsonb, u.m::jsonb, u.r, events_stream_at(u.s)
FROM unnest($1::bigint[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[], $7::timestamptz[]) AS u(p, s, v, t, d, m, r)
ON CONFLICT ON CONSTRAINT events_stream_version_key DO NOTHING`

// advanceSQL moves the log's next position past the highest it holds.
const advanceSQL = `
SELECT setval(pg_get_serial_sequence('events', 'position'),
              greatest((SELECT coalesce(max(position), 0) FROM events), (SELECT last_value FROM events_position_seq)))`

// Import writes evs (from an archive of the log) in tx at their positions,
// skipping those the log holds already, and moves the log's next position
// past them; it answers how many went in. The log must have partitions
// for their streams.
func (s *Store) Import(ctx context.Context, tx pgx.Tx, evs []StoredEvent) (int, error) {
	positions := make([]int64, len(evs))
	versions := make([]int32, len(evs))
	recorded := make([]time.Time, len(evs))
	streams, types, datas, metas := make([]string, len(evs)), make([]string, len(evs)), make([]string, len(evs)), make([]string, len(evs))
	for i, e := range evs {
		positions[i], streams[i], versions[i], types[i] = e.Position, e.StreamID, int32(e.Version), e.Type
		datas[i], metas[i], recorded[i] = string(e.Data), string(e.Metadata), e.RecordedAt
	}
	tag, err := tx.Exec(ctx, importSQL, positions, streams, versions, types, datas, metas, recorded)
	if err != nil {
		return 0, fmt.Errorf("import %d events: %w", len(evs), err)
	}
	if _, err := tx.Exec(ctx, advanceSQL); err != nil {
		return 0, fmt.Errorf("import %d events: %w", len(evs), err)
	}
	return int(tag.RowsAffected()), nil
}

// Folded reports whether every projection has folded every event of the
// jobs submitted in r held in table (the log, or one of its partitions,
// detached or not): the read models say all there is to say of them. A
// projection folds in (tx_id, position) order, so every event at or
// before its checkpoint is folded; with no checkpoint, nothing is.
func (s *Store) Folded(ctx context.Context, table string, r domain.TimeRange) (bool, error) {
	var folded bool
	err := s.pool.QueryRow(ctx, `SELECT last IS NULL OR (EXISTS (SELECT 1 FROM projection_checkpoints)
		AND NOT EXISTS (SELECT 1 FROM projection_checkpoints c WHERE (c.tx_id, c.position) < last)) FROM (SELECT
		(SELECT (e.tx_id, e.position) FROM `+pgx.Identifier{table}.Sanitize()+` e
		 WHERE e.stream_at >= $1 AND e.stream_at < $2 ORDER BY e.tx_id DESC, e.position DESC LIMIT 1) AS last) AS x`,
		r.Low, r.High).Scan(&folded)
	if err != nil {
		return false, fmt.Errorf("folded, %s: %w", table, err)
	}
	return folded, nil
}

// Held is how many events of the jobs submitted in r table holds, and the
// first and last of their positions.
func (s *Store) Held(ctx context.Context, table string, r domain.TimeRange) (n int, first, last int64, err error) {
	err = s.pool.QueryRow(ctx, `SELECT count(*), coalesce(min(position), 0), coalesce(max(position), 0)
		FROM `+pgx.Identifier{table}.Sanitize()+` WHERE stream_at >= $1 AND stream_at < $2`, r.Low, r.High).Scan(&n, &first, &last)
	if err != nil {
		err = fmt.Errorf("events held in %s: %w", table, err)
	}
	return n, first, last, err
}

// HoldsStreams says whether table holds an event, of a stream whose id
// starts with prefix, of the streams of r.
func (s *Store) HoldsStreams(ctx context.Context, table string, r domain.TimeRange, prefix string) (bool, error) {
	var held bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+pgx.Identifier{table}.Sanitize()+`
		WHERE stream_at >= $1 AND stream_at < $2 AND starts_with(stream_id, $3))`, r.Low, r.High, prefix).Scan(&held)
	if err != nil {
		return false, fmt.Errorf("streams %s* in %s: %w", prefix, table, err)
	}
	return held, nil
}
