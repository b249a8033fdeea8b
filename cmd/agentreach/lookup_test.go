package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/sdk"
)

type lookupJSON struct {
	Candidates []struct {
		AgentID        string    `json:"agent_id"`
		Endpoint       string    `json:"endpoint"`
		Protocol       string    `json:"protocol"`
		Score          float64   `json:"score"`
		State          string    `json:"state"`
		TTLMS          int64     `json:"ttl_ms"`
		Grant          string    `json:"grant"`
		GrantExpiresAt time.Time `json:"grant_expires_at"`
	} `json:"candidates"`
	TTLMS     int64 `json:"ttl_ms"`
	WatchFrom int64 `json:"watch_from"`
}

func lookupOf(t *testing.T, base, auth, body string) lookupJSON {
	t.Helper()
	code, out := call(t, http.MethodPost, base+"/v1/lookup", auth, body)
	require.Equal(t, http.StatusOK, code, out)
	var l lookupJSON
	require.NoError(t, json.Unmarshal([]byte(out), &l))
	return l
}

type metricsJSON struct {
	Agents []struct {
		AgentID   string `json:"agent_id"`
		Attempted int    `json:"attempted"`
		Delivered int    `json:"delivered"`
		Succeeded int    `json:"succeeded"`
		Direct    struct {
			Attempted int `json:"attempted"`
			Delivered int `json:"delivered"`
			Succeeded int `json:"succeeded"`
			Failed    int `json:"failed"`
		} `json:"direct"`
	} `json:"agents"`
}

