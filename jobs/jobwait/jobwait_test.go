package jobwait

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/pgtest"
	"github.com/agentreach/agentreach/jobs/jobstore"
)

// TestEndedHandsTheFoldToItsWaits: a commit of this process that ended a
// job wakes the waits for that job at once, with the job's fold (no read
// of the log: the job here has no stream at all), and no other wait.
func TestEndedHandsTheFoldToItsWaits(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	h := New(eventstore.New(pool), pool, 2, slog.New(slog.DiscardHandler))
	id, other := uuid.Must(uuid.NewV7()).String(), uuid.Must(uuid.NewV7()).String()
	w, err := h.Reserve("key")
	require.NoError(t, err)
	defer w.Close()
	w.Watch(id)
	o, err := h.Reserve("key")
	require.NoError(t, err)
	defer o.Close()
	o.Watch(other)
	_, err = h.Reserve("key")
	require.ErrorIs(t, err, ErrTooManyWaits)

	ended := &jobstore.Loaded{}
	ended.JobID, ended.Status = id, domain.StatusSuccess
	h.Ended(ended)
	require.True(t, w.Until(context.Background(), time.Now().Add(10*time.Second)), "woken by the end")
	require.Same(t, ended, w.Fold())
	require.False(t, o.Until(context.Background(), time.Now().Add(50*time.Millisecond)), "another job's wait sleeps on")
	require.Nil(t, o.Fold())
}

// TestWatchMovesToTheNewJob: a wait that watches another job stops
// watching the first (a submit whose Idempotency-Key answered an earlier
// job watches that one instead of the id it was given).
func TestWatchMovesToTheNewJob(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	h := New(eventstore.New(pool), pool, 1, slog.New(slog.DiscardHandler))
	first, second := uuid.Must(uuid.NewV7()).String(), uuid.Must(uuid.NewV7()).String()
	w, err := h.Reserve("key")
	require.NoError(t, err)
	defer w.Close()
	w.Watch(first)
	w.Watch(second)
	end := func(id string) *jobstore.Loaded {
		l := &jobstore.Loaded{}
		l.JobID, l.Status = id, domain.StatusSuccess
		h.Ended(l)
		return l
	}
	end(first)
	require.False(t, w.Until(context.Background(), time.Now().Add(50*time.Millisecond)), "the first job's end wakes it no more")
	// Moved away from a job that had ended, it keeps nothing of that end.
	w.Watch(first)
	end(first)
	w.Watch(second)
	require.Nil(t, w.Fold(), "the first job's fold is dropped with its watch")
	require.False(t, w.Until(context.Background(), time.Now().Add(50*time.Millisecond)), "nor its wake-up")
	ended := end(second)
	require.True(t, w.Until(context.Background(), time.Now().Add(10*time.Second)))
	require.Same(t, ended, w.Fold())
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Len(t, h.waits, 1, "one stream watched")
}
