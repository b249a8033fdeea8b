package bench

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The relay takes every submit with 202 and its id, delivers it to the
// agents in turn and calls the caller back, signed, with the agent's
// answer: every job once.
func TestRelayCarriesEveryJob(t *testing.T) {
	t.Parallel()
	var delivered [2]atomic.Int64
	var agents []string
	for i := range 2 {
		a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			require.NotEmpty(t, r.Header.Get("webhook-signature"))
			delivered[i].Add(1)
			inlineAgent(w, r)
		}))
		t.Cleanup(a.Close)
		agents = append(agents, a.URL)
	}
	var acked atomic.Int64
	var mu sync.Mutex
	seen := map[string]bool{}
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var cb struct {
			JobID  string          `json:"job_id"`
			Status string          `json:"status"`
			Result json.RawMessage `json:"result"`
		}
		body, _ := io.ReadAll(r.Body)
		require.NoError(t, json.Unmarshal(body, &cb))
		require.Equal(t, "SUCCESS", cb.Status)
		require.JSONEq(t, `{"ok":true}`, string(cb.Result))
		mu.Lock()
		require.False(t, seen[cb.JobID], "one callback a job")
		seen[cb.JobID] = true
		mu.Unlock()
		acked.Add(1)
	}))
	t.Cleanup(receiver.Close)
	rl := newRelay(agents)
	srv := httptest.NewServer(rl)
	t.Cleanup(srv.Close)
	const n = 200
	rate, ids, err := benchEndToEnd(t.Context(), srv.URL, receiver.URL, "bench.echo", n, false, &acked)
	require.NoError(t, err)
	require.Positive(t, rate)
	require.Len(t, ids, n)
	mu.Lock()
	for _, id := range ids {
		require.True(t, seen[id], "job %s called back", id)
	}
	mu.Unlock()
	require.EqualValues(t, n, delivered[0].Load()+delivered[1].Load())
	require.InDelta(t, n/2, delivered[0].Load(), 1, "round robin")
	require.Zero(t, rl.failed.Load())
}

// benchWait sends its submits one at a time with wait_ms and measures each
// round trip; an answer that is not 200 with the job SUCCESS stops it.
func TestBenchWait(t *testing.T) {
	t.Parallel()
	var status atomic.Int64
	status.Store(http.StatusOK)
	var bodies atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var sub struct {
			WaitMS int `json:"wait_ms"`
		}
		_ = json.NewDecoder(r.Body).Decode(&sub)
		if sub.WaitMS > 0 {
			bodies.Add(1)
		}
		w.WriteHeader(int(status.Load()))
		_, _ = io.WriteString(w, `{"job_id":"j","status":"SUCCESS"}`)
	}))
	t.Cleanup(api.Close)
	lat, err := benchWait(t.Context(), api.Client(), api.URL, "c", 5, nil)
	require.NoError(t, err)
	require.Len(t, lat.total, 5)
	require.IsNonDecreasing(t, lat.total)
	require.EqualValues(t, 5, bodies.Load(), "every submit asks to wait")
	status.Store(http.StatusAccepted)
	_, err = benchWait(t.Context(), api.Client(), api.URL, "c", 1, nil)
	require.ErrorContains(t, err, "answered 202")
}

// work never ends before the time it is given (it spins the rest of a
// sleep cut short of it).
func TestWorkTakesItsTime(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{waitJobWork, 200 * time.Microsecond, 2100 * time.Microsecond} {
		t0 := time.Now()
		work(d)
		require.GreaterOrEqual(t, time.Since(t0), d)
	}
}
