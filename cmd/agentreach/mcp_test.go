package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/webhook"
)

// mcpPost sends one JSON-RPC message to an MCP endpoint as a 2026-07-28
// client does (its headers, and its _meta with the tasks extension when
// tasks is set), answering the HTTP status and the decoded body.
func mcpPost(t *testing.T, url, key, method, name string, params map[string]any, tasks bool) (int, map[string]any) {
	t.Helper()
	caps := map[string]any{}
	if tasks {
		caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
	}
	if params == nil {
		params = map[string]any{}
	}
	meta, _ := params["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta["io.modelcontextprotocol/protocolVersion"] = "2026-07-28"
	meta["io.modelcontextprotocol/clientCapabilities"] = caps
	meta["io.modelcontextprotocol/clientInfo"] = map[string]any{"name": "test", "version": "1"}
	params["_meta"] = meta
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(string(body)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	require.NoError(t, json.Unmarshal(raw, &out), "%d %s", resp.StatusCode, raw)
	return resp.StatusCode, out
}

// bearerTransport adds a key to every request of the Go SDK's client.
type bearerTransport struct{ key string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

func mcpSession(t *testing.T, url, key string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "agentreach-test", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerTransport{key}},
		DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	list, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// The MCP face: the tools are the capabilities the key may submit (with
// the input schema registered, find_capability first), a call is a job
// answered inline (structured content; isError for a FAILED job), the
// list follows the registry, a key without a capability's scope neither
// sees nor calls its tool, and a client with the tasks extension gets a
// task it polls to the result.
func TestMCPToolsAreCapabilities(t *testing.T) {
	t.Parallel()
	svc := startTuned(t, map[string]string{"DATABASE_URL": newDatabase(t)}, fastSweeps,
		"serve", "--admin-key", testAdminKey, "--addr", "127.0.0.1:0", "--log-level", "warn")
	base := svc.m.URL()
	waitReady(t, base)
	api := keyedProxy(t, base, testAdminKey)
	full, _ := createKey(t, base, testAdminKey, `{"namespace":"default","scopes":["jobs:submit:mcp.*","jobs:read"]}`)
	narrow, _ := createKey(t, base, testAdminKey, `{"namespace":"default","scopes":["jobs:submit:mcp.echo"]}`)
	other, _ := createKey(t, base, testAdminKey, `{"namespace":"elsewhere","scopes":["jobs:submit:*","jobs:read"]}`)

	schema := `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`
	newTestAgent(t, api, "mcp-echo", "mcp.echo", 50, func(w http.ResponseWriter, env webhook.Envelope) {
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "SUCCESS", "result": map[string]any{"echo": env.Payload}})
	})
	code, out := call(t, http.MethodPut, api+"/v1/capabilities/mcp.echo?namespace=default", "",
		`{"description":"Echoes its payload.","input_schema":`+schema+`}`)
	require.Equal(t, http.StatusOK, code, out)
	newTestAgent(t, api, "mcp-no", "mcp.refuse", 50, answer("FAILED", "not_today"))

	cs := mcpSession(t, base+"/mcp/default", full)
	waitFor(t, 10*time.Second, "both tools listed", func() bool { return strings.Join(toolNames(t, cs), ",") == "find_capability,mcp.echo,mcp.refuse" })
	list, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	var echoTool *mcp.Tool
	for _, tool := range list.Tools {
		if tool.Name == "mcp.echo" {
			echoTool = tool
		}
	}
	require.Equal(t, "Echoes its payload.", echoTool.Description)
	got, _ := json.Marshal(echoTool.InputSchema)
	require.JSONEq(t, schema, string(got), "the registered input schema")

	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "mcp.echo", Arguments: map[string]any{"text": "hi"}})
	require.NoError(t, err)
	require.False(t, res.IsError)
	require.Equal(t, map[string]any{"echo": map[string]any{"text": "hi"}}, res.StructuredContent)
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "mcp.refuse", Arguments: map[string]any{}})
	require.NoError(t, err)
	require.True(t, res.IsError, "a FAILED job is a tool error")
	require.Contains(t, res.Content[0].(*mcp.TextContent).Text, "not_today")

	// find_capability resolves an intent to a tool.
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "find_capability", Arguments: map[string]any{"intent": "echo my payload"}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	require.Equal(t, "mcp.echo", res.StructuredContent.(map[string]any)["tool"])

	// A narrow key sees and calls only its capability.
	ns := mcpSession(t, base+"/mcp/default", narrow)
	require.Equal(t, []string{"find_capability", "mcp.echo"}, toolNames(t, ns))
	_, err = ns.CallTool(t.Context(), &mcp.CallToolParams{Name: "mcp.refuse", Arguments: map[string]any{}})
	require.ErrorContains(t, err, `no tool "mcp.refuse"`)
	// find_capability names no capability the key may not submit.
	res, err = ns.CallTool(t.Context(), &mcp.CallToolParams{Name: "find_capability", Arguments: map[string]any{"intent": "refuse"}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.NotContains(t, res.Content[0].(*mcp.TextContent).Text, "mcp.refuse")
	// The endpoint takes POST only.
	code, body := call(t, http.MethodGet, base+"/mcp/default", "", "")
	require.Equal(t, http.StatusMethodNotAllowed, code, body)
	// Another namespace's key: that namespace is not found; its own has no tools.
	code, body = call(t, http.MethodPost, base+"/mcp/default", "Bearer "+other, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`)
	require.Equal(t, http.StatusNotFound, code, body)
	require.Equal(t, []string{"find_capability"}, toolNames(t, mcpSession(t, base+"/mcp", other)))
	code, body = call(t, http.MethodPost, base+"/mcp/default", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`)
	require.Equal(t, http.StatusUnauthorized, code, body)

	// With the tasks extension: a task at once, polled to its result.
	code, created := mcpPost(t, base+"/mcp/default", full, "tools/call", "mcp.echo",
		map[string]any{"name": "mcp.echo", "arguments": map[string]any{"text": "later"}}, true)
	require.Equal(t, http.StatusOK, code, "%v", created)
	task := created["result"].(map[string]any)
	require.Equal(t, "task", task["resultType"])
	id := task["taskId"].(string)
	require.NotEmpty(t, task["ttlMs"])
	require.NotEmpty(t, task["pollIntervalMs"])
	var done map[string]any
	waitFor(t, 20*time.Second, "the task completed", func() bool {
		_, got := mcpPost(t, base+"/mcp/default", full, "tasks/get", id, map[string]any{"taskId": id}, true)
		done = got["result"].(map[string]any)
		return done["status"] == "completed"
	})
	require.Equal(t, map[string]any{"echo": map[string]any{"text": "later"}}, done["result"].(map[string]any)["structuredContent"])
	// The task is the job: REST shows it, marked as submitted over MCP.
	require.Equal(t, "SUCCESS", getJob(t, api, id).Status)
	var via struct {
		Via string `json:"via"`
	}
	getJSON(t, api+"/v1/jobs/"+id, http.StatusOK, &via)
	require.Equal(t, "mcp", via.Via)
	// A key that may not see it: no such task.
	_, missing := mcpPost(t, base+"/mcp", other, "tasks/get", id, map[string]any{"taskId": id}, true)
	require.Contains(t, fmt.Sprint(missing["error"]), "no task")

	// The list follows the registry: a deregistered agent's tool goes.
	code, body = call(t, http.MethodDelete, api+"/v1/agents/mcp-no", "", "")
	require.Equal(t, http.StatusNoContent, code, body)
	waitFor(t, 10*time.Second, "mcp.refuse gone", func() bool { return strings.Join(toolNames(t, cs), ",") == "find_capability,mcp.echo" })
}

// A 2025-11-25 client (params.task, tasks/result) gets a task too.
func TestMCPLegacyTasks(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	newTestAgent(t, base, "mcp-old", "mcp.old", 50, answer("SUCCESS", ""))
	post := func(method string, params string) map[string]any {
		req, err := http.NewRequest(http.MethodPost, base+"/mcp/default", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"`+method+`","params":`+params+`}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if method != "initialize" {
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(out))
		var m map[string]any
		require.NoError(t, json.Unmarshal(out, &m), string(out))
		return m
	}
	init := post("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"old","version":"1"}}`)
	caps := init["result"].(map[string]any)["capabilities"].(map[string]any)
	require.NotNil(t, caps["tasks"], "the 2025-11-25 tasks capability: %v", caps)
	created := post("tools/call", `{"name":"mcp.old","arguments":{},"task":{"ttl":60000}}`)
	task := created["result"].(map[string]any)["task"].(map[string]any)
	id := task["taskId"].(string)
	// The job as it stands when the task is answered: the inline agent
	// may have answered already.
	require.Contains(t, []any{"working", "completed"}, task["status"])
	require.NotNil(t, task["ttl"])
	result := post("tasks/result", `{"taskId":"`+id+`"}`)
	require.Equal(t, false, result["result"].(map[string]any)["isError"] == true)
	require.Equal(t, "completed", post("tasks/get", `{"taskId":"`+id+`"}`)["result"].(map[string]any)["status"])
}

// A task survives a SIGKILL of the process that created it: another
// process answers tasks/get with its result.
func TestMCPTaskSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t)
	first, base, _ := serveProcess(t, dsn, deadAddr(t))
	release := make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	newTestAgent(t, base, "mcp-slow", "mcp.slow", 50, func(w http.ResponseWriter, env webhook.Envelope) {
		<-release // answers once the process that took the call is gone
		answer("SUCCESS", "")(w, env)
	})
	code, created := mcpPost(t, base+"/mcp/default", "", "tools/call", "mcp.slow", map[string]any{"name": "mcp.slow", "arguments": map[string]any{},
		"_meta": map[string]any{"agentreach/timeout_ms": 3000}}, true)
	require.Equal(t, http.StatusOK, code, "%v", created)
	id := created["result"].(map[string]any)["taskId"].(string)
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_, _ = first.Process.Wait()

	_, second, _ := serveProcess(t, dsn, deadAddr(t))
	_, got := mcpPost(t, second+"/mcp/default", "", "tasks/get", id, map[string]any{"taskId": id}, true)
	require.Contains(t, []any{"working", "completed"}, got["result"].(map[string]any)["status"], "%v", got)
	close(release)
	waitFor(t, 60*time.Second, "the task completed after the restart", func() bool {
		_, got := mcpPost(t, second+"/mcp/default", "", "tasks/get", id, map[string]any{"taskId": id}, true)
		return got["result"].(map[string]any)["status"] == "completed"
	})
}

