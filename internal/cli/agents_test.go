package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/internal/cli"
)

func TestUntilIsNeverNegative(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	require.Equal(t, "in 4.2s", cli.Until(now.Add(4200*time.Millisecond), now))
	require.Equal(t, "3s ago", cli.Until(now.Add(-3*time.Second), now))
	require.Equal(t, "in 0s", cli.Until(now, now))
}

func TestNextLeaseChange(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ttl := 20 * time.Second
	for _, tc := range []struct {
		state string
		last  time.Time
		want  string
	}{
		{"HEALTHY", now.Add(-4 * time.Second), "SUSPECT in 6s without a heartbeat"},
		{"HEALTHY", now.Add(-11 * time.Second), "SUSPECT at the next sweep (a heartbeat is overdue)"},
		{"SUSPECT", now.Add(-12 * time.Second), "DOWN in 8s without a heartbeat"},
		{"SUSPECT", now.Add(-25 * time.Second), "DOWN at the next sweep (a heartbeat is overdue)"},
		{"PROBING", now.Add(-5 * time.Second), "DOWN in 15s without a heartbeat"},
		{"DOWN", now.Add(-time.Hour), ""},
		{"DRAINING", now, ""},
		{"OFFLINE", now, ""},
	} {
		require.Equal(t, tc.want, cli.NextLeaseChange(tc.state, tc.last, ttl, now), "%s, last heartbeat %s ago", tc.state, now.Sub(tc.last))
	}
}

// agentsAPI answers GET /v1/agents and /v1/agents/{id} with a push agent
// and a pull agent shaped as the API shapes them: a pull agent has no
// endpoint and an inbox_depth, a push agent no inbox_depth.
func agentsAPI(t *testing.T) string {
	t.Helper()
	agents := map[string]string{
		"ocr-1": `{"agent_id":"ocr-1","namespace":"default","capabilities":["doc.ocr"],"aliases":[],
			"endpoint":"http://127.0.0.1:9/a2a","protocol":"a2a-lite","mode":"push","state":"HEALTHY","in_flight":2,
			"max_concurrent":4,"ttl_seconds":30,"breaker":{"state":"closed","error_rate":0,"attempts":0}}`,
		"puller": `{"agent_id":"puller","namespace":"default","capabilities":["doc.pull"],"aliases":[],
			"endpoint":"","protocol":"a2a-lite","mode":"pull","inbox_depth":3,"state":"HEALTHY","in_flight":1,
			"max_concurrent":0,"ttl_seconds":30,"breaker":{"state":"closed","error_rate":0,"attempts":0}}`,
		// 19 attempts in the hour, none in the breaker's last minute.
		"quiet": `{"agent_id":"quiet","namespace":"default","capabilities":["doc.ocr"],"aliases":[],
			"endpoint":"http://127.0.0.1:9/a2a","protocol":"a2a-lite","mode":"push","state":"HEALTHY","in_flight":0,
			"max_concurrent":0,"ttl_seconds":30,"breaker":{"state":"half_open","error_rate":0,"attempts":0},
			"recent":{"window":"1h0m0s","routed":19,"attempted":19,"delivered":5,"succeeded":5,"failed":0,"timed_out":0,
				"reach_rate":0.263,"success_rate":0.263},
			"recovery":{"last_ms":150000,"mean_24h_ms":450,"recoveries_24h":2}}`,
	}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/policies/routing" {
			_, _ = io.WriteString(w, `{"namespace":"default","breaker_window_s":60}`)
			return
		}
		if r.URL.Path == "/v1/agents" {
			_, _ = io.WriteString(w, `{"agents":[`+agents["ocr-1"]+`,`+agents["puller"]+`],"self_preservation":[]}`)
			return
		}
		if a, ok := agents[strings.TrimPrefix(r.URL.Path, "/v1/agents/")]; ok {
			_, _ = io.WriteString(w, a)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"no such agent"}}`)
	}))
	t.Cleanup(api.Close)
	return api.URL
}

// runCLI runs one CLI command against the API at base and answers its
// standard output.
func runCLI(t *testing.T, base string, cmd func(context.Context, cli.Env, []string) error, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	env := cli.Env{Stdout: &out, Stderr: &errOut, Getenv: func(k string) string {
		return map[string]string{"AGENTREACH_URL": base}[k]
	}}
	require.NoError(t, cmd(t.Context(), env, args), errOut.String())
	return out.String()
}

// TestAgentsShowsModeAndInbox: the list names each agent's mode and, for a
// pull agent only, how many attempts wait in its inbox; --json passes both
// through as the API wrote them.
func TestAgentsShowsModeAndInbox(t *testing.T) {
	t.Parallel()
	base := agentsAPI(t)
	out := runCLI(t, base, cli.Agents)
	require.Regexp(t, `(?m)^AGENT\s+NAMESPACE\s+MODE\s+STATE\s+IN-FLIGHT\s+INBOX\s+BREAKER\s+LAST HEARTBEAT\s+CAPABILITIES\n`, out)
	require.Regexp(t, `(?m)^ocr-1\s+default\s+push\s+HEALTHY\s+2\s+-\s+closed\s+.*doc\.ocr$`, out, "a push agent has no inbox")
	require.Regexp(t, `(?m)^puller\s+default\s+pull\s+HEALTHY\s+1\s+3\s+closed\s+.*doc\.pull$`, out)

	var body struct {
		Agents []struct {
			AgentID    string `json:"agent_id"`
			Mode       string `json:"mode"`
			InboxDepth *int   `json:"inbox_depth"`
		} `json:"agents"`
	}
	require.NoError(t, json.Unmarshal([]byte(runCLI(t, base, cli.Agents, "--json")), &body))
	require.Len(t, body.Agents, 2)
	require.Equal(t, "push", body.Agents[0].Mode)
	require.Nil(t, body.Agents[0].InboxDepth)
	require.Equal(t, "pull", body.Agents[1].Mode)
	require.NotNil(t, body.Agents[1].InboxDepth)
	require.Equal(t, 3, *body.Agents[1].InboxDepth)
}

// TestDigShowsModeAndInbox: dig of a pull agent says it claims its work in
// place of an endpoint and shows its inbox; dig of a push agent shows its
// endpoint and no inbox.
func TestDigShowsModeAndInbox(t *testing.T) {
	t.Parallel()
	base := agentsAPI(t)

	pull := runCLI(t, base, cli.Dig, "puller")
	require.Regexp(t, `(?m)^mode\s+pull \(claims its work; no endpoint\)$`, pull)
	require.Regexp(t, `(?m)^inbox\s+3 waiting to be claimed$`, pull)
	require.Regexp(t, `(?m)^load\s+1 in flight \(max unlimited\)$`, pull)
	require.NotContains(t, pull, "endpoint ")

	push := runCLI(t, base, cli.Dig, "ocr-1")
	require.Regexp(t, `(?m)^mode\s+push$`, push)
	require.Regexp(t, `(?m)^endpoint\s+http://127\.0\.0\.1:9/a2a \(a2a-lite\)$`, push)
	require.NotRegexp(t, `(?m)^inbox\s`, push)

	require.JSONEq(t, `{"mode":"pull","inbox_depth":3}`, pickJSON(t, runCLI(t, base, cli.Dig, "puller", "--json"), "mode", "inbox_depth"))
}

