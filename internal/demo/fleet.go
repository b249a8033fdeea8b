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

// fleetSpec is the demo's fleet: per capability, a fast agent beside
// others that are slow, flaky, asynchronous or refuse every delivery.
var fleetSpec = []struct {
	id, capability, behaviour string
}{
	{"ocr-fast", "document.ocr", "fast"}, {"ocr-slow", "document.ocr", "slow"}, {"ocr-flaky", "document.ocr", "flaky"},
	{"translate-async", "text.translate", "async"}, {"translate-dead", "text.translate", "dead"},
	{"summarize", "text.summarize", "fast"},
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
		if err := a.register(ctx, base, spec.id, spec.capability); err != nil {
			return f, err
		}
	}
	return f, harness.WaitAgentsHealthy(ctx, base, len(fleetSpec), 30*time.Second)
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
}

func newAgent(life context.Context, behaviour string, client *http.Client) *agent {
	a := &agent{behaviour: behaviour, client: client, life: life}
	a.tok.Store("")
	a.srv = httptest.NewServer(a)
	return a
}

// register registers the agent as id with capability, and keeps its token.
func (a *agent) register(ctx context.Context, base, id, capability string) error {
	req, err := harness.NewRequest(ctx, http.MethodPost, base+"/v1/agents", fmt.Sprintf(
		`{"agent_id":%q,"capabilities":[%q],"endpoint":%q,"ttl_seconds":60}`, id, capability, a.srv.URL))
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

// ServeHTTP answers probes (GET) 200 and deliveries by behaviour.
func (a *agent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
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
