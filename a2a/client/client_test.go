package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/a2a"
	"github.com/agentreach/agentreach/a2a/client"
)

// agent is an A2A agent that records the bodies it is sent and answers
// each with answer(method).
func agent(t *testing.T, answer func(method string) string) (*httptest.Server, <-chan string) {
	t.Helper()
	bodies := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies <- r.Header.Get("A2A-Version") + " " + string(b)
		var req struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(b, &req)
		_, _ = io.WriteString(w, answer(req.Method))
	}))
	t.Cleanup(srv.Close)
	return srv, bodies
}

// The wire is byte for byte what Agent-Reach has always sent: a v1.0
// SendMessage, and for an agent that knows only v0.3 names (it answers
// method-not-found), the same message as v0.3's message/send, asked in
// v0.3 terms from then on.
func TestSendMessageWire(t *testing.T) {
	t.Parallel()
	const task = `{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t1","contextId":"c1","status":{"state":"working"}}}`
	srv, bodies := agent(t, func(method string) string {
		if method == "message/send" || method == "tasks/get" {
			return task
		}
		return `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"method not found"}}`
	})
	c := &client.Client{HTTP: srv.Client()}
	ctx := context.Background()
	got, err := c.SendMessage(ctx, client.Send{Endpoint: srv.URL, JobID: "0190f1c2-0000-7000-8000-000000000001", Attempt: 1,
		Capability: "calc.add", Payload: json.RawMessage(`{"a":2,"b":3}`),
		Push: &client.Push{URL: "http://127.0.0.1:8080/a2a-push/0190f1c2-0000-7000-8000-000000000001/1", Token: "arp_tok"}})
	require.NoError(t, err)
	require.Equal(t, a2a.Task{ID: "t1", ContextID: "c1", State: a2a.StateWorking}, got)
	require.Equal(t, `1.0 {"id":1,"jsonrpc":"2.0","method":"SendMessage","params":{"configuration":{"returnImmediately":true,`+
		`"taskPushNotificationConfig":{"authentication":{"credentials":"arp_tok","scheme":"Bearer"},"token":"arp_tok",`+
		`"url":"http://127.0.0.1:8080/a2a-push/0190f1c2-0000-7000-8000-000000000001/1"}},"message":{"messageId":"0190f1c2-0000-7000-8000-000000000001",`+
		`"metadata":{"reach_attempt":1,"reach_job_id":"0190f1c2-0000-7000-8000-000000000001","skill":"calc.add"},`+
		`"parts":[{"data":{"a":2,"b":3},"mediaType":"application/json"}],"role":"ROLE_USER"},`+
		`"metadata":{"reach_attempt":1,"reach_job_id":"0190f1c2-0000-7000-8000-000000000001","skill":"calc.add"}}}`, <-bodies)
	require.Equal(t, `0.3 {"id":1,"jsonrpc":"2.0","method":"message/send","params":{"configuration":{"blocking":false,`+
		`"pushNotificationConfig":{"authentication":{"credentials":"arp_tok","schemes":["Bearer"]},"token":"arp_tok",`+
		`"url":"http://127.0.0.1:8080/a2a-push/0190f1c2-0000-7000-8000-000000000001/1"}},"message":{"kind":"message",`+
		`"messageId":"0190f1c2-0000-7000-8000-000000000001","metadata":{"reach_attempt":1,"reach_job_id":"0190f1c2-0000-7000-8000-000000000001","skill":"calc.add"},`+
		`"parts":[{"data":{"a":2,"b":3},"kind":"data"}],"role":"user"},`+
		`"metadata":{"reach_attempt":1,"reach_job_id":"0190f1c2-0000-7000-8000-000000000001","skill":"calc.add"}}}`, <-bodies)

	// The input to a task: its own message id, the agent's task id, data
	// that is not an object wrapped for v0.3; v0.3 names straight away.
	_, err = c.SendMessage(ctx, client.Send{Endpoint: srv.URL, JobID: "0190f1c2-0000-7000-8000-000000000001", Attempt: 2,
		Capability: "t.unit", Payload: json.RawMessage(`[1,2]`), TaskID: "task-1", MessageID: "m-2"})
	require.NoError(t, err)
	require.Equal(t, `0.3 {"id":1,"jsonrpc":"2.0","method":"message/send","params":{"configuration":{"blocking":false},`+
		`"message":{"kind":"message","messageId":"m-2","metadata":{"reach_attempt":2,"reach_job_id":"0190f1c2-0000-7000-8000-000000000001","skill":"t.unit"},`+
		`"parts":[{"data":{"value":[1,2]},"kind":"data"}],"role":"user","taskId":"task-1"},`+
		`"metadata":{"reach_attempt":2,"reach_job_id":"0190f1c2-0000-7000-8000-000000000001","skill":"t.unit"}}}`, <-bodies)
	_, err = c.GetTask(ctx, srv.URL, "t1", nil)
	require.NoError(t, err)
	require.Equal(t, `0.3 {"id":1,"jsonrpc":"2.0","method":"tasks/get","params":{"id":"t1"}}`, <-bodies)
}

