package sdk_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/sdk"
	"github.com/agentreach/agentreach/webhook"
)

// sign signs like Agent-Reach does: HMAC-SHA256 keyed with sha256(token)
// over "id.timestamp.body".
func sign(token, id, ts string, body []byte) string {
	key := sha256.Sum256([]byte(token))
	mac := hmac.New(sha256.New, key[:])
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

func TestVerifyDelivery(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	body := []byte(`{"job_id":"j1","payload":{}}`)
	ts := strconv.FormatInt(now.Unix(), 10)
	headers := func(sigs string, ts string) http.Header {
		h := http.Header{}
		h.Set("webhook-id", "j1.1")
		h.Set("webhook-timestamp", ts)
		h.Set("webhook-signature", sigs)
		return h
	}
	good := sign("art_new", "j1.1", ts, body)
	old := sign("art_old", "j1.1", ts, body)

	require.NoError(t, sdk.VerifyDelivery("art_new", headers(good, ts), body, now))
	// During a rotation both signatures travel; either token verifies.
	require.NoError(t, sdk.VerifyDelivery("art_old", headers(good+" "+old, ts), body, now))
	require.NoError(t, sdk.VerifyDelivery("art_new", headers(old+" "+good, ts), body, now))

	for name, err := range map[string]error{
		"wrong token":   sdk.VerifyDelivery("art_other", headers(good, ts), body, now),
		"tampered body": sdk.VerifyDelivery("art_new", headers(good, ts), []byte(`{"job_id":"j2"}`), now),
		"too old":       sdk.VerifyDelivery("art_new", headers(good, ts), body, now.Add(6*time.Minute)),
		"no timestamp":  sdk.VerifyDelivery("art_new", headers(good, ""), body, now),
		"not signed":    sdk.VerifyDelivery("art_new", headers("", ts), body, now),
		"no token yet":  sdk.VerifyDelivery("", headers(good, ts), body, now),
		"other scheme":  sdk.VerifyDelivery("art_new", headers("v2,"+good[3:], ts), body, now),
	} {
		require.True(t, errors.Is(err, sdk.ErrBadSignature), "%s: %v", name, err)
	}
}

// Report sends the delivery's trace context, so an async result stays in
// the job's trace; a delivery built by hand gets one from its trace id.
func TestReportCarriesTheTrace(t *testing.T) {
	t.Parallel()
	got := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("traceparent")
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	agent := sdk.New(sdk.Config{ServerURL: srv.URL}, sdk.Registration{AgentID: "a"}, nil)
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	require.NoError(t, agent.Report(context.Background(), sdk.Delivery{Envelope: webhook.Envelope{JobID: "j", ResultURL: srv.URL}, Traceparent: tp}, sdk.Success(nil)))
	require.Equal(t, tp, <-got)
	require.NoError(t, agent.Report(context.Background(), sdk.Delivery{Envelope: webhook.Envelope{JobID: "j", ResultURL: srv.URL, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"}}, sdk.Success(nil)))
	made := <-got
	require.Regexp(t, `^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$`, made)
}

// Report tries again when Agent-Reach answers 429 or 503 (it wrote
// nothing: PostgreSQL briefly out of connections, say), after its
// Retry-After, and the same body goes each time; a service that keeps
// answering 503 gets a *StatusError after a few tries, and a 400 is not
// tried again.
func TestReportRetriesUnavailable(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var bodies []string
	answers := []int{http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusOK}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		bodies = append(bodies, string(b))
		code := answers[min(len(bodies), len(answers))-1]
		if code == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
		}
		w.WriteHeader(code)
	}))
	defer srv.Close()
	agent := sdk.New(sdk.Config{ServerURL: srv.URL}, sdk.Registration{AgentID: "a"}, nil)
	d := sdk.Delivery{Envelope: webhook.Envelope{JobID: "j", Attempt: 2, ResultURL: srv.URL}}
	require.NoError(t, agent.Report(context.Background(), d, sdk.Success(map[string]int{"n": 1})))
	mu.Lock()
	require.Len(t, bodies, 3)
	require.Equal(t, bodies[0], bodies[1])
	require.Equal(t, bodies[0], bodies[2])
	bodies = nil
	answers = []int{http.StatusServiceUnavailable}
	mu.Unlock()

	err := agent.Report(context.Background(), d, sdk.Success(nil))
	var se *sdk.StatusError
	require.ErrorAs(t, err, &se)
	require.Equal(t, http.StatusServiceUnavailable, se.Status)
	mu.Lock()
	require.Len(t, bodies, 5, "tried, then four more times")
	bodies = nil
	answers = []int{http.StatusBadRequest, http.StatusOK}
	mu.Unlock()

	require.ErrorAs(t, agent.Report(context.Background(), d, sdk.Success(nil)), &se)
	require.Equal(t, http.StatusBadRequest, se.Status)
	mu.Lock()
	require.Len(t, bodies, 1, "a refusal is final")
	mu.Unlock()
}

// A report whose context ends before Retry-After is not tried again.
func TestReportRetryWithinItsDeadline(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	agent := sdk.New(sdk.Config{ServerURL: srv.URL}, sdk.Registration{AgentID: "a"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var se *sdk.StatusError
	require.ErrorAs(t, agent.Report(ctx, sdk.Delivery{Envelope: webhook.Envelope{JobID: "j", ResultURL: srv.URL}}, sdk.Success(nil)), &se)
	require.EqualValues(t, 1, n.Load(), "no time left for the wait it asked")
}

// TestAgentAtMaxConcurrentSaysNotNow: a push agent holding as many jobs
// as its max_concurrent answers another delivery 503 with Retry-After
// (the service pauses it, counting no failure), and takes work again once
// a slot frees.
func TestAgentAtMaxConcurrentSaysNotNow(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	started := make(chan struct{}, 4)
	a := sdk.New(sdk.Config{ServerURL: "http://127.0.0.1:1", SkipVerify: true},
		sdk.Registration{AgentID: "busy", Capabilities: []string{"c"}, MaxConcurrent: 1},
		func(ctx context.Context, d sdk.Delivery) (sdk.Result, error) {
			started <- struct{}{}
			<-release
			return sdk.Success(map[string]any{"ok": true}), nil
		})
	srv := httptest.NewServer(a)
	defer srv.Close()
	post := func() (*http.Response, error) {
		return http.Post(srv.URL, "application/json", strings.NewReader(`{"job_id":"j","capability":"c","payload":{}}`))
	}
	first := make(chan int, 1)
	go func() {
		resp, err := post()
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-started // the one slot is taken
	resp, err := post()
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	close(release)
	require.Equal(t, http.StatusOK, <-first)
	resp, err = post()
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "a slot is free again")
}
