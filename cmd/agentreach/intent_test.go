package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/webhook"
)

// intentAgent registers an agent that answers every delivery with SUCCESS,
// saying what its capabilities do (capability_info, a JSON object).
func intentAgent(t *testing.T, base, auth, id, capability, info string) {
	t.Helper()
	srv := newHTTPTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			return // the probe
		}
		var env webhook.Envelope
		_ = json.NewDecoder(r.Body).Decode(&env)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "SUCCESS", "result": map[string]any{"by": id, "capability": env.Capability}})
	}))
	code, out := call(t, http.MethodPost, base+"/v1/agents", auth, fmt.Sprintf(
		`{"agent_id":%q,"capabilities":[%q],"endpoint":%q,"ttl_seconds":30,"capability_info":{%q:%s}}`, id, capability, srv.URL+"/deliver", capability, info))
	require.Equal(t, http.StatusCreated, code, out)
}

type resolutionOut struct {
	Intent           string `json:"intent"`
	Capability       string `json:"capability"`
	Resolver         string `json:"resolver"`
	Model            string `json:"model"`
	Cached           bool   `json:"cached"`
	CatalogueVersion int64  `json:"catalogue_version"`
	Candidates       []struct {
		Capability string  `json:"capability"`
		Score      float64 `json:"score"`
	} `json:"candidates"`
	Steps []struct {
		Resolver string `json:"resolver"`
		Outcome  string `json:"outcome"`
	} `json:"steps"`
}

type errorOut struct {
	Error struct {
		Code        string `json:"code"`
		Field       string `json:"field"`
		Message     string `json:"message"`
		Suggestions []struct {
			Capability string `json:"capability"`
		} `json:"suggestions"`
	} `json:"error"`
}

func resolveIntent(t *testing.T, base, auth, words string) resolutionOut {
	t.Helper()
	code, out := call(t, http.MethodPost, base+"/v1/resolve", auth, fmt.Sprintf(`{"intent":%q}`, words))
	require.Equal(t, http.StatusOK, code, out)
	var r resolutionOut
	require.NoError(t, jsonUnmarshal(out, &r))
	return r
}

// shopAgents are a parcel tracker and a weather forecaster, described in
// English and Chinese.
func shopAgents(t *testing.T, base, auth string) {
	t.Helper()
	intentAgent(t, base, auth, "parcels", "parcel.track",
		`{"description":"Where a parcel is now and when it arrives. 查询包裹在哪里","examples":["where is my parcel","我的包裹在哪里"]}`)
	intentAgent(t, base, auth, "weather", "weather.forecast",
		`{"description":"The weather forecast for a city. 天气预报","examples":["will it rain tomorrow","明天会下雨吗"]}`)
}

