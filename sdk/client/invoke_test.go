package client_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/sdk/client"
)

// TestInvokeFailsOverFromADeadCandidate: the best candidate refuses
// connections, so the second gets the invocation, as a brokered delivery's
// envelope with its own grant, and its answer is the result; both outcomes
// are reported with their fields.
func TestInvokeFailsOverFromADeadCandidate(t *testing.T) {
	t.Parallel()
	reg := newFakeRegistry(t)
	good := newFakeAgent(t, answering("SUCCESS", "fine", map[string]int{"n": 1}))
	reg.set("doc.ocr", candidate("dead-1", deadURL(t), 120), candidate("good-2", good.srv.URL, 110))
	c := newClient(t, reg.URL(), client.ReportBatch(100, time.Hour))

	before := time.Now()
	res, err := c.Invoke(t.Context(), "doc.ocr", map[string]string{"url": "x.pdf"}, client.InvokeOptions{Hint: "a pdf"})
	require.NoError(t, err)
	require.Equal(t, client.StatusSuccess, res.Status)
	require.JSONEq(t, `{"n":1}`, string(res.Result))
	require.Equal(t, "fine", res.BizCode)
	require.Equal(t, "good-2", res.AgentID)
	require.False(t, res.Stale)
	require.Len(t, res.Attempts, 2)
	require.Equal(t, "dead-1", res.Attempts[0].AgentID)
	require.False(t, res.Attempts[0].Reached)
	require.Zero(t, res.Attempts[0].StatusCode)
	require.Error(t, res.Attempts[0].Err)
	require.True(t, res.Attempts[1].Reached)
	require.NoError(t, res.Attempts[1].Err)

	d := <-good.calls
	require.Equal(t, "grant-good-2", d.header.Get("X-Reach-Grant"))
	require.Equal(t, "application/json", d.header.Get("Content-Type"))
	require.Regexp(t, `^00-`+res.TraceID+`-[0-9a-f]{16}-01$`, d.header.Get("traceparent"))
	require.Equal(t, res.InvocationID, d.body["job_id"])
	id, err := uuid.Parse(res.InvocationID)
	require.NoError(t, err)
	require.Equal(t, uuid.Version(7), id.Version())
	require.Equal(t, res.TraceID, d.body["trace_id"])
	require.Equal(t, "doc.ocr", d.body["capability"])
	require.Equal(t, map[string]any{"url": "x.pdf"}, d.body["payload"])
	require.Equal(t, "", d.body["result_url"])
	require.EqualValues(t, 2, d.body["attempt"], "the second candidate tried")
	deadline, err := time.Parse(time.RFC3339Nano, d.body["deadline"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, before.Add(30*time.Second), deadline, 5*time.Second, "the default candidate timeout")

	require.Equal(t, "a pdf", reg.lookup(0)["hint"])
	require.Equal(t, map[string]any{"protocol": "http"}, reg.lookup(0)["constraints"], "Invoke asks for agents it can call")

	require.NoError(t, c.Flush(t.Context()))
	batch := reg.waitBatch()
	require.Len(t, batch, 2)
	require.Equal(t, "dead-1", batch[0]["agent_id"])
	require.Equal(t, "doc.ocr", batch[0]["capability"])
	require.Equal(t, false, batch[0]["reached"])
	require.Equal(t, false, batch[0]["ok"])
	require.Equal(t, "good-2", batch[1]["agent_id"])
	require.Equal(t, true, batch[1]["reached"])
	require.Equal(t, true, batch[1]["ok"])
	require.Equal(t, "fine", batch[1]["biz_code"])
	require.Greater(t, batch[1]["latency_ms"].(float64), 0.0)
	at, err := time.Parse(time.RFC3339Nano, batch[1]["at"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), at, 10*time.Second)
}

// TestInvokeFailsOverFrom503: a candidate answering 503 is passed over; a
// FAILED answer is a result (the agent's business failure), not a reason
// to try a third agent.
func TestInvokeFailsOverFrom503(t *testing.T) {
	t.Parallel()
	reg := newFakeRegistry(t)
	busy := newFakeAgent(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	failing := newFakeAgent(t, answering("FAILED", "bad_scan", nil))
	third := newFakeAgent(t, answering("SUCCESS", "", nil))
	reg.set("doc.ocr", candidate("busy", busy.srv.URL, 3), candidate("failing", failing.srv.URL, 2), candidate("third", third.srv.URL, 1))
	c := newClient(t, reg.URL(), client.ReportBatch(100, time.Hour))

	res, err := c.Invoke(t.Context(), "doc.ocr", json.RawMessage(`{"a":1}`), client.InvokeOptions{})
	require.NoError(t, err)
	require.Equal(t, client.StatusFailed, res.Status)
	require.Equal(t, "bad_scan", res.BizCode)
	require.Equal(t, "failing", res.AgentID)
	require.Equal(t, http.StatusServiceUnavailable, res.Attempts[0].StatusCode)
	require.False(t, res.Attempts[0].Reached)
	require.EqualValues(t, 1, busy.count.Load())
	require.EqualValues(t, 1, failing.count.Load())
	require.Zero(t, third.count.Load())
	require.Equal(t, (<-busy.calls).body["job_id"], (<-failing.calls).body["job_id"], "one invocation id across candidates")

	require.NoError(t, c.Flush(t.Context()))
	batch := reg.waitBatch()
	require.Len(t, batch, 2)
	require.Equal(t, map[string]any{"agent_id": "busy", "reached": false, "ok": false}, pick(batch[0], "agent_id", "reached", "ok"))
	require.Equal(t, map[string]any{"agent_id": "failing", "reached": true, "ok": false, "biz_code": "bad_scan"},
		pick(batch[1], "agent_id", "reached", "ok", "biz_code"))
}

// TestInvokeTimesOutACandidate: a candidate that does not answer within
// the per-candidate timeout is passed over.
func TestInvokeTimesOutACandidate(t *testing.T) {
	t.Parallel()
	reg := newFakeRegistry(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	hung := newFakeAgent(t, func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	good := newFakeAgent(t, answering("SUCCESS", "", "done"))
	reg.set("c", candidate("hung", hung.srv.URL, 2), candidate("good", good.srv.URL, 1))
	c := newClient(t, reg.URL())

	res, err := c.Invoke(t.Context(), "c", 1, client.InvokeOptions{Timeout: 200 * time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, "good", res.AgentID)
	require.ErrorContains(t, res.Attempts[0].Err, "no answer within 200ms")
	require.GreaterOrEqual(t, res.Attempts[0].Latency, 200*time.Millisecond)
}

// TestInvokeWithNoCandidateTakingIt: every candidate failing is
// ErrNoCandidates, with what each did.
func TestInvokeWithNoCandidateTakingIt(t *testing.T) {
	t.Parallel()
	reg := newFakeRegistry(t)
	broken := newFakeAgent(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) })
	reg.set("c", candidate("dead", deadURL(t), 2), candidate("broken", broken.srv.URL, 1))
	c := newClient(t, reg.URL())

	res, err := c.Invoke(t.Context(), "c", 1, client.InvokeOptions{})
	require.ErrorIs(t, err, client.ErrNoCandidates)
	require.ErrorContains(t, err, "broken: answered HTTP 500")
	require.Len(t, res.Attempts, 2)

	_, err = c.Invoke(t.Context(), "nobody", 1, client.InvokeOptions{})
	require.ErrorIs(t, err, client.ErrNoCandidates)
	_, err = c.Invoke(t.Context(), "c", 1, client.InvokeOptions{Constraints: client.Constraints{Protocol: "a2a"}})
	require.ErrorIs(t, err, client.ErrInvalidArgument)
}

// TestInvokeContinuesTheCallersTrace: a traceparent given is continued,
// with a span of the client's own.
func TestInvokeContinuesTheCallersTrace(t *testing.T) {
	t.Parallel()
	reg := newFakeRegistry(t)
	good := newFakeAgent(t, answering("SUCCESS", "", nil))
	reg.set("c", candidate("good", good.srv.URL, 1))
	c := newClient(t, reg.URL())
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	res, err := c.Invoke(t.Context(), "c", 1, client.InvokeOptions{TraceParent: parent})
	require.NoError(t, err)
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", res.TraceID)
	tp := (<-good.calls).header.Get("traceparent")
	require.True(t, strings.HasPrefix(tp, "00-4bf92f3577b34da6a3ce929d0e0e4736-"), tp)
	require.NotEqual(t, parent, tp)
}

// TestReportsFlushWhenABatchIsFull: with a batch of two, the two outcomes
// of one invocation go out in one request without a Flush.
func TestReportsFlushWhenABatchIsFull(t *testing.T) {
	t.Parallel()
	reg := newFakeRegistry(t)
	good := newFakeAgent(t, answering("SUCCESS", "", nil))
	reg.set("c", candidate("dead", deadURL(t), 2), candidate("good", good.srv.URL, 1))
	c := newClient(t, reg.URL(), client.ReportBatch(2, time.Hour))

	_, err := c.Invoke(t.Context(), "c", 1, client.InvokeOptions{})
	require.NoError(t, err)
	batch := reg.waitBatch()
	require.Len(t, batch, 2)
	require.Equal(t, []any{"dead", "good"}, []any{batch[0]["agent_id"], batch[1]["agent_id"]})
}

// TestReportsFlushOnTheInterval: one outcome, far under the batch size,
// goes out at the next tick.
func TestReportsFlushOnTheInterval(t *testing.T) {
	t.Parallel()
	reg := newFakeRegistry(t)
	good := newFakeAgent(t, answering("SUCCESS", "", nil))
	reg.set("c", candidate("good", good.srv.URL, 1))
	c := newClient(t, reg.URL(), client.ReportBatch(100, 20*time.Millisecond))

	_, err := c.Invoke(t.Context(), "c", 1, client.InvokeOptions{})
	require.NoError(t, err)
	batch := reg.waitBatch()
	require.Len(t, batch, 1)
	require.Equal(t, "good", batch[0]["agent_id"])
}

// TestReportsCloseFlushes: Close sends what is pending.
func TestReportsCloseFlushes(t *testing.T) {
	t.Parallel()
	reg := newFakeRegistry(t)
	c, err := client.New(reg.URL(), "ark_test", client.ReportBatch(100, time.Hour))
	require.NoError(t, err)
	c.Report(client.Report{AgentID: "a", Capability: "c", Reached: true, OK: true, LatencyMS: 1.5, At: time.Now()})
	require.NoError(t, c.Close())
	batch := reg.waitBatch()
	require.Equal(t, map[string]any{"agent_id": "a", "capability": "c", "reached": true, "ok": true, "latency_ms": 1.5},
		pick(batch[0], "agent_id", "capability", "reached", "ok", "latency_ms"))
}

// TestReportsDropTheOneRefused: the service takes a batch whole or not at
// all, naming the report it refuses; the client drops that one and sends
// the rest again.
func TestReportsDropTheOneRefused(t *testing.T) {
	t.Parallel()
	reg := newFakeRegistry(t)
	reg.refuseNext(func(batch []map[string]any) (int, string) {
		return http.StatusBadRequest, `{"error":{"code":"invalid_argument","message":"agent not looked up","field":"reports[1].agent_id"}}`
	})
	c := newClient(t, reg.URL(), client.ReportBatch(100, time.Hour))
	now := time.Now()
	c.Report(client.Report{AgentID: "a", Capability: "c", At: now}, client.Report{AgentID: "stranger", Capability: "c", At: now},
		client.Report{AgentID: "b", Capability: "c", At: now})
	require.NoError(t, c.Flush(t.Context()))
	batch := reg.waitBatch()
	require.Equal(t, []any{"a", "b"}, []any{batch[0]["agent_id"], batch[1]["agent_id"]})
}

// TestReportsKeptWhileTheRegistryIsDown: a flush that gets no answer keeps
// the reports for the next.
func TestReportsKeptWhileTheRegistryIsDown(t *testing.T) {
	t.Parallel()
	reg := newFakeRegistry(t)
	c := newClient(t, reg.URL(), client.ReportBatch(100, time.Hour))
	c.Report(client.Report{AgentID: "a", Capability: "c", At: time.Now()})
	reg.down.Store(true)
	require.ErrorIs(t, c.Flush(t.Context()), client.ErrUnreachable)
	reg.down.Store(false)
	require.NoError(t, c.Flush(t.Context()))
	require.Equal(t, "a", reg.waitBatch()[0]["agent_id"])
}

func pick(m map[string]any, keys ...string) map[string]any {
	out := map[string]any{}
	for _, k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}

// TestReportsGoInABatchPerNamespace: the service checks reports against
// the lookups of one namespace, so each namespace's go in a batch of
// their own, naming it.
func TestReportsGoInABatchPerNamespace(t *testing.T) {
	t.Parallel()
	reg := newFakeRegistry(t)
	c := newClient(t, reg.URL(), client.ReportBatch(100, time.Hour))
	now := time.Now()
	c.Report(client.Report{Namespace: "team-a", AgentID: "a1", Capability: "c", At: now},
		client.Report{Namespace: "team-b", AgentID: "b1", Capability: "c", At: now},
		client.Report{Namespace: "team-a", AgentID: "a2", Capability: "c", At: now})
	require.NoError(t, c.Flush(t.Context()))
	first, second := reg.waitBatch(), reg.waitBatch()
	require.Equal(t, []any{"a1", "a2"}, []any{first[0]["agent_id"], first[1]["agent_id"]})
	require.Equal(t, "b1", second[0]["agent_id"])
	reg.mu.Lock()
	defer reg.mu.Unlock()
	require.Equal(t, []string{"team-a", "team-b"}, reg.batchNS)
}

// TestInvokeQuarantinesAHungCandidate: the best candidate hangs; the first
// call waits for it the candidate timeout, then fails over; the next call
// tries it last (quarantined), so it costs nothing, and a dead one likewise.
func TestInvokeQuarantinesAHungCandidate(t *testing.T) {
	t.Parallel()
	reg := newFakeRegistry(t)
	release := make(chan struct{})
	hung := newFakeAgent(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) }) // before the hung agent's server closes
	good := newFakeAgent(t, answering("SUCCESS", "", map[string]int{"n": 1}))
	reg.set("doc.ocr", candidate("dead-1", deadURL(t), 130), candidate("hung-2", hung.srv.URL, 120), candidate("good-3", good.srv.URL, 110))
	c := newClient(t, reg.URL(), client.ReportBatch(100, time.Hour), client.CandidateTimeout(300*time.Millisecond))

	first, err := c.Invoke(t.Context(), "doc.ocr", map[string]int{}, client.InvokeOptions{})
	require.NoError(t, err)
	require.Equal(t, "good-3", first.AgentID)
	require.Len(t, first.Attempts, 3)
	require.Contains(t, first.Attempts[1].Err.Error(), "no answer within")

	for range 3 {
		again, err := c.Invoke(t.Context(), "doc.ocr", map[string]int{}, client.InvokeOptions{})
		require.NoError(t, err)
		require.Equal(t, "good-3", again.AgentID)
		require.Len(t, again.Attempts, 1, "the dead and the hung candidates are tried last while quarantined")
	}
	require.EqualValues(t, 1, hung.count.Load())
}

// TestInvokeHedges: with Hedge set, a candidate that has not answered
// within it is raced by the next; the first result wins and the slow call
// is cancelled. Without it, the slow one is waited for.
func TestInvokeHedges(t *testing.T) {
	t.Parallel()
	reg := newFakeRegistry(t)
	release := make(chan struct{})
	cancelled := make(chan struct{}, 1)
	slow := newFakeAgent(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
			answering("SUCCESS", "", "slow")(w, r)
		case <-r.Context().Done():
			cancelled <- struct{}{}
		}
	})
	t.Cleanup(func() { close(release) }) // before the slow agent's server closes
	fast := newFakeAgent(t, answering("SUCCESS", "", "fast"))
	reg.set("c", candidate("slow", slow.srv.URL, 2), candidate("fast", fast.srv.URL, 1))
	c := newClient(t, reg.URL())

	res, err := c.Invoke(t.Context(), "c", 1, client.InvokeOptions{Timeout: time.Minute, Hedge: 50 * time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, "fast", res.AgentID)
	require.JSONEq(t, `"fast"`, string(res.Result))
	require.Len(t, res.Attempts, 1, "the winner's attempt; the slow one was still running")
	select {
	case <-cancelled:
	case <-time.After(30 * time.Second):
		t.Fatal("the slow call was not cancelled once the fast one answered")
	}
	require.Equal(t, (<-slow.calls).body["job_id"], (<-fast.calls).body["job_id"], "one invocation id across the race")
}