// mcpListen opens subscriptions/listen on url with params and answers its
// messages as they come (the channel closes with the stream).
func mcpListen(t *testing.T, url string, params map[string]any) <-chan map[string]any {
	t.Helper()
	meta := map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}}
	params["_meta"] = meta
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen", "params": params})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(string(body)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	out := make(chan map[string]any, 100)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m map[string]any
				if json.Unmarshal([]byte(data), &m) == nil {
					out <- m
				}
			}
		}
	}()
	return out
}

// next is the stream's next message, within a deadline.
func nextMessage(t *testing.T, msgs <-chan map[string]any) map[string]any {
	t.Helper()
	select {
	case m, ok := <-msgs:
		require.True(t, ok, "the stream ended early")
		return m
	case <-time.After(30 * time.Second):
		t.Fatal("no message on the stream within 30 s")
		return nil
	}
}

// notifications/tasks on subscriptions/listen: a task taken by one
// process is followed on another, which sends its state at once and again
// when the job's events (committed by the first) change it, with its
// result; the stream then ends with the request's answer. A stream that
// follows the tool list hears of a new tool; taskIds without the tasks
// extension, and a body that is not JSON, are JSON-RPC errors.
func TestMCPTaskNotifications(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t)
	_, first, _ := serveProcess(t, dsn, deadAddr(t))
	_, second, _ := serveProcess(t, dsn, deadAddr(t))
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	newTestAgent(t, first, "mcp-held", "mcp.held", 50, func(w http.ResponseWriter, env webhook.Envelope) {
		<-release
		answer("SUCCESS", "")(w, env)
	})
	tools := mcpListen(t, second+"/mcp/default", map[string]any{"notifications": map[string]any{"toolsListChanged": true}})
	ack := nextMessage(t, tools)
	require.Equal(t, "notifications/subscriptions/acknowledged", ack["method"])
	require.Equal(t, true, ack["params"].(map[string]any)["notifications"].(map[string]any)["toolsListChanged"])

	_, created := mcpPost(t, first+"/mcp/default", "", "tools/call", "mcp.held", map[string]any{"name": "mcp.held", "arguments": map[string]any{}}, true)
	id := created["result"].(map[string]any)["taskId"].(string)
	msgs := mcpListen(t, second+"/mcp/default", map[string]any{"notifications": map[string]any{"taskIds": []string{id}}})
	ack = nextMessage(t, msgs)
	require.Equal(t, "notifications/subscriptions/acknowledged", ack["method"])
	params := ack["params"].(map[string]any)
	require.Equal(t, []any{id}, params["notifications"].(map[string]any)["taskIds"])
	require.EqualValues(t, 9, params["_meta"].(map[string]any)["io.modelcontextprotocol/subscriptionId"])
	now := nextMessage(t, msgs)
	require.Equal(t, "notifications/tasks", now["method"])
	require.Equal(t, id, now["params"].(map[string]any)["taskId"])
	require.Equal(t, "working", now["params"].(map[string]any)["status"])

	once.Do(func() { close(release) })
	var done map[string]any
	for done == nil {
		m := nextMessage(t, msgs)
		require.Equal(t, "notifications/tasks", m["method"], "%v", m)
		if p := m["params"].(map[string]any); p["status"] == "completed" {
			require.Equal(t, false, p["result"].(map[string]any)["isError"] == true, "%v", p)
			done = p
		} else {
			require.Equal(t, "working", p["status"], "%v", p)
		}
	}
	end := nextMessage(t, msgs)
	require.EqualValues(t, 9, end["id"])
	require.Equal(t, "complete", end["result"].(map[string]any)["resultType"])
	_, open := <-msgs
	require.False(t, open, "the stream ends once every task it follows has ended")

	// The lists mark the job with its face, and filter by it.
	waitFor(t, 20*time.Second, "the MCP job in the list of MCP jobs", func() bool {
		var page struct {
			Jobs []struct {
				JobID string `json:"job_id"`
				Via   string `json:"via"`
			} `json:"jobs"`
		}
		getJSON(t, first+"/v1/jobs?via=mcp", http.StatusOK, &page)
		return len(page.Jobs) == 1 && page.Jobs[0].JobID == id && page.Jobs[0].Via == "mcp"
	})
	code, rest := call(t, http.MethodGet, first+"/v1/jobs?via=rest", "", "")
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, rest, id)
	code, bad := call(t, http.MethodGet, first+"/v1/jobs?via=smtp", "", "")
	require.Equal(t, http.StatusBadRequest, code, bad)

	newTestAgent(t, first, "mcp-new", "mcp.new", 50, answer("SUCCESS", ""))
	require.Equal(t, "notifications/tools/list_changed", nextMessage(t, tools)["method"])

	_, refused := mcpPost(t, second+"/mcp/default", "", "subscriptions/listen", "", map[string]any{"notifications": map[string]any{"taskIds": []string{id}}}, false)
	require.EqualValues(t, -32021, refused["error"].(map[string]any)["code"], "%v", refused)
	_, unknown := mcpPost(t, second+"/mcp/default", "", "subscriptions/listen", "", map[string]any{"notifications": map[string]any{"taskIds": []string{"nope"}}}, true)
	require.EqualValues(t, -32602, unknown["error"].(map[string]any)["code"], "%v", unknown)
	mismatch, err := http.NewRequest(http.MethodPost, second+"/mcp/default", strings.NewReader(`{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{}}`))
	require.NoError(t, err)
	mismatch.Header.Set("Content-Type", "application/json")
	mismatch.Header.Set("Mcp-Method", "tools/list")
	mresp, err := http.DefaultClient.Do(mismatch)
	require.NoError(t, err)
	mresp.Body.Close()
	require.Equal(t, http.StatusBadRequest, mresp.StatusCode, "an Mcp-Method header that is not the body's method")
	resp, err := http.Post(second+"/mcp/default", "application/json", strings.NewReader(`{"jsonrpc":`))
	require.NoError(t, err)
	defer resp.Body.Close()
	var parse map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&parse))
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.EqualValues(t, -32700, parse["error"].(map[string]any)["code"], "%v", parse)
}
