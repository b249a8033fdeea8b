package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/sdk/client"
)

// fakeRegistry is a fake of Agent-Reach's lookup-mode endpoints: POST
// /v1/lookup answers the candidates set for a capability, POST
// /v1/reports records each batch, GET /v1/agents/watch streams what the
// test writes. down makes every request fail without an answer (the
// connection is closed), as an unreachable registry does.
type fakeRegistry struct {
	t   *testing.T
	srv *httptest.Server

	mu         sync.Mutex
	candidates map[string][]client.Candidate
	ttlMS      int64
	watchFrom  int64
	batchNS    []string         // each accepted batch's namespace
	lookups    []map[string]any // request bodies
	batches    [][]map[string]any
	// refuse, when set, answers the next report batch with this error
	// body and status instead of accepting it.
	refuse func(batch []map[string]any) (int, string)
	// onLookup, when set, runs before a lookup is answered.
	onLookup func()

	down      atomic.Bool
	reported  chan []map[string]any // each accepted batch
	watchers  chan http.Header      // the headers of each watch connection
	watchFeed chan string           // raw SSE text to write; "" ends the stream
}

func newFakeRegistry(t *testing.T) *fakeRegistry {
	t.Helper()
	f := &fakeRegistry{t: t, candidates: map[string][]client.Candidate{}, ttlMS: 30_000,
		reported: make(chan []map[string]any, 100), watchers: make(chan http.Header, 10), watchFeed: make(chan string)}
	f.srv = httptest.NewServer(f)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeRegistry) URL() string { return f.srv.URL }

func (f *fakeRegistry) set(capability string, cands ...client.Candidate) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.candidates[capability] = cands
}

func (f *fakeRegistry) lookupCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.lookups)
}

// lookup answers the body of the i-th lookup request.
func (f *fakeRegistry) lookup(i int) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lookups[i]
}

// refuseNext makes the next report batch answered by refuse.
func (f *fakeRegistry) refuseNext(refuse func(batch []map[string]any) (int, string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refuse = refuse
}

func (f *fakeRegistry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.down.Load() {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	if r.Header.Get("Authorization") != "Bearer ark_test" {
		writeError(w, http.StatusUnauthorized, "unauthenticated", "bad key", "")
		return
	}
	switch r.Method + " " + r.URL.Path {
	case "POST /v1/lookup":
		var body map[string]any
		assert.NoError(f.t, json.NewDecoder(r.Body).Decode(&body))
		f.mu.Lock()
		f.lookups = append(f.lookups, body)
		cands := f.candidates[body["capability"].(string)]
		ttl, from := f.ttlMS, f.watchFrom
		onLookup := f.onLookup
		f.mu.Unlock()
		if onLookup != nil {
			onLookup()
		}
		if cands == nil {
			cands = []client.Candidate{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"candidates": cands, "ttl_ms": ttl, "watch_from": from})
	case "POST /v1/reports":
		var body struct {
			Namespace string           `json:"namespace"`
			Reports   []map[string]any `json:"reports"`
		}
		assert.NoError(f.t, json.NewDecoder(r.Body).Decode(&body))
		f.mu.Lock()
		refuse := f.refuse
		f.refuse = nil
		if refuse == nil {
			f.batches = append(f.batches, body.Reports)
			f.batchNS = append(f.batchNS, body.Namespace)
		}
		f.mu.Unlock()
		if refuse != nil {
			status, errBody := refuse(body.Reports)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, errBody)
			return
		}
		f.reported <- body.Reports
		writeJSON(w, http.StatusAccepted, map[string]any{"accepted": len(body.Reports)})
	case "GET /v1/agents/watch":
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, ": keepalive\n\n")
		http.NewResponseController(w).Flush()
		f.watchers <- r.Header.Clone()
		for {
			select {
			case <-r.Context().Done():
				return
			case s := <-f.watchFeed:
				if s == "" {
					return
				}
				_, _ = io.WriteString(w, s)
				http.NewResponseController(w).Flush()
			}
		}
	default:
		writeError(w, http.StatusNotFound, "not_found", "no route "+r.URL.Path, "")
	}
}

// change writes one agent change to the watch feed and answers when the
// feed's handler took it.
func (f *fakeRegistry) change(id int64, typ, agentID, state string) {
	f.t.Helper()
	data, _ := json.Marshal(map[string]any{"type": typ, "namespace": "default", "agent_id": agentID, "state": state,
		"position": id, "recorded_at": time.Now().UTC().Format(time.RFC3339Nano)})
	select {
	case f.watchFeed <- fmt.Sprintf("id: %d\nevent: agent\ndata: %s\n\n", id, data):
	case <-time.After(5 * time.Second):
		f.t.Fatal("the watch feed has no reader")
	}
}

// waitWatcher answers the headers of the next watch connection.
func (f *fakeRegistry) waitWatcher() http.Header {
	f.t.Helper()
	select {
	case h := <-f.watchers:
		return h
	case <-time.After(5 * time.Second):
		f.t.Fatal("the client did not connect to the watch feed")
		return nil
	}
}

// waitBatch answers the next accepted report batch.
func (f *fakeRegistry) waitBatch() []map[string]any {
	f.t.Helper()
	select {
	case b := <-f.reported:
		return b
	case <-time.After(5 * time.Second):
		f.t.Fatal("no report batch arrived")
		return nil
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg, field string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg, "field": field}})
}

// delivery is what a fake agent received.
type delivery struct {
	header http.Header
	body   map[string]any
}

// fakeAgent is an agent answering with answer, recording each delivery.
type fakeAgent struct {
	srv   *httptest.Server
	calls chan delivery
	count atomic.Int32
}

func newFakeAgent(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) *fakeAgent {
	t.Helper()
	a := &fakeAgent{calls: make(chan delivery, 100)}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.count.Add(1)
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		a.calls <- delivery{header: r.Header.Clone(), body: body}
		answer(w, r)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

// answering is an agent's inline answer.
func answering(status, bizCode string, result any) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": status, "biz_code": bizCode, "result": result})
	}
}

// deadURL is the URL of a server that is gone: connections are refused.
func deadURL(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	u := srv.URL
	srv.Close()
	return u
}

// candidate is a HEALTHY candidate at endpoint with grant "grant-<id>".
func candidate(id, endpoint string, score float64) client.Candidate {
	return client.Candidate{AgentID: id, Namespace: "default", Endpoint: endpoint, Protocol: "http", Score: score,
		State: "HEALTHY", TTLMS: 30_000, Grant: "grant-" + id, GrantExpiresAt: time.Now().Add(5 * time.Minute).UTC()}
}

// newClient is a client of reg with the test key, closed at the end.
func newClient(t *testing.T, base string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(base, "ark_test", append([]client.Option{client.Logger(slog.New(slog.DiscardHandler))}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newServer is the URL of a test server answering with h.
func newServer(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// recordHandler is a slog handler sending every record to ch.
type recordHandler chan slog.Record

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	h <- r
	return nil
}
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordHandler) WithGroup(string) slog.Handler      { return h }
