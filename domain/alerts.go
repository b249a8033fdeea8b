package domain

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// AlertAgentDown and AlertAgentBack are the alerts of an agent's lease:
// an AGENT_STATE_CHANGED to DOWN, and the next one out of DOWN into
// service. They are alert kinds, not event types.
const (
	AlertAgentDown EventType = "AGENT_DOWN"
	AlertAgentBack EventType = "AGENT_BACK"
)

// AlertKinds are the kinds of alert, in the order the docs list them.
var AlertKinds = []EventType{
	EventHealthDegraded, EventHealthRecovered, EventBreakerOpened, EventBreakerClosed,
	EventSelfPreservation, EventSelfPreservationEnded, EventQueueHigh, EventQueueNormal,
	AlertAgentDown, AlertAgentBack,
}

// alertPairs names, for each alert that ends a condition, the alert that
// began it: a PagerDuty incident opened by the one is resolved by the other.
var alertPairs = map[EventType]EventType{
	EventHealthRecovered: EventHealthDegraded, EventBreakerClosed: EventBreakerOpened,
	EventSelfPreservationEnded: EventSelfPreservation, EventQueueNormal: EventQueueHigh, AlertAgentBack: AlertAgentDown,
}

// The formats of an alert webhook's body.
const (
	AlertFormatStandard  = "standard"  // the alert as JSON, signed as Standard Webhooks
	AlertFormatSlack     = "slack"     // a Slack incoming webhook's {"text": ...}
	AlertFormatPagerDuty = "pagerduty" // a PagerDuty Events API v2 event (trigger, or resolve on recovery)
)

// MaxAlertWebhooks bounds a namespace's alert webhooks.
const MaxAlertWebhooks = 10

// AlertWebhook is one operator URL that alerts are sent to: the kinds it
// wants (none named: every kind) in a format.
type AlertWebhook struct {
	URL    string      `json:"url"`
	Kinds  []EventType `json:"kinds,omitempty"`
	Format string      `json:"format,omitempty"`
	// RoutingKey is a PagerDuty integration key (format pagerduty only):
	// a secret, stored but never shown (RoutingKeySet says it is there).
	RoutingKey    string `json:"routing_key,omitempty"`
	RoutingKeySet bool   `json:"routing_key_set,omitempty"`
}

// Wants says whether w is sent alerts of kind k.
func (w AlertWebhook) Wants(k EventType) bool {
	return len(w.Kinds) == 0 || slices.Contains(w.Kinds, k)
}

// AlertPolicy is a namespace's alert webhooks (PUT /v1/policies/alerts),
// versioned like the routing policy; version 0 is none.
type AlertPolicy struct {
	Version  int            `json:"version"`
	Webhooks []AlertWebhook `json:"webhooks"`
}

// Normalize fills the defaults (format standard) and keeps a pagerduty
// webhook's stored routing key when the new document names the same URL
// without one (a GET never shows the key, so a GET edited and PUT back
// keeps it).
func (p AlertPolicy) Normalize(prev AlertPolicy) AlertPolicy {
	out := AlertPolicy{Version: p.Version, Webhooks: make([]AlertWebhook, 0, len(p.Webhooks))}
	for _, w := range p.Webhooks {
		if w.Format == "" {
			w.Format = AlertFormatStandard
		}
		if w.Format == AlertFormatPagerDuty && w.RoutingKey == "" {
			for _, old := range prev.Webhooks {
				if old.URL == w.URL && old.Format == AlertFormatPagerDuty {
					w.RoutingKey = old.RoutingKey
				}
			}
		}
		w.RoutingKeySet = false
		out.Webhooks = append(out.Webhooks, w)
	}
	return out
}

