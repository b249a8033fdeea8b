package client_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/sdk/client"
)

func agentIDs(cands []client.Candidate) []string {
	ids := make([]string, len(cands))
	for i, c := range cands {
		ids[i] = c.AgentID
	}
	return ids
}

// TestLookupCachesTheAnswer: a second lookup of the same question is
// answered from memory, without a request, and never with a SUSPECT
// candidate; another question, or NoCache, asks the registry.
func TestLookupCachesTheAnswer(t *testing.T) {
	t.Parallel()
	reg := newFakeRegistry(t)
	suspect := candidate("s", "http://127.0.0.1:9/s", 80)
	suspect.State = "SUSPECT"
	reg.set("doc.ocr", candidate("a", "http://127.0.0.1:9/a", 120), suspect)
	c := newClient(t, reg.URL())

	first, err := c.Lookup(t.Context(), "doc.ocr", client.LookupOptions{Hint: "pdf", Limit: 2})
	require.NoError(t, err)
	require.False(t, first.Cached)
	require.Equal(t, []string{"a", "s"}, agentIDs(first.Candidates), "the registry's answer as it is")
	require.Equal(t, 30*time.Second, first.TTL)
	require.Equal(t, map[string]any{"capability": "doc.ocr", "hint": "pdf", "limit": 2.0}, reg.lookup(0))

	second, err := c.Lookup(t.Context(), "doc.ocr", client.LookupOptions{Hint: "pdf", Limit: 2})
	require.NoError(t, err)
	require.True(t, second.Cached)
	require.Equal(t, 1, reg.lookupCount(), "no request")
	require.Equal(t, []string{"a"}, agentIDs(second.Candidates), "a SUSPECT candidate is never served from the cache")
	require.Equal(t, "grant-a", second.Candidates[0].Grant)
	require.Positive(t, second.TTL)
	require.LessOrEqual(t, second.TTL, 30*time.Second)

	_, err = c.Lookup(t.Context(), "doc.ocr", client.LookupOptions{Hint: "scan", Limit: 2})
	require.NoError(t, err)
	require.Equal(t, 2, reg.lookupCount(), "another hint is another question")
	_, err = c.Lookup(t.Context(), "doc.ocr", client.LookupOptions{Hint: "pdf", Limit: 2, NoCache: true})
	require.NoError(t, err)
	require.Equal(t, 3, reg.lookupCount())
}

// TestConcurrentLookupsShareOneRequest: a lookup asked while the same
// one is under way waits for it rather than sending its own, and one
// caller giving up does not fail the others.
func TestConcurrentLookupsShareOneRequest(t *testing.T) {
	t.Parallel()
	reg := newFakeRegistry(t)
	reg.set("c", candidate("a", "http://127.0.0.1:9/a", 1))
	arrived, release := make(chan struct{}, 10), make(chan struct{})
	reg.mu.Lock()
	reg.onLookup = func() { arrived <- struct{}{}; <-release }
	reg.mu.Unlock()
	c := newClient(t, reg.URL())

	first := make(chan error, 1)
	go func() {
		_, err := c.Lookup(t.Context(), "c", client.LookupOptions{})
		first <- err
	}()
	<-arrived
	impatient, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err := c.Lookup(impatient, "c", client.LookupOptions{})
	require.ErrorIs(t, err, context.DeadlineExceeded, "it waited for the request under way")
	require.Equal(t, 1, reg.lookupCount(), "and sent none of its own")

	close(release)
	require.NoError(t, <-first, "the caller that gave up did not fail the first")
	res, err := c.Lookup(t.Context(), "c", client.LookupOptions{})
	require.NoError(t, err)
	require.True(t, res.Cached)
	require.Equal(t, 1, reg.lookupCount())
}

