package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/agentreach/agentreach/eventstore"
)

// streamFrom is where a Server-Sent Events stream of the global log starts:
// after the position in the Last-Event-ID header or after=, else at the
// start of the log (fromEnd false) or after its latest event (fromEnd
// true). A bad position is answered with 400 and ok false.
func (s *Server) streamFrom(c *gin.Context, fromEnd bool) (eventstore.Cursor, bool) {
	raw := c.Query("after")
	if id := c.GetHeader("Last-Event-ID"); id != "" {
		raw = id
	}
	var after int64
	var err error
	switch {
	case raw != "":
		if after, err = strconv.ParseInt(raw, 10, 64); err != nil || after < 0 {
			_ = c.Error(Invalid("after", "after must be the position of an event you received, or 0"))
			return eventstore.Cursor{}, false
		}
	case fromEnd:
		if after, err = eventstore.LastPosition(c.Request.Context(), s.deps.Pool); err != nil {
			_ = c.Error(err)
			return eventstore.Cursor{}, false
		}
	}
	cur, err := s.cursorAt(c.Request.Context(), after)
	if err != nil {
		_ = c.Error(err)
		return eventstore.Cursor{}, false
	}
	return cur, true
}

// streamLog sends the global log after cur as Server-Sent Events until the
// client goes: each record msg turns into a message (its event name and
// data; ok false skips it) goes out with the record's position as its id,
// so a client that reconnects with Last-Event-ID resumes where it left
// off. It wakes on LISTEN/NOTIFY, looks again every second (a lost
// notification delays, never loses) and sends a keep-alive comment every
// 15 s.
func (s *Server) streamLog(c *gin.Context, cur eventstore.Cursor, msg func(eventstore.Record) (event string, data []byte, ok bool)) {
	ctx := c.Request.Context()
	wake, cancel := s.deps.Store.Subscribe()
	defer cancel()
	w := c.Writer
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	w.Flush()
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	const page = 1000
	for {
		for {
			recs, err := s.deps.Store.ReadAll(ctx, nil, cur, page)
			if err != nil {
				return
			}
			for _, r := range recs {
				cur = r.Cursor()
				event, data, ok := msg(r)
				if !ok {
					continue
				}
				if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", r.Position, event, data); err != nil {
					return
				}
			}
			w.Flush()
			if len(recs) < page {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-poll.C:
		case <-keepAlive.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			w.Flush()
		}
	}
}
