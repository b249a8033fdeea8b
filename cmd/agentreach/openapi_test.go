package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/agentreach/agentreach/httpapi"
)

// contractTransport validates every call the test suite makes to the API
// against the OpenAPI document: every response, and every request that the
// server accepted (requests that are wrong on purpose are left alone).
type contractTransport struct {
	next   http.RoundTripper
	router routers.Router

	mu         sync.Mutex
	touched    map[string]int
	violations []string
}

func newContractTransport(next http.RoundTripper) *contractTransport {
	doc, err := httpapi.OpenAPI()
	if err != nil {
		panic(err)
	}
	doc.Servers = nil // any host: the tests listen on random ports
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		panic(err)
	}
	return &contractTransport{next: next, router: router, touched: map[string]int{}}
}

func ours(path string) bool {
	return strings.HasPrefix(path, "/v1/") || path == "/healthz" || path == "/readyz" || path == "/openapi.json"
}

func (ct *contractTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !ours(req.URL.Path) {
		return ct.next.RoundTrip(req)
	}
	var reqBody []byte
	if req.Body != nil {
		reqBody, _ = io.ReadAll(req.Body)
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	resp, err := ct.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	check := req.Clone(context.Background())
	check.Body = io.NopCloser(bytes.NewReader(reqBody))
	if len(reqBody) > 0 && check.Header.Get("Content-Type") == "" {
		check.Header.Set("Content-Type", "application/json") // the API reads every body as JSON
	}
	route, params, err := ct.router.FindRoute(check)
	if err != nil {
		if resp.StatusCode != http.StatusNotFound {
			ct.violate("%s %s: not in the OpenAPI document (%v)", req.Method, req.URL.Path, err)
		}
		return resp, nil
	}
	ct.mu.Lock()
	ct.touched[req.Method+" "+route.Path]++
	ct.mu.Unlock()
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true}
	in := &openapi3filter.RequestValidationInput{Request: check, PathParams: params, Route: route, Options: opts}
	if resp.StatusCode/100 == 2 {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			ct.violate("%s %s request: %v", req.Method, route.Path, firstLine(err))
		}
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, nil // a stream: nothing to read whole
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(body)), Options: opts}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		ct.violate("%s %s response %d: %v", req.Method, route.Path, resp.StatusCode, firstLine(err))
	}
	return resp, nil
}

func firstLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i > 0 {
		return s[:i]
	}
	return s
}

func (ct *contractTransport) violate(format string, args ...any) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if len(ct.violations) < 50 {
		ct.violations = append(ct.violations, fmt.Sprintf(format, args...))
	}
}

// report says which operations the suite touched and what broke.
func (ct *contractTransport) report() (string, bool) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	ops := make([]string, 0, len(ct.touched))
	for op := range ct.touched {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	var b strings.Builder
	fmt.Fprintf(&b, "OpenAPI contract: %d operations exercised, %d violations\n", len(ops), len(ct.violations))
	for _, v := range ct.violations {
		fmt.Fprintf(&b, "  VIOLATION %s\n", v)
	}
	return b.String(), len(ct.violations) == 0
}
