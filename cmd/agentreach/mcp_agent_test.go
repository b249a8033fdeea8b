package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentreach/agentreach/webhook"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// mcpToolServer is an MCP server built with the official Go SDK: tools
// add and fail (and later more), behind a header it requires.
type mcpToolServer struct {
	url   string
	calls atomic.Int32
	extra atomic.Bool // lists the tool shout too
}

func newMCPToolServer(t *testing.T, header, value string) *mcpToolServer {
	s := &mcpToolServer{}
	newServer := func(*http.Request) *mcp.Server {
		srv := mcp.NewServer(&mcp.Implementation{Name: "tools", Version: "1.0.0"}, nil)
		srv.AddTool(&mcp.Tool{Name: "mcpa.add", Description: "Adds a and b.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`)},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				s.calls.Add(1)
				var in struct{ A, B float64 }
				_ = json.Unmarshal(req.Params.Arguments, &in)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sum"}}, StructuredContent: map[string]any{"sum": in.A + in.B}}, nil
			})
		srv.AddTool(&mcp.Tool{Name: "mcpa.fail", Description: "Always fails.", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				s.calls.Add(1)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "out of paper"}}, IsError: true}, nil
			})
		if s.extra.Load() {
			srv.AddTool(&mcp.Tool{Name: "mcpa.shout", InputSchema: json.RawMessage(`{"type":"object"}`)},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "HEY"}}}, nil
				})
		}
		return srv
	}
	h := mcp.NewStreamableHTTPHandler(newServer, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(header) != value {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections() // the service's watch of its tool list stays open
		srv.Close()
	})
	s.url = srv.URL + "/mcp"
	return s
}

