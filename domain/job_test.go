package domain_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
)

// TestTransitionExhaustive walks every (status, event) pair and checks it
// against the expected table written out by hand from docs/design.md, so that a
// change to the state machine must be made twice to pass.
func TestTransitionExhaustive(t *testing.T) {
	t.Parallel()
	S := func(s domain.JobStatus) *domain.JobStatus { return &s }
	type row map[domain.EventType]*domain.JobStatus
	terminal := func(s domain.JobStatus) row {
		return row{domain.EventResultDuplicate: S(s), domain.EventCallbackSent: S(s), domain.EventCallbackFailed: S(s),
			domain.EventInputProvided: S(s)}
	}
	want := map[domain.JobStatus]row{
		domain.StatusNone: {domain.EventSubmitted: S(domain.StatusSubmitted)},
		domain.StatusSubmitted: {
			domain.EventIntentResolved:   S(domain.StatusSubmitted),
			domain.EventAwaitingApproval: S(domain.StatusAwaitingApproval),
			domain.EventRouted:           S(domain.StatusSubmitted),
			domain.EventDelivered:        S(domain.StatusDelivered),
			domain.EventAttemptFailed:    S(domain.StatusSubmitted),
			domain.EventDeadLetter:       S(domain.StatusDeadLetter),
			domain.EventCancelled:        S(domain.StatusCancelled),
			domain.EventResultDuplicate:  S(domain.StatusSubmitted),
		},
		domain.StatusAwaitingApproval: {
			domain.EventApproved:  S(domain.StatusSubmitted),
			domain.EventRejected:  S(domain.StatusRejected),
			domain.EventCancelled: S(domain.StatusCancelled),
		},
		domain.StatusDelivered: {
			domain.EventSuccess:         S(domain.StatusSuccess),
			domain.EventFailed:          S(domain.StatusFailed),
			domain.EventAttemptFailed:   S(domain.StatusSubmitted),
			domain.EventTimeout:         S(domain.StatusTimeout),
			domain.EventCancelled:       S(domain.StatusCancelled),
			domain.EventResultDuplicate: S(domain.StatusDelivered),
			domain.EventAwaitingInput:   S(domain.StatusAwaitingInput),
			domain.EventInputProvided:   S(domain.StatusDelivered),
			domain.EventProgress:        S(domain.StatusDelivered),
		},
		domain.StatusAwaitingInput: {
			domain.EventInputProvided:   S(domain.StatusAwaitingInput),
			domain.EventResumed:         S(domain.StatusDelivered),
			domain.EventSuccess:         S(domain.StatusSuccess),
			domain.EventFailed:          S(domain.StatusFailed),
			domain.EventAttemptFailed:   S(domain.StatusSubmitted),
			domain.EventCancelled:       S(domain.StatusCancelled),
			domain.EventResultDuplicate: S(domain.StatusAwaitingInput),
		},
		domain.StatusTimeout: {
			domain.EventRouted:          S(domain.StatusSubmitted),
			domain.EventAttemptFailed:   S(domain.StatusSubmitted),
			domain.EventDeadLetter:      S(domain.StatusDeadLetter),
			domain.EventCancelled:       S(domain.StatusCancelled),
			domain.EventResultDuplicate: S(domain.StatusTimeout),
		},
		domain.StatusSuccess:    terminal(domain.StatusSuccess),
		domain.StatusFailed:     terminal(domain.StatusFailed),
		domain.StatusDeadLetter: terminal(domain.StatusDeadLetter),
		domain.StatusCancelled:  terminal(domain.StatusCancelled),
		domain.StatusRejected:   terminal(domain.StatusRejected),
	}
	require.Len(t, want, len(domain.JobStatuses))
	pairs := 0
	for _, from := range domain.JobStatuses {
		for _, ev := range domain.JobEventTypes {
			pairs++
			got, err := domain.Transition(from, ev)
			if to := want[from][ev]; to != nil {
				require.NoError(t, err, "%q + %s", from, ev)
				require.Equal(t, *to, got, "%q + %s", from, ev)
			} else {
				require.ErrorIs(t, err, domain.ErrIllegalTransition, "%q + %s", from, ev)
				require.Equal(t, from, got)
			}
		}
	}
	require.Equal(t, len(domain.JobStatuses)*len(domain.JobEventTypes), pairs)
}

func TestTerminalStatusNeverChanges(t *testing.T) {
	t.Parallel()
	for _, from := range domain.JobStatuses {
		if !from.Terminal() {
			continue
		}
		for _, ev := range domain.JobEventTypes {
			if to, err := domain.Transition(from, ev); err == nil {
				require.Equal(t, from, to, "%s + %s", from, ev)
			}
		}
	}
}

