package httpapi

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/auth"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/pgtest"
	"github.com/agentreach/agentreach/jobs"
	"github.com/agentreach/agentreach/projection"
	"github.com/agentreach/agentreach/registry"
	"github.com/agentreach/agentreach/registry/riverwork"
	"github.com/agentreach/agentreach/retention"
)

// newTestAPI is the whole API over a fresh database, with authentication
// off and no workers running: every handler does its real I/O.
func newTestAPI(t testing.TB) (http.Handler, []string) {
	t.Helper()
	pool := pgtest.NewPool(t)
	store := eventstore.New(pool)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := registry.New(pool, store, logger, registry.Config{})
	js := jobs.NewService(pool, store, reg, logger, jobs.Config{PublicURL: "http://127.0.0.1:1"})
	workers := river.NewWorkers()
	riverwork.AddWorkers(workers, reg)
	js.AddWorkers(workers)
	client, err := jobs.NewClient(pool, logger, workers, jobs.ClientConfig{TestOnly: true})
	require.NoError(t, err)
	reg.SetProbes(riverwork.Probes(client))
	js.SetClient(client)
	engine := New(Deps{Pool: pool, Store: store, Logger: logger,
		Jobs: js, Approvals: js, Callbacks: js.Callbacks(), Inbox: js.Inbox(), A2AJobs: js.Adapter(), Agents: reg, Routing: reg,
		Retention: retention.New(pool, store, eventstore.NewProjector(store, logger, projection.All()...), logger, retention.Config{}),
		Auth:      auth.NewStore(pool, store, ""), Insecure: true})
	var routes []string
	for _, r := range engine.Routes() {
		if strings.Contains(r.Path, "stream") {
			continue // long-lived by design
		}
		routes = append(routes, r.Method+" "+r.Path)
	}
	sort.Strings(routes)
	return engine, routes
}

// FuzzRequests sends arbitrary path values, query values and bodies to
// every route of the API on a real database: no panic, no answer of 500 or
// more, and text PostgreSQL cannot store in a path value is a 400.
func FuzzRequests(f *testing.F) {
	api, routes := newTestAPI(f)
	for i, seed := range []struct{ path, key, value, body string }{
		{"x", "namespace", "default", `{}`},
		{"\x00", "capability", "a", ``},
		{"\xff\xfe", "after", "\x00", `{"capability":"x:y","payload":{"k":"a\u0000b"}}`},
		{"0190f1c2-0000-7000-8000-000000000000", "limit", "5", `{"status":"SUCCESS","attempt":1}`},
		{"a", "namespace", "\xc3\x28", `{"agent_id":"a","capabilities":["x"],"endpoint":"http://127.0.0.1:9/","aliases":["\ud800"]}`},
		{"default", "", "", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"\u0000"}}`},
		{"default", "", "", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"\ud800","parts":[]}}}`},
	} {
		f.Add(uint8(i), seed.path, seed.key, seed.value, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, route uint8, value, key, qv string, body []byte) {
		method, pattern, _ := strings.Cut(routes[int(route)%len(routes)], " ")
		segs := strings.Split(pattern, "/")
		hasParam := false
		for i, s := range segs {
			if strings.HasPrefix(s, ":") || strings.HasPrefix(s, "*") {
				segs[i], hasParam = url.PathEscape(value), true
			}
		}
		target := strings.Join(segs, "/")
		if key != "" {
			target += "?" + url.Values{key: {qv}}.Encode()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		require.Less(t, rec.Code, 500, "%s %s %q: %s", method, target, body, rec.Body.String())
		if hasParam && value != "" && !storableText(value) && !strings.HasPrefix(pattern, "/dashboard") {
			require.Equal(t, http.StatusBadRequest, rec.Code, "%s %s: %s", method, target, rec.Body.String())
		}
	})
}

func TestUnstorableJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		doc, at string
		bad     bool
	}{
		{`{"a":"ok","b":[1,"x",{"c":null}]}`, "", false},
		{`{"a":"\ud83d\ude00"}`, "", false},
		{`{"a":"\\u0000"}`, "", false}, // an escaped backslash, then text
		{`{"a":"x\u0000"}`, "a", true},
		{`{"a":{"b":["ok","\ud800"]}}`, "a.b[1]", true},
		{`{"a":"\udc00"}`, "a", true},
		{`{"a":"\ud800\u0041"}`, "a", true},
		{`{"k\u0000":1}`, `k\u0000`, true},
		{"{\"a\":\"\xff\"}", "a", true},
		{`"\u0000"`, "", true},
		{`[{"x":1},{"y":"\u0000"}]`, "[1].y", true},
		{`{"a":1e200000}`, "a", true},
		{`{"a":-1e-20000}`, "a", true},
		{`[1,2e131072]`, "[1]", true},
		{`{"a":1.5e300,"b":-0.000125,"c":0e999999,"d":1e-16383,"e":true,"f":null}`, "", false},
	} {
		at, bad := unstorableJSON([]byte(tc.doc))
		require.Equal(t, tc.bad, bad, tc.doc)
		require.Equal(t, tc.at, at, tc.doc)
	}
}
