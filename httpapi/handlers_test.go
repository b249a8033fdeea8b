package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// do makes one request of the API and answers its status and JSON body.
func do(t *testing.T, api http.Handler, method, path, body string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	api.ServeHTTP(rec, req)
	var out map[string]any
	if rec.Body.Len() > 0 && strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out), rec.Body.String())
	}
	return rec.Code, out
}

func errCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// TestHandlersJobs: submit answers 202 with the job, which reads back by
// id, and bad input is a 400 naming the field.
func TestHandlersJobs(t *testing.T) {
	t.Parallel()
	api, _ := newTestAPI(t)
	code, out := do(t, api, "POST", "/v1/jobs", `{"capability":"doc:parse","payload":{"a":1}}`)
	require.Equal(t, http.StatusAccepted, code, out)
	id, _ := out["job_id"].(string)
	require.NotEmpty(t, id)
	require.Equal(t, "SUBMITTED", out["status"])

	code, out = do(t, api, "GET", "/v1/jobs/"+id, "")
	require.Equal(t, http.StatusOK, code, out)
	require.Equal(t, "doc:parse", out["capability"])
	code, out = do(t, api, "GET", "/v1/jobs/"+id+"/events", "")
	require.Equal(t, http.StatusOK, code, out)
	require.NotEmpty(t, out["events"])

	for _, tc := range []struct{ body, field string }{
		{`{"payload":{}}`, "capability"},
		{`{"capability":"doc:parse","payload":{},"priority":"urgent"}`, "priority"},
		{`{"capability":"doc:parse","payload":{},"nope":1}`, "nope"},
		{`{"capability":"doc:parse","payload":{}} trailing`, "body"},
	} {
		code, out = do(t, api, "POST", "/v1/jobs", tc.body)
		require.Equal(t, http.StatusBadRequest, code, tc.body)
		require.Equal(t, "invalid_argument", errCode(out), tc.body)
		require.Equal(t, tc.field, out["error"].(map[string]any)["field"], tc.body)
	}
	code, out = do(t, api, "GET", "/v1/jobs/0190f1c2-0000-7000-8000-000000000000", "")
	require.Equal(t, http.StatusNotFound, code)
	require.Equal(t, "not_found", errCode(out))
	code, out = do(t, api, "GET", "/v1/jobs?limit=abc", "")
	require.Equal(t, http.StatusBadRequest, code, out)
}

// TestHandlersAgents: registration answers 201 with a token, the agent
// reads back without it, and an unknown route is the JSON 404.
func TestHandlersAgents(t *testing.T) {
	t.Parallel()
	api, _ := newTestAPI(t)
	code, out := do(t, api, "POST", "/v1/agents", `{"agent_id":"h-1","capabilities":["doc:parse"],"endpoint":"http://127.0.0.1:9/"}`)
	require.Equal(t, http.StatusCreated, code, out)
	require.True(t, strings.HasPrefix(out["token"].(string), "art_"))
	require.Equal(t, "PROBING", out["state"])

	code, out = do(t, api, "GET", "/v1/agents/h-1", "")
	require.Equal(t, http.StatusOK, code, out)
	require.NotContains(t, out, "token", "the token is shown once")
	code, out = do(t, api, "GET", "/v1/agents?namespace=default", "")
	require.Equal(t, http.StatusOK, code, out)
	require.Len(t, out["agents"], 1)

	code, out = do(t, api, "POST", "/v1/agents", `{"agent_id":"h 2","capabilities":["doc:parse"],"endpoint":"http://127.0.0.1:9/"}`)
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "agent_id", out["error"].(map[string]any)["field"])
	code, out = do(t, api, "GET", "/v1/route?capability=doc:parse", "")
	require.Equal(t, http.StatusOK, code, out)
	require.Empty(t, out["chosen"], "a PROBING agent gets no work")

	code, out = do(t, api, "GET", "/v1/nowhere", "")
	require.Equal(t, http.StatusNotFound, code)
	require.Equal(t, "not_found", errCode(out))
	code, out = do(t, api, "DELETE", "/v1/agents/h-1", "")
	require.Equal(t, http.StatusNoContent, code, out)
	code, _ = do(t, api, "GET", "/v1/agents/h-1", "")
	require.Equal(t, http.StatusNotFound, code)
}
