package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/httpapi"
	"github.com/agentreach/agentreach/webhook"
)

// The credential kinds of docs/security.md's matrix, in its column order.
var matrixKinds = []string{"none", "garbage", "revoked", "expired", "other ns", "narrow", "other agent", "agent", "admin a", "admin *"}

// matrixRow is one operation of the documented matrix: its expected answer
// per credential kind ("401", "rpc -32600", …).
type matrixRow struct {
	op   string
	want map[string]string
}

// readMatrix parses the authorization table of docs/security.md.
func readMatrix(t *testing.T) []matrixRow {
	t.Helper()
	f, err := os.Open("../../docs/security.md")
	require.NoError(t, err)
	defer f.Close()
	var rows []matrixRow
	sc := bufio.NewScanner(f)
	header := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if cells[0] == "operation" {
			require.Equal(t, append([]string{"operation"}, matrixKinds...), cells, "the matrix's columns")
			header = true
			continue
		}
		if !header || strings.HasPrefix(cells[0], "---") {
			continue
		}
		require.Len(t, cells, len(matrixKinds)+1, "row %q", cells[0])
		row := matrixRow{op: cells[0], want: map[string]string{}}
		for i, k := range matrixKinds {
			row.want[k] = cells[i+1]
		}
		rows = append(rows, row)
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, rows)
	return rows
}

// a2aMatrixMethods are the A2A v1.0 methods the matrix must cover.
var a2aMatrixMethods = []string{"SendMessage", "SendStreamingMessage", "GetTask", "CancelTask", "SubscribeToTask",
	"SetTaskPushNotificationConfig", "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfig",
	"DeleteTaskPushNotificationConfig", "GetExtendedAgentCard"}

// mcpMatrixMethods are the MCP methods the matrix must cover (of namespace
// a's endpoint, in 2025-11-25's terms: no per-request headers).
var mcpMatrixMethods = []string{"tools/list", "tools/call", "tasks/get", "tasks/cancel", "tasks/update", "subscriptions/listen"}

// TestAuthorizationMatrixCoversTheAPI: every operation of the OpenAPI
// document and every A2A method has a row, and every row names one.
func TestAuthorizationMatrixCoversTheAPI(t *testing.T) {
	t.Parallel()
	doc, err := httpapi.OpenAPI()
	require.NoError(t, err)
	var want []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			want = append(want, method+" "+path)
		}
	}
	want = append(want, "GET /riverui/", "PUT /riverui/api/queues/{queue}/pause")
	for _, m := range a2aMatrixMethods {
		want = append(want, "A2A "+m)
	}
	for _, m := range mcpMatrixMethods {
		want = append(want, "MCP "+m)
	}
	var got []string
	for _, r := range readMatrix(t) {
		got = append(got, r.op)
	}
	sort.Strings(want)
	sort.Strings(got)
	require.Equal(t, want, got, "docs/security.md's matrix and the API list the same operations")
}

// matrixCall is one request of the matrix.
type matrixCall struct {
	method, path, body string
}

