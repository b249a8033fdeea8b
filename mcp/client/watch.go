package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ErrNoListChanged: the server does not say when its tools change (no
// tools.listChanged in its capabilities): there is nothing to watch.
var ErrNoListChanged = fmt.Errorf("the MCP server does not send notifications/tools/list_changed")

// WatchSession bounds one session of WatchTools: the SDK's client does not
// notice a 2026-07-28 listen stream that ended (a restart of the server,
// a proxy's idle timeout), so the session is opened afresh this often.
const WatchSession = 5 * time.Minute

// WatchTools holds a session with ep that listens for
// notifications/tools/list_changed (subscriptions/listen of the 2026-07-28
// revision, the session's stream of earlier ones), calling changed for
// each, until ctx ends, the session does (its error then), or
// WatchSession passes (nil: open another).
func (c Client) WatchTools(ctx context.Context, ep Endpoint, changed func()) error {
	ctx, cancel := context.WithTimeout(ctx, WatchSession)
	defer cancel()
	hc := c.httpFor(ep)
	client := mcp.NewClient(&mcp.Implementation{Name: "agent-reach", Version: c.Version}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed() }})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ep.URL, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		return fmt.Errorf("connect to the MCP server %s: %w", ep.URL, err)
	}
	defer func() { _ = cs.Close() }()
	if res := cs.InitializeResult(); res == nil || res.Capabilities == nil || res.Capabilities.Tools == nil || !res.Capabilities.Tools.ListChanged {
		return ErrNoListChanged
	}
	stop := context.AfterFunc(ctx, func() { _ = cs.Close() })
	defer stop()
	err = cs.Wait()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil // the session's time is up
	}
	return err
}