// TestIntentSubmit: a job submitted with an intent, in Chinese or English,
// is resolved to a capability and routed as any job; INTENT_RESOLVED
// follows SUBMITTED, ROUTED and GET /v1/route show the resolution; an
// ambiguous intent is 422 with suggestions and writes nothing; an
// operator's words change what resolves, and a retried submit with the
// same Idempotency-Key is the same job even after the catalogue moved.
func TestIntentSubmit(t *testing.T) {
	t.Parallel()
	r, dsn := service(t)
	base := r.m.URL()
	shopAgents(t, base, "")
	waitRoute(t, base, "parcel.track", func(rj routeJSON) bool { return len(rj.Candidates) == 1 })
	waitRoute(t, base, "weather.forecast", func(rj routeJSON) bool { return len(rj.Candidates) == 1 })

	res := resolveIntent(t, base, "", "我的包裹在哪里？")
	require.Equal(t, "parcel.track", res.Capability)
	require.Equal(t, "lexical", res.Resolver)
	require.Equal(t, "resolved", res.Steps[0].Outcome)
	require.Equal(t, "weather.forecast", resolveIntent(t, base, "", "will it rain in Paris tomorrow").Capability)

	var cat struct {
		CatalogueVersion int64 `json:"catalogue_version"`
		Capabilities     []struct {
			Name     string   `json:"name"`
			Examples []string `json:"examples"`
			Agents   []string `json:"agents"`
		} `json:"capabilities"`
	}
	getJSON(t, base+"/v1/capabilities", http.StatusOK, &cat)
	require.Len(t, cat.Capabilities, 2)
	require.Equal(t, "parcel.track", cat.Capabilities[0].Name)
	require.Equal(t, []string{"where is my parcel", "我的包裹在哪里"}, cat.Capabilities[0].Examples)
	require.Equal(t, []string{"parcels"}, cat.Capabilities[0].Agents)

	var rt struct {
		Capability string         `json:"capability"`
		Chosen     string         `json:"chosen"`
		Intent     *resolutionOut `json:"intent"`
	}
	getJSON(t, base+"/v1/route?intent="+url.QueryEscape("where is my parcel"), http.StatusOK, &rt)
	require.Equal(t, "parcel.track", rt.Capability)
	require.Equal(t, "parcels", rt.Chosen)
	require.NotNil(t, rt.Intent)
	require.Equal(t, "where is my parcel", rt.Intent.Intent)
	code, out := call(t, http.MethodGet, base+"/v1/route?intent=text&capability=parcel.track", "", "")
	require.Equal(t, http.StatusBadRequest, code, out)

	for words, want := range map[string]string{"我的包裹在哪里": "parcels", "will it rain tomorrow?": "weather"} {
		id := submitOK(t, base, fmt.Sprintf(`{"intent":%q,"payload":{"n":1}}`, words))
		j := waitJob(t, base, id, func(j jobJSON) bool { return j.Status == "SUCCESS" }, 15*time.Second)
		require.Equal(t, want, j.AgentID, words)
		var full struct {
			Capability string `json:"capability"`
			Intent     string `json:"intent"`
		}
		getJSON(t, base+"/v1/jobs/"+id, http.StatusOK, &full)
		require.Equal(t, words, full.Intent)
		evs := jobEventsFull(t, base, id)
		require.GreaterOrEqual(t, len(evs), 4)
		require.Equal(t, []string{"SUBMITTED", "INTENT_RESOLVED", "ROUTED"}, []string{evs[0].Type, evs[1].Type, evs[2].Type})
		var resolved resolutionOut
		require.NoError(t, json.Unmarshal(evs[1].Data, &resolved))
		require.Equal(t, full.Capability, resolved.Capability)
		require.Equal(t, words, resolved.Intent)
		require.Equal(t, "lexical", resolved.Resolver)
		var routed struct {
			Route struct {
				Intent resolutionOut `json:"intent"`
			} `json:"route"`
		}
		require.NoError(t, json.Unmarshal(evs[2].Data, &routed))
		require.Equal(t, full.Capability, routed.Route.Intent.Capability, "ROUTED shows the resolution")
	}

	pool := openDB(t, dsn)
	writes := func() string {
		var s string
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT concat_ws(',', (SELECT count(*) FROM events),
			(SELECT count(*) FROM river_job WHERE kind = 'dispatch_job'))`).Scan(&s))
		return s
	}
	before := writes()
	for body, want := range map[string]string{
		`{"intent":"sing me a song about the sea","payload":{}}`:         "ambiguous_intent",
		`{"intent":"forecast","capability":"parcel.track","payload":{}}`: "invalid_argument",
		`{"intent":"   ","payload":{}}`:                                  "invalid_argument",
	} {
		code, out := call(t, http.MethodPost, base+"/v1/jobs", "", body)
		var e errorOut
		require.NoError(t, jsonUnmarshal(out, &e), out)
		require.Equal(t, want, e.Error.Code, out)
		require.Equal(t, "intent", e.Error.Field, out)
		if want == "ambiguous_intent" {
			require.Equal(t, http.StatusUnprocessableEntity, code)
		} else {
			require.Equal(t, http.StatusBadRequest, code)
		}
	}
	code, out = call(t, http.MethodPost, base+"/v1/resolve", "", `{"intent":"parcel weather"}`)
	require.Equal(t, http.StatusUnprocessableEntity, code, out)
	var amb errorOut
	require.NoError(t, jsonUnmarshal(out, &amb))
	require.Len(t, amb.Error.Suggestions, 2, "both capabilities are suggested")
	require.Equal(t, before, writes(), "a refused submit writes nothing")

	// An operator's words change what resolves, and move the version.
	const umbrella = "do I need an umbrella"
	code, out = call(t, http.MethodPost, base+"/v1/resolve", "", fmt.Sprintf(`{"intent":%q}`, umbrella))
	require.Equal(t, http.StatusUnprocessableEntity, code, out)
	const forecast = "the forecast for tomorrow"
	require.Equal(t, "weather.forecast", resolveIntent(t, base, "", forecast).Capability)
	id := submitOK(t, base, fmt.Sprintf(`{"intent":%q,"payload":{}}`, forecast), "Idempotency-Key", "k-1")
	code, out = call(t, http.MethodPut, base+"/v1/capabilities/weather.forecast", "", `{"title":"Weather","examples":["do I need an umbrella?"]}`)
	require.Equal(t, http.StatusOK, code, out)
	var entry struct {
		CatalogueVersion int64    `json:"catalogue_version"`
		Title            string   `json:"title"`
		Examples         []string `json:"examples"`
		Note             *struct {
			UpdatedBy string `json:"updated_by"`
		} `json:"note"`
	}
	require.NoError(t, jsonUnmarshal(out, &entry))
	require.Greater(t, entry.CatalogueVersion, cat.CatalogueVersion)
	require.Equal(t, "Weather", entry.Title)
	require.Equal(t, "do I need an umbrella?", entry.Examples[0], "the operator's examples come first")
	require.Equal(t, "key:insecure", entry.Note.UpdatedBy)
	require.Equal(t, "weather.forecast", resolveIntent(t, base, "", umbrella).Capability)
	code, out = call(t, http.MethodPut, base+"/v1/capabilities/parcel.track", "", fmt.Sprintf(`{"title":%q}`, forecast))
	require.Equal(t, http.StatusOK, code, out)
	require.Equal(t, "parcel.track", resolveIntent(t, base, "", forecast).Capability, "the title rule now decides")
	code, again := submit(t, base, fmt.Sprintf(`{"intent":%q,"payload":{}}`, forecast), "Idempotency-Key", "k-1")
	require.Equal(t, http.StatusAccepted, code, "%v", again)
	require.Equal(t, id, again["job_id"], "the same submit again is the same job, though the intent resolves elsewhere now")
	code, out = call(t, http.MethodGet, base+"/v1/capabilities/no.such", "", "")
	require.Equal(t, http.StatusNotFound, code, out)
}

// TestIntentScope: a job submitted with an intent is checked against the
// key's jobs:submit scope for the capability the intent resolved to;
// reading the catalogue needs capabilities:read (or agents:read).
func TestIntentScope(t *testing.T) {
	t.Parallel()
	svc := securedService(t, nil)
	base := svc.m.URL()
	admin := "Bearer " + testAdminKey
	shopAgents(t, base, admin)
	weatherOnly, _ := createKey(t, base, testAdminKey, `{"namespace":"default","scopes":["jobs:submit:weather.*","capabilities:read"]}`)
	submitOnly, _ := createKey(t, base, testAdminKey, `{"namespace":"default","scopes":["jobs:submit:*"]}`)

	code, out := call(t, http.MethodPost, base+"/v1/jobs", "Bearer "+weatherOnly, `{"intent":"where is my parcel","payload":{}}`)
	require.Equal(t, http.StatusForbidden, code, out)
	require.Contains(t, out, "parcel.track")
	code, out = call(t, http.MethodPost, base+"/v1/jobs", "Bearer "+weatherOnly, `{"intent":"will it rain tomorrow","payload":{}}`)
	require.Equal(t, http.StatusAccepted, code, out)
	require.Equal(t, "weather.forecast", resolveIntent(t, base, "Bearer "+weatherOnly, "明天会下雨吗").Capability)

	code, out = call(t, http.MethodPost, base+"/v1/resolve", "Bearer "+submitOnly, `{"intent":"where is my parcel"}`)
	require.Equal(t, http.StatusForbidden, code, out)
	code, out = call(t, http.MethodPut, base+"/v1/capabilities/parcel.track", "Bearer "+weatherOnly, `{"title":"x"}`)
	require.Equal(t, http.StatusForbidden, code, out)
	code, out = call(t, http.MethodPut, base+"/v1/capabilities/parcel.track", admin, `{"title":"x","unknown":1}`)
	require.Equal(t, http.StatusBadRequest, code, out)
	code, out = call(t, http.MethodPut, base+"/v1/capabilities/parcel.track", admin, fmt.Sprintf(`{"title":%q}`, strings.Repeat("t", 200)))
	require.Equal(t, http.StatusBadRequest, code, out)
	require.Contains(t, out, `"field":"title"`)
}

// TestIntentModelAndCard: the resolvers' flags reach the service: an
// intent no word of the catalogue matches is resolved by the embedding
// model (a stand-in on 127.0.0.1), recorded as such in INTENT_RESOLVED,
// and answered from the cache the second time; the key is never printed.
// An agent registered by its A2A card brings its skills' words into the
// catalogue.
func TestIntentModelAndCard(t *testing.T) {
	t.Parallel()
	var embeds atomic.Int32
	model := newHTTPTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input []string `json:"input"`
		}
		if r.Header.Get("Authorization") != "Bearer sk-never-printed" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		embeds.Add(1)
		type item struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		var resp struct {
			Data []item `json:"data"`
		}
		for i, in := range req.Input {
			in = strings.ToLower(in)
			v := []float32{0.01, 0.01}
			for _, w := range []string{"parcel", "package", "包裹"} {
				v[0] += float32(strings.Count(in, w))
			}
			for _, w := range []string{"weather", "rain", "umbrella"} {
				v[1] += float32(strings.Count(in, w))
			}
			resp.Data = append(resp.Data, item{Index: i, Embedding: v})
		}
		_ = json.NewEncoder(w).Encode(resp)
	}))
	r := startTuned(t, map[string]string{"DATABASE_URL": newDatabase(t), "AGENTREACH_EMBED_KEY": "sk-never-printed"}, fastSweeps,
		"serve", "--insecure", "--addr", "127.0.0.1:0", "--log-level", "info",
		"--embed-url", model.URL+"/v1", "--embed-model", "two-topics")
	base := r.m.URL()
	waitReady(t, base)
	shopAgents(t, base, "")
	waitRoute(t, base, "parcel.track", func(rj routeJSON) bool { return len(rj.Candidates) == 1 })

	const words = "my package has not shown up"
	id := submitOK(t, base, fmt.Sprintf(`{"intent":%q,"payload":{}}`, words))
	waitJob(t, base, id, func(j jobJSON) bool { return j.Status == "SUCCESS" }, 15*time.Second)
	evs := jobEventsFull(t, base, id)
	var resolved resolutionOut
	require.NoError(t, json.Unmarshal(evs[1].Data, &resolved))
	require.Equal(t, "parcel.track", resolved.Capability)
	require.Equal(t, "embedding", resolved.Resolver)
	require.Equal(t, "two-topics", resolved.Model)
	require.False(t, resolved.Cached)
	asked := embeds.Load()
	require.EqualValues(t, 2, asked, "the catalogue, then the intent")

	res := resolveIntent(t, base, "", words)
	require.True(t, res.Cached)
	require.Equal(t, "parcel.track", res.Capability)
	require.Equal(t, asked, embeds.Load(), "a repeated intent never calls the model twice")
	require.NotContains(t, r.out.String(), "sk-never-printed")

	card := newHTTPTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"name":"Translator","version":"1.0","url":"http://%s/rpc","preferredTransport":"JSONRPC",
			"skills":[{"id":"text.translate","name":"Translate a text","description":"Translate text between languages. 翻译",
			"tags":["translation"],"examples":["translate this into French","把这段话翻译成英文"]}]}`, r.Host)
	}))
	code, out := call(t, http.MethodPost, base+"/v1/agents", "", fmt.Sprintf(`{"card_url":%q}`, card.URL))
	require.Equal(t, http.StatusCreated, code, out)
	var entry struct {
		Title       string   `json:"title"`
		Description string   `json:"description"`
		Examples    []string `json:"examples"`
		Tags        []string `json:"tags"`
		Agents      []string `json:"agents"`
	}
	getJSON(t, base+"/v1/capabilities/text.translate", http.StatusOK, &entry)
	require.Equal(t, "Translate a text", entry.Title)
	require.Contains(t, entry.Description, "翻译")
	require.Equal(t, []string{"translate this into French", "把这段话翻译成英文"}, entry.Examples)
	require.Contains(t, entry.Tags, "translation")
	require.Equal(t, []string{"translator"}, entry.Agents)
	require.Equal(t, "text.translate", resolveIntent(t, base, "", "把这段话翻译成英文").Capability)
	code, out = call(t, http.MethodPost, base+"/v1/agents", "", fmt.Sprintf(`{"card_url":%q,"capability_info":{"x.y":{"title":"no"}}}`, card.URL))
	require.Equal(t, http.StatusBadRequest, code, out)
}

// TestIntentKeysAreSecret: -h shows the model-key flags but never their
// values from the environment.
func TestIntentKeysAreSecret(t *testing.T) {
	t.Parallel()
	m := NewMain()
	out := &syncBuffer{}
	m.Stdout, m.Stderr = out, out
	m.Getenv = func(k string) string {
		return map[string]string{"AGENTREACH_EMBED_KEY": "sk-embed-secret", "AGENTREACH_LLM_KEY": "sk-llm-secret"}[k]
	}
	_ = m.Run(context.Background(), []string{"serve", "-h"})
	help := out.String()
	require.Contains(t, help, "-embed-key")
	require.Contains(t, help, "-llm-key")
	require.NotContains(t, help, "sk-embed-secret")
	require.NotContains(t, help, "sk-llm-secret")
}
