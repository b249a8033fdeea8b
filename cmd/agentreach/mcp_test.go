package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
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
	require.Equal(t, "working", task["status"])
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
