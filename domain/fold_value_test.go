package domain_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
)

// TestFoldOfMadeEventsIsFoldOfStored: folding events made in this process
// (which read the value they encode) gives the fold of the same events
// read back from the log (which decode their data), for every kind of
// attempt, retry and callback.
func TestFoldOfMadeEventsIsFoldOfStored(t *testing.T) {
	t.Parallel()
	md := domain.Metadata{TraceID: "t", Actor: "test"}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	res := domain.IntentResolution{Intent: "where is my parcel", Capability: "parcel.track", Resolver: "lexical", Confidence: 0.4}
	submitted := domain.NewEvent(domain.EventSubmitted, domain.Submitted{JobID: "j", Namespace: "default", Capability: "parcel.track",
		Intent: "where is my parcel", Payload: json.RawMessage(`{"a":[1,2]}`), MaxAttempts: 3, CallbackURL: "http://127.0.0.1:9/cb",
		Priority: domain.PriorityHigh, Resolution: &res}, md)
	ev := func(t domain.EventType, d any) domain.Event { return domain.NewEvent(t, d, md) }
	for name, evs := range map[string][]domain.Event{
		"success then callback": {submitted, ev(domain.EventIntentResolved, res),
			ev(domain.EventRouted, domain.Routed{Attempt: 1, AgentID: "a", Route: json.RawMessage(`{"chosen":"a"}`)}),
			ev(domain.EventDelivered, domain.Delivered{Attempt: 1, AgentID: "a", Deadline: at, LatencyMS: 1.5, HTTPStatus: 200}),
			ev(domain.EventSuccess, domain.Outcome{Attempt: 1, AgentID: "a", Result: json.RawMessage(`{"ok":true}`), BizCode: "B1"}),
			ev(domain.EventCallbackSent, domain.CallbackOutcome{Attempt: 0, StatusCode: 200})},
		"failure, timeout, dead letter": {submitted,
			ev(domain.EventRouted, domain.Routed{Attempt: 1, AgentID: "a"}),
			ev(domain.EventAttemptFailed, domain.AttemptFailed{Attempt: 1, AgentID: "a", Reason: "http_500", RetryAt: at}),
			ev(domain.EventRouted, domain.Routed{Attempt: 2, AgentID: "b"}),
			ev(domain.EventDelivered, domain.Delivered{Attempt: 2, AgentID: "b", Deadline: at, Async: true}),
			ev(domain.EventTimeout, domain.TimedOut{Attempt: 2, AgentID: "b", Deadline: at, RetryAt: at}),
			ev(domain.EventRouted, domain.Routed{Attempt: 3, AgentID: "c"}),
			ev(domain.EventDelivered, domain.Delivered{Attempt: 3, AgentID: "c", Deadline: at}),
			ev(domain.EventFailed, domain.Outcome{Attempt: 3, AgentID: "c", Error: "no"}),
			ev(domain.EventCallbackFailed, domain.CallbackOutcome{Attempt: 1, StatusCode: 500, Final: true})},
	} {
		t.Run(name, func(t *testing.T) {
			stored := make([]domain.Event, len(evs))
			for i, e := range evs {
				stored[i] = domain.Event{Type: e.Type, Data: e.Data, Metadata: e.Metadata}
			}
			made, err := domain.FoldJob(evs)
			require.NoError(t, err)
			read, err := domain.FoldJob(stored)
			require.NoError(t, err)
			require.Equal(t, read, made)
		})
	}
}