// TestLookupCacheIsCappedByGrants: an answer whose grant expires sooner
// than its TTL is fresh only until shortly before the grant expires; one
// with ttl_ms 0 is not cached at all.
func TestLookupCacheIsCappedByGrants(t *testing.T) {
	t.Parallel()
	reg := newFakeRegistry(t)
	short := candidate("a", "http://127.0.0.1:9/a", 1)
	short.GrantExpiresAt = time.Now().Add(5 * time.Second) // inside the client's margin already
	reg.set("short", short)
	reg.set("long", candidate("b", "http://127.0.0.1:9/b", 1))
	c := newClient(t, reg.URL())
	for range 2 {
		_, err := c.Lookup(t.Context(), "short", client.LookupOptions{})
		require.NoError(t, err)
	}
	require.Equal(t, 2, reg.lookupCount(), "a grant about to expire is not served from the cache")

	reg.mu.Lock()
	reg.ttlMS = 0
	reg.mu.Unlock()
	for range 2 {
		_, err := c.Lookup(t.Context(), "long", client.LookupOptions{})
		require.NoError(t, err)
	}
	require.Equal(t, 4, reg.lookupCount(), "ttl_ms 0: not cached")
}

// TestWatchDropsACandidateGoingDown: once the watch feed has said an
// agent went DOWN, the next lookup no longer gets it from the cache (and
// it came within a second of the event being written); a SUSPECT agent
// goes the same way; a list left empty is asked again; a change to
// HEALTHY makes the namespace's lists ask the registry again. After a
// lost connection the feed resumes after the last event it read.
func TestWatchDropsACandidateGoingDown(t *testing.T) {
	t.Parallel()
	reg := newFakeRegistry(t)
	reg.set("doc.ocr", candidate("a", "http://127.0.0.1:9/a", 120), candidate("b", "http://127.0.0.1:9/b", 110))
	reg.set("other", candidate("c", "http://127.0.0.1:9/c", 100))
	changes := make(chan client.AgentChange, 10)
	c := newClient(t, reg.URL(), client.OnAgentChange(func(ch client.AgentChange) { changes <- ch }))
	c.Watch(t.Context())
	require.Empty(t, reg.waitWatcher().Get("Last-Event-ID"), "a first connection starts from now")
	applied := func() client.AgentChange {
		t.Helper()
		select {
		case ch := <-changes:
			return ch
		case <-time.After(time.Second):
			t.Fatal("the change was not applied within a second")
			return client.AgentChange{}
		}
	}
	lookup := func(capability string) client.LookupResult {
		t.Helper()
		res, err := c.Lookup(t.Context(), capability, client.LookupOptions{})
		require.NoError(t, err)
		return res
	}

	require.Equal(t, []string{"a", "b"}, agentIDs(lookup("doc.ocr").Candidates))
	lookup("other")
	require.Equal(t, 2, reg.lookupCount())

	written := time.Now()
	reg.change(41, "AGENT_STATE_CHANGED", "a", "DOWN")
	ch := applied()
	require.Less(t, time.Since(written), time.Second)
	require.Equal(t, client.AgentChange{Type: "AGENT_STATE_CHANGED", Namespace: "default", AgentID: "a", State: "DOWN", Position: 41,
		RecordedAt: ch.RecordedAt}, ch)
	res := lookup("doc.ocr")
	require.True(t, res.Cached)
	require.Equal(t, []string{"b"}, agentIDs(res.Candidates), "the DOWN agent is dropped at once")
	require.Equal(t, 2, reg.lookupCount())

	reg.change(42, "AGENT_STATE_CHANGED", "b", "SUSPECT")
	applied()
	res = lookup("doc.ocr")
	require.False(t, res.Cached, "no candidate left: asked again")
	require.Equal(t, 3, reg.lookupCount())
	require.True(t, lookup("other").Cached, "the other list is untouched")

	reg.change(43, "AGENT_STATE_CHANGED", "z", "HEALTHY")
	applied()
	require.False(t, lookup("other").Cached, "a newly HEALTHY agent may rank first: asked again")
	require.Equal(t, 4, reg.lookupCount())

	reg.watchFeed <- "" // the connection ends
	require.Equal(t, "43", reg.waitWatcher().Get("Last-Event-ID"), "resumed after the last event read")
	reg.change(44, "AGENT_DEREGISTERED", "c", "")
	applied()
	require.False(t, lookup("other").Cached)
}

