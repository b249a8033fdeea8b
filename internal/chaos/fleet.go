package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/internal/harness"
	"github.com/agentreach/agentreach/webhook"
)

// behaviours are the fleet's: 8 push agents, 5 good (inline or
// asynchronous) and 3 bad (refuse with 503, hang past the deadline, and one
// that dies mid-run); and 4 pull agents (see pull.go), 2 good (report at
// once, or later) and 2 bad (flaky, and one that dies holding claimed work).
var behaviours = []string{"inline", "inline", "inline", "async", "async", "refuse", "hang", "dies",
	pullInline, pullAsync, pullFlaky, pullDies}

// Modes of an agent of the fleet.
const (
	modePush = "push"
	modePull = "pull"
)

// mode is the mode of an agent of behaviour b.
func mode(b string) string {
	if strings.HasPrefix(b, "pull-") {
		return modePull
	}
	return modePush
}

// describeFleet says how many agents of each mode, and their behaviours.
func describeFleet(bs []string) string {
	by := map[string][]string{}
	for _, b := range bs {
		by[mode(b)] = append(by[mode(b)], strings.TrimPrefix(b, "pull-"))
	}
	return fmt.Sprintf("%d agents: %d push (%s), %d pull (%s)", len(bs),
		len(by[modePush]), strings.Join(by[modePush], ", "), len(by[modePull]), strings.Join(by[modePull], ", "))
}

// fleet is the run's agents, served in this process. They register and
// heartbeat, and pull agents claim, through whichever service process
// answers.
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
		a.logf = logf
		f.agents = append(f.agents, a)
		if b == "dies" {
			go a.dieAfter(fctx, 3*time.Second, logf)
		}
		serverFor := func(try int) string { return server(i + try) }
		go a.keepRegistered(fctx, serverFor)
		if a.mode == modePull {
			go a.claimLoop(fctx, serverFor)
		}
	}
	return f
}

// dieHolding tells the pull agents that die to die at their next claim
// that brings work, holding it.
func (f *fleet) dieHolding() {
	for _, a := range f.agents {
		if a.behaviour == pullDies {
			a.dying.Store(true)
		}
	}
}

// stop ends the agents' calls and closes their servers.
func (f *fleet) stop() {
	f.cancel()
	for _, a := range f.agents {
		if a.srv != nil {
			a.srv.Close()
		}
	}
}

// agent is one agent of the fleet: a push agent's HTTP server answering
// deliveries as its behaviour says (a pull agent has none: it claims), and
// the token its registration returned.
type agent struct {
	id, behaviour, mode string
	client              *http.Client
	life                context.Context // the fleet's: ends the agent's own calls
	every               time.Duration   // between heartbeats
	logf                func(string, ...any)
	srv                 *httptest.Server // push only
	tok                 atomic.Value     // string: "" until registered
	dead                atomic.Bool
	regMu               sync.Mutex // one registration at a time

	dying atomic.Bool // a pull agent dies at its next claim that brings work
	mu    sync.Mutex
	held  []domain.HeldAttempt // what a pull agent held when it died
}

func newAgent(life context.Context, id, behaviour string, client *http.Client) *agent {
	a := &agent{id: id, behaviour: behaviour, mode: mode(behaviour), client: client, life: life, every: 2 * time.Second,
		logf: func(string, ...any) {}}
	a.tok.Store("")
	if a.mode == modePush {
		a.srv = httptest.NewServer(a)
	}
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
	var env webhook.Envelope
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
func (a *agent) report(env webhook.Envelope) {
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

// register registers the agent through base, unless it is registered
// already, and keeps the token it answers: a push agent with its endpoint,
// a pull agent with none. A pull agent's claim loop registers too; one at a
// time, so that they do not replace each other's token.
func (a *agent) register(ctx context.Context, base string) {
	a.regMu.Lock()
	defer a.regMu.Unlock()
	if a.token() != "" {
		return
	}
	body := fmt.Sprintf(`{"agent_id":%q,"capabilities":["chaos.work"],"endpoint":%q,"ttl_seconds":10}`, a.id, a.endpoint())
	if a.mode == modePull {
		body = fmt.Sprintf(`{"agent_id":%q,"capabilities":["chaos.work"],"mode":"pull","max_concurrent":%d,"ttl_seconds":10}`, a.id, pullSlots)
	}
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

// heartbeat renews the agent's lease through base.
func (a *agent) heartbeat(ctx context.Context, base string) {
	tok := a.token()
	req, err := harness.NewRequest(ctx, http.MethodPut, base+"/v1/agents/"+a.id+"/heartbeat", "")
	if err != nil {
		return
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := a.client.Do(req)
	if err != nil {
		return
	}
	resp.Body.Close()
	a.forgotten(resp.StatusCode, tok)
}

// forgotten reports whether status says the service no longer knows the
// agent or its token tok (404, 401), and then clears the token so that
// the agent registers again; unless it already did.
func (a *agent) forgotten(status int, tok string) bool {
	if status == http.StatusNotFound || status == http.StatusUnauthorized {
		a.tok.CompareAndSwap(tok, "")
		return true
	}
	return false
}

// endpoint is where a push agent is delivered to; "" for a pull agent.
func (a *agent) endpoint() string {
	if a.srv == nil {
		return ""
	}
	return a.srv.URL
}