// An MCP server is an agent: registered by URL with its credentials (never
// shown), its tools its capabilities (with their descriptions and
// schemas), kept alive by reading its tools, and each job for one of them a
// tools/call whose result is the job's (isError: FAILED) and reaches the
// caller's callback; a server.json registers it too, and a tool it adds
// later becomes a capability.
func TestMCPServerIsAnAgent(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	tools := newMCPToolServer(t, "X-Api-Key", "s3cret")

	registered := time.Now()
	code, out := call(t, http.MethodPost, base+"/v1/agents", "", `{"agent_id":"mcp-tools","protocol":"mcp","endpoint":"`+tools.url+`","ttl_seconds":6}`)
	require.Equal(t, http.StatusBadRequest, code, "without its credentials: %s", out)
	require.Contains(t, out, `"field":"endpoint"`)
	code, out = call(t, http.MethodPost, base+"/v1/agents", "", `{"agent_id":"mcp-tools","protocol":"mcp","endpoint":"`+tools.url+
		`","headers":{"X-Api-Key":"s3cret"},"ttl_seconds":6}`)
	require.Equal(t, http.StatusCreated, code, out)
	require.NotContains(t, out, "s3cret", "a header's value is never shown")
	var reg agentJSON
	require.NoError(t, json.Unmarshal([]byte(out), &reg))
	require.Equal(t, []string{"mcpa.add", "mcpa.fail"}, reg.Capabilities)
	waitState(t, base, "mcp-tools", "HEALTHY", 20*time.Second)
	code, out = call(t, http.MethodGet, base+"/v1/agents/mcp-tools", "", "")
	require.Equal(t, http.StatusOK, code, out)
	require.NotContains(t, out, "s3cret")
	require.Contains(t, out, `"headers":["X-Api-Key"]`)
	var entry struct {
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	getJSON(t, base+"/v1/capabilities/mcpa.add", http.StatusOK, &entry)
	require.Equal(t, "Adds a and b.", entry.Description)
	require.Contains(t, string(entry.InputSchema), `"required":["a","b"]`)

	// A job over REST: a tools/call, its result called back.
	got := make(chan []byte, 1)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body json.RawMessage
		_ = json.NewDecoder(r.Body).Decode(&body)
		select {
		case got <- body:
		default:
		}
	}))
	t.Cleanup(receiver.Close)
	id := submitOK(t, base, `{"capability":"mcpa.add","payload":{"a":2,"b":40},"callback_url":"`+receiver.URL+`"}`)
	j := waitTerminal(t, base, id, 20*time.Second)
	require.Equal(t, "SUCCESS", j.Status)
	require.JSONEq(t, `{"sum":42}`, string(j.Result))
	select {
	case body := <-got:
		require.Contains(t, string(body), `"sum":42`)
	case <-time.After(20 * time.Second):
		t.Fatal("no callback with the tool's result")
	}
	fail := submitOK(t, base, `{"capability":"mcpa.fail","payload":{},"max_attempts":1}`)
	j = waitTerminal(t, base, fail, 20*time.Second)
	require.Equal(t, "FAILED", j.Status)
	require.Equal(t, "tool_error", j.BizCode)
	require.Contains(t, j.Error, "out of paper")

	// Reading its tools keeps its lease (6 s) alive, and finds a new tool.
	tools.extra.Store(true)
	waitFor(t, 30*time.Second, "the new tool a capability", func() bool {
		var a agentJSON
		getJSON(t, base+"/v1/agents/mcp-tools", http.StatusOK, &a)
		return strings.Join(a.Capabilities, ",") == "mcpa.add,mcpa.fail,mcpa.shout"
	})
	// Past its lease, it holds it: HEALTHY, or SUSPECT when a read came
	// late on a busy machine (reads every 2 s, SUSPECT after 3 s without
	// one), never DOWN.
	waitFor(t, 30*time.Second, "7 s since its registration", func() bool { return time.Since(registered) > 7*time.Second })
	require.Contains(t, []string{"HEALTHY", "SUSPECT"}, agentState(t, base, "mcp-tools"), "alive past its 6 s lease without a heartbeat")

	// A server.json: its streamable-http remote and the header it needs.
	code, out = call(t, http.MethodPost, base+"/v1/agents", "", `{"ttl_seconds":6,"capabilities":["mcpa.add"],
		"server":{"name":"io.example/adder-two","description":"Adds.","version":"2.1.0",
		"remotes":[{"type":"sse","url":"http://127.0.0.1:1/sse"},{"type":"streamable-http","url":"`+tools.url+`",
		"headers":[{"name":"X-Api-Key","isRequired":true,"isSecret":true}]}]},"headers":{"X-Api-Key":"s3cret"}}`)
	require.Equal(t, http.StatusCreated, code, out)
	require.NoError(t, json.Unmarshal([]byte(out), &reg))
	require.Equal(t, "adder-two", reg.AgentID)
	require.Equal(t, []string{"mcpa.add"}, reg.Capabilities, "only the tools it names")
	code, out = call(t, http.MethodPost, base+"/v1/agents", "", `{"server":{"name":"io.example/x","version":"1",
		"remotes":[{"type":"streamable-http","url":"`+tools.url+`","headers":[{"name":"X-Api-Key","isRequired":true}]}]}}`)
	require.Equal(t, http.StatusBadRequest, code, out)
	require.Contains(t, out, "X-Api-Key")

	// The private MCP registry lists both.
	var list struct {
		Servers []struct {
			Server struct {
				Name    string `json:"name"`
				Version string `json:"version"`
				Remotes []struct {
					Type string `json:"type"`
					URL  string `json:"url"`
				} `json:"remotes"`
			} `json:"server"`
		} `json:"servers"`
		Metadata struct {
			Count int `json:"count"`
		} `json:"metadata"`
	}
	getJSON(t, base+"/v0.1/servers?namespace=default", http.StatusOK, &list)
	require.Equal(t, 2, list.Metadata.Count)
	require.Equal(t, "default/adder-two", list.Servers[0].Server.Name)
	require.Equal(t, "2.1.0", list.Servers[0].Server.Version)
	require.Equal(t, base+"/mcp/default", list.Servers[0].Server.Remotes[0].URL, "reached through Agent-Reach, durably")
	var latest struct {
		Server struct {
			Name string `json:"name"`
		} `json:"server"`
	}
	getJSON(t, base+"/v0.1/servers/default%2Fmcp-tools/versions/latest?namespace=default", http.StatusOK, &latest)
	require.Equal(t, "default/mcp-tools", latest.Server.Name)
	code, out = call(t, http.MethodGet, base+"/v0.1/servers/default%2Fnope/versions/latest?namespace=default", "", "")
	require.Equal(t, http.StatusNotFound, code, out)
}

