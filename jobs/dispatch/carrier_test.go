package dispatch

import (
	"cmp"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/jobs/jobstore"
	"github.com/agentreach/agentreach/registry"
	"github.com/agentreach/agentreach/webhook"
)

// carrying is a dispatcher that only carries: no database is touched on
// the way to an agent and back.
func carrying(inlineWait time.Duration) *Dispatcher {
	push := Push{HTTP: &http.Client{}, ResultURL: func(id string) string { return "http://127.0.0.1:1/v1/jobs/" + id + "/result" }, Now: time.Now}
	return New(nil, nil, nil, nil, nil, Carriers{Push: push}, slog.New(slog.DiscardHandler),
		Config{InlineWait: inlineWait, Now: time.Now})
}

func attemptOf(deadline time.Duration) Attempt {
	l := &jobstore.Loaded{TraceID: "0123456789abcdef0123456789abcdef"}
	l.JobID, l.Capability, l.Payload = "019a0000-0000-7000-8000-000000000001", "doc.parse", json.RawMessage(`{"n":1}`)
	return Attempt{L: l, N: 2, Deadline: time.Now().Add(deadline)}
}

// TestPushCarry: the native push carrier sends the envelope with the
// attempt's headers and reads each kind of answer into the observation
// the decisions expect; a call cut short by the longest inline wait is
// accepted, one cut short by the deadline hung, one never connected
// failed.
func TestPushCarry(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		answer     func(w http.ResponseWriter, r *http.Request)
		inlineWait time.Duration
		deadline   time.Duration
		want       domain.Observation
	}{
		{name: "result", answer: func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, `{"status":"SUCCESS","result":{"ok":true},"biz_code":"B1"}`)
		}, want: domain.Observation{Kind: domain.ObservedResult, Status: domain.StatusSuccess, Result: json.RawMessage(`{"ok":true}`), BizCode: "B1", HTTPStatus: 200}},
		{name: "accepted", answer: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) },
			want: domain.Observation{Kind: domain.ObservedAccepted, HTTPStatus: 202}},
		{name: "not now", answer: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
		}, want: domain.Observation{Kind: domain.ObservedPaused, Reason: domain.ReasonAgentPaused,
			ErrText: "the agent answered 429 with Retry-After 7: no work for it until then", RetryAfter: 7 * time.Second, HTTPStatus: 429}},
		{name: "busy, not now", answer: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusServiceUnavailable)
		}, want: domain.Observation{Kind: domain.ObservedPaused, Reason: domain.ReasonAgentPaused,
			ErrText: "the agent answered 503 with Retry-After 2: no work for it until then", RetryAfter: 2 * time.Second, HTTPStatus: 503}},
		{name: "rate limited, no Retry-After", answer: func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, "slow down")
		}, want: domain.Observation{Kind: domain.ObservedFailed, Reason: "http_429", ErrText: "slow down", HTTPStatus: 429}},
		{name: "server error", answer: func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "busy\x00")
		}, want: domain.Observation{Kind: domain.ObservedFailed, Reason: "http_503", ErrText: "busy", HTTPStatus: 503}},
		{name: "no answer by the inline wait", inlineWait: 50 * time.Millisecond, deadline: time.Hour,
			answer: func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() },
			want:   domain.Observation{Kind: domain.ObservedAccepted}},
		{name: "no answer by the deadline", inlineWait: time.Hour, deadline: 50 * time.Millisecond,
			answer: func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() },
			want:   domain.Observation{Kind: domain.ObservedHung, Reason: "timeout", ErrText: "no answer by the deadline"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := make(chan *http.Request, 1)
			var body []byte
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ = io.ReadAll(r.Body)
				got <- r
				tc.answer(w, r)
			}))
			defer srv.Close()
			d := carrying(cmp.Or(tc.inlineWait, time.Minute))
			at := attemptOf(cmp.Or(tc.deadline, time.Minute))
			agent := &registry.Agent{AgentRegistration: domain.AgentRegistration{AgentID: "a", Endpoint: srv.URL}}
			obs, _ := d.carry(context.Background(), agent, at)
			require.Equal(t, tc.want, obs)

			r := <-got
			require.Equal(t, at.L.JobID, r.Header.Get("X-Reach-Job-Id"))
			require.Equal(t, "2", r.Header.Get("X-Reach-Attempt"))
			require.Equal(t, at.L.JobID+".2", r.Header.Get(webhook.HeaderID))
			require.True(t, strings.HasPrefix(r.Header.Get(webhook.HeaderSignature), "v1,"))
			var env webhook.Envelope
			require.NoError(t, json.Unmarshal(body, &env))
			require.Equal(t, at.L.JobID, env.JobID)
			require.Equal(t, 2, env.Attempt)
			require.JSONEq(t, `{"n":1}`, string(env.Payload))
			require.Equal(t, "http://127.0.0.1:1/v1/jobs/"+at.L.JobID+"/result", env.ResultURL)
		})
	}
}

// TestPushCarryUnusableAnswers: a 200 that is no answer fails the attempt
// as bad_response and keeps the first bytes of what the agent said; an
// agent that cannot be reached fails it as connection_refused.
func TestPushCarryUnusableAnswers(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"status":"MAYBE"}`)
	}))
	defer srv.Close()
	d := carrying(time.Minute)
	obs, _ := d.carry(context.Background(), &registry.Agent{AgentRegistration: domain.AgentRegistration{AgentID: "a", Endpoint: srv.URL}}, attemptOf(time.Minute))
	require.Equal(t, domain.ObservedFailed, obs.Kind)
	require.Equal(t, "bad_response", obs.Reason)
	require.Equal(t, `{"status":"MAYBE"}`, obs.Body)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	obs, _ = d.carry(context.Background(), &registry.Agent{AgentRegistration: domain.AgentRegistration{AgentID: "a", Endpoint: closed}}, attemptOf(time.Minute))
	require.Equal(t, domain.ObservedFailed, obs.Kind)
	require.Equal(t, "connection_refused", obs.Reason)
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"3":                             3 * time.Second,
		"0":                             0,
		"-5":                            0,
		"soon":                          0,
		"86400":                         time.Hour, // capped
		"Thu, 03 Dec 2026 10:00:30 GMT": 30 * time.Second,
		"Thu, 03 Dec 2026 09:00:00 GMT": 0, // past
	} {
		require.Equal(t, want, parseRetryAfter(v, now), "Retry-After %q", v)
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	require.Equal(t, "abc", Truncate("abc", 5))
	require.Equal(t, "ab…", Truncate("abcdef", 2))
	require.Equal(t, "ab", Truncate("a\x00b", 5), "no NUL")
	require.Equal(t, "é…", Truncate("éé", 3), "a cut rune is dropped, not stored half")
}
