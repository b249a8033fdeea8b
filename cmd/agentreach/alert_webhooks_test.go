package main

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/webhook"
)

// alertReceiver is an operator's URL: it keeps what it was sent, and
// refuses the first refuse requests with a 500.
type alertReceiver struct {
	mu     sync.Mutex
	got    []receivedAlert
	refuse int
}

type receivedAlert struct {
	header http.Header
	body   []byte
}

func newAlertReceiver(t *testing.T, refuse int) (*alertReceiver, string) {
	r := &alertReceiver{refuse: refuse}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.got = append(r.got, receivedAlert{header: req.Header.Clone(), body: body})
		if len(r.got) <= r.refuse {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return r, srv.URL
}

func (r *alertReceiver) received() []receivedAlert {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]receivedAlert(nil), r.got...)
}

// An agent going DOWN and back is sent to the namespace's alert webhooks:
// as a signed Standard Webhooks alert (tried again after a 500), as a Slack
// text, and as a PagerDuty trigger that the AGENT_BACK resolves, each
// linking to the agent's page; a policy's bad fields are refused with
// nothing written, and a PagerDuty routing key is never shown.
func TestAlertWebhooks(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	standard, standardURL := newAlertReceiver(t, 1)
	slack, slackURL := newAlertReceiver(t, 0)
	pager, pagerURL := newAlertReceiver(t, 0)

	for _, bad := range []struct{ body, field string }{
		{`{"namespace":"default","webhooks":[{"url":"ftp://x"}]}`, "webhooks[0].url"},
		{`{"namespace":"default","webhooks":[{"url":"` + slackURL + `","format":"teams"}]}`, "webhooks[0].format"},
		{`{"namespace":"default","webhooks":[{"url":"` + slackURL + `","kinds":["AGENT_LOST"]}]}`, "webhooks[0].kinds"},
		{`{"namespace":"default","webhooks":[{"url":"` + pagerURL + `","format":"pagerduty"}]}`, "webhooks[0].routing_key"},
		{`{"namespace":"default","webhooks":[{"url":"http://169.254.169.254/hook"}]}`, "webhooks[0].url"},
		{`{"namespace":"default"}`, "webhooks"},
	} {
		code, out := call(t, http.MethodPut, base+"/v1/policies/alerts", "", bad.body)
		require.Equal(t, http.StatusBadRequest, code, "%s: %s", bad.body, out)
		require.Contains(t, out, bad.field, bad.body)
	}
	var empty struct {
		Version  int               `json:"version"`
		Webhooks []json.RawMessage `json:"webhooks"`
	}
	getJSON(t, base+"/v1/policies/alerts?namespace=default", http.StatusOK, &empty)
	require.Zero(t, empty.Version, "nothing written by the refusals")
	require.NotNil(t, empty.Webhooks)

	policy := `{"namespace":"default","webhooks":[
		{"url":"` + standardURL + `"},
		{"url":"` + slackURL + `","format":"slack","kinds":["AGENT_DOWN"]},
		{"url":"` + pagerURL + `","format":"pagerduty","kinds":["AGENT_DOWN","AGENT_BACK"],"routing_key":"R0UTINGKEY"}]}`
	code, out := call(t, http.MethodPut, base+"/v1/policies/alerts", "", policy)
	require.Equal(t, http.StatusOK, code, out)
	require.NotContains(t, out, "R0UTINGKEY", "a routing key is never shown")
	require.Contains(t, out, `"routing_key_set":true`)
	require.Contains(t, out, `"format":"standard"`, "the default format")
	code, out = call(t, http.MethodGet, base+"/v1/policies/alerts?namespace=default", "", "")
	require.Equal(t, http.StatusOK, code, out)
	require.NotContains(t, out, "R0UTINGKEY")
	require.Contains(t, out, `"version":1`)
	// The shown document PUT back keeps the routing key it does not show.
	code, out = call(t, http.MethodPut, base+"/v1/policies/alerts", "", out)
	require.Equal(t, http.StatusOK, code, out)
	require.Contains(t, out, `"version":2`)

	newTestAgent(t, base, "paged", "t.paged", 50, answer("SUCCESS", ""))
	waitState(t, base, "paged", "HEALTHY", 20*time.Second)
	code, out = call(t, http.MethodPost, base+"/v1/agents/paged/down", "", `{"reason":"disk failed"}`)
	require.Equal(t, http.StatusOK, code, out)

	// The standard webhook: refused once, then sent again, signed with the
	// namespace's callback secret.
	waitFor(t, 60*time.Second, "the AGENT_DOWN alert tried again after a 500", func() bool { return len(standard.received()) >= 2 })
	var secret struct {
		Secret string `json:"secret"`
	}
	getJSON(t, base+"/v1/callbacks/secret?namespace=default", http.StatusOK, &secret)
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret.Secret, "whsec_"))
	require.NoError(t, err)
	got := standard.received()
	require.Equal(t, got[0].body, got[1].body, "the retry sends the same alert")
	require.NoError(t, webhook.Verify(key, got[1].header, got[1].body, time.Now(), 5*time.Minute))
	var std struct {
		Type string `json:"type"`
		Data struct {
			Kind, Namespace, Subject, Severity, URL, Summary string
			Resolves                                         bool
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(got[1].body, &std), string(got[1].body))
	require.Equal(t, "alert.agent_down", std.Type)
	require.Equal(t, "AGENT_DOWN", std.Data.Kind)
	require.Equal(t, "paged", std.Data.Subject)
	require.Equal(t, "critical", std.Data.Severity)
	require.Equal(t, base+"/dashboard/agents/default/paged", std.Data.URL, "the alert links to the agent's page")
	require.Equal(t, "AGENT_DOWN", got[1].header.Get("X-Reach-Alert-Kind"))

	waitFor(t, 30*time.Second, "the Slack text", func() bool { return len(slack.received()) == 1 })
	var text struct {
		Text string `json:"text"`
	}
	require.NoError(t, json.Unmarshal(slack.received()[0].body, &text))
	require.Contains(t, text.Text, "agent paged of namespace default: is DOWN")
	require.Contains(t, text.Text, "<"+base+"/dashboard/agents/default/paged|open in Agent-Reach>")

	code, out = call(t, http.MethodPost, base+"/v1/agents/paged/up", "", `{"reason":"disk replaced"}`)
	require.Equal(t, http.StatusOK, code, out)
	waitFor(t, 30*time.Second, "the PagerDuty trigger and its resolve", func() bool { return len(pager.received()) == 2 })
	type pdEvent struct {
		RoutingKey  string `json:"routing_key"`
		EventAction string `json:"event_action"`
		DedupKey    string `json:"dedup_key"`
		Payload     *struct {
			Severity string `json:"severity"`
		} `json:"payload"`
		Links []struct{ Href string } `json:"links"`
	}
	var events []pdEvent
	for _, r := range pager.received() {
		var e pdEvent
		require.NoError(t, json.Unmarshal(r.body, &e), string(r.body))
		events = append(events, e)
	}
	if events[0].EventAction != "trigger" { // two River jobs: either may be sent first
		events[0], events[1] = events[1], events[0]
	}
	require.Equal(t, "trigger", events[0].EventAction)
	require.Equal(t, "resolve", events[1].EventAction)
	require.Equal(t, "R0UTINGKEY", events[0].RoutingKey, "the stored key, kept across the PUT that did not show it")
	require.Equal(t, events[0].DedupKey, events[1].DedupKey, "the resolve names the trigger's incident")
	require.Equal(t, "critical", events[0].Payload.Severity)
	require.Equal(t, base+"/dashboard/agents/default/paged", events[0].Links[0].Href)

	// The standard webhook wants every kind: it got the AGENT_BACK too; the
	// Slack one wants only AGENT_DOWN.
	waitFor(t, 30*time.Second, "the AGENT_BACK at the standard webhook", func() bool { return len(standard.received()) == 3 })
	require.Contains(t, string(standard.received()[2].body), `"kind":"AGENT_BACK"`)
	require.Len(t, slack.received(), 1)
}