// deliveredTask waits for job id's attempt to be DELIVERED as a task
// (async, with the server's task id) and answers the task id.
func deliveredTask(t *testing.T, base, id string) string {
	t.Helper()
	var taskID string
	waitFor(t, 30*time.Second, "the attempt delivered as the server's task", func() bool {
		for _, e := range jobEvents(t, base, id) {
			var d struct {
				Async        bool   `json:"async"`
				RemoteTaskID string `json:"remote_task_id"`
			}
			if e.Type == "DELIVERED" && json.Unmarshal(e.Data, &d) == nil && d.Async && d.RemoteTaskID != "" {
				taskID = d.RemoteTaskID
				return true
			}
		}
		return false
	})
	return taskID
}

// An MCP server that speaks the Tasks extension (here Agent-Reach's own MCP
// face, namespace up, registered as an agent of namespace default) answers
// a delivery with a task: the attempt is DELIVERED with the server's task
// id and no worker waits on it; the poller reads the task (tasks/get) until
// it completes and records its result as the job's.
func TestMCPServerTaskDelivery(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	release, stop := make(chan struct{}), make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			return
		}
		var env webhook.Envelope
		_ = json.NewDecoder(r.Body).Decode(&env)
		if strings.Contains(string(env.Payload), `"hold":true`) {
			select { // held until the test ends
			case <-r.Context().Done():
			case <-stop:
			}
			return
		}
		<-release
		answer("SUCCESS", "")(w, env)
	}))
	t.Cleanup(upstream.Close)
	t.Cleanup(func() { close(stop) }) // before the server's Close
	code, out := call(t, http.MethodPost, base+"/v1/agents", "", `{"agent_id":"up-agent","namespace":"up","capabilities":["slow.task"],"endpoint":"`+upstream.URL+`"}`)
	require.Equal(t, http.StatusCreated, code, out)
	code, out = call(t, http.MethodPost, base+"/v1/agents", "", `{"agent_id":"up-mcp","protocol":"mcp","endpoint":"`+base+`/mcp/up","capabilities":["slow.task"],"ttl_seconds":60}`)
	require.Equal(t, http.StatusCreated, code, out)
	waitState(t, base, "up-mcp", "HEALTHY", 20*time.Second)

	start := time.Now()
	_, sub := submit(t, base, `{"capability":"slow.task","payload":{"n":1},"timeout_ms":60000}`)
	id := sub["job_id"].(string)
	taskID := deliveredTask(t, base, id)
	var up struct {
		MaxAttempts int `json:"max_attempts"`
	}
	getJSON(t, base+"/v1/jobs/"+taskID, http.StatusOK, &up)
	require.Equal(t, 1, up.MaxAttempts, "the upstream job makes one attempt: the retries are this side's")
	var upSub struct {
		TimeoutMS int `json:"timeout_ms"`
	}
	require.NoError(t, json.Unmarshal(jobEvents(t, base, taskID)[0].Data, &upSub))
	require.InDelta(t, 60000, upSub.TimeoutMS, 15000, "the upstream job's timeout is what the attempt has left")
	require.NotEmpty(t, taskID)
	t.Logf("delivered as a task after %s", time.Since(start))
	require.NotEqual(t, id, taskID, "the task is the upstream job of namespace up")
	require.Equal(t, "DELIVERED", getJob(t, base, id).Status)

	once.Do(func() { close(release) })
	j := waitJob(t, base, id, func(j jobJSON) bool { return j.Status == "SUCCESS" }, 30*time.Second)
	var res struct {
		JobID string `json:"job_id"`
	}
	require.NoError(t, json.Unmarshal(j.Result, &res), string(j.Result))
	require.Equal(t, taskID, res.JobID, "the result is the upstream agent's, read from the task")
	require.Equal(t, "up-mcp", j.AgentID)
	t.Logf("done after %s", time.Since(start))

	// A job cancelled here has its task cancelled at the server
	// (tasks/cancel): the upstream job of namespace up ends CANCELLED.
	_, sub = submit(t, base, `{"capability":"slow.task","payload":{"hold":true},"timeout_ms":60000}`)
	held := sub["job_id"].(string)
	upstreamID := deliveredTask(t, base, held)
	code, out = call(t, http.MethodPost, base+"/v1/jobs/"+held+"/cancel", "", `{"reason":"no longer needed"}`)
	require.Equal(t, http.StatusOK, code, out)
	waitJob(t, base, upstreamID, func(j jobJSON) bool { return j.Status == "CANCELLED" }, 30*time.Second)
}