// pickJSON answers the named fields of the JSON object doc, re-encoded.
func pickJSON(t *testing.T, doc string, fields ...string) string {
	t.Helper()
	var all map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(doc), &all))
	picked := map[string]json.RawMessage{}
	for _, f := range fields {
		if v, ok := all[f]; ok {
			picked[f] = v
		}
	}
	b, err := json.Marshal(picked)
	require.NoError(t, err)
	return string(b)
}

// TestHumanDuration: durations as a person reads them, never Go's
// "1h0m0s".
func TestHumanDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0:                      "0s",
		450 * time.Microsecond: "0.45ms",
		450 * time.Millisecond: "450ms",
		999*time.Millisecond + 800*time.Microsecond: "1s",
		4200 * time.Millisecond:                     "4.2s",
		3 * time.Second:                             "3s",
		time.Minute:                                 "1m",
		2*time.Minute + 30*time.Second:              "2m30s",
		time.Hour:                                   "1h",
		time.Hour + 5*time.Minute:                   "1h5m",
		26 * time.Hour:                              "1d2h",
		48 * time.Hour:                              "2d",
		-90 * time.Second:                           "-1m30s",
	} {
		require.Equal(t, want, cli.HumanDuration(d), "%s", d)
	}
	require.Equal(t, "half-open", cli.BreakerWord("half_open"))
	require.Equal(t, "open", cli.BreakerWord("open"))
}

// TestDigSaysTheWindow: an agent with attempts in the hour but none in the
// breaker's window is "no attempts in the last 1m", with the hour's count,
// never "no attempts yet"; its windows and durations are written humanly
// and its breaker state in words.
func TestDigSaysTheWindow(t *testing.T) {
	t.Parallel()
	out := runCLI(t, agentsAPI(t), cli.Dig, "quiet")
	require.NotContains(t, out, "no attempts yet")
	require.Regexp(t, `(?m)^breaker\s+half-open, no attempts in the last 1m: no error rate \(19 attempted in the last 1h\)$`, out)
	require.Regexp(t, `(?m)^route hits\s+19 routed in the last 1h$`, out)
	require.Regexp(t, `(?m)^recent health\s+19 attempted, 5 delivered, 5 succeeded, 0 failed, 0 timed out \(reached 26\.3%, answered OK of attempts 26\.3%\)$`, out)
	require.Regexp(t, `(?m)^time to recover\s+last 2m30s, mean 450ms over 2 recoveries in 24h$`, out)
	require.NotContains(t, out, "0m0s")
	require.NotContains(t, out, "half_open")
}