// A v1.0 agent gets v1.0 only; a text payload is a text part.
func TestSendMessageV1(t *testing.T) {
	t.Parallel()
	srv, bodies := agent(t, func(string) string {
		return `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"},` +
			`"artifacts":[{"artifactId":"a","parts":[{"text":"done"}]}]}}}`
	})
	c := &client.Client{HTTP: srv.Client()}
	got, err := c.SendMessage(context.Background(), client.Send{Endpoint: srv.URL, JobID: "j", Attempt: 1, Capability: "c", Payload: json.RawMessage(`"hi"`)})
	require.NoError(t, err)
	require.Equal(t, a2a.StateCompleted, got.State)
	require.JSONEq(t, `"done"`, string(got.Result))
	require.Equal(t, `1.0 {"id":1,"jsonrpc":"2.0","method":"SendMessage","params":{"configuration":{"returnImmediately":true},`+
		`"message":{"messageId":"j","metadata":{"reach_attempt":1,"reach_job_id":"j","skill":"c"},"parts":[{"text":"hi"}],"role":"ROLE_USER"},`+
		`"metadata":{"reach_attempt":1,"reach_job_id":"j","skill":"c"}}}`, <-bodies)
	require.Empty(t, bodies, "no v0.3 fallback")
}

// Errors: a JSON-RPC error is an *RPCError, another status an *HTTPError,
// an answer that is no task a2a.ErrBadTask.
func TestErrors(t *testing.T) {
	t.Parallel()
	answers := map[string]string{"c1": `{"jsonrpc":"2.0","id":1,"error":{"code":-32003,"message":"no push"}}`, "c2": `{"jsonrpc":"2.0","id":1,"result":{}}`}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		var req struct {
			Params struct {
				Metadata struct {
					Skill string `json:"skill"`
				} `json:"metadata"`
			} `json:"params"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		_, _ = io.WriteString(w, answers[req.Params.Metadata.Skill])
	}))
	t.Cleanup(srv.Close)
	c := &client.Client{HTTP: srv.Client()}
	ctx := context.Background()
	_, err := c.SendMessage(ctx, client.Send{Endpoint: srv.URL, JobID: "j", Capability: "c1", Payload: json.RawMessage(`{}`)})
	var rpc *client.RPCError
	require.True(t, errors.As(err, &rpc), "%v", err)
	require.True(t, rpc.Incompatible())
	_, err = c.SendMessage(ctx, client.Send{Endpoint: srv.URL, JobID: "j", Capability: "c2", Payload: json.RawMessage(`{}`)})
	require.ErrorIs(t, err, a2a.ErrBadTask)
	_, err = c.SendMessage(ctx, client.Send{Endpoint: srv.URL + "/busy", JobID: "j", Capability: "c", Payload: json.RawMessage(`{}`)})
	var httpErr *client.HTTPError
	require.True(t, errors.As(err, &httpErr), "%v", err)
	require.Equal(t, http.StatusTooManyRequests, httpErr.Status)
	require.Equal(t, "3", httpErr.RetryAfter)
}
