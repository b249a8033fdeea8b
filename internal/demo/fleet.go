package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/agentreach/agentreach/internal/harness"
)

// agentSpec is one agent of the demo's fleet: its id, capability and
// behaviour, its lease, its capacity (0: unlimited), and how it
// heartbeats: every third of its TTL, as the SDK does (heartbeat 0), at a
// fraction of it, or never (negative).
type agentSpec struct {
	id, capability, behaviour string
	ttl, maxConcurrent        int
	heartbeat                 float64
}

// fleetSpec is the demo's fleet, so that the dashboard shows every state
// and every outcome: per capability a fast agent beside others that are
// slow, flaky, asynchronous, refuse every delivery, fail some of their work
// on business grounds (reach and success apart), or hang past the
// deadline (timeouts); a capability nobody serves (dead letters); an agent
// whose probe never passes (PROBING), one that never heartbeats (SUSPECT,
// then DOWN), one that heartbeats late (SUSPECT most of the time), one
// that goes offline after the run (OFFLINE) and one drained while it holds
// work (DRAINING).
var fleetSpec = []agentSpec{
	{id: "ocr-fast", capability: "document.ocr", behaviour: "fast"},
	{id: "ocr-slow", capability: "document.ocr", behaviour: "slow"},
	{id: "ocr-flaky", capability: "document.ocr", behaviour: "flaky"},
	{id: "ocr-hang", capability: "document.ocr", behaviour: "hang", maxConcurrent: 2},
	{id: "ocr-gone", capability: "document.ocr", behaviour: "fast", ttl: 20, heartbeat: -1},
	{id: "translate-async", capability: "text.translate", behaviour: "async"},
	{id: "translate-dead", capability: "text.translate", behaviour: "dead"},
	{id: "translate-late", capability: "text.translate", behaviour: "fast", ttl: 30, heartbeat: 0.9},
	{id: "summarize", capability: "text.summarize", behaviour: "fast"},
	{id: "summarize-picky", capability: "text.summarize", behaviour: "picky"},
	{id: "summarize-retired", capability: "text.summarize", behaviour: "fast"},
	{id: "resize-dead", capability: "image.resize", behaviour: "dead"},
	{id: "describe-probing", capability: "image.describe", behaviour: "probing"},
	{id: "report-long", capability: "report.long", behaviour: "hold", maxConcurrent: 1},
}

// healthy is how many agents of fleetSpec pass their probe.
func healthy() int {
	n := 0
	for _, s := range fleetSpec {
		if s.behaviour != "probing" {
			n++
		}
	}
	return n
}

// fleet is the demo's agents, served in this process.
type fleet struct {
	agents []*agent
	cancel context.CancelFunc
}

// startFleet serves and registers every agent of fleetSpec with the
// service at base, and waits until they are healthy. The fleet it returns
// is to be closed even with an error.
func startFleet(ctx context.Context, base string) (*fleet, error) {
	life, cancel := context.WithCancel(ctx)
	f := &fleet{cancel: cancel}
	client := &http.Client{Timeout: 10 * time.Second}
	for _, spec := range fleetSpec {
		a := newAgent(life, spec.behaviour, client)
		f.agents = append(f.agents, a)
		if err := a.register(ctx, base, spec); err != nil {
			return f, err
		}
		go a.heartbeats(base, spec)
	}
	return f, harness.WaitAgentsHealthy(ctx, base, healthy(), 30*time.Second)
}

// agentByID is the fleet's agent of id, nil if none.
func (f *fleet) agentByID(id string) *agent {
	for i, s := range fleetSpec {
		if s.id == id && i < len(f.agents) {
			return f.agents[i]
		}
	}
	return nil
}

func (f *fleet) close() {
	f.cancel()
	for _, a := range f.agents {
		a.srv.Close()
	}
}

// agent is one agent of the demo: an HTTP server answering deliveries as
// its behaviour says, and the token its registration returned.
type agent struct {
	behaviour string
	client    *http.Client
	life      context.Context // the fleet's: ends the agent's own calls
	srv       *httptest.Server
	tok       atomic.Value // string
	served    atomic.Int64 // deliveries answered, for the picky agent
}