func TestFoldJob(t *testing.T) {
	t.Parallel()
	md := domain.Metadata{TraceID: "t1"}
	deadline := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	evs := []domain.Event{
		domain.NewEvent(domain.EventSubmitted, domain.Submitted{JobID: "j1", Capability: "doc:parse", Payload: json.RawMessage(`{"a":1}`), MaxAttempts: 3}, md),
		domain.NewEvent(domain.EventRouted, domain.Routed{Attempt: 1, AgentID: "a1"}, md),
		domain.NewEvent(domain.EventAttemptFailed, domain.AttemptFailed{Attempt: 1, AgentID: "a1", Reason: "http_503"}, md),
		domain.NewEvent(domain.EventRouted, domain.Routed{Attempt: 2, AgentID: "a2"}, md),
		domain.NewEvent(domain.EventDelivered, domain.Delivered{Attempt: 2, AgentID: "a2", Deadline: deadline}, md),
		domain.NewEvent(domain.EventSuccess, domain.Outcome{Attempt: 2, AgentID: "a2", Result: json.RawMessage(`"ok"`)}, md),
		domain.NewEvent(domain.EventResultDuplicate, domain.ResultDuplicate{Attempt: 2, Status: domain.StatusSuccess, Reason: "duplicate"}, md),
		domain.NewEvent(domain.EventCallbackSent, domain.CallbackOutcome{Attempt: 1, StatusCode: 200}, md),
	}
	j, err := domain.FoldJob(evs)
	require.NoError(t, err)
	require.Equal(t, domain.StatusSuccess, j.Status)
	require.Equal(t, 8, j.Version)
	require.Equal(t, 2, j.Attempts)
	require.Equal(t, "a2", j.AgentID)
	require.JSONEq(t, `"ok"`, string(j.Result))
	require.Empty(t, j.Error)
	require.True(t, j.CallbackAcked)
	require.Equal(t, "doc:parse", j.Capability)

	// A second success is refused and leaves the job as it was.
	before := j
	err = j.Apply(domain.NewEvent(domain.EventSuccess, domain.Outcome{Attempt: 2}, md))
	require.ErrorIs(t, err, domain.ErrIllegalTransition)
	require.Equal(t, before, j)
}

func TestApplyRejectsBadData(t *testing.T) {
	t.Parallel()
	var j domain.Job
	err := j.Apply(domain.Event{Type: domain.EventSubmitted, Data: json.RawMessage(`[1,2`)})
	require.Error(t, err)
	require.Equal(t, domain.StatusNone, j.Status)
	require.Zero(t, j.Version)
}

// A slot is held from ROUTED until the attempt ends, whatever ends it, and
// is kept while the agent holds the job.
func TestSlotHolder(t *testing.T) {
	t.Parallel()
	md := domain.Metadata{}
	ev := func(typ domain.EventType, d any) domain.Event { return domain.NewEvent(typ, d, md) }
	submitted := ev(domain.EventSubmitted, domain.Submitted{JobID: "j1", Capability: "c", MaxAttempts: 3})
	routed := ev(domain.EventRouted, domain.Routed{Attempt: 1, AgentID: "a1"})
	delivered := ev(domain.EventDelivered, domain.Delivered{Attempt: 1, AgentID: "a1"})
	for _, tc := range []struct {
		name string
		evs  []domain.Event
		want string
	}{
		{"submitted holds none", []domain.Event{submitted}, ""},
		{"routed holds", []domain.Event{submitted, routed}, "a1"},
		{"routed to no agent holds none", []domain.Event{submitted, ev(domain.EventRouted, domain.Routed{Attempt: 1})}, ""},
		{"delivered holds", []domain.Event{submitted, routed, delivered}, "a1"},
		{"awaiting input holds", []domain.Event{submitted, routed, delivered, ev(domain.EventAwaitingInput, domain.AwaitingInput{Attempt: 1})}, "a1"},
		{"late duplicate keeps it", []domain.Event{submitted, routed, ev(domain.EventResultDuplicate, domain.ResultDuplicate{Attempt: 0})}, "a1"},
		{"failed attempt frees", []domain.Event{submitted, routed, ev(domain.EventAttemptFailed, domain.AttemptFailed{Attempt: 1, AgentID: "a1"})}, ""},
		{"success frees", []domain.Event{submitted, routed, delivered, ev(domain.EventSuccess, domain.Outcome{Attempt: 1})}, ""},
		{"failure frees", []domain.Event{submitted, routed, delivered, ev(domain.EventFailed, domain.Outcome{Attempt: 1})}, ""},
		{"timeout frees", []domain.Event{submitted, routed, delivered, ev(domain.EventTimeout, domain.TimedOut{Attempt: 1})}, ""},
		{"cancel frees", []domain.Event{submitted, routed, delivered, ev(domain.EventCancelled, domain.Cancelled{})}, ""},
		{"dead letter frees", []domain.Event{submitted, routed, ev(domain.EventDeadLetter, domain.DeadLettered{})}, ""},
		{"next attempt holds the new agent", []domain.Event{submitted, routed, ev(domain.EventAttemptFailed, domain.AttemptFailed{Attempt: 1}),
			ev(domain.EventRouted, domain.Routed{Attempt: 2, AgentID: "a2"})}, "a2"},
	} {
		j, err := domain.FoldJob(tc.evs)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, j.SlotHolder, tc.name)
	}
}

// TestEndingEvents: the events that end a job are those that take it from
// a status that is not terminal to one that is, and no other.
func TestEndingEvents(t *testing.T) {
	t.Parallel()
	require.Equal(t, []domain.EventType{domain.EventCancelled, domain.EventDeadLetter, domain.EventFailed, domain.EventRejected, domain.EventSuccess}, domain.EndingEvents())
	for _, e := range domain.EndingEvents() {
		ends := false
		for _, from := range domain.JobStatuses {
			if to, err := domain.Transition(from, e); err == nil && !from.Terminal() && to.Terminal() {
				ends = true
			}
		}
		require.True(t, ends, "%s ends a job", e)
	}
	for _, e := range []domain.EventType{domain.EventTimeout, domain.EventDelivered, domain.EventRouted, domain.EventAttemptFailed, domain.EventCallbackSent} {
		require.NotContains(t, domain.EndingEvents(), e)
	}
}