// TestWatchStartsFromTheCachedAnswers: a feed started after lookups
// were cached reads the changes since the oldest of them was computed
// (its watch_from), so none made in between is missed.
func TestWatchStartsFromTheCachedAnswers(t *testing.T) {
	t.Parallel()
	reg := newFakeRegistry(t)
	reg.set("c", candidate("a", "http://127.0.0.1:9/a", 1))
	reg.mu.Lock()
	reg.watchFrom = 17
	reg.mu.Unlock()
	changes := make(chan client.AgentChange, 10)
	c := newClient(t, reg.URL(), client.OnAgentChange(func(ch client.AgentChange) { changes <- ch }))
	_, err := c.Lookup(t.Context(), "c", client.LookupOptions{})
	require.NoError(t, err)
	c.Watch(t.Context())
	require.Equal(t, "17", reg.waitWatcher().Get("Last-Event-ID"))
	reg.change(18, "AGENT_STATE_CHANGED", "a", "DOWN") // made between the lookup and the watch
	select {
	case <-changes:
	case <-time.After(5 * time.Second):
		t.Fatal("the change was not applied")
	}
	res, err := c.Lookup(t.Context(), "c", client.LookupOptions{})
	require.NoError(t, err)
	require.False(t, res.Cached)
}

// TestALookupRacingAChangeIsNotCached: an answer the registry computed
// before a change the feed applied while it was on its way may hold the
// changed agent, so it is answered but not served again from the cache.
func TestALookupRacingAChangeIsNotCached(t *testing.T) {
	t.Parallel()
	reg := newFakeRegistry(t)
	reg.set("c", candidate("a", "http://127.0.0.1:9/a", 1))
	changes := make(chan client.AgentChange, 10)
	c := newClient(t, reg.URL(), client.OnAgentChange(func(ch client.AgentChange) { changes <- ch }))
	c.Watch(t.Context())
	reg.waitWatcher()
	reg.mu.Lock()
	reg.onLookup = func() {
		reg.change(7, "AGENT_STATE_CHANGED", "a", "DOWN")
		<-changes
	}
	reg.mu.Unlock()
	res, err := c.Lookup(t.Context(), "c", client.LookupOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, agentIDs(res.Candidates), "the answer as the registry gave it")
	reg.mu.Lock()
	reg.onLookup = nil
	reg.mu.Unlock()
	res, err = c.Lookup(t.Context(), "c", client.LookupOptions{})
	require.NoError(t, err)
	require.False(t, res.Cached)
	require.Equal(t, 2, reg.lookupCount())
}

// TestWatchStopsOnARefusedKey: a 401 ends the feed rather than retrying
// it for ever.
func TestWatchStopsOnARefusedKey(t *testing.T) {
	t.Parallel()
	calls := make(chan struct{}, 10)
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
		calls <- struct{}{}
		writeError(w, http.StatusUnauthorized, "unauthenticated", "bad key", "")
	})
	logged := make(chan slog.Record, 10)
	c := newClient(t, srv, client.Logger(slog.New(recordHandler(logged))))
	c.Watch(t.Context())
	select {
	case rec := <-logged:
		require.Equal(t, slog.LevelError, rec.Level, "the feed gave up: %s", rec.Message)
		require.Contains(t, rec.Message, "agent watch refused")
	case <-time.After(5 * time.Second):
		t.Fatal("the feed did not give up")
	}
	require.NoError(t, c.Close())
	require.Len(t, calls, 1, "one request, not retried")
}

