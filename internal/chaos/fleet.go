package chaos

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
	"github.com/agentreach/agentreach/jobs"
)

// behaviours are the fleet's: 8 good (inline or asynchronous) and 4 bad
// (refuse with 503, hang past the deadline, flaky, and one that dies
// mid-run).
var behaviours = []string{"inline", "inline", "inline", "inline", "inline", "async", "async", "async", "refuse", "hang", "flaky", "dies"}

// fleet is the run's agents, served in this process. They register and
// heartbeat through whichever service process answers.
type fleet struct {
	agents []*agent
	cancel context.CancelFunc
}

// startFleet starts an agent of each behaviour; server(k) is the base URL
// of a live service for caller k.
func startFleet(ctx context.Context, server func(int) string, logf func(string, ...any)) *fleet {
	fctx, cancel := context.WithCancel(ctx)
	f := &fleet{cancel: cancel}
	client := &http.Client{Timeout: 5 * time.Second}
	for i, b := range behaviours {
		a := newAgent(fctx, fmt.Sprintf("chaos-%02d-%s", i, b), b, client)
		f.agents = append(f.agents, a)
		if b == "dies" {
			go a.dieAfter(fctx, 3*time.Second, logf)
		}
		go a.keepRegistered(fctx, func(try int) string { return server(i + try) })
	}
	return f
}

// stop ends the agents' calls and closes their servers.
func (f *fleet) stop() {
	f.cancel()
	for _, a := range f.agents {
		a.srv.Close()
	}
}

// agent is one agent of the fleet: an HTTP server answering deliveries as
// its behaviour says, and the token its registration returned.
type agent struct {
	id, behaviour string
	client        *http.Client
	life          context.Context // the fleet's: ends the agent's own calls
	every         time.Duration   // between heartbeats
	srv           *httptest.Server
	tok           atomic.Value // string: "" until registered
	dead          atomic.Bool
}

func newAgent(life context.Context, id, behaviour string, client *http.Client) *agent {
	a := &agent{id: id, behaviour: behaviour, client: client, life: life, every: 2 * time.Second}
	a.tok.Store("")
	a.srv = httptest.NewServer(a)
	return a
}

func (a *agent) token() string { return a.tok.Load().(string) }

// ServeHTTP answers probes (GET) 200 and deliveries by behaviour; a dead
// agent drops the connection.
func (a *agent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if a.dead.Load() {
		hangUp(w)
		return
	}
	if r.Method == http.MethodGet {
		return
	}
	var env jobs.Envelope
	_ = json.NewDecoder(r.Body).Decode(&env)
	switch a.behaviour {
	case "refuse":
		w.WriteHeader(http.StatusServiceUnavailable)
	case "hang":
		select {
		case <-time.After(time.Until(env.Deadline) + time.Second):
		case <-r.Context().Done():
		}
	case "flaky":
		if rand.IntN(2) == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, `{"status":"SUCCESS","result":{"flaky":true}}`)
	case "async":
		w.WriteHeader(http.StatusAccepted)
		go a.report(env)
	default:
		_, _ = io.WriteString(w, `{"status":"SUCCESS","result":{"ok":true}}`)
	}
}

// hangUp closes the connection under w: the agent dies mid-answer.
func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			_ = c.Close()
		}
	}
}

// report posts an accepted delivery's SUCCESS to its result URL, retrying
// while the service is down, until the attempt's deadline.
func (a *agent) report(env jobs.Envelope) {
	body := fmt.Sprintf(`{"status":"SUCCESS","result":{"async":true},"attempt":%d}`, env.Attempt)
	for try := 0; try < 50 && time.Now().Before(env.Deadline); try++ {
		req, err := harness.NewRequest(a.life, http.MethodPost, env.ResultURL, body)
		if err != nil {
			return
		}
		req.Header.Set("Authorization", "Bearer "+a.token())
		if resp, err := a.client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode < 500 {
				return
			}
		}
		if !pause(a.life, 100*time.Millisecond) { // the service is down: retry soon
			return
		}
	}
}

// pause waits d, and reports false when ctx ends first.
func pause(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// dieAfter makes the agent drop every connection after d.
func (a *agent) dieAfter(ctx context.Context, d time.Duration, logf func(string, ...any)) {
	if pause(ctx, d) {
		logf("agent %s dies", a.id)
		a.dead.Store(true)
	}
}

// keepRegistered registers the agent, then heartbeats, through server(try)
// for the try-th call, registering again when the service no longer knows
// it; until ctx ends or the agent dies.
func (a *agent) keepRegistered(ctx context.Context, server func(try int) string) {
	for try := 0; ctx.Err() == nil && !a.dead.Load(); try++ {
		if a.token() == "" {
			a.register(ctx, server(try))
		} else {
			a.heartbeat(ctx, server(try))
		}
		pause(ctx, a.every)
	}
}

func (a *agent) register(ctx context.Context, base string) {
	body := fmt.Sprintf(`{"agent_id":%q,"capabilities":["chaos.work"],"endpoint":%q,"ttl_seconds":10}`, a.id, a.srv.URL)
	req, err := harness.NewRequest(ctx, http.MethodPost, base+"/v1/agents", body)
	if err != nil {
		return
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	var out struct {
		Token string `json:"token"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode == http.StatusCreated {
		a.tok.Store(out.Token)
	}
}

func (a *agent) heartbeat(ctx context.Context, base string) {
	req, err := harness.NewRequest(ctx, http.MethodPut, base+"/v1/agents/"+a.id+"/heartbeat", "")
	if err != nil {
		return
	}
	req.Header.Set("Authorization", "Bearer "+a.token())
	resp, err := a.client.Do(req)
	if err != nil {
		return
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		a.tok.Store("") // the service forgot the agent: register again
	}
}
