package eventstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
)

// folding is a projection that writes the position of every event it folds
// into test_folded, under its name; it fails while failing is set.
type folding struct {
	name    string
	failing atomic.Bool
}

func (f *folding) Name() string { return f.name }

func (f *folding) Apply(ctx context.Context, tx pgx.Tx, batch []eventstore.Record) error {
	if f.failing.Load() {
		return errors.New("poisoned")
	}
	for _, r := range batch {
		if _, err := tx.Exec(ctx, `INSERT INTO test_folded (name, position) VALUES ($1, $2)`, f.name, r.Position); err != nil {
			return err
		}
	}
	return nil
}

func (f *folding) Reset(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `DELETE FROM test_folded WHERE name = $1`, f.name)
	return err
}

// catchUp steps p until every projection named has folded want (the log
// is readable only below the cluster's oldest open transaction, which other
// tests may hold back for a moment), and answers CatchUp's last error.
func catchUp(t *testing.T, p *eventstore.Projector, s *eventstore.Store, want []int64, names ...string) error {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := p.CatchUp(context.Background())
		done := true
		for _, n := range names {
			done = done && slices.Equal(want, folded(t, s, n))
		}
		if done {
			return err
		}
		require.True(t, time.Now().Before(deadline), "not caught up: %v", err)
		time.Sleep(10 * time.Millisecond) // poll interval while waiting on the condition
	}
}

func folded(t *testing.T, s *eventstore.Store, name string) []int64 {
	t.Helper()
	rows, err := s.Pool().Query(context.Background(), `SELECT position FROM test_folded WHERE name = $1 ORDER BY position`, name)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return out
}

// TestProjectorCatchUp: projections folded together each see every event
// once, in order, also when they stand at different places (one rebuilt,
// one caught up); one that fails holds back none of the others, and folds
// what it missed once it works again.
func TestProjectorCatchUp(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	_, err := s.Pool().Exec(ctx, `CREATE TABLE test_folded (name text, position bigint, UNIQUE (name, position))`)
	require.NoError(t, err)
	a, b, c := &folding{name: "a"}, &folding{name: "b"}, &folding{name: "c"}
	p := eventstore.NewProjector(s, slog.New(slog.NewTextHandler(io.Discard, nil)), a, b, c)
	p.BatchSize = 7 // several batches

	var all []int64
	appendSome := func(n int) {
		for i := range n {
			recs, err := s.Append(ctx, fmt.Sprintf("job:%d-%d", len(all), i), eventstore.NoStream, ev("A", i), ev("B", i))
			require.NoError(t, err)
			for _, r := range recs {
				all = append(all, r.Position)
			}
		}
	}
	appendSome(10)
	require.NoError(t, catchUp(t, p, s, all, "a", "b", "c"))
	n, err := p.CatchUp(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "each event folded once")

	// b is rebuilt from the start while a and c stand at the end.
	tx, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, b.Reset(ctx, tx))
	_, err = tx.Exec(ctx, `UPDATE projection_checkpoints SET tx_id = '0', position = 0 WHERE name = 'b'`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	appendSome(5)
	require.NoError(t, catchUp(t, p, s, all, "a", "b", "c"))

	// a fails: b and c go on, and a catches up once it works again.
	a.failing.Store(true)
	before := len(all)
	appendSome(4)
	require.ErrorContains(t, catchUp(t, p, s, all, "b", "c"), "poisoned")
	require.Equal(t, all[:before], folded(t, s, "a"))
	a.failing.Store(false)
	require.NoError(t, catchUp(t, p, s, all, "a", "b", "c"))
}

// sizing is a projection that records the size of each batch it folds.
type sizing struct {
	folding
	batches []int
}

func (z *sizing) Apply(ctx context.Context, tx pgx.Tx, batch []eventstore.Record) error {
	z.batches = append(z.batches, len(batch))
	return z.folding.Apply(ctx, tx, batch)
}

// TestProjectorBoundsBatchBytes: a batch ends once its events' data reach
// BatchBytes, so large payloads are folded a few at a time, each once, and
// an event larger than the bound alone is still folded.
func TestProjectorBoundsBatchBytes(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	_, err := s.Pool().Exec(ctx, `CREATE TABLE test_folded (name text, position bigint, UNIQUE (name, position))`)
	require.NoError(t, err)
	z := &sizing{folding: folding{name: "z"}}
	p := eventstore.NewProjector(s, slog.New(slog.NewTextHandler(io.Discard, nil)), z)
	p.BatchBytes = 2500
	big := func(n int) domain.Event {
		return domain.NewEvent("BIG", map[string]string{"blob": strings.Repeat("x", n)}, domain.Metadata{})
	}
	var all []int64
	for i, size := range []int{1000, 1000, 1000, 1000, 1000, 1000, 1000, 5000, 1000} {
		recs, err := s.Append(ctx, fmt.Sprintf("job:big-%d", i), eventstore.NoStream, big(size))
		require.NoError(t, err)
		all = append(all, recs[0].Position)
	}
	require.NoError(t, catchUp(t, p, s, all, "z"))
	require.Equal(t, len(all), sumInts(z.batches))
	for _, n := range z.batches {
		require.LessOrEqual(t, n, 3, "a batch stops once 2,500 bytes are read: %v", z.batches)
	}
}

func sumInts(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// TestProjectorFollows: a follower (a projection with no read model) is
// folded with the read models, each event once, but is not among
// Projections, so nothing snapshots or rebuilds it.
func TestProjectorFollows(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	_, err := s.Pool().Exec(ctx, `CREATE TABLE test_folded (name text, position bigint, UNIQUE (name, position))`)
	require.NoError(t, err)
	model, follower := &folding{name: "model"}, &folding{name: "follower"}
	p := eventstore.NewProjector(s, slog.New(slog.NewTextHandler(io.Discard, nil)), model)
	p.Follow(follower)
	var all []int64
	for i := range 3 {
		recs, err := s.Append(ctx, fmt.Sprintf("job:f-%d", i), eventstore.NoStream, ev("A", i))
		require.NoError(t, err)
		all = append(all, recs[0].Position)
	}
	require.NoError(t, catchUp(t, p, s, all, "model", "follower"))
	n, err := p.CatchUp(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "each event folded once")
	names := []string{}
	for _, proj := range p.Projections() {
		names = append(names, proj.Name())
	}
	require.Equal(t, []string{"model"}, names, "a follower is no read model")
}