// TestAuthorizationMatrix calls every cell of docs/security.md's matrix on a
// running service and checks the documented answer; every refused call
// appends no event and changes no row.
func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	var clock atomicTime
	svc := securedService(t, nil)
	base := svc.m.URL()
	ctx := context.Background()
	asKey := func(k string) string { return "Bearer " + k }

	all := `"scopes":["agents:write","agents:read","jobs:read","jobs:approve","jobs:submit:*"]`
	adminA, _ := createKey(t, base, testAdminKey, `{"namespace":"a","scopes":["admin"]}`)
	adminB, _ := createKey(t, base, testAdminKey, `{"namespace":"b","scopes":["admin"]}`)
	narrow, _ := createKey(t, base, testAdminKey, `{"namespace":"a","scopes":["jobs:submit:nothing.here"]}`)
	revoked, revokedID := createKey(t, base, testAdminKey, `{"namespace":"a",`+all+`}`)
	expired, _ := createKey(t, base, testAdminKey, `{"namespace":"a",`+all+`,"ttl_seconds":3600}`)
	code, _ := call(t, http.MethodDelete, base+"/v1/keys/"+revokedID, asKey(testAdminKey), "")
	require.Equal(t, http.StatusNoContent, code)
	clock.set(time.Now().Add(2 * time.Hour)) // the 1 h key has expired
	svc.m.app.auth.SetClock(clock.now)

	// Agents of namespace a: one that holds its work (202), and another.
	holder := newSecuredAgent(t, base, adminA, "mx-hold", "a", "mx.cap", http.StatusAccepted)
	other := newSecuredAgent(t, base, adminA, "mx-other", "a", "mx.other", http.StatusOK)
	receiver := newHTTPTestServer(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	mcpTools := newMCPToolServer(t, "X-Matrix", "")
	code, out := call(t, http.MethodPost, base+"/v1/agents", asKey(adminA), `{"agent_id":"mx-mcp","namespace":"a","protocol":"mcp","endpoint":"`+mcpTools.url+`","ttl_seconds":3600}`)
	require.Equal(t, http.StatusCreated, code, out)
	code, out = call(t, http.MethodPut, base+"/v1/policies/approvals", asKey(adminA), `{"patterns":["mx.risky*"]}`)
	require.Equal(t, http.StatusOK, code, out)

	n := 0
	fresh := func(prefix string) string { n++; return fmt.Sprintf("%s-%d", prefix, n) }
	submit := func(body string) string {
		code, out := call(t, http.MethodPost, base+"/v1/jobs", asKey(adminA), body)
		require.Equal(t, http.StatusAccepted, code, out)
		var r struct {
			JobID string `json:"job_id"`
		}
		require.NoError(t, jsonUnmarshal(out, &r))
		return r.JobID
	}
	// A job that stays pending for ten minutes: no agent, a long backoff.
	pending := func() string {
		return submit(`{"capability":"mx.none","payload":{},"max_attempts":3,"backoff_base_ms":600000}`)
	}
	register := func() (id, token string) {
		id = fresh("mx-agent")
		code, out := call(t, http.MethodPost, base+"/v1/agents", asKey(adminA), fmt.Sprintf(
			`{"agent_id":%q,"namespace":"a","capabilities":["mx.reg"],"endpoint":%q,"ttl_seconds":3600}`, id, holder.srv.URL))
		require.Equal(t, http.StatusCreated, code, out)
		var reg agentJSON
		require.NoError(t, jsonUnmarshal(out, &reg))
		return id, reg.Token
	}
	registerPull := func() (id, token string) {
		id = fresh("mx-pull")
		code, out := call(t, http.MethodPost, base+"/v1/agents", asKey(adminA), fmt.Sprintf(
			`{"agent_id":%q,"namespace":"a","capabilities":["mx.pull"],"mode":"pull","ttl_seconds":3600}`, id))
		require.Equal(t, http.StatusCreated, code, out)
		var reg agentJSON
		require.NoError(t, jsonUnmarshal(out, &reg))
		return id, reg.Token
	}
	a2a := func(method, params string) matrixCall {
		return matrixCall{"POST", "/a2a/a", fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":%s}`, method, params)}
	}
	mcpCall := func(method, params string) matrixCall {
		return matrixCall{"POST", "/mcp/a", fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":%s}`, method, params)}
	}
	// A task with a push config, made over A2A, that stays with its agent.
	pushTask := func() string {
		code, out := call(t, http.MethodPost, base+"/a2a/a", asKey(adminA), fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"message/send",
			"params":{"message":{"kind":"message","role":"user","messageId":%q,"parts":[{"kind":"data","data":{}}]},
			"metadata":{"skill":"mx.cap","timeout_ms":3600000},
			"configuration":{"blocking":false,"pushNotificationConfig":{"id":"cfg","url":%q}}}}`, fresh("msg"), receiver.URL))
		require.Equal(t, http.StatusOK, code, out)
		var r struct {
			Result struct {
				ID string `json:"id"`
			} `json:"result"`
		}
		require.NoError(t, jsonUnmarshal(out, &r), out)
		require.NotEmpty(t, r.Result.ID, out)
		return r.Result.ID
	}
	// agentToken is the token of the agent a call is about, set by the
	// fixture that names one.
	var agentToken string
	longJob := `{"capability":"mx.cap","payload":{},"timeout_ms":3600000}`
	fixtures := map[string]func() matrixCall{
		"GET /healthz":      func() matrixCall { return matrixCall{"GET", "/healthz", ""} },
		"GET /readyz":       func() matrixCall { return matrixCall{"GET", "/readyz", ""} },
		"GET /openapi.json": func() matrixCall { return matrixCall{"GET", "/openapi.json", ""} },
		"GET /metrics":      func() matrixCall { return matrixCall{"GET", "/metrics", ""} },
		"POST /v1/agents": func() matrixCall {
			return matrixCall{"POST", "/v1/agents", fmt.Sprintf(`{"agent_id":%q,"namespace":"a","capabilities":["mx.reg"],"endpoint":%q,"ttl_seconds":3600}`,
				fresh("mx-new"), holder.srv.URL)}
		},
		"GET /v1/agents":            func() matrixCall { return matrixCall{"GET", "/v1/agents?namespace=a", ""} },
		"GET /v1/agents/{agent_id}": func() matrixCall { return matrixCall{"GET", "/v1/agents/mx-hold", ""} },
		"DELETE /v1/agents/{agent_id}": func() matrixCall {
			id, _ := register()
			return matrixCall{"DELETE", "/v1/agents/" + id, ""}
		},
		"PATCH /v1/agents/{agent_id}": func() matrixCall {
			id, _ := register()
			return matrixCall{"PATCH", "/v1/agents/" + id, `{"weight":70}`}
		},
		"POST /v1/agents/{agent_id}/drain": func() matrixCall {
			id, _ := register()
			return matrixCall{"POST", "/v1/agents/" + id + "/drain", `{"reason":"matrix"}`}
		},
		"POST /v1/agents/{agent_id}/down": func() matrixCall {
			id, _ := register()
			return matrixCall{"POST", "/v1/agents/" + id + "/down", ""}
		},
		"POST /v1/agents/{agent_id}/up": func() matrixCall {
			id, _ := register()
			// Confirmed down first, so that up is allowed whatever its probe
			// made of it (up on a HEALTHY agent is a 409).
			code, out := call(t, http.MethodPost, base+"/v1/agents/"+id+"/down?namespace=a", asKey(adminA), `{"reason":"matrix"}`)
			require.Equal(t, http.StatusOK, code, out)
			return matrixCall{"POST", "/v1/agents/" + id + "/up", ""}
		},
		"PUT /v1/agents/{agent_id}/heartbeat": func() matrixCall {
			id, token := register()
			agentToken = token
			return matrixCall{"PUT", "/v1/agents/" + id + "/heartbeat", ""}
		},
		"POST /v1/agents/{agent_id}/offline": func() matrixCall {
			id, token := register()
			agentToken = token
			return matrixCall{"POST", "/v1/agents/" + id + "/offline", ""}
		},
		"POST /v1/agents/{agent_id}/claim": func() matrixCall {
			id, token := registerPull()
			agentToken = token
			return matrixCall{"POST", "/v1/agents/" + id + "/claim", `{"max":1,"wait_ms":0}`}
		},
		"POST /v1/agents/{agent_id}/release": func() matrixCall {
			id, token := registerPull()
			agentToken = token
			return matrixCall{"POST", "/v1/agents/" + id + "/release", `{}`}
		},
		"POST /v1/agents/{agent_id}/token:rotate": func() matrixCall {
			id, token := register()
			agentToken = token
			return matrixCall{"POST", "/v1/agents/" + id + "/token:rotate", ""}
		},
		"GET /v1/alerts":                   func() matrixCall { return matrixCall{"GET", "/v1/alerts?namespace=a", ""} },
		"GET /v1/agents/{agent_id}/series": func() matrixCall { return matrixCall{"GET", "/v1/agents/mx-hold/series?namespace=a", ""} },
		"GET /v1/session":                  func() matrixCall { return matrixCall{"GET", "/v1/session", ""} },
		"POST /v1/session":                 func() matrixCall { return matrixCall{"POST", "/v1/session", ""} },
		"DELETE /v1/session":               func() matrixCall { return matrixCall{"DELETE", "/v1/session", ""} },
		"GET /v1/route":                    func() matrixCall { return matrixCall{"GET", "/v1/route?capability=mx.cap&namespace=a", ""} },
		"GET /v1/capabilities":             func() matrixCall { return matrixCall{"GET", "/v1/capabilities?namespace=a", ""} },
		"GET /v1/capabilities/{name}": func() matrixCall {
			return matrixCall{"GET", "/v1/capabilities/mx.cap?namespace=a", ""}
		},
		"PUT /v1/capabilities/{name}": func() matrixCall {
			return matrixCall{"PUT", "/v1/capabilities/mx.cap", fmt.Sprintf(`{"namespace":"a","description":%q}`, fresh("matrix words"))}
		},
		"POST /v1/resolve": func() matrixCall { return matrixCall{"POST", "/v1/resolve", `{"intent":"mx.cap","namespace":"a"}`} },
		"POST /v1/lookup": func() matrixCall {
			return matrixCall{"POST", "/v1/lookup", `{"capability":"mx.cap","namespace":"a"}`}
		},
		"POST /v1/reports": func() matrixCall {
			for _, k := range []string{adminA, testAdminKey} { // the keys that may report looked the agent up
				code, out := call(t, http.MethodPost, base+"/v1/lookup", asKey(k), `{"capability":"mx.cap","namespace":"a"}`)
				require.Equal(t, http.StatusOK, code, out)
			}
			return matrixCall{"POST", "/v1/reports", `{"namespace":"a","reports":[{"agent_id":"mx-hold","capability":"mx.cap","reached":true,"ok":true,"latency_ms":1}]}`}
		},
		"GET /v1/agents/watch": func() matrixCall { return matrixCall{"GET", "/v1/agents/watch?namespace=a&after=0", ""} },
		"POST /v1/jobs": func() matrixCall {
			return matrixCall{"POST", "/v1/jobs", `{"capability":"mx.none","namespace":"a","payload":{},"max_attempts":3,"backoff_base_ms":600000}`}
		},
		"GET /v1/jobs":                 func() matrixCall { return matrixCall{"GET", "/v1/jobs?namespace=a", ""} },
		"GET /v1/jobs/{job_id}":        func() matrixCall { return matrixCall{"GET", "/v1/jobs/" + pending(), ""} },
		"GET /v1/jobs/{job_id}/events": func() matrixCall { return matrixCall{"GET", "/v1/jobs/" + pending() + "/events", ""} },
		"POST /v1/jobs/{job_id}/result": func() matrixCall {
			id := submit(longJob)
			var env webhook.Envelope
			for env = <-holder.envelopes; env.JobID != id; env = <-holder.envelopes {
			}
			agentToken = holder.token
			return matrixCall{"POST", "/v1/jobs/" + id + "/result", fmt.Sprintf(`{"status":"SUCCESS","attempt":%d}`, env.Attempt)}
		},
		"POST /v1/jobs/{job_id}/progress": func() matrixCall {
			id := submit(longJob)
			var env webhook.Envelope
			for env = <-holder.envelopes; env.JobID != id; env = <-holder.envelopes {
			}
			agentToken = holder.token
			waitJobAuth(t, base, asKey(adminA), id, "DELIVERED")
			return matrixCall{"POST", "/v1/jobs/" + id + "/progress", fmt.Sprintf(`{"attempt":%d,"extend_ms":1000,"progress":{"n":1}}`, env.Attempt)}
		},
		"POST /v1/jobs/{job_id}/cancel": func() matrixCall { return matrixCall{"POST", "/v1/jobs/" + pending() + "/cancel", ""} },
		"POST /v1/jobs/{job_id}/input":  func() matrixCall { return matrixCall{"POST", "/v1/jobs/" + pending() + "/input", `{"payload":{}}`} },
		"POST /v1/jobs/{job_id}/replay": func() matrixCall {
			id := submit(`{"capability":"mx.none","payload":{},"max_attempts":1}`)
			waitJobAuth(t, base, asKey(adminA), id, "DEAD_LETTER")
			return matrixCall{"POST", "/v1/jobs/" + id + "/replay", ""}
		},
		"POST /v1/jobs/{job_id}/approve": func() matrixCall {
			return matrixCall{"POST", "/v1/jobs/" + submit(`{"capability":"mx.risky","payload":{},"max_attempts":3,"backoff_base_ms":600000}`) + "/approve", `{}`}
		},
		"POST /v1/jobs/{job_id}/reject": func() matrixCall {
			return matrixCall{"POST", "/v1/jobs/" + submit(`{"capability":"mx.risky","payload":{}}`) + "/reject", `{}`}
		},
		"GET /v1/events":        func() matrixCall { return matrixCall{"GET", "/v1/events", ""} },
		"GET /v1/events/stream": func() matrixCall { return matrixCall{"GET", "/v1/events/stream", ""} },
		"GET /v1/metrics/agents": func() matrixCall {
			return matrixCall{"GET", "/v1/metrics/agents?namespace=a", ""}
		},
		"GET /v1/metrics/agents/series": func() matrixCall {
			return matrixCall{"GET", "/v1/metrics/agents/series?namespace=a", ""}
		},
		"GET /v1/metrics/fleet": func() matrixCall { return matrixCall{"GET", "/v1/metrics/fleet?namespace=a&window=24h", ""} },
		"GET /v0.1/servers":     func() matrixCall { return matrixCall{"GET", "/v0.1/servers?namespace=a", ""} },
		"GET /v0.1/servers/{name}/versions/latest": func() matrixCall {
			return matrixCall{"GET", "/v0.1/servers/a%2Fmx-mcp/versions/latest?namespace=a", ""}
		},
		"GET /v1/callbacks/secret":         func() matrixCall { return matrixCall{"GET", "/v1/callbacks/secret?namespace=a", ""} },
		"POST /v1/callbacks/secret:rotate": func() matrixCall { return matrixCall{"POST", "/v1/callbacks/secret:rotate?namespace=a", ""} },
		"POST /v1/keys":                    func() matrixCall { return matrixCall{"POST", "/v1/keys", `{"namespace":"a","scopes":["jobs:read"]}`} },
		"GET /v1/keys":                     func() matrixCall { return matrixCall{"GET", "/v1/keys", ""} },
		"DELETE /v1/keys/{key_id}": func() matrixCall {
			_, id := createKey(t, base, adminA, `{"namespace":"a","scopes":["jobs:read"]}`)
			return matrixCall{"DELETE", "/v1/keys/" + id, ""}
		},
		"GET /v1/policies/approvals": func() matrixCall { return matrixCall{"GET", "/v1/policies/approvals?namespace=a", ""} },
		"GET /v1/policies/routing":   func() matrixCall { return matrixCall{"GET", "/v1/policies/routing?namespace=a", ""} },
		"GET /v1/policies/retention": func() matrixCall { return matrixCall{"GET", "/v1/policies/retention?namespace=a", ""} },
		"PUT /v1/policies/retention": func() matrixCall {
			return matrixCall{"PUT", "/v1/policies/retention", `{"namespace":"a","retention_seconds":86400}`}
		},
		"GET /v1/policies/alerts": func() matrixCall { return matrixCall{"GET", "/v1/policies/alerts?namespace=a", ""} },
		"PUT /v1/policies/alerts": func() matrixCall {
			return matrixCall{"PUT", "/v1/policies/alerts", `{"namespace":"a","webhooks":[]}`}
		},
		"PUT /v1/policies/routing": func() matrixCall {
			return matrixCall{"PUT", "/v1/policies/routing", `{"namespace":"a","weight_max":25}`}
		},
		"PUT /v1/policies/approvals": func() matrixCall {
			return matrixCall{"PUT", "/v1/policies/approvals", `{"namespace":"a","patterns":["mx.risky*"]}`}
		},
		"GET /riverui/":                         func() matrixCall { return matrixCall{"GET", "/riverui/", ""} },
		"PUT /riverui/api/queues/{queue}/pause": func() matrixCall { return matrixCall{"PUT", "/riverui/api/queues/a2a_poll/pause", ""} },
		"A2A SendMessage": func() matrixCall {
			return a2a("SendMessage", fmt.Sprintf(`{"message":{"role":"ROLE_USER","messageId":%q,"parts":[{"data":{}}]},
				"metadata":{"skill":"mx.cap","timeout_ms":3600000},"configuration":{"returnImmediately":true}}`, fresh("msg")))
		},
		"A2A SendStreamingMessage": func() matrixCall {
			return a2a("SendStreamingMessage", fmt.Sprintf(`{"message":{"role":"ROLE_USER","messageId":%q,"parts":[{"data":{}}]},
				"metadata":{"skill":"mx.cap","timeout_ms":3600000}}`, fresh("msg")))
		},
		"A2A GetTask":         func() matrixCall { return a2a("GetTask", fmt.Sprintf(`{"id":%q}`, pending())) },
		"A2A CancelTask":      func() matrixCall { return a2a("CancelTask", fmt.Sprintf(`{"id":%q}`, pending())) },
		"A2A SubscribeToTask": func() matrixCall { return a2a("SubscribeToTask", fmt.Sprintf(`{"id":%q}`, pending())) },
		"A2A SetTaskPushNotificationConfig": func() matrixCall {
			return a2a("tasks/pushNotificationConfig/set", fmt.Sprintf(`{"taskId":%q,"pushNotificationConfig":{"id":"cfg2","url":%q}}`, pushTask(), receiver.URL))
		},
		"A2A GetTaskPushNotificationConfig": func() matrixCall {
			return a2a("tasks/pushNotificationConfig/get", fmt.Sprintf(`{"id":%q,"pushNotificationConfigId":"cfg"}`, pushTask()))
		},
		"A2A ListTaskPushNotificationConfig": func() matrixCall {
			return a2a("tasks/pushNotificationConfig/list", fmt.Sprintf(`{"id":%q}`, pushTask()))
		},
		"A2A DeleteTaskPushNotificationConfig": func() matrixCall {
			return a2a("tasks/pushNotificationConfig/delete", fmt.Sprintf(`{"id":%q,"pushNotificationConfigId":"cfg"}`, pushTask()))
		},
		"A2A GetExtendedAgentCard": func() matrixCall { return a2a("GetExtendedAgentCard", `{}`) },
		"MCP tools/list":           func() matrixCall { return mcpCall("tools/list", `{}`) },
		"MCP tools/call": func() matrixCall {
			return mcpCall("tools/call", `{"name":"mx.cap","arguments":{},"task":{"ttl":60000},"_meta":{"agentreach/timeout_ms":3600000}}`)
		},
		"MCP tasks/get": func() matrixCall { return mcpCall("tasks/get", fmt.Sprintf(`{"taskId":%q}`, pending())) },
		"MCP subscriptions/listen": func() matrixCall {
			return mcpCall("subscriptions/listen", fmt.Sprintf(`{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}},"notifications":{"taskIds":[%q]}}`, pending()))
		},
		"MCP tasks/cancel": func() matrixCall { return mcpCall("tasks/cancel", fmt.Sprintf(`{"taskId":%q}`, pending())) },
		"MCP tasks/update": func() matrixCall {
			return mcpCall("tasks/update", fmt.Sprintf(`{"taskId":%q,"inputResponses":{"input":{"action":"accept","content":{"x":1}}}}`, pending()))
		},
	}
	credential := func(kind string) string {
		switch kind {
		case "garbage":
			return asKey("ark_000000000000_never-made-never-made-never-made-never")
		case "revoked":
			return asKey(revoked)
		case "expired":
			return asKey(expired)
		case "other ns":
			return asKey(adminB)
		case "narrow":
			return asKey(narrow)
		case "other agent":
			return asKey(other.token)
		case "agent":
			if agentToken == "" {
				return asKey(holder.token)
			}
			return asKey(agentToken)
		case "admin a":
			return asKey(adminA)
		case "admin *":
			return asKey(testAdminKey)
		}
		return ""
	}
	// writes counts what a refused call must leave alone.
	writes := func() string {
		var s string
		require.NoError(t, svc.m.app.pool.QueryRow(ctx, `SELECT concat_ws(',',
			(SELECT count(*) FROM events), (SELECT count(*) FROM agents), (SELECT count(*) FROM api_keys WHERE revoked_at IS NULL),
			(SELECT count(*) FROM river_job WHERE kind IN ('dispatch_job', 'callback_job')), (SELECT count(*) FROM a2a_push_configs),
			(SELECT count(*) FROM approval_policies), (SELECT count(*) FROM signing_secrets), (SELECT count(*) FROM river_queue WHERE paused_at IS NOT NULL),
			(SELECT count(*) FROM idempotency_keys), (SELECT string_agg(coalesce(prev_token_hash::text, '-'), ',' ORDER BY namespace, agent_id) FROM agents),
			(SELECT count(*) FROM capability_notes), (SELECT coalesce(sum(version), 0) FROM catalogue_versions))`).Scan(&s))
		return s
	}
	settle := func() { settleWrites(t, writes) }

	client := &http.Client{Transport: http.DefaultTransport, Timeout: 30 * time.Second}
	for _, row := range readMatrix(t) {
		fixture := fixtures[row.op]
		require.NotNil(t, fixture, "no fixture for %s", row.op)
		agentToken = ""
		c := fixture()
		settle()
		for _, kind := range matrixKinds {
			want := row.want[kind]
			before := writes()
			got := matrixDo(t, client, base, c, credential(kind))
			require.Equal(t, want, got, "%s with %s credentials", row.op, kind)
			if !strings.HasPrefix(got, "2") {
				require.Equal(t, before, writes(), "%s with %s credentials was refused (%s) but wrote something", row.op, kind, got)
				continue
			}
			agentToken = ""
			c = fixture() // the success may have used the fixture up
			settle()
		}
	}
}

// matrixDo makes one call and answers its status, or "rpc CODE" for a
// JSON-RPC error. A stream is judged by its first event.
func matrixDo(t *testing.T, client *http.Client, base string, c matrixCall, auth string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req, err := http.NewRequestWithContext(ctx, c.method, base+c.path, body)
	require.NoError(t, err)
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if strings.HasPrefix(c.path, "/mcp") {
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	status := fmt.Sprint(resp.StatusCode)
	var payload []byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				payload = []byte(data)
				break
			}
			if c.path == "/v1/events/stream" && sc.Text() == "" {
				break // the log's stream may have nothing to say yet
			}
		}
	} else {
		payload, _ = io.ReadAll(resp.Body)
		if resp.StatusCode >= 400 {
			require.Contains(t, string(payload), `"code":`, "%s %s: the error body", c.method, c.path)
		}
	}
	if (strings.HasPrefix(c.path, "/a2a/") || strings.HasPrefix(c.path, "/mcp")) && resp.StatusCode == http.StatusOK {
		var rpc struct {
			Error *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(payload, &rpc), "%s: %s", c.body, payload)
		if rpc.Error != nil {
			return fmt.Sprintf("rpc %d", rpc.Error.Code)
		}
	}
	return status
}
