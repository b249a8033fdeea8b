package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A server built with the official Go SDK that adds a tool while it is
// watched: the watch hears notifications/tools/list_changed.
func TestWatchToolsHearsListChanged(t *testing.T) {
	t.Parallel()
	srv := mcp.NewServer(&mcp.Implementation{Name: "tools", Version: "1"}, nil)
	tool := func(name string) {
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
	}
	tool("one")
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	ctx, cancel := context.WithCancel(t.Context())
	changed := make(chan struct{}, 10)
	done := make(chan error, 1)
	go func() { done <- Client{}.WatchTools(ctx, Endpoint{URL: ts.URL}, func() { changed <- struct{}{} }) }()
	// The watch's stream opens at some point: add a tool every 100 ms
	// until one is heard, within a deadline.
	deadline := time.After(20 * time.Second)
	add := time.NewTicker(100 * time.Millisecond)
	defer add.Stop()
	for n := 0; ; n++ {
		select {
		case <-changed:
			cancel()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the watch did not end with its context")
			}
			return
		case err := <-done:
			t.Fatalf("the watch ended: %v", err)
		case <-deadline:
			t.Fatal("no list_changed within 20 s")
		case <-add.C:
			tool(fmt.Sprintf("added%d", n))
		}
	}
}