// The fleet's series: every bucket of the window present (60 minutes, 24
// or 168 hours), the jobs that ran counted in the current one with their
// error rate and latency, other namespaces' jobs not; a bad window is 400.
func TestFleetSeries(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	var fails atomic.Int32
	newTestAgent(t, base, "fleet-a", "t.fleet", 50, func(w http.ResponseWriter, env webhook.Envelope) {
		if fails.Add(1) == 1 {
			answer("FAILED", "no")(w, env)
			return
		}
		answer("SUCCESS", "")(w, env)
	})
	waitState(t, base, "fleet-a", "HEALTHY", 20*time.Second)
	var ids []string
	for range 4 {
		ids = append(ids, submitOK(t, base, `{"namespace":"default","capability":"t.fleet","payload":{},"max_attempts":1}`))
	}
	for _, id := range ids {
		waitJob(t, base, id, func(j jobJSON) bool { return terminal[j.Status] }, 20*time.Second)
	}

	type series struct {
		Namespace     string `json:"namespace"`
		Window        string `json:"window"`
		BucketSeconds int    `json:"bucket_seconds"`
		Points        []struct {
			At           time.Time `json:"at"`
			Attempted    int       `json:"attempted"`
			Succeeded    int       `json:"succeeded"`
			Failed       int       `json:"failed"`
			ErrorRate    *float64  `json:"error_rate"`
			LatencyP50MS *float64  `json:"latency_p50_ms"`
		} `json:"points"`
	}
	sum := func(s series) (attempted, succeeded, failed int) {
		for _, p := range s.Points {
			attempted, succeeded, failed = attempted+p.Attempted, succeeded+p.Succeeded, failed+p.Failed
		}
		return
	}
	var hour series
	waitFor(t, 20*time.Second, "the four attempts in the fleet's hour", func() bool {
		getJSON(t, base+"/v1/metrics/fleet?namespace=default", http.StatusOK, &hour)
		a, s, f := sum(hour)
		return a == 4 && s+f == 4
	})
	require.Equal(t, "1h", hour.Window, "the default window")
	require.Equal(t, 60, hour.BucketSeconds)
	require.Len(t, hour.Points, 60, "every minute, attempts or not")
	require.True(t, hour.Points[0].At.Before(hour.Points[59].At), "oldest first")
	_, s, f := sum(hour)
	require.Equal(t, 3, s)
	require.Equal(t, 1, f)
	var busy int
	for _, p := range hour.Points {
		if p.Attempted > 0 {
			busy++
			require.NotNil(t, p.ErrorRate)
			require.NotNil(t, p.LatencyP50MS)
		} else {
			require.Nil(t, p.ErrorRate, "no rate where nothing ended")
		}
	}
	require.GreaterOrEqual(t, busy, 1)

	for window, buckets := range map[string]int{"24h": 24, "7d": 168} {
		var s series
		waitFor(t, 20*time.Second, "the four attempts in the fleet's "+window, func() bool {
			getJSON(t, base+"/v1/metrics/fleet?namespace=default&window="+window, http.StatusOK, &s)
			a, _, _ := sum(s)
			return a == 4
		})
		require.Len(t, s.Points, buckets, window)
		require.Equal(t, 3600, s.BucketSeconds, window)
	}
	var other series
	getJSON(t, base+"/v1/metrics/fleet?namespace=elsewhere", http.StatusOK, &other)
	a, _, _ := sum(other)
	require.Zero(t, a, "another namespace's fleet")
	code, out := call(t, http.MethodGet, base+"/v1/metrics/fleet?window=30d", "", "")
	require.Equal(t, http.StatusBadRequest, code, out)
	require.Contains(t, out, `"field":"window"`)
}