// TestLookupGrantsAndReports: a lookup ranks the candidates as brokered
// routing does, leaves out pull agents, and gives each a grant only that
// agent verifies; reports of direct calls show in the metrics, split from
// brokered attempts, and failed ones open the agent's breaker; a report on
// an agent not looked up is refused whole.
func TestLookupGrantsAndReports(t *testing.T) {
	t.Parallel()
	r, _ := service(t)
	base := r.m.URL()
	heavy := newTestAgent(t, base, "heavy", "l.cap", 90, answer("SUCCESS", ""))
	light := newTestAgent(t, base, "light", "l.cap", 10, answer("SUCCESS", ""))
	p := registerPull(t, base, "l-pull", "l.cap", "")
	p.mustClaim(t, 1, 0)
	waitRoute(t, base, "l.cap", func(rj routeJSON) bool { return len(rj.Candidates) == 3 })

	l := lookupOf(t, base, "", `{"capability":"l.cap","limit":5}`)
	require.Len(t, l.Candidates, 2, "a pull agent cannot be called directly")
	require.Equal(t, "heavy", l.Candidates[0].AgentID, "ranked as routing ranks")
	require.Equal(t, "light", l.Candidates[1].AgentID)
	require.Greater(t, l.Candidates[0].Score, l.Candidates[1].Score)
	require.Equal(t, heavy.srv.URL+"/deliver", l.Candidates[0].Endpoint)
	require.Equal(t, "HEALTHY", l.Candidates[0].State)
	require.EqualValues(t, 30000, l.TTLMS)
	require.Positive(t, l.WatchFrom)
	keyOf := func(token string) []byte { k := sha256.Sum256([]byte(token)); return k[:] }
	g, err := domain.VerifyGrant(l.Candidates[0].Grant, keyOf(heavy.token), "heavy", "l.cap", time.Now())
	require.NoError(t, err)
	require.Equal(t, "l.cap", g.Capability)
	require.WithinDuration(t, time.Now().Add(domain.GrantTTL), l.Candidates[0].GrantExpiresAt, 10*time.Second)
	_, err = domain.VerifyGrant(l.Candidates[0].Grant, keyOf(light.token), "light", "l.cap", time.Now())
	require.ErrorIs(t, err, domain.ErrBadGrant, "agent light refuses a grant for heavy")
	_, err = domain.VerifyGrant(l.Candidates[0].Grant, keyOf(heavy.token), "heavy", "l.cap", time.Now().Add(domain.GrantTTL+time.Second))
	require.ErrorIs(t, err, domain.ErrBadGrant, "an expired grant is refused")

	for _, bad := range []string{`{"capability":"no such!"}`, `{"capability":"l.cap","limit":21}`, `{}`} {
		code, body := call(t, http.MethodPost, base+"/v1/lookup", "", bad)
		require.Equal(t, http.StatusBadRequest, code, "%s: %s", bad, body)
	}
	code, body := call(t, http.MethodPost, base+"/v1/reports", "", `{"reports":[{"agent_id":"heavy","capability":"l.cap","reached":true,"ok":true,"latency_ms":3},
		{"agent_id":"nobody","capability":"l.cap","reached":true,"ok":true,"latency_ms":3}]}`)
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, `"field":"reports[1].agent_id"`)
	code, body = call(t, http.MethodPost, base+"/v1/reports", "", `{"reports":[{"agent_id":"heavy","capability":"l.cap","reached":false,"ok":true}]}`)
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, `"field":"reports[0].ok"`)

	var reps []string
	for i := range 30 {
		reps = append(reps, fmt.Sprintf(`{"agent_id":"light","capability":"l.cap","reached":%t,"ok":%t,"latency_ms":%d}`, i < 3, i < 2, i))
	}
	reps = append(reps, `{"agent_id":"heavy","capability":"l.cap","reached":true,"ok":true,"latency_ms":4}`)
	code, body = call(t, http.MethodPost, base+"/v1/reports", "", `{"reports":[`+strings.Join(reps, ",")+`]}`)
	require.Equal(t, http.StatusAccepted, code, body)
	require.JSONEq(t, `{"accepted":31}`, body)

	waitFor(t, 15*time.Second, "the reports show in the metrics", func() bool {
		var m metricsJSON
		getJSON(t, base+"/v1/metrics/agents?window=5m", http.StatusOK, &m)
		for _, a := range m.Agents {
			if a.AgentID == "light" && a.Direct.Attempted == 30 {
				require.Equal(t, 3, a.Direct.Delivered)
				require.Equal(t, 2, a.Direct.Succeeded)
				require.Equal(t, 1, a.Direct.Failed)
				require.Equal(t, 30, a.Attempted, "the totals count them too (no brokered work yet)")
				return true
			}
		}
		return false
	})
	waitFor(t, 10*time.Second, "27 failed direct calls open light's breaker", func() bool {
		var a struct {
			Breaker struct {
				State string `json:"state"`
			} `json:"breaker"`
		}
		getJSON(t, base+"/v1/agents/light", http.StatusOK, &a)
		return a.Breaker.State == "open"
	})
	l = lookupOf(t, base, "", `{"capability":"l.cap","limit":5}`)
	require.Len(t, l.Candidates, 1, "an open breaker takes light out of lookups as out of routing")
	require.Equal(t, "heavy", l.Candidates[0].AgentID)
}

