package eventstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
)

// A job's stream lives in the time partition of its id; every other
// stream in events_kept. A stale append is a conflict in either, and a
// job's events written before the log was partitioned (or by a binary
// that predates it: stream_at left to its default) are read with the rest
// of the stream and counted by its appends.
func TestStreamsLiveInTheirPartitions(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	job := domain.JobStream(uuid.Must(uuid.NewV7()).String())
	partitionOf := func(stream string) string {
		var name string
		require.NoError(t, s.Pool().QueryRow(ctx, `SELECT DISTINCT tableoid::regclass::text FROM events WHERE stream_id = $1`, stream).Scan(&name))
		return name
	}

	_, err := s.Append(ctx, job, eventstore.NoStream, ev("A", 1))
	require.NoError(t, err)
	require.Regexp(t, `^events_p\d{8}_\d{6}$`, partitionOf(job))
	_, err = s.Append(ctx, "agent:default/a", eventstore.NoStream, ev("A", 1))
	require.NoError(t, err)
	require.Equal(t, "events_kept", partitionOf("agent:default/a"))
	// A batch of direct reports lives by its batch's time, as a job does.
	batch := uuid.Must(uuid.NewV7())
	direct := domain.DirectStream(domain.AgentKey{Namespace: "default", ID: "a"}, batch.String())
	_, err = s.Append(ctx, direct, eventstore.NoStream, ev("A", 1))
	require.NoError(t, err)
	require.Equal(t, partitionOf(job), partitionOf(direct))
	sec, nsec := batch.Time().UnixTime()
	var at time.Time
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT events_stream_at($1)`, direct).Scan(&at))
	require.Equal(t, time.Unix(sec, nsec).UnixMilli(), at.UnixMilli())
	for _, other := range []string{"direct:default/a/not-a-uuid", "direct:" + batch.String(), "directory:default/a/" + batch.String()} {
		var kept bool
		require.NoError(t, s.Pool().QueryRow(ctx, `SELECT events_stream_at($1) = '-infinity'`, other).Scan(&kept))
		require.True(t, kept, "%s lives in events_kept", other)
	}

	_, err = s.Append(ctx, job, eventstore.NoStream, ev("X", 0))
	require.ErrorIs(t, err, eventstore.ErrConflict, "a conflict in a time partition")
	err = s.InTx(ctx, func(tx pgx.Tx) error {
		return s.AppendAll(ctx, tx, nil, []eventstore.StreamAppend{{Stream: job, Expected: 0, Events: []domain.Event{ev("X", 0)}}}, nil)
	})
	require.ErrorIs(t, err, eventstore.ErrConflict, "a conflict of a shared append in a time partition")

	// Version 2 as an older binary writes it: stream_at left to its default.
	_, err = s.Pool().Exec(ctx, `INSERT INTO events (stream_id, version, type) VALUES ($1, 2, 'B')`, job)
	require.NoError(t, err)
	_, err = s.Append(ctx, job, 1, ev("X", 0))
	require.ErrorIs(t, err, eventstore.ErrConflict, "the version in events_kept counts")
	_, err = s.Append(ctx, job, eventstore.Any, ev("C", 3))
	require.NoError(t, err)
	got, err := s.ReadStream(ctx, nil, job)
	require.NoError(t, err)
	var kinds []domain.EventType
	for _, r := range got {
		kinds = append(kinds, r.Type)
	}
	require.Equal(t, []domain.EventType{"A", "B", "C"}, kinds)
	last, ok, err := eventstore.Last(ctx, s.Pool(), job)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 3, last.Version)

	_, err = s.Pool().Exec(ctx, `DELETE FROM events WHERE stream_id = $1`, job)
	require.ErrorContains(t, err, "events are immutable", "rows of a time partition refuse change")
}

// A partition is folded by a projection once its checkpoint is at or past
// the partition's last event; one with no checkpoint has folded nothing.
func TestFolded(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	now := time.Now()
	r := domain.TimeRange{Low: now.Add(-time.Hour), High: now.Add(time.Hour)}
	folded, err := s.Folded(ctx, "events", r)
	require.NoError(t, err)
	require.True(t, folded, "no events: nothing to fold")

	recs, err := s.Append(ctx, domain.JobStream(uuid.Must(uuid.NewV7()).String()), eventstore.NoStream, ev("A", 1), ev("B", 2))
	require.NoError(t, err)
	folded, err = s.Folded(ctx, "events", r)
	require.NoError(t, err)
	require.False(t, folded, "no checkpoint: nothing folded")
	checkpoint := func(rec eventstore.Record) {
		_, err := s.Pool().Exec(ctx, `INSERT INTO projection_checkpoints (name, tx_id, position) VALUES ('jobs', $1::text::xid8, $2)
			ON CONFLICT (name) DO UPDATE SET tx_id = excluded.tx_id, position = excluded.position`, fmt.Sprint(rec.TxID), rec.Position)
		require.NoError(t, err)
	}
	checkpoint(recs[0])
	folded, err = s.Folded(ctx, "events", r)
	require.NoError(t, err)
	require.False(t, folded, "the checkpoint within the partition's last transaction, before its last event")
	checkpoint(recs[1])
	folded, err = s.Folded(ctx, "events", r)
	require.NoError(t, err)
	require.True(t, folded)
}
