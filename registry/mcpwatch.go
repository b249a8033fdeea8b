package registry

import (
	"context"
	"errors"
	"maps"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/domain"
	mcpclient "github.com/agentreach/agentreach/mcp/client"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qMCPServersWatched = queries.Must("MCPServersWatched")
	qMCPServerToRead   = queries.Must("MCPServerToRead")
)

// mcpWatches are the watches of the MCP server agents' tool lists
// (notifications/tools/list_changed), one per server, held by the process
// that leads the sweeps: each run of the refresh sweep starts those of new
// servers and stops those of servers gone; a process that stops leading
// stops them all once no run has renewed them for three sweep intervals.
type mcpWatches struct {
	mu     sync.Mutex
	m      map[domain.AgentKey]*mcpWatch
	renew  *time.Timer
	closed bool // StopWatches: no watch starts again
}

type mcpWatch struct {
	ep     mcpclient.Endpoint
	cancel context.CancelFunc
}

// watchBackoff bounds the wait before a watch whose session ended (or
// never opened) connects again.
const (
	watchBackoffMin = time.Second
	watchBackoffMax = 5 * time.Minute
)

// watchMCPServers brings the watches in line with the MCP server agents
// of the database.
func (r *Registry) watchMCPServers(ctx context.Context) error {
	rows, err := r.pool.Query(ctx, qMCPServersWatched)
	if err != nil {
		return err
	}
	want := map[domain.AgentKey]mcpclient.Endpoint{}
	var k domain.AgentKey
	var ep mcpclient.Endpoint
	if _, err := pgx.ForEachRow(rows, []any{&k.Namespace, &k.ID, &ep.URL, &ep.Headers}, func() error {
		want[k] = mcpclient.Endpoint{URL: ep.URL, Headers: maps.Clone(ep.Headers)}
		return nil
	}); err != nil {
		return err
	}
	w := &r.mcpWatches
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	if w.m == nil {
		w.m = map[domain.AgentKey]*mcpWatch{}
	}
	for key, cur := range w.m {
		if next, ok := want[key]; !ok || next.URL != cur.ep.URL || !maps.Equal(next.Headers, cur.ep.Headers) {
			cur.cancel()
			delete(w.m, key)
		}
	}
	for key, ep := range want {
		if w.m[key] != nil {
			continue
		}
		wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		w.m[key] = &mcpWatch{ep: ep, cancel: cancel}
		go r.watchTools(wctx, key, ep)
	}
	stale := 3 * r.cfg.SweepInterval
	if w.renew == nil {
		w.renew = time.AfterFunc(stale, r.stopMCPWatches)
	} else {
		w.renew.Reset(stale)
	}
	return nil
}

// StopWatches stops the watches of MCP servers' tool lists for good: the
// process shuts down.
func (r *Registry) StopWatches() {
	r.mcpWatches.mu.Lock()
	r.mcpWatches.closed = true
	r.mcpWatches.mu.Unlock()
	r.stopMCPWatches()
}

// stopMCPWatches stops every watch (this process no longer leads).
func (r *Registry) stopMCPWatches() {
	w := &r.mcpWatches
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.renew != nil {
		w.renew.Stop()
		w.renew = nil
	}
	for key, cur := range w.m {
		cur.cancel()
		delete(w.m, key)
	}
}

// watchTools watches one server's tool list until ctx ends: each
// list_changed makes its tools due at once and reads them; a session that
// ends is opened again after a backoff. A server that sends no
// list_changed is left to the refresh sweep's schedule.
func (r *Registry) watchTools(ctx context.Context, k domain.AgentKey, ep mcpclient.Endpoint) {
	backoff := watchBackoffMin
	for ctx.Err() == nil {
		opened := time.Now()
		err := r.mcpClient().WatchTools(ctx, ep, func() { r.toolsChanged(ctx, k) })
		if errors.Is(err, mcpclient.ErrNoListChanged) {
			return
		}
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			backoff = watchBackoffMin // a session's time was up: the next at once
			continue
		}
		r.logger.DebugContext(ctx, "MCP tool list watch ended", "agent_id", k.ID, "namespace", k.Namespace, "err", err)
		if time.Since(opened) > watchBackoffMax {
			backoff = watchBackoffMin // it stood a while: not a failing server
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, watchBackoffMax)
	}
}

// toolsChanged reads server k's tools at once (a server that says so in
// a loop is read once at a time: the watch's callback runs in turn).
func (r *Registry) toolsChanged(ctx context.Context, k domain.AgentKey) {
	var d dueMCP
	d.agent = k
	err := r.pool.QueryRow(ctx, qMCPServerToRead, k.Namespace, k.ID).Scan(&d.ep.URL, &d.ep.Headers, &d.hash, &d.ttlSecs, &d.picked)
	if errors.Is(err, pgx.ErrNoRows) {
		return // deregistered meanwhile: the next sweep stops the watch
	}
	if err == nil {
		_, err = r.refreshMCP(ctx, d)
	}
	if err != nil {
		r.logger.WarnContext(ctx, "MCP tool list changed", "agent_id", k.ID, "namespace", k.Namespace, "err", err)
	}
}
