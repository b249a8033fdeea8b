package domain

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestEventPayloadsOnTheWire pins the JSON of the typed payloads: the log
// is the audit trail, so these names never change.
func TestEventPayloadsOnTheWire(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	yes := true
	for _, tc := range []struct {
		t    EventType
		data any
		json string
	}{
		{EventAwaitingApproval, AwaitingApproval{Until: at}, `{"until":"2026-12-01T12:00:00Z"}`},
		{EventApproved, Decided{Reason: "ok"}, `{"reason":"ok"}`},
		{EventRejected, Decided{}, `{}`},
		{EventAgentTokenRotated, AgentTokenRotated{PreviousValidUntil: at, InstanceID: "i"}, `{"previous_valid_until":"2026-12-01T12:00:00Z","instance_id":"i"}`},
		{EventAgentContextChanged, AgentContextChanged{From: map[string]any{}, To: map[string]any{"accepting": false}}, `{"from":{},"to":{"accepting":false}}`},
		{EventAgentUpdated, AgentUpdated{Fields: []string{"weight"}, From: AgentSettings{Weight: 50}, To: AgentSettings{Weight: 80}},
			`{"fields":["weight"],"from":{"weight":50,"rollout_percent":0,"max_concurrent":0,"aliases":null,"context":null,"metadata":null},"to":{"weight":80,"rollout_percent":0,"max_concurrent":0,"aliases":null,"context":null,"metadata":null}}`},
		{EventAgentDeregistered, AgentDeregistered{AgentID: "a"}, `{"agent_id":"a"}`},
		{EventAgentCardUpdated, AgentCardUpdated{CardURL: "u", From: CardView{Capabilities: []string{"x"}, Aliases: []string{}},
			To: CardView{Capabilities: []string{"y"}, Aliases: []string{}, Push: &yes}},
			`{"card_url":"u","from":{"capabilities":["x"],"aliases":[],"version":"","endpoint":""},"to":{"capabilities":["y"],"aliases":[],"version":"","endpoint":"","push":true}}`},
		{EventSelfPreservationEnded, SelfPreservationEnded{Namespace: "n"}, `{"namespace":"n"}`},
		{EventKeyRevoked, KeyRevoked{KeyID: "k"}, `{"key_id":"k"}`},
		{EventPolicyChanged, PolicyChanged{Namespace: "n", ApprovalPatterns: []string{"pay.*"}}, `{"namespace":"n","approval_patterns":["pay.*"]}`},
		{EventSecretRotated, SecretRotated{Namespace: "n", Secret: "callbacks", PreviousValidUntil: at}, `{"namespace":"n","secret":"callbacks","previous_valid_until":"2026-12-01T12:00:00Z"}`},
		{EventSweepReport, SweepReported{Sweep: "deadline", Lost: []string{"j"}}, `{"sweep":"deadline","lost":["j"]}`},
		{EventHealthDegraded, HealthVerdict{Window: "5m", Attempted: 10, ReachRate: 1, SuccessRate: 0.5, Below: true},
			`{"window":"5m","attempted":10,"reach_rate":1,"success_rate":0.5,"below":true}`},
	} {
		require.JSONEq(t, tc.json, string(NewEvent(tc.t, tc.data, Metadata{}).Data), string(tc.t))
	}
}

// TestRejectedReadsItsReason: REJECTED folds with its own payload.
func TestRejectedReadsItsReason(t *testing.T) {
	t.Parallel()
	var j Job
	require.NoError(t, j.Apply(NewEvent(EventSubmitted, Submitted{Namespace: "n", Capability: "pay.out", MaxAttempts: 1}, Metadata{})))
	require.NoError(t, j.Apply(NewEvent(EventAwaitingApproval, AwaitingApproval{}, Metadata{})))
	require.NoError(t, j.Apply(NewEvent(EventRejected, Decided{Reason: "too much"}, Metadata{})))
	require.Equal(t, StatusRejected, j.Status)
	require.Equal(t, "too much", j.Error)
}
