package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/agentreach/agentreach/a2a"
)

// streamV1 passes a2asrv's v0.3 server-sent events on in v1.0's shapes, as
// v1.0's SendStreamingMessage and SubscribeToTask must answer: every event
// a StreamResponse, the task first ({"task": …}), then, as the job
// changes, its new artifacts ({"artifactUpdate": …}, before the status
// that comes with them) and its status ({"statusUpdate": …}); errors with
// their text as the message (errorV1). a2asrv writes an event as an id
// line and a data line, then flushes; streamV1 translates each whole event
// (up to its blank line) and writes it on at once.
type streamV1 struct {
	w       http.ResponseWriter
	pending []byte
	started bool            // the task went out
	sent    map[string]bool // artifact ids already out
}

func newStreamV1(w http.ResponseWriter) *streamV1 {
	return &streamV1{w: w, sent: map[string]bool{}}
}

func (s *streamV1) Header() http.Header { return s.w.Header() }

func (s *streamV1) WriteHeader(code int) { s.w.WriteHeader(code) }

// Write takes a2asrv's bytes and writes on every event they complete.
func (s *streamV1) Write(p []byte) (int, error) {
	s.pending = append(s.pending, p...)
	for {
		end := bytes.Index(s.pending, []byte("\n\n"))
		if end < 0 {
			return len(p), nil
		}
		event := s.pending[:end]
		s.pending = s.pending[end+2:]
		if _, err := s.w.Write(s.translate(event)); err != nil {
			return 0, err
		}
	}
}

// Flush flushes what was written on (a2asrv flushes after each event).
func (s *streamV1) Flush() {
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

// translate is one v0.3 event (without its blank line) as v1.0 events,
// each with its blank line. A line other than data passes as it is.
func (s *streamV1) translate(event []byte) []byte {
	var id string
	var data []byte
	var out bytes.Buffer
	for line := range bytes.SplitSeq(event, []byte("\n")) {
		switch {
		case bytes.HasPrefix(line, []byte("id: ")):
			id = string(line[len("id: "):])
		case bytes.HasPrefix(line, []byte("data: ")):
			data = line[len("data: "):]
		default:
			out.Write(line)
			out.WriteByte('\n')
		}
	}
	events := s.dataV1(data)
	if len(events) == 0 {
		out.WriteByte('\n') // an event without data (a comment): its blank line
		return out.Bytes()
	}
	for i, d := range events {
		if id != "" {
			out.WriteString("id: " + id)
			if i > 0 {
				out.WriteString("." + strconv.Itoa(i))
			}
			out.WriteByte('\n')
		}
		out.WriteString("data: ")
		out.Write(d)
		out.WriteString("\n\n")
	}
	return out.Bytes()
}

// dataV1 is the data of one v0.3 event (a JSON-RPC answer whose result is
// a task, a message or an update) as the data of one or more v1.0 events.
func (s *streamV1) dataV1(data []byte) [][]byte {
	if data == nil {
		return nil
	}
	var resp response
	if json.Unmarshal(data, &resp) != nil {
		return [][]byte{data}
	}
	if resp.Result == nil {
		return [][]byte{errorV1(data)}
	}
	var kind struct {
		Kind string `json:"kind"`
	}
	_ = json.Unmarshal(resp.Result, &kind)
	var results []a2a.StreamResponseV1
	switch kind.Kind {
	case "task":
		var t a2a.TaskV03
		if json.Unmarshal(resp.Result, &t) != nil {
			return [][]byte{data}
		}
		if !s.started {
			s.started = true
			for _, a := range t.Artifacts {
				s.sent[a.ArtifactID] = true
			}
			v1 := t.V1()
			results = append(results, a2a.StreamResponseV1{Task: &v1})
			break
		}
		for _, a := range t.Artifacts {
			if s.sent[a.ArtifactID] {
				continue
			}
			s.sent[a.ArtifactID] = true
			results = append(results, a2a.StreamResponseV1{ArtifactUpdate: &a2a.ArtifactUpdateV1{
				Artifact: a.V1(), ContextID: t.ContextID, LastChunk: true, TaskID: t.ID}})
		}
		update := t.StatusUpdateV1()
		results = append(results, a2a.StreamResponseV1{StatusUpdate: &update})
	case "status-update":
		var e a2a.StatusUpdateV03
		if json.Unmarshal(resp.Result, &e) != nil {
			return [][]byte{data}
		}
		v1 := e.V1()
		results = append(results, a2a.StreamResponseV1{StatusUpdate: &v1})
	case "artifact-update":
		var e a2a.ArtifactUpdateV03
		if json.Unmarshal(resp.Result, &e) != nil {
			return [][]byte{data}
		}
		v1 := e.V1()
		results = append(results, a2a.StreamResponseV1{ArtifactUpdate: &v1})
	case "message":
		var m a2a.MessageV03
		if json.Unmarshal(resp.Result, &m) != nil {
			return [][]byte{data}
		}
		v1 := m.V1()
		results = append(results, a2a.StreamResponseV1{Message: &v1})
	default:
		return [][]byte{data}
	}
	out := make([][]byte, 0, len(results))
	for _, r := range results {
		resp.Result, _ = json.Marshal(r)
		b, _ := json.Marshal(resp)
		out = append(out, b)
	}
	return out
}
