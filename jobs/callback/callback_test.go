package callback

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/pgtest"
	"github.com/agentreach/agentreach/jobs/jobstore"
	"github.com/agentreach/agentreach/webhook"
)

// queued is a jobstore.Queue that keeps what it was asked for.
type queued struct {
	mu   sync.Mutex
	jobs []jobstore.Enqueued
}

func (q *queued) InsertTx(_ context.Context, _ pgx.Tx, jobs []jobstore.Enqueued) ([]int64, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		q.jobs = append(q.jobs, j)
		ids[i] = int64(len(q.jobs))
	}
	return ids, nil
}

func (q *queued) callbacks(jobID string) (n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, j := range q.jobs {
		if j.Kind == jobstore.EnqueueCallback && j.JobID == jobID {
			n++
		}
	}
	return n
}

// noPushes: no job here was submitted over A2A.
type noPushes struct{}

func (noPushes) Uses(context.Context, *jobstore.Loaded) (bool, error) { return false, nil }
func (noPushes) Deliver(context.Context, *jobstore.Loaded, Try) error { panic("no A2A job here") }

var key = []byte("a callback key of thirty-two byt")

type fixture struct {
	events *eventstore.Store
	jobs   *jobstore.Store
	queue  *queued
	sender *Sender
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	pool := pgtest.NewPool(t)
	f := fixture{events: eventstore.New(pool), queue: &queued{}}
	f.jobs = jobstore.New(pool, f.events, f.queue, jobstore.Config{LostAfter: 10 * time.Second, CallbackGrace: 45 * time.Second})
	f.sender = New(pool, f.events, f.jobs, &http.Client{}, noPushes{}, slog.New(slog.DiscardHandler),
		Config{Secret: "whsec_" + base64.StdEncoding.EncodeToString(key)})
	return f
}

// ended writes a job whose agent answered SUCCESS, with its callback to
// url due, and answers its fold.
func (f fixture) ended(t *testing.T, url string) *jobstore.Loaded {
	t.Helper()
	ctx := context.Background()
	sub := domain.Submitted{Capability: "doc:parse", Payload: json.RawMessage(`{}`), CallbackURL: url}
	require.NoError(t, domain.NormalizeSubmission(&sub, domain.DefaultMaxPayloadBytes))
	sub.JobID = uuid.Must(uuid.NewV7()).String()
	md := domain.Metadata{Actor: "test", TraceID: "0123456789abcdef0123456789abcdef"}
	evs, _ := domain.SubmitEvents(sub, false, time.Now(), time.Hour, md)
	w := &jobstore.Write{L: &jobstore.Loaded{Job: domain.Job{Submitted: domain.Submitted{JobID: sub.JobID}}}, Events: evs}
	require.NoError(t, w.Decide())
	f.jobs.Commit(ctx, []*jobstore.Write{w}, nil)
	require.NoError(t, w.Err)
	l, err := f.jobs.Load(ctx, nil, sub.JobID)
	require.NoError(t, err)
	routed := domain.NewEvent(domain.EventRouted, domain.Routed{Attempt: 1, AgentID: "a"}, md)
	require.NoError(t, f.events.InTx(ctx, func(tx pgx.Tx) error { return f.jobs.AppendTx(ctx, tx, l, domain.Effects{}, routed) }))
	now := time.Now()
	out := domain.Observation{Kind: domain.ObservedResult, Status: domain.StatusSuccess, Result: json.RawMessage(`{"ok":true}`)}
	evs, fx := domain.Delivery(&l.Job, now, out, now.Add(time.Minute), time.Millisecond, now, 0.5, domain.AttemptPolicy{}, md)
	// As a dispatcher records it: the callback is its own to make at once.
	require.NoError(t, f.jobs.Write(ctx, &jobstore.Write{L: l, Events: evs, Effects: fx, CallbackNow: true}))
	require.Equal(t, domain.StatusSuccess, l.Status)
	require.Zero(t, f.queue.callbacks(l.JobID))
	return l
}