// TestLookupScopes: lookups and reports take agents:lookup (admin implies
// it); a key reports only on agents it looked up itself.
func TestLookupScopes(t *testing.T) {
	t.Parallel()
	svc := securedService(t, nil)
	base := svc.m.URL()
	admin := "Bearer " + testAdminKey
	agentKey, _ := createKey(t, base, testAdminKey, `{"namespace":"default","scopes":["agents:write"]}`)
	var reg agentJSON
	postJSONAuth(t, base+"/v1/agents", "Bearer "+agentKey, `{"agent_id":"scoped","capabilities":["s.cap"],"mode":"pull"}`, &reg)
	puller := &pullAgent{base: base, id: "scoped", token: reg.Token}
	puller.mustClaim(t, 1, 0)
	a := newSecuredAgent(t, base, testAdminKey, "direct-1", "default", "s.cap", http.StatusOK)
	_ = a
	looker, _ := createKey(t, base, testAdminKey, `{"namespace":"default","scopes":["agents:lookup"]}`)
	other, _ := createKey(t, base, testAdminKey, `{"namespace":"default","scopes":["agents:lookup"]}`)
	reader, _ := createKey(t, base, testAdminKey, `{"namespace":"default","scopes":["agents:read"]}`)

	code, body := call(t, http.MethodPost, base+"/v1/lookup", "Bearer "+reader, `{"capability":"s.cap"}`)
	require.Equal(t, http.StatusForbidden, code, body)
	code, _ = call(t, http.MethodPost, base+"/v1/lookup", "", `{"capability":"s.cap"}`)
	require.Equal(t, http.StatusUnauthorized, code)
	require.Len(t, lookupOf(t, base, admin, `{"capability":"s.cap"}`).Candidates, 1, "admin implies agents:lookup")
	require.Len(t, lookupOf(t, base, "Bearer "+looker, `{"capability":"s.cap"}`).Candidates, 1)

	report := `{"reports":[{"agent_id":"direct-1","capability":"s.cap","reached":true,"ok":true,"latency_ms":1}]}`
	code, body = call(t, http.MethodPost, base+"/v1/reports", "Bearer "+other, report)
	require.Equal(t, http.StatusBadRequest, code, "another key's lookup does not count: %s", body)
	code, body = call(t, http.MethodPost, base+"/v1/reports", "Bearer "+reader, report)
	require.Equal(t, http.StatusForbidden, code, body)
	code, body = call(t, http.MethodPost, base+"/v1/reports", "Bearer "+looker, report)
	require.Equal(t, http.StatusAccepted, code, body)

	// A lookup scope limited to a capability pattern: those capabilities
	// only, for lookups and reports alike, and no watch feed (it shows
	// every agent of the namespace).
	limited, _ := createKey(t, base, testAdminKey, `{"namespace":"default","scopes":["agents:lookup:s.*"]}`)
	require.Len(t, lookupOf(t, base, "Bearer "+limited, `{"capability":"s.cap"}`).Candidates, 1)
	code, body = call(t, http.MethodPost, base+"/v1/lookup", "Bearer "+limited, `{"capability":"t.cap"}`)
	require.Equal(t, http.StatusForbidden, code, body)
	require.Contains(t, body, `"field":"capability"`)
	code, body = call(t, http.MethodPost, base+"/v1/reports", "Bearer "+limited,
		`{"reports":[{"agent_id":"direct-1","capability":"t.cap","reached":true,"ok":true,"latency_ms":1}]}`)
	require.Equal(t, http.StatusForbidden, code, body)
	require.Contains(t, body, `"field":"reports[0].capability"`)
	code, body = call(t, http.MethodGet, base+"/v1/agents/watch", "Bearer "+limited, "")
	require.Equal(t, http.StatusForbidden, code, body)
	for _, bad := range []string{"agents:lookup:", "agents:lookup:bad pattern"} {
		code, body = call(t, http.MethodPost, base+"/v1/keys", admin, fmt.Sprintf(`{"namespace":"default","scopes":[%q]}`, bad))
		require.Equal(t, http.StatusBadRequest, code, "%s: %s", bad, body)
	}
}

