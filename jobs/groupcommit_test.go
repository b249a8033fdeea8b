package jobs

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
)

// TestSubmitsShareATransaction: submits committed together each get their
// job, a repeat of one with the same Idempotency-Key gets that job (its
// events not yet written when it is decided), another request with the
// key is a conflict, and a refused one (a parent that is not there) fails
// alone.
func TestSubmitsShareATransaction(t *testing.T) {
	t.Parallel()
	s := newService(t)
	ctx := context.Background()
	sub := func(payload, key, parent string) *batchItem {
		x := domain.Submitted{Capability: "doc:parse", Payload: json.RawMessage(payload), IdempotencyKey: key, ParentJobID: parent}
		require.NoError(t, s.prepare(ctx, &x))
		return newBatchItem(ctx, x, domain.Metadata{Actor: "test", TraceID: "t-" + x.JobID})
	}
	items := []*batchItem{sub(`{"a":1}`, "k", ""), sub(`{"b":1}`, "", ""), sub(`{"a":1}`, "k", ""), sub(`{"a":2}`, "k", ""),
		sub(`{}`, "", "01a23acf-8639-7529-a70c-e02d5e1ff409")}
	s.commitSubmits(ctx, items)
	var got []batchResult
	for _, it := range items {
		got = append(got, <-it.done)
	}
	require.NoError(t, got[0].err)
	require.NoError(t, got[1].err)
	require.NotEqual(t, got[0].res.JobID, got[1].res.JobID)
	require.NoError(t, got[2].err)
	require.Equal(t, got[0].res.JobID, got[2].res.JobID, "the repeat gets the first's job")
	require.True(t, got[2].res.Existing)
	require.ErrorIs(t, got[3].err, ErrConflict, "the key with another request")
	var fe *domain.FieldError
	require.ErrorAs(t, got[4].err, &fe, "no such parent")
	for i, want := range map[int]bool{0: true, 1: true, 2: false, 3: false, 4: false} { // the repeat's own id stays unused
		_, err := s.Load(ctx, nil, items[i].sub.JobID)
		require.Equal(t, want, err == nil, "job of item %d written", i)
	}
}

// TestRepeatedKeyGoesToTheFirstToArrive: of two submits with one
// Idempotency-Key and different bodies in one transaction, the one that
// came first gets the job, whatever their job ids' order.
func TestRepeatedKeyGoesToTheFirstToArrive(t *testing.T) {
	t.Parallel()
	s := newService(t)
	ctx := context.Background()
	sub := func(payload string) *batchItem {
		x := domain.Submitted{Capability: "doc:parse", Payload: json.RawMessage(payload), IdempotencyKey: "k"}
		require.NoError(t, s.prepare(ctx, &x))
		return newBatchItem(ctx, x, domain.Metadata{Actor: "test"})
	}
	early, late := sub(`{"n":1}`), sub(`{"n":2}`) // late's job id sorts after early's
	s.commitSubmits(ctx, []*batchItem{late, early})
	got, first := <-early.done, <-late.done
	require.NoError(t, first.err, "the first to arrive gets the job")
	require.ErrorIs(t, got.err, ErrConflict, "the other request with the key")
}

// TestRepeatedKeyOfARefusedSubmit: a repeat of a submit's
// Idempotency-Key in the same transaction gets that submit's answer: its
// job when it is written, its refusal when backpressure refuses it (never
// the id of a job that was not written).
func TestRepeatedKeyOfARefusedSubmit(t *testing.T) {
	t.Parallel()
	s := newServiceWith(t, Config{Watermarks: domain.Watermarks{High: 1, Low: 1, Limit: 1}})
	ctx := context.Background()
	sub := func(key string) *batchItem {
		x := domain.Submitted{Capability: "doc:parse", Payload: json.RawMessage(`{}`), IdempotencyKey: key}
		require.NoError(t, s.prepare(ctx, &x))
		return newBatchItem(ctx, x, domain.Metadata{Actor: "test"})
	}
	items := []*batchItem{sub(""), sub("k"), sub("k")}
	s.commitSubmits(ctx, items)
	got := []batchResult{<-items[0].done, <-items[1].done, <-items[2].done}
	require.NoError(t, got[0].err, "the first fills the lane")
	require.ErrorIs(t, got[1].err, ErrOverloaded)
	require.ErrorIs(t, got[2].err, ErrOverloaded, "the repeat shares the refusal")
	var keys int
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys`).Scan(&keys))
	require.Zero(t, keys, "a refused submit claims no key")
}

// TestConcurrentSubmitsOfOneKey: submits with one Idempotency-Key in
// concurrent transactions make one job: the key's lock orders them, and
// every later one answers the first's job.
func TestConcurrentSubmitsOfOneKey(t *testing.T) {
	t.Parallel()
	s := newService(t)
	ctx := context.Background()
	const n = 8
	items := make([]*batchItem, n)
	for i := range items {
		x := domain.Submitted{Capability: "doc:parse", Payload: json.RawMessage(`{"same":true}`), IdempotencyKey: "one-key"}
		require.NoError(t, s.prepare(ctx, &x))
		items[i] = newBatchItem(ctx, x, domain.Metadata{Actor: "test"})
	}
	var wg sync.WaitGroup
	for _, it := range items {
		wg.Go(func() { s.commitSubmits(ctx, []*batchItem{it}) }) // a transaction each
	}
	wg.Wait()
	jobs := map[string]int{}
	for _, it := range items {
		r := <-it.done
		require.NoError(t, r.err)
		jobs[r.res.JobID]++
	}
	require.Len(t, jobs, 1, "one job for the key")
	var streams int
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT count(DISTINCT stream_id) FROM events WHERE type = 'SUBMITTED'`).Scan(&streams))
	require.Equal(t, 1, streams)
}

// TestLoneSubmitCommitsAtOnce: a submit with nothing else waiting is
// committed without waiting for company (the window and the idle time
// are an hour), and the submits that arrived while a transaction ran
// share the next one.
func TestLoneSubmitCommitsAtOnce(t *testing.T) {
	t.Parallel()
	for _, window := range []time.Duration{time.Hour, 20 * time.Millisecond} {
		batches := make(chan []*batchItem)
		release := make(chan struct{})
		b := &batcher{items: make(chan *batchItem, 8), window: window, idle: time.Hour, maxBatch: 500,
			commit: func(_ context.Context, batch []*batchItem) {
				batches <- batch
				<-release
			}}
		ctx, cancel := context.WithCancel(context.Background())
		go b.run(ctx)
		item := func() *batchItem { return newBatchItem(ctx, domain.Submitted{}, domain.Metadata{}) }
		next := func() []*batchItem {
			select {
			case batch := <-batches:
				return batch
			case <-time.After(10 * time.Second):
				t.Fatalf("window %s: no transaction committed", window)
				return nil
			}
		}
		b.items <- item()
		require.Len(t, next(), 1, "the lone submit is committed without waiting")
		if window < time.Hour {
			for range 3 { // they arrive while the first transaction runs
				b.items <- item()
			}
			release <- struct{}{}
			require.Len(t, next(), 3, "the submits that waited share the next transaction")
		}
		cancel()
		close(release)
	}
}