// A server that says its tools changed (notifications/tools/list_changed,
// here an official Go SDK server that adds a tool) has them read at once:
// the new tool is a capability of its agent long before the next read of
// the schedule (a third of an hour's lease).
func TestMCPServerToolsListChanged(t *testing.T) {
	t.Parallel()
	svc, dsn := service(t)
	base := svc.m.URL()
	srv := mcp.NewServer(&mcp.Implementation{Name: "growing", Version: "1"}, nil)
	tool := func(name string) {
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
	}
	tool("grow.one")
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	code, out := call(t, http.MethodPost, base+"/v1/agents", "", `{"agent_id":"growing","protocol":"mcp","endpoint":"`+ts.URL+`","ttl_seconds":3600}`)
	require.Equal(t, http.StatusCreated, code, out)
	// Another agent of the same server picked one tool: reads keep to it.
	code, out = call(t, http.MethodPost, base+"/v1/agents", "", `{"agent_id":"picky","protocol":"mcp","endpoint":"`+ts.URL+`","ttl_seconds":6,"capabilities":["grow.one"]}`)
	require.Equal(t, http.StatusCreated, code, out)
	firstAdd := time.Now()

	// The watch opens at the next sweep: add a tool every 200 ms until
	// one shows as a capability.
	deadline := time.Now().Add(30 * time.Second)
	for n := 0; ; n++ {
		var a struct {
			Capabilities []string `json:"capabilities"`
		}
		getJSON(t, base+"/v1/agents/growing", http.StatusOK, &a)
		if len(a.Capabilities) > 1 {
			require.Contains(t, a.Capabilities, "grow.one")
			require.Contains(t, a.Capabilities, "grow.added0", "a read after the change finds every tool added so far")
			db := openDB(t, dsn)
			waitFor(t, 30*time.Second, "picky's tools read after a tool was added", func() bool {
				var at time.Time
				err := db.QueryRow(t.Context(), `SELECT refreshed_at FROM mcp_servers WHERE agent_id = 'picky'`).Scan(&at)
				return err == nil && at.After(firstAdd)
			})
			var p agentJSON
			getJSON(t, base+"/v1/agents/picky", http.StatusOK, &p)
			require.Equal(t, []string{"grow.one"}, p.Capabilities, "a read keeps to the tools the registration picked")
			return
		}
		require.True(t, time.Now().Before(deadline), "no tool added became a capability within 30 s: %v", a.Capabilities)
		tool(fmt.Sprintf("grow.added%d", n))
		select {
		case <-time.After(200 * time.Millisecond):
		case <-t.Context().Done():
			return
		}
	}
}
