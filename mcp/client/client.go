// Package client is how Agent-Reach calls MCP servers registered as
// agents ("protocol": "mcp"): it lists their tools and calls one, over
// Streamable HTTP, by the official Go SDK's client (a session per
// operation: the servers may be stateless, and an operation is rare next
// to the work it starts). A server that declares the Tasks extension is
// called by plain JSON-RPC instead (tasks.go): the SDK's client drops a
// task's id.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Endpoint is an MCP server: its URL and the headers every request
// carries (its credentials).
type Endpoint struct {
	URL     string
	Headers map[string]string
}

// ToolDef is one of a server's tools.
type ToolDef struct {
	Name        string
	Title       string
	Description string
	InputSchema json.RawMessage
}

// Client calls MCP servers.
type Client struct {
	// HTTP dials the servers (the service's guarded client).
	HTTP *http.Client
	// Version is Agent-Reach's, sent as the client's.
	Version string
}

type headerTransport struct {
	headers map[string]string
	base    http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	return t.base.RoundTrip(r)
}

// httpFor is the HTTP client of the SDK's sessions with ep: c.HTTP's
// transport adding ep's headers, without an overall timeout (the
// operation's context bounds a call; a watch's stream lives on).
func (c Client) httpFor(ep Endpoint) *http.Client {
	base := http.DefaultClient
	if c.HTTP != nil {
		base = c.HTTP
	}
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	return &http.Client{Transport: headerTransport{headers: ep.Headers, base: rt}, CheckRedirect: base.CheckRedirect}
}

// connect opens a session with ep.
func (c Client) connect(ctx context.Context, ep Endpoint) (*mcp.ClientSession, error) {
	hc := c.httpFor(ep)
	client := mcp.NewClient(&mcp.Implementation{Name: "agent-reach", Version: c.Version}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ep.URL, HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		return nil, fmt.Errorf("connect to the MCP server %s: %w", ep.URL, err)
	}
	return cs, nil
}

// MaxTools bounds how many tools of a server are read.
const MaxTools = 256

// ListTools lists ep's tools (every page), sorted by name.
func (c Client) ListTools(ctx context.Context, ep Endpoint) ([]ToolDef, error) {
	cs, err := c.connect(ctx, ep)
	if err != nil {
		return nil, err
	}
	defer func() { _ = cs.Close() }()
	var out []ToolDef
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("tools/list of %s: %w", ep.URL, err)
		}
		if len(out) == MaxTools {
			return nil, fmt.Errorf("tools/list of %s: more than %d tools", ep.URL, MaxTools)
		}
		schema, _ := json.Marshal(tool.InputSchema)
		out = append(out, ToolDef{Name: tool.Name, Title: tool.Title, Description: tool.Description, InputSchema: schema})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Outcome is what a tools/call answered: the tool's result (its
// structured content, else its text) and whether the tool failed.
type Outcome struct {
	Result  json.RawMessage
	IsError bool
	// Text is the result's text blocks, joined: the reason of an isError.
	Text string
}

// ErrProtocol marks an answer that is not a tool result (a JSON-RPC error,
// or a malformed answer): the call was not done.
var ErrProtocol = errors.New("the MCP server did not answer with a tool result")

// CallTool calls tool name of ep with args (a JSON object), for an
// attempt due by deadline (zero: none). A server that declared the Tasks
// extension (2026-07-28) may answer with a task instead of a result: task
// is then set, and GetTask reads it.
func (c Client) CallTool(ctx context.Context, ep Endpoint, name string, args json.RawMessage, deadline time.Time) (out Outcome, task *Task, err error) {
	cs, err := c.connect(ctx, ep)
	if err != nil {
		return Outcome{}, nil, err
	}
	defer func() { _ = cs.Close() }()
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	if revision := speaksTasks(cs); revision != "" {
		return c.callTask(ctx, ep, revision, name, args, deadline)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, Meta: callMeta(deadline)})
	if err != nil {
		return Outcome{}, nil, fmt.Errorf("%w: tools/call %s: %w", ErrProtocol, name, err)
	}
	return OutcomeOf(res), nil, nil
}

// callMeta is what a tools/call says in _meta of the attempt it carries,
// for a server that is itself Agent-Reach (others ignore it): the time
// the attempt has left until deadline as the job's timeout, and one
// attempt, as the attempt's retries are this side's.
func callMeta(deadline time.Time) mcp.Meta {
	m := mcp.Meta{"agentreach/max_attempts": 1}
	if !deadline.IsZero() {
		m["agentreach/timeout_ms"] = min(max(time.Until(deadline).Milliseconds(), 100), time.Hour.Milliseconds()) // what a job may ask
	}
	return m
}

// OutcomeOf reads a tool result: its structured content as the result
// when it has one, else its text (one block as a JSON string, several as
// an array of strings).
func OutcomeOf(res *mcp.CallToolResult) Outcome {
	var texts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, t.Text)
		}
	}
	out := Outcome{IsError: res.IsError}
	for i, t := range texts {
		if i > 0 {
			out.Text += "\n"
		}
		out.Text += t
	}
	switch {
	case res.StructuredContent != nil:
		out.Result, _ = json.Marshal(res.StructuredContent)
	case len(texts) == 1:
		out.Result, _ = json.Marshal(texts[0])
	default:
		out.Result, _ = json.Marshal(texts)
	}
	return out
}
