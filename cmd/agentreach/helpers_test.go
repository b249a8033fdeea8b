package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

type httpTestServer = httptest.Server

func newHTTPTestServer(t *testing.T, h http.Handler) *httpTestServer {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}