// Validate checks a normalized policy, returning the first problem as a
// *FieldError.
func (p AlertPolicy) Validate() error {
	if len(p.Webhooks) > MaxAlertWebhooks {
		return fieldErr("webhooks", "must list at most %d webhooks", MaxAlertWebhooks)
	}
	seen := map[string]bool{}
	for i, w := range p.Webhooks {
		field := fmt.Sprintf("webhooks[%d]", i)
		u, err := url.Parse(w.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(w.URL) > 2048 {
			return fieldErr(field+".url", "must be an absolute http or https URL of at most 2048 bytes")
		}
		if seen[w.URL] {
			return fieldErr(field+".url", "is named twice: one webhook a URL (list every kind it wants in its kinds)")
		}
		seen[w.URL] = true
		for _, k := range w.Kinds {
			if !slices.Contains(AlertKinds, k) {
				return fieldErr(field+".kinds", "%q is not an alert kind: use %s", k, alertKindList())
			}
		}
		switch w.Format {
		case AlertFormatStandard, AlertFormatSlack:
			if w.RoutingKey != "" {
				return fieldErr(field+".routing_key", "is for pagerduty webhooks only")
			}
		case AlertFormatPagerDuty:
			if w.RoutingKey == "" {
				return fieldErr(field+".routing_key", "a pagerduty webhook needs the integration's routing key")
			}
		default:
			return fieldErr(field+".format", "must be standard, slack or pagerduty")
		}
	}
	return nil
}

// Shown is p as an API answer shows it: routing keys hidden.
func (p AlertPolicy) Shown() AlertPolicy {
	out := AlertPolicy{Version: p.Version, Webhooks: make([]AlertWebhook, 0, len(p.Webhooks))}
	for _, w := range p.Webhooks {
		w.RoutingKeySet = w.RoutingKey != ""
		w.RoutingKey = ""
		out.Webhooks = append(out.Webhooks, w)
	}
	return out
}

func alertKindList() string {
	names := make([]string, len(AlertKinds))
	for i, k := range AlertKinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// EventAlertPolicyChanged, on "policy:alerts:<namespace>": a new version
// of the namespace's alert webhooks.
const EventAlertPolicyChanged EventType = "ALERT_POLICY_CHANGED"

// AlertPolicyChanged is its data: the policy before and after, as shown
// (routing keys hidden: the log is read by more people than the keys are
// for).
type AlertPolicyChanged struct {
	Namespace string      `json:"namespace"`
	From      AlertPolicy `json:"from"`
	To        AlertPolicy `json:"to"`
}

// Alert is one alert as it is sent: what happened to which subject, and
// the dashboard page that shows it.
type Alert struct {
	ID        string          `json:"id"` // the position of the event that raised it
	Kind      EventType       `json:"kind"`
	Namespace string          `json:"namespace"`
	Subject   string          `json:"subject"`      // the agent, the namespace, or the lane
	SubjectOf string          `json:"subject_kind"` // agent, namespace or lane
	At        time.Time       `json:"at"`
	Severity  string          `json:"severity"` // critical, error, warning or info
	Resolves  bool            `json:"resolves"` // it ends the condition an earlier alert began
	Summary   string          `json:"summary"`
	URL       string          `json:"url"` // the dashboard page, when the service knows its public address
	Details   json.RawMessage `json:"details,omitempty"`
}

// AlertSeverity is how bad an alert of kind k is.
func AlertSeverity(k EventType) string {
	switch k {
	case AlertAgentDown:
		return "critical"
	case EventBreakerOpened, EventSelfPreservation:
		return "error"
	case EventHealthDegraded, EventQueueHigh:
		return "warning"
	}
	return "info"
}

// NewAlert describes an alert of kind k about subject (of kind subjectOf)
// in namespace ns, linking to the dashboard under base (no link when base
// is empty).
func NewAlert(id string, k EventType, ns, subjectOf, subject string, at time.Time, details json.RawMessage, base string) Alert {
	a := Alert{ID: id, Kind: k, Namespace: ns, Subject: subject, SubjectOf: subjectOf, At: at.UTC(), Severity: AlertSeverity(k),
		Details: details}
	_, a.Resolves = alertPairs[k]
	what := map[EventType]string{
		EventHealthDegraded: "health degraded", EventHealthRecovered: "health recovered",
		EventBreakerOpened: "breaker opened", EventBreakerClosed: "breaker closed",
		EventSelfPreservation: "self-preservation began (leases are no longer expiring)", EventSelfPreservationEnded: "self-preservation ended",
		EventQueueHigh: "queue above its high watermark", EventQueueNormal: "queue back under its watermark",
		AlertAgentDown: "is DOWN", AlertAgentBack: "is back in service",
	}[k]
	a.Summary = fmt.Sprintf("%s %s of namespace %s: %s", subjectOf, subject, ns, what)
	if base != "" {
		base = strings.TrimRight(base, "/")
		switch subjectOf {
		case "agent":
			a.URL = base + "/dashboard/agents/" + url.PathEscape(ns) + "/" + url.PathEscape(subject)
		default:
			a.URL = base + "/dashboard/alerts?namespace=" + url.QueryEscape(ns) + "&kind=" + url.QueryEscape(string(k))
		}
	}
	return a
}

// AlertBody is the body an alert is POSTed with to a webhook of format
// (AlertFormatStandard, Slack or PagerDuty); routingKey is a PagerDuty
// webhook's.
func AlertBody(format string, a Alert, routingKey string) ([]byte, error) {
	switch format {
	case AlertFormatSlack:
		text := a.Summary
		if a.URL != "" {
			text += " <" + a.URL + "|open in Agent-Reach>"
		}
		return json.Marshal(map[string]string{"text": fmt.Sprintf("[%s] %s", strings.ToUpper(a.Severity), text)})
	case AlertFormatPagerDuty:
		trigger := a.Kind
		action := "trigger"
		if began, ok := alertPairs[a.Kind]; ok {
			trigger, action = began, "resolve"
		}
		ev := map[string]any{
			"routing_key": routingKey, "event_action": action,
			"dedup_key": "agentreach:" + a.Namespace + ":" + a.SubjectOf + ":" + a.Subject + ":" + string(trigger),
		}
		if action == "trigger" {
			ev["payload"] = map[string]any{"summary": a.Summary, "source": "agent-reach/" + a.Namespace, "severity": a.Severity,
				"timestamp": a.At.Format(time.RFC3339Nano), "component": a.Subject, "class": string(a.Kind), "custom_details": a}
		}
		if a.URL != "" {
			ev["links"] = []map[string]string{{"href": a.URL, "text": "Agent-Reach"}}
		}
		return json.Marshal(ev)
	default:
		return json.Marshal(map[string]any{"type": "alert." + strings.ToLower(string(a.Kind)), "timestamp": a.At.Format(time.RFC3339Nano), "data": a})
	}
}
