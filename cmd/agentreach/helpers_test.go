package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

type httpTestServer = httptest.Server

func newHTTPTestServer(t *testing.T, h http.Handler) *httpTestServer {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

func jsonUnmarshal(s string, into any) error { return json.Unmarshal([]byte(s), into) }

func jsonDecode(r io.Reader, into any) error { return json.NewDecoder(r).Decode(into) }

// atomicTime is a settable clock.
type atomicTime struct {
	mu sync.Mutex
	t  time.Time
}

func (a *atomicTime) set(t time.Time) { a.mu.Lock(); a.t = t; a.mu.Unlock() }

func (a *atomicTime) now() time.Time { a.mu.Lock(); defer a.mu.Unlock(); return a.t }
