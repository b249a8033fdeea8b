package client

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// GetTask tells a task the server no longer knows (-32602: the attempt is
// lost) from any other error (passing: polled again), and reads a
// completed task's tool result, answered as JSON or on an SSE stream.
func TestGetTaskTellsAnUnknownTaskFromOtherErrors(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var answer string
	sse := false
	set := func(a string, stream bool) {
		mu.Lock()
		answer, sse = a, stream
		mu.Unlock()
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		answer, sse := answer, sse
		mu.Unlock()
		require.Equal(t, "tasks/get", r.Header.Get("Mcp-Method"))
		if sse {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\nevent: message\ndata: %s\n\n", answer)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = fmt.Fprint(w, answer)
	}))
	t.Cleanup(srv.Close)
	ep := Endpoint{URL: srv.URL}

	set(`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"no task"}}`, false)
	_, err := Client{}.GetTask(t.Context(), ep, "t1")
	require.ErrorIs(t, err, ErrTaskUnknown)

	set(`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"internal error"}}`, false)
	_, err = Client{}.GetTask(t.Context(), ep, "t1")
	require.ErrorIs(t, err, ErrProtocol)
	require.False(t, errors.Is(err, ErrTaskUnknown), "an internal error is not a lost task")

	set(`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","taskId":"t1","status":"completed","pollIntervalMs":250,`+
		`"result":{"content":[{"type":"text","text":"hi"}],"structuredContent":{"n":1}}}}`, true)
	task, err := Client{}.GetTask(t.Context(), ep, "t1")
	require.NoError(t, err)
	require.True(t, task.Ended())
	require.JSONEq(t, `{"n":1}`, string(task.Outcome.Result))
	require.Equal(t, "hi", task.Outcome.Text)
}