func lastEvent(t *testing.T, f fixture, id string) (*jobstore.Loaded, domain.EventType) {
	t.Helper()
	l, err := f.jobs.Load(context.Background(), nil, id)
	require.NoError(t, err)
	return l, l.Records[len(l.Records)-1].Type
}

// TestTryAcknowledged: the try made at once posts the job's outcome to
// its caller, signed with the namespace's secret, and records
// CALLBACK_DELIVERED; nothing is queued for River.
func TestTryAcknowledged(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	got := make(chan error, 1)
	var body Body
	caller := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &body)
		got <- webhook.Verify(key, r.Header, b, time.Now(), 5*time.Minute)
	}))
	defer caller.Close()
	l := f.ended(t, caller.URL)

	require.NoError(t, f.sender.Try(context.Background(), l, Try{Cause: "test"}))
	require.NoError(t, <-got, "the callback is signed with the namespace's secret")
	require.Equal(t, l.JobID, body.JobID)
	require.Equal(t, domain.StatusSuccess, body.Status)
	require.Equal(t, l.TraceID, body.TraceID)
	after, last := lastEvent(t, f, l.JobID)
	require.Equal(t, domain.EventCallbackSent, last)
	require.True(t, after.CallbackAcked)
	require.Zero(t, f.queue.callbacks(l.JobID))
}

// TestTryNotAcknowledged: a caller that does not acknowledge the try made
// at once gets its callback from River (a callback job is queued in the
// same transaction as CALLBACK_FAILED); River's last try that fails too is
// final, and an error for River.
func TestTryNotAcknowledged(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	caller := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer caller.Close()
	l := f.ended(t, caller.URL)
	ctx := context.Background()

	require.NoError(t, f.sender.Try(ctx, l, Try{Cause: "test"}))
	after, last := lastEvent(t, f, l.JobID)
	require.Equal(t, domain.EventCallbackFailed, last)
	require.False(t, after.CallbackAcked)
	require.Equal(t, 1, f.queue.callbacks(l.JobID), "River takes the callback over")

	require.Error(t, f.sender.Try(ctx, after, Try{Attempt: 3, Max: 3, Cause: "river:1"}))
	final, last := lastEvent(t, f, l.JobID)
	require.Equal(t, domain.EventCallbackFailed, last)
	var co domain.CallbackOutcome
	require.NoError(t, json.Unmarshal(final.Records[len(final.Records)-1].Data, &co))
	require.True(t, co.Final)
	require.Equal(t, 500, co.StatusCode)
	require.Equal(t, 1, f.queue.callbacks(l.JobID), "a River try queues nothing more")
}

// TestNowQueuesABurstBeyondItsSenders: callbacks made at once beyond
// callbacksNow wait in the process for a sender, and only past the queue's
// room go to River; once the caller answers, every queued one is sent and
// recorded by the process.
func TestNowQueuesABurstBeyondItsSenders(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const room, beyond = 2, 3
	f.sender.queued = make(chan queuedTry, room)
	gate := make(chan struct{})
	var arrived sync.WaitGroup
	arrived.Add(callbacksNow)
	var mu sync.Mutex
	seen := 0
	caller := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if seen++; seen <= callbacksNow {
			arrived.Done()
		}
		mu.Unlock()
		<-gate
	}))
	defer caller.Close()
	var ls []*jobstore.Loaded
	for range callbacksNow + room + beyond {
		ls = append(ls, f.ended(t, caller.URL))
	}
	for _, l := range ls {
		f.sender.Now(context.Background(), l, "test")
	}
	arrived.Wait() // every sender is busy
	byRiver := 0
	for _, l := range ls {
		byRiver += f.queue.callbacks(l.JobID)
	}
	require.Equal(t, beyond, byRiver, "only what the queue has no room for goes to River")
	close(gate)
	for _, l := range ls[:callbacksNow+room] {
		require.Eventually(t, func() bool {
			after, _ := lastEvent(t, f, l.JobID)
			return after.CallbackAcked
		}, 10*time.Second, 10*time.Millisecond, "job %s is called back by the process", l.JobID)
		require.Zero(t, f.queue.callbacks(l.JobID))
	}
}
