package domain_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/agentreach/agentreach/domain"
)

// BenchmarkFoldStoredJob folds a job's five events as read back from the
// log (decoding their data), as the projector and every load of a job do.
func BenchmarkFoldStoredJob(b *testing.B) {
	md := domain.Metadata{TraceID: "t", Actor: "test"}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	made := []domain.Event{
		domain.NewEvent(domain.EventSubmitted, domain.Submitted{JobID: "j", Namespace: "default", Capability: "bench.echo",
			Payload: json.RawMessage(`{"n":1}`), MaxAttempts: 3, CallbackURL: "http://127.0.0.1:9/cb"}, md),
		domain.NewEvent(domain.EventRouted, domain.Routed{Attempt: 1, AgentID: "a", Route: json.RawMessage(`{"chosen":"a"}`)}, md),
		domain.NewEvent(domain.EventDelivered, domain.Delivered{Attempt: 1, AgentID: "a", Deadline: at, LatencyMS: 1.5, HTTPStatus: 200}, md),
		domain.NewEvent(domain.EventSuccess, domain.Outcome{Attempt: 1, AgentID: "a", Result: json.RawMessage(`{"ok":true}`)}, md),
		domain.NewEvent(domain.EventCallbackSent, domain.CallbackOutcome{StatusCode: 200}, md),
	}
	stored := make([]domain.Event, len(made))
	for i, e := range made {
		stored[i] = domain.Event{Type: e.Type, Data: e.Data, Metadata: e.Metadata}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := domain.FoldJob(stored); err != nil {
			b.Fatal(err)
		}
	}
}
