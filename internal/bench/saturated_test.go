package bench

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// busy counts only the slot-time inside the window; waits pair each job's
// slot with its submit.
func TestSlotLog(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	f := &slotLog{}
	f.add("a", at(0), at(100))     // inside
	f.add("b", at(-50), at(50))    // half before the window
	f.add("c", at(950), at(1050))  // half after it
	f.add("d", at(2000), at(2100)) // after
	require.Equal(t, 200*time.Millisecond, f.busy(at(0), at(1000)))
	var first time.Time
	require.Equal(t, []time.Duration{50 * time.Millisecond, 100 * time.Millisecond},
		f.waits(map[string]time.Time{"a": at(-100), "c": at(900), "never": at(0)}, &first))
	require.Equal(t, at(0), first)
	require.Equal(t, 80.0, pct([]time.Duration{10 * time.Millisecond, 80 * time.Millisecond}, 0.99))
	require.Zero(t, pct(nil, 0.5))
}

// The offer submits at its rate for its time, one job in satHighEach high.
func TestOfferSaturated(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	var mu sync.Mutex
	priorities := map[string]int{}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Priority    string `json:"priority"`
			RouteWaitMS int    `json:"route_wait_ms"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		priorities[body.Priority]++
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"job_id":"j`+strconv.FormatInt(n.Add(1), 10)+`"}`)
	}))
	t.Cleanup(api.Close)
	high, low, end, err := offerSaturated(t.Context(), api.URL, "bench.slow", 400, 100*time.Millisecond)
	require.NoError(t, err)
	require.Len(t, high, 2)
	require.Len(t, low, 38)
	require.Equal(t, map[string]int{"high": 2, "low": 38}, priorities)
	for _, at := range high {
		require.False(t, at.After(end))
	}
}