func newAgent(life context.Context, behaviour string, client *http.Client) *agent {
	a := &agent{behaviour: behaviour, client: client, life: life}
	a.tok.Store("")
	a.srv = httptest.NewServer(a)
	return a
}

// register registers the agent as spec says, and keeps its token. A
// probing agent's health URL answers 503, so its probe never passes.
func (a *agent) register(ctx context.Context, base string, spec agentSpec) error {
	ttl := spec.ttl
	if ttl == 0 {
		ttl = 60
	}
	extra := ""
	if spec.behaviour == "probing" {
		extra = fmt.Sprintf(`,"health_url":%q`, a.srv.URL+"/unhealthy")
	}
	req, err := harness.NewRequest(ctx, http.MethodPost, base+"/v1/agents", fmt.Sprintf(
		`{"agent_id":%q,"capabilities":[%q],"endpoint":%q,"ttl_seconds":%d,"max_concurrent":%d%s}`,
		spec.id, spec.capability, a.srv.URL, ttl, spec.maxConcurrent, extra))
	if err != nil {
		return err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var reg struct {
		Token string `json:"token"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&reg)
	a.tok.Store(reg.Token)
	return nil
}

// heartbeats renews the agent's lease as spec says until the fleet ends;
// a negative heartbeat never renews it.
func (a *agent) heartbeats(base string, spec agentSpec) {
	if spec.heartbeat < 0 {
		return
	}
	ttl := spec.ttl
	if ttl == 0 {
		ttl = 60
	}
	every := time.Duration(ttl) * time.Second / 3
	if spec.heartbeat > 0 {
		every = time.Duration(float64(ttl) * spec.heartbeat * float64(time.Second))
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-a.life.Done():
			return
		case <-t.C:
		}
		req, err := harness.NewRequest(a.life, http.MethodPut, base+"/v1/agents/"+spec.id+"/heartbeat", "")
		if err != nil {
			return
		}
		req.Header.Set("Authorization", "Bearer "+a.tok.Load().(string))
		if resp, err := a.client.Do(req); err == nil {
			resp.Body.Close()
		}
	}
}

// ServeHTTP answers probes (GET) 200, or 503 on a probing agent's health
// URL, and deliveries by behaviour.
func (a *agent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		if r.URL.Path == "/unhealthy" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		return
	}
	var env struct {
		Attempt   int    `json:"attempt"`
		ResultURL string `json:"result_url"`
	}
	_ = json.NewDecoder(r.Body).Decode(&env)
	switch a.behaviour {
	case "slow":
		time.Sleep(time.Duration(80+rand.IntN(120)) * time.Millisecond) // the agent's work
	case "flaky":
		if rand.IntN(10) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
	case "dead":
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "upstream model unavailable")
		return
	case "picky":
		if a.served.Add(1)%3 == 1 { // every third, from the first: a business failure, delivered but not a success
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"status":"FAILED","biz_code":"unreadable_input","result":{"reason":"the text is too short to summarize"}}`)
			return
		}
	case "hang":
		select { // past the job's deadline: the attempt times out
		case <-r.Context().Done():
		case <-a.life.Done():
		case <-time.After(time.Minute):
		}
		return
	case "hold":
		w.WriteHeader(http.StatusAccepted) // and never reports: it holds the job
		return
	case "async":
		w.WriteHeader(http.StatusAccepted)
		go a.report(env.ResultURL, env.Attempt)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"status":"SUCCESS","result":{"ok":true}}`)
}

// report posts an accepted delivery's SUCCESS to resultURL after a short
// while of work.
func (a *agent) report(resultURL string, attempt int) {
	time.Sleep(time.Duration(20+rand.IntN(60)) * time.Millisecond) // the agent's work
	req, err := harness.NewRequest(a.life, http.MethodPost, resultURL,
		fmt.Sprintf(`{"status":"SUCCESS","result":{"translated":true},"attempt":%d}`, attempt))
	if err != nil {
		return
	}
	req.Header.Set("Authorization", "Bearer "+a.tok.Load().(string))
	if resp, err := a.client.Do(req); err == nil {
		resp.Body.Close()
	}
}