// TestStaleStartFromTheCacheFile: a client that looked up with a cache
// file leaves its lists there; a new client started while the registry is
// unreachable answers them, marked stale, and Invoke works with them as
// long as their grants last (an agent refuses an expired one and the next
// candidate is tried); once the registry answers again, answers are fresh.
func TestStaleStartFromTheCacheFile(t *testing.T) {
	t.Parallel()
	reg := newFakeRegistry(t)
	key := []byte("signing key of the agents")
	grantFor := func(agent string, expires time.Time) string {
		return domain.SignGrant(domain.Grant{Namespace: "default", Agent: agent, Capability: "doc.ocr", KeyID: "k1",
			IssuedAt: time.Now().Unix(), Expires: expires.Unix()}, key)
	}
	// An agent that checks the grant as the agent SDK does.
	agent := func(id string) *fakeAgent {
		return newFakeAgent(t, func(w http.ResponseWriter, r *http.Request) {
			if _, err := domain.VerifyGrant(r.Header.Get("X-Reach-Grant"), key, id, "doc.ocr", time.Now()); err != nil {
				writeError(w, http.StatusUnauthorized, "unauthenticated", err.Error(), "")
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{"status": "SUCCESS", "result": id})
		})
	}
	expired, valid := agent("expired"), agent("valid")
	first := candidate("expired", expired.srv.URL, 2)
	first.Grant = grantFor("expired", time.Now().Add(-time.Second))
	second := candidate("valid", valid.srv.URL, 1)
	second.Grant = grantFor("valid", time.Now().Add(5*time.Minute))
	reg.set("doc.ocr", first, second)
	file := filepath.Join(t.TempDir(), "agentreach-cache.json")

	warm := newClient(t, reg.URL(), client.CacheFile(file))
	fresh, err := warm.Lookup(t.Context(), "doc.ocr", client.LookupOptions{Constraints: client.Constraints{Protocol: "http"}})
	require.NoError(t, err)
	require.NoError(t, warm.Close())
	st, err := os.Stat(file)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "it holds grants")
	var doc struct {
		Lists []json.RawMessage `json:"lists"`
	}
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &doc))
	require.Len(t, doc.Lists, 1)

	reg.down.Store(true)
	cold := newClient(t, reg.URL(), client.CacheFile(file), client.ReportBatch(100, time.Hour))
	res, err := cold.Lookup(t.Context(), "doc.ocr", client.LookupOptions{Constraints: client.Constraints{Protocol: "http"}})
	require.NoError(t, err)
	require.True(t, res.Stale)
	require.Equal(t, []string{"expired", "valid"}, agentIDs(res.Candidates))
	require.Equal(t, fresh.Candidates, res.Candidates)
	require.WithinDuration(t, fresh.FetchedAt, res.FetchedAt, time.Millisecond)
	_, err = cold.Lookup(t.Context(), "never.seen", client.LookupOptions{})
	require.ErrorIs(t, err, client.ErrUnreachable, "nothing known: the registry's error")

	inv, err := cold.Invoke(t.Context(), "doc.ocr", 1, client.InvokeOptions{})
	require.NoError(t, err)
	require.True(t, inv.Stale)
	require.Equal(t, "valid", inv.AgentID, "the expired grant was refused, the next candidate took it")
	require.Equal(t, http.StatusUnauthorized, inv.Attempts[0].StatusCode)
	require.ErrorContains(t, inv.Attempts[0].Err, "refused the grant")

	reg.down.Store(false)
	res, err = cold.Lookup(t.Context(), "doc.ocr", client.LookupOptions{Constraints: client.Constraints{Protocol: "http"}})
	require.NoError(t, err)
	require.False(t, res.Stale, "the registry answers again")
	require.False(t, res.Cached)

	require.NoError(t, cold.Flush(t.Context()))
	batch := reg.waitBatch()
	require.Len(t, batch, 1, "a refused grant is not reported")
	require.Equal(t, "valid", batch[0]["agent_id"])
}

// TestStartWithACorruptCacheFile: a cache file that cannot be read is
// ignored, not fatal.
func TestStartWithACorruptCacheFile(t *testing.T) {
	t.Parallel()
	reg := newFakeRegistry(t)
	reg.set("c", candidate("a", "http://127.0.0.1:9/a", 1))
	file := filepath.Join(t.TempDir(), "cache.json")
	require.NoError(t, os.WriteFile(file, []byte("{not json"), 0o600))
	c := newClient(t, reg.URL(), client.CacheFile(file))
	res, err := c.Lookup(t.Context(), "c", client.LookupOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, agentIDs(res.Candidates))
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.True(t, json.Valid(b), "rewritten whole")
}
