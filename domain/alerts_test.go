package domain

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestAlertPolicyValidate(t *testing.T) {
	hook := func(url, format string, kinds ...EventType) AlertWebhook {
		return AlertWebhook{URL: url, Format: format, Kinds: kinds}
	}
	many := AlertPolicy{}
	for i := range MaxAlertWebhooks + 1 {
		many.Webhooks = append(many.Webhooks, hook("https://ops.example/"+string(rune('a'+i)), AlertFormatStandard))
	}
	for _, c := range []struct {
		name  string
		p     AlertPolicy
		field string // "" for valid
	}{
		{"none", AlertPolicy{}, ""},
		{"every kind", AlertPolicy{Webhooks: []AlertWebhook{hook("https://ops.example/h", AlertFormatStandard)}}, ""},
		{"slack, two kinds", AlertPolicy{Webhooks: []AlertWebhook{hook("https://hooks.slack.example/x", AlertFormatSlack, AlertAgentDown, EventBreakerOpened)}}, ""},
		{"pagerduty with key", AlertPolicy{Webhooks: []AlertWebhook{{URL: "https://events.pd.example/v2/enqueue", Format: AlertFormatPagerDuty, RoutingKey: "k"}}}, ""},
		{"pagerduty without key", AlertPolicy{Webhooks: []AlertWebhook{hook("https://events.pd.example/v2/enqueue", AlertFormatPagerDuty)}}, "webhooks[0].routing_key"},
		{"not http", AlertPolicy{Webhooks: []AlertWebhook{hook("ftp://ops.example/h", AlertFormatStandard)}}, "webhooks[0].url"},
		{"relative", AlertPolicy{Webhooks: []AlertWebhook{hook("/hook", AlertFormatStandard)}}, "webhooks[0].url"},
		{"twice", AlertPolicy{Webhooks: []AlertWebhook{hook("https://a.example", AlertFormatStandard), hook("https://a.example", AlertFormatSlack)}}, "webhooks[1].url"},
		{"unknown kind", AlertPolicy{Webhooks: []AlertWebhook{hook("https://a.example", AlertFormatStandard, "JOB_FAILED")}}, "webhooks[0].kinds"},
		{"unknown format", AlertPolicy{Webhooks: []AlertWebhook{hook("https://a.example", "teams")}}, "webhooks[0].format"},
		{"too many", many, "webhooks"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.p.Validate()
			if c.field == "" {
				require.NoError(t, err)
				return
			}
			var fe *FieldError
			require.True(t, errors.As(err, &fe), "%v", err)
			require.Equal(t, c.field, fe.Field)
		})
	}
}

func TestAlertPolicyNormalizeKeepsTheRoutingKeyItDoesNotShow(t *testing.T) {
	prev := AlertPolicy{Version: 3, Webhooks: []AlertWebhook{{URL: "https://pd.example", Format: AlertFormatPagerDuty, RoutingKey: "secret"}}}
	shown := prev.Shown()
	require.Empty(t, shown.Webhooks[0].RoutingKey)
	require.True(t, shown.Webhooks[0].RoutingKeySet)

	next := shown.Normalize(prev)
	require.Equal(t, "secret", next.Webhooks[0].RoutingKey, "the shown document PUT back keeps the key")
	require.False(t, next.Webhooks[0].RoutingKeySet, "a stored policy does not say what only answers say")

	moved := AlertPolicy{Webhooks: []AlertWebhook{{URL: "https://other.example", Format: AlertFormatPagerDuty}}}.Normalize(prev)
	require.Empty(t, moved.Webhooks[0].RoutingKey, "a key stays with its URL")

	std := AlertPolicy{Webhooks: []AlertWebhook{{URL: "https://a.example", RoutingKey: "stray"}}}.Normalize(AlertPolicy{})
	require.Equal(t, AlertFormatStandard, std.Webhooks[0].Format, "the default format")
	var fe *FieldError
	require.True(t, errors.As(std.Validate(), &fe), "a routing key on a standard webhook is refused, not dropped")
	require.Equal(t, "webhooks[0].routing_key", fe.Field)
}

func TestAlertBodies(t *testing.T) {
	at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	down := NewAlert("42", AlertAgentDown, "ops", "agent", "summarizer-1", at, json.RawMessage(`{"to":"DOWN"}`), "http://127.0.0.1:8080/")
	back := NewAlert("43", AlertAgentBack, "ops", "agent", "summarizer-1", at, nil, "http://127.0.0.1:8080")
	lane := NewAlert("44", EventQueueHigh, "ops", "lane", "high", at, nil, "")
	require.Equal(t, "http://127.0.0.1:8080/dashboard/agents/ops/summarizer-1", down.URL)
	require.Equal(t, "critical", down.Severity)
	require.False(t, down.Resolves)
	require.True(t, back.Resolves)
	require.Equal(t, "info", back.Severity)
	require.Empty(t, lane.URL, "no link without a public address")
	require.Equal(t, "warning", lane.Severity)
	require.Equal(t, "http://h/dashboard/alerts?namespace=ops&kind=BREAKER_OPENED",
		NewAlert("1", EventBreakerOpened, "ops", "namespace", "ops", at, nil, "http://h").URL)

	for _, c := range []struct {
		name, format string
		a            Alert
		want         map[string]any
	}{
		{"standard", AlertFormatStandard, down, map[string]any{"type": "alert.agent_down", "timestamp": "2026-12-04T12:00:00Z"}},
		{"slack", AlertFormatSlack, down, map[string]any{
			"text": "[CRITICAL] agent summarizer-1 of namespace ops: is DOWN <http://127.0.0.1:8080/dashboard/agents/ops/summarizer-1|open in Agent-Reach>"}},
		{"pagerduty trigger", AlertFormatPagerDuty, down, map[string]any{"event_action": "trigger", "routing_key": "rk",
			"dedup_key": "agentreach:ops:agent:summarizer-1:AGENT_DOWN"}},
		{"pagerduty resolve", AlertFormatPagerDuty, back, map[string]any{"event_action": "resolve", "routing_key": "rk",
			"dedup_key": "agentreach:ops:agent:summarizer-1:AGENT_DOWN"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			body, err := AlertBody(c.format, c.a, "rk")
			require.NoError(t, err)
			var got map[string]any
			require.NoError(t, json.Unmarshal(body, &got))
			for k, v := range c.want {
				require.Equal(t, v, got[k], k)
			}
		})
	}
	body, _ := AlertBody(AlertFormatPagerDuty, back, "rk")
	require.NotContains(t, string(body), `"payload"`, "a resolve carries no payload")
	body, _ = AlertBody(AlertFormatPagerDuty, down, "rk")
	require.Contains(t, string(body), `"severity":"critical"`)
	require.Contains(t, string(body), `"links":[{"href":"http://127.0.0.1:8080/dashboard/agents/ops/summarizer-1"`)
}