// TestAgentsWatch: the watch feed sends an agent's change as it commits,
// from a lookup's watch_from on, and resumes after the last id it sent.
func TestAgentsWatch(t *testing.T) {
	t.Parallel()
	r, _ := service(t)
	base := r.m.URL()
	newTestAgent(t, base, "watched", "w.cap", 50, answer("SUCCESS", ""))
	l := lookupOf(t, base, "", `{"capability":"w.cap"}`)
	require.Len(t, l.Candidates, 1)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/agents/watch?after=%d", base, l.WatchFrom), nil)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	changes := make(chan map[string]any, 16)
	ids := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			if id, ok := strings.CutPrefix(line, "id: "); ok {
				ids <- id
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				var m map[string]any
				if json.Unmarshal([]byte(data), &m) == nil {
					changes <- m
				}
			}
		}
	}()
	code, _ := call(t, http.MethodPost, base+"/v1/agents/watched/down", "", `{"reason":"test"}`)
	require.Equal(t, http.StatusOK, code)
	var got map[string]any
	select {
	case got = <-changes:
	case <-time.After(10 * time.Second):
		require.FailNow(t, "no change came")
	}
	require.Equal(t, "AGENT_STATE_CHANGED", got["type"])
	require.Equal(t, "watched", got["agent_id"])
	require.Equal(t, "DOWN", got["state"])
	last := <-ids
	require.Equal(t, fmt.Sprint(got["position"]), last)

	// Resuming after that id sends only what came later.
	code, _ = call(t, http.MethodPost, base+"/v1/agents/watched/up", "", `{}`)
	require.Equal(t, http.StatusOK, code)
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/agents/watch", nil)
	req.Header.Set("Last-Event-ID", last)
	resp2, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp2.Body.Close()
	sc := bufio.NewScanner(resp2.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(data), &m))
			require.Equal(t, "HEALTHY", m["state"], "the next change after the DOWN")
			break
		}
	}
}

func postJSONAuth(t *testing.T, url, auth, body string, into any) {
	t.Helper()
	code, out := call(t, http.MethodPost, url, auth, body)
	require.Equal(t, http.StatusCreated, code, out)
	require.NoError(t, json.Unmarshal([]byte(out), into))
}

// TestDirectCallWithGrant: SDK agents take a direct call that carries a
// grant from a lookup and answer it inline; agent B refuses agent A's
// grant, and a call with neither grant nor signature is refused.
func TestDirectCallWithGrant(t *testing.T) {
	t.Parallel()
	r, _ := service(t)
	base := r.m.URL()
	start := func(id string) *sdk.Agent {
		a := sdk.New(sdk.Config{ServerURL: base, StartJitter: -1}, sdk.Registration{AgentID: id, Capabilities: []string{"g.cap"}, TTLSeconds: 10},
			func(ctx context.Context, d sdk.Delivery) (sdk.Result, error) {
				return sdk.Success(map[string]any{"by": id, "direct": d.Direct}), nil
			})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		waitState(t, base, id, "HEALTHY", 20*time.Second)
		return a
	}
	a, b := start("grant-a"), start("grant-b")
	waitRoute(t, base, "g.cap", func(rj routeJSON) bool { return len(rj.Candidates) == 2 })
	l := lookupOf(t, base, "", `{"capability":"g.cap","limit":2}`)
	require.Len(t, l.Candidates, 2)
	grants := map[string]string{}
	for _, c := range l.Candidates {
		grants[c.AgentID] = c.Grant
	}
	invoke := func(agent *sdk.Agent, grant string) (int, string) {
		code, body := call(t, http.MethodPost, agent.Endpoint(), "", `{"job_id":"0193e6f2-0000-7000-8000-000000000001","attempt":1,"capability":"g.cap","payload":{}}`)
		if grant == "" {
			return code, body
		}
		req, _ := http.NewRequest(http.MethodPost, agent.Endpoint(), strings.NewReader(`{"job_id":"0193e6f2-0000-7000-8000-000000000001","attempt":1,"capability":"g.cap","payload":{}}`))
		req.Header.Set(sdk.GrantHeader, grant)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	code, body := invoke(a, grants["grant-a"])
	require.Equal(t, http.StatusOK, code, body)
	require.JSONEq(t, `{"status":"SUCCESS","result":{"by":"grant-a","direct":true}}`, body)
	code, body = invoke(b, grants["grant-a"])
	require.Equal(t, http.StatusUnauthorized, code, "B refuses A's grant: %s", body)
	code, _ = invoke(a, "")
	require.Equal(t, http.StatusUnauthorized, code, "no grant, no signature")
}
