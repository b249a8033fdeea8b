package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// AgentChange is one change of the registry the watch feed reports.
type AgentChange struct {
	// Type is the event's type: AGENT_REGISTERED, AGENT_STATE_CHANGED,
	// AGENT_DEREGISTERED, AGENT_UPDATED, ...
	Type      string `json:"type"`
	Namespace string `json:"namespace"`
	AgentID   string `json:"agent_id"`
	// State is the agent's state after the change, when the event says.
	State string `json:"state"`
	// Position is the event's position in the global log.
	Position   int64     `json:"position"`
	RecordedAt time.Time `json:"recorded_at"`
	// Data is the event's own data, as the service wrote it.
	Data json.RawMessage `json:"data,omitempty"`
}

// Watch follows the registry's agent changes (GET /v1/agents/watch,
// scope agents:read or agents:lookup) on a goroutine of its own until ctx
// ends or the client is closed, and applies each to the lookup cache: an
// agent that leaves HEALTHY or deregisters is dropped from every cached
// list at once, and other changes make their namespace's lists ask the
// registry again. The feed reconnects with backoff after a lost
// connection, resuming after the last event it read (Last-Event-ID), or
// before it read any, from the oldest cached answer's watch_from. A
// 401 or 403 ends it (logged); so does a second call while one runs (it
// does nothing). It returns at once.
func (c *Client) Watch(ctx context.Context) {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	if c.watching || c.ctx.Err() != nil {
		return
	}
	c.watching = true
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.ctx, cancel)
	c.wg.Go(func() {
		defer stop()
		defer cancel()
		defer func() { c.watchMu.Lock(); c.watching = false; c.watchMu.Unlock() }()
		c.watchLoop(ctx)
	})
}

func (c *Client) watchLoop(ctx context.Context) {
	var lastID string
	for try := 0; ctx.Err() == nil; {
		read, err := c.watchOnce(ctx, &lastID)
		if ctx.Err() != nil {
			return
		}
		var apiErr *APIError
		if errors.As(err, &apiErr) && apiErr.Status/100 == 4 && apiErr.Status != http.StatusTooManyRequests {
			c.logger.Error("agentreach client: agent watch refused; cached lookups are bounded by their TTL only", "err", err)
			return
		}
		if read {
			try = 0
		}
		wait := backoff(try, 250*time.Millisecond, 5*time.Second)
		if apiErr != nil && apiErr.RetryAfter > wait {
			wait = apiErr.RetryAfter
		}
		c.logger.Warn("agentreach client: agent watch interrupted; reconnecting", "err", err, "after", wait.Round(time.Millisecond))
		try++
		if sleepCtx(ctx, wait) != nil {
			return
		}
	}
}

// watchOnce reads the feed until it ends, keeping *lastID; it reports
// whether it read anything (a successful connection).
func (c *Client) watchOnce(ctx context.Context, lastID *string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/agents/watch", nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	from := *lastID
	if from == "" {
		// Nothing read yet: from the oldest position a cached answer was
		// computed at (its watch_from), so that no change since any of
		// them is missed; with nothing cached, from now on.
		if p := c.cache.watchFrom(); p > 0 {
			from = strconv.FormatInt(p, 10)
		}
	}
	if from != "" {
		req.Header.Set("Last-Event-ID", from)
	}
	resp, err := c.stream.Do(req)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return false, answerError(resp.StatusCode, b, retryAfter(resp.Header.Get("Retry-After"), c.cfg.now()))
	}
	read := false
	err = readSSE(resp.Body, func(ev sseEvent) {
		read = true
		if ev.id != "" {
			*lastID = ev.id
		}
		if (ev.event != "agent" && ev.event != "") || ev.data == "" {
			return
		}
		var ch AgentChange
		if err := json.Unmarshal([]byte(ev.data), &ch); err != nil || ch.AgentID == "" {
			c.logger.Warn("agentreach client: unreadable agent change", "id", ev.id, "data", ev.data)
			return
		}
		if ch.Position == 0 {
			ch.Position, _ = strconv.ParseInt(ev.id, 10, 64)
		}
		if c.cache.agentChanged(ch) {
			c.cache.persist() // so that a start from the file does not offer it either
		}
		if c.cfg.onChange != nil {
			c.cfg.onChange(ch)
		}
	}, func() { read = true })
	if err == nil {
		err = errors.New("the feed ended")
	}
	return read, err
}

// sseEvent is one Server-Sent Event.
type sseEvent struct{ id, event, data string }

// maxSSELine bounds one line of the feed.
const maxSSELine = 1 << 20

// readSSE reads Server-Sent Events from r, calling on for each one and
// comment for each comment (a keepalive); it answers the reader's error,
// nil at its end.
func readSSE(r io.Reader, on func(sseEvent), comment func()) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxSSELine)
	var ev sseEvent
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if len(data) > 0 || ev.id != "" {
				ev.data = strings.Join(data, "\n")
				on(ev)
			}
			ev, data = sseEvent{}, nil
			continue
		}
		if strings.HasPrefix(line, ":") {
			comment()
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			ev.id = value
		case "event":
			ev.event = value
		case "data":
			data = append(data, value)
		}
	}
	return sc.Err()
}
