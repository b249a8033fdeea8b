package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/internal/harness"
	"github.com/agentreach/agentreach/webhook"
)

// The behaviours of pull agents: registered with no endpoint, they claim
// their work through whichever service answers and report or give it back
// the same way.
const (
	// pullInline reports each claimed attempt's SUCCESS at once.
	pullInline = "pull-inline"
	// pullAsync reports each SUCCESS a little later, claiming on meanwhile.
	pullAsync = "pull-async"
	// pullFlaky reports a third of its attempts SUCCESS, gives a third back
	// failed (a spent attempt, retried after backoff) and a third back
	// unstarted (routed again at once, no attempt spent).
	pullFlaky = "pull-flaky"
	// pullDies is a pullInline until the run tells it to die; it then dies
	// at its next claim that brings work, holding that work: no more
	// claims, results or heartbeats.
	pullDies = "pull-dies"
)

// A pull agent's slots (max_concurrent) and its claims: it asks for fewer
// than it has slots, so that an agent that dies holding a claim still has
// room in its inbox for work routed to it after its death.
const (
	pullSlots  = 8
	pullClaim  = 4
	pullWaitMS = 1000
)

// claimLoop is a pull agent's work: it claims through server(try), moving
// on to the next service while one does not answer, registers again when
// the service no longer knows it, and handles each claim's deliveries as
// its behaviour says; until ctx ends or the agent dies. (Its heartbeats are
// keepRegistered's.)
func (a *agent) claimLoop(ctx context.Context, server func(try int) string) {
	try := 0
	for ctx.Err() == nil && !a.dead.Load() {
		tok := a.token()
		if tok == "" {
			a.register(ctx, server(try))
			if a.token() == "" {
				try++
				pause(ctx, 100*time.Millisecond) // no service answers: the next one, soon
			}
			continue
		}
		envs, status := a.claim(ctx, server(try), tok)
		if a.forgotten(status, tok) {
			continue
		}
		if status != http.StatusOK {
			try++
			pause(ctx, 100*time.Millisecond) // the service or its database is down: the next one, soon
			continue
		}
		if len(envs) > 0 && a.dying.Load() {
			a.die(envs)
			return
		}
		a.handle(ctx, envs, server)
	}
}

// claim asks base for up to pullClaim deliveries, waiting up to pullWaitMS
// for the first, and returns them with the answer's status (0: none, or
// cut off mid-answer; whatever that claim took times out at its deadline).
func (a *agent) claim(ctx context.Context, base, tok string) ([]webhook.Envelope, int) {
	req, err := harness.NewRequest(ctx, http.MethodPost, base+"/v1/agents/"+a.id+"/claim",
		fmt.Sprintf(`{"max":%d,"wait_ms":%d}`, pullClaim, pullWaitMS))
	if err != nil {
		return nil, 0
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, 0
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode
	}
	var out struct {
		Deliveries []webhook.Envelope `json:"deliveries"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, 0
	}
	return out.Deliveries, http.StatusOK
}

// handle does what the agent's behaviour says with one claim's deliveries.
func (a *agent) handle(ctx context.Context, envs []webhook.Envelope, server func(try int) string) {
	switch a.behaviour {
	case pullAsync:
		for _, env := range envs {
			go func() {
				if pause(ctx, time.Duration(rand.IntN(300))*time.Millisecond) {
					a.result(server, env)
				}
			}()
		}
	case pullFlaky:
		var failed, unstarted []webhook.Envelope
		for _, env := range envs {
			switch rand.IntN(3) {
			case 0:
				a.result(server, env)
			case 1:
				failed = append(failed, env)
			default:
				unstarted = append(unstarted, env)
			}
		}
		a.release(server, failed, "flaky: could not do it")
		a.release(server, unstarted, "")
	default: // pullInline, and pullDies while it lives
		for _, env := range envs {
			a.result(server, env)
		}
	}
}

// result reports env's SUCCESS to its result URL's path on a live service.
func (a *agent) result(server func(try int) string, env webhook.Envelope) {
	u, err := url.Parse(env.ResultURL)
	if err != nil {
		return
	}
	a.send(server, u.Path, fmt.Sprintf(`{"status":"SUCCESS","result":{"by":%q},"attempt":%d}`, a.id, env.Attempt), env.Deadline)
}

// release gives envs back: failed with errText, or unstarted without.
func (a *agent) release(server func(try int) string, envs []webhook.Envelope, errText string) {
	if len(envs) == 0 {
		return
	}
	body := struct {
		Jobs  []domain.HeldAttempt `json:"jobs"`
		Error string               `json:"error,omitempty"`
	}{Error: errText}
	until := envs[0].Deadline
	for _, env := range envs {
		body.Jobs = append(body.Jobs, domain.HeldAttempt{JobID: env.JobID, Attempt: env.Attempt})
		if env.Deadline.Before(until) {
			until = env.Deadline
		}
	}
	b, _ := json.Marshal(body)
	a.send(server, "/v1/agents/"+a.id+"/release", string(b), until)
}

// send POSTs body to path with the agent's token through server(try),
// moving on to the next service while none answers below 500, until the
// time until or the end of the agent's life; it reports whether a service
// answered.
func (a *agent) send(server func(try int) string, path, body string, until time.Time) bool {
	for try := 0; time.Now().Before(until); try++ {
		req, err := harness.NewRequest(a.life, http.MethodPost, server(try)+path, body)
		if err != nil {
			return false
		}
		req.Header.Set("Authorization", "Bearer "+a.token())
		if resp, err := a.client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode < 500 {
				return true
			}
		}
		if !pause(a.life, 100*time.Millisecond) { // the service is down: the next one, soon
			return false
		}
	}
	return false
}

// die keeps envs, just claimed, unanswered and marks the agent dead: its
// claim loop and heartbeats stop. What it claimed must time out at its
// deadline and be retried elsewhere, and what waits in its inbox must be
// routed again as not claimed.
func (a *agent) die(envs []webhook.Envelope) {
	a.mu.Lock()
	for _, env := range envs {
		a.held = append(a.held, domain.HeldAttempt{JobID: env.JobID, Attempt: env.Attempt})
	}
	a.mu.Unlock()
	a.dead.Store(true)
	a.logf("agent %s dies holding %d claimed attempts", a.id, len(envs))
}

// heldAtDeath is what the agent held when it died (none if it did not).
func (a *agent) heldAtDeath() []domain.HeldAttempt {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.held)
}
