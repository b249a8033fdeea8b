package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/internal/pgtest"
)

func TestScratchDatabase(t *testing.T) {
	t.Parallel()
	pgtest.Reserve(t, 3)
	name := "agentreach_harness_test_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	ctx, cancel := context.WithCancel(t.Context())
	dsn, drop, err := ScratchDatabase(ctx, pgtest.AdminURL(), name)
	require.NoError(t, err)
	conn, err := pgx.Connect(t.Context(), dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var db string
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT current_database()").Scan(&db))
	require.Equal(t, name, db)
	// The drop works after the caller's context ended, and ends the
	// connections still open.
	cancel()
	drop()
	_, err = pgx.Connect(t.Context(), dsn)
	require.Error(t, err, "the database is gone")

	_, _, err = ScratchDatabase(t.Context(), pgtest.AdminURL(), "postgres")
	require.ErrorContains(t, err, "create postgres")
}

func TestUntil(t *testing.T) {
	t.Parallel()
	calls := 0
	ok, err := Until(t.Context(), time.Second, time.Millisecond, func() (bool, error) { calls++; return calls == 3, nil })
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 3, calls)

	ok, err = Until(t.Context(), 20*time.Millisecond, time.Millisecond, func() (bool, error) { return false, nil })
	require.NoError(t, err)
	require.False(t, ok, "the deadline passes")

	boom := errors.New("boom")
	_, err = Until(t.Context(), time.Second, time.Millisecond, func() (bool, error) { return false, boom })
	require.ErrorIs(t, err, boom)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = Until(ctx, time.Minute, time.Hour, func() (bool, error) { return false, nil })
	require.ErrorIs(t, err, context.Canceled)
}

func TestWaits(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		switch r.URL.Path {
		case "/readyz":
			if n < 3 {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		case "/nope":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/v1/agents":
			require.Equal(t, "HEALTHY", r.URL.Query().Get("state"))
			_, _ = io.WriteString(w, `{"agents":[{},{}]}`)
		}
	}))
	t.Cleanup(api.Close)
	require.NoError(t, WaitReady(t.Context(), api.URL+"/readyz", 10*time.Second))
	require.GreaterOrEqual(t, calls.Load(), int64(3))
	require.NoError(t, WaitAgentsHealthy(t.Context(), api.URL, 2, 10*time.Second))
	require.EqualError(t, WaitAgentsHealthy(t.Context(), api.URL, 3, 100*time.Millisecond), "agents not healthy within 100ms")
	require.EqualError(t, WaitReady(t.Context(), api.URL+"/nope", 100*time.Millisecond), api.URL+"/nope not ready within 100ms")
}

func TestSubmitAndGet(t *testing.T) {
	t.Parallel()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			require.Equal(t, "application/json", r.Header.Get("Content-Type"))
			b, _ := io.ReadAll(r.Body)
			if string(b) == "bad" {
				w.WriteHeader(http.StatusUnprocessableEntity)
				_, _ = io.WriteString(w, "no")
				return
			}
			w.WriteHeader(http.StatusAccepted)
			_, _ = io.WriteString(w, `{"job_id":"j1"}`)
			return
		}
		if r.URL.Path == "/missing" {
			w.WriteHeader(http.StatusNotFound)
		}
		_, _ = io.WriteString(w, "body")
	}))
	t.Cleanup(api.Close)
	id, err := Submit(t.Context(), api.URL+"/v1/jobs", `{}`)
	require.NoError(t, err)
	require.Equal(t, "j1", id)
	_, err = Submit(t.Context(), api.URL+"/v1/jobs", "bad")
	require.EqualError(t, err, fmt.Sprintf("POST %s/v1/jobs: 422 no", api.URL))
	b, err := Get(t.Context(), api.URL+"/x")
	require.NoError(t, err)
	require.Equal(t, "body", string(b))
	_, err = Get(t.Context(), api.URL+"/missing")
	require.EqualError(t, err, fmt.Sprintf("GET %s/missing: 404 body", api.URL))
}

// TestSubmitHonoursRetryAfter: a submit answered 429 is tried again after
// its Retry-After; other refusals are errors at once.
func TestSubmitHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n := calls.Add(1); {
		case n <= 2:
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
		case r.URL.Path == "/refused":
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(`{"job_id":"j1"}`))
		}
	}))
	t.Cleanup(srv.Close)
	id, err := Submit(t.Context(), srv.URL+"/v1/jobs", `{}`)
	require.NoError(t, err)
	require.Equal(t, "j1", id)
	require.EqualValues(t, 3, calls.Load())
	_, err = Submit(t.Context(), srv.URL+"/refused", `{}`)
	require.ErrorContains(t, err, "503")
	require.EqualValues(t, 4, calls.Load(), "a 503 is not tried again: it may have written")

	require.Equal(t, 100*time.Millisecond, RetryAfter(""))
	require.Equal(t, 2*time.Second, RetryAfter("2"))
	require.Equal(t, 10*time.Second, RetryAfter("3600"))
}
