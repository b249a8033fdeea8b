package sdk

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"
)

// The modes of Registration.Mode.
const (
	// ModePush is an agent Agent-Reach sends its deliveries to (the
	// default): it listens on HTTP and registers its endpoint.
	ModePush = "push"
	// ModePull is an agent with no inbound endpoint: it claims its
	// deliveries from Agent-Reach.
	ModePull = "pull"
)

// ErrShutdown is the cause of a pull job's context cancelled because the
// agent stopped and its ShutdownGrace ran out.
var ErrShutdown = errors.New("sdk: the agent is shutting down")

const (
	maxClaim      = 100              // the most one claim may ask for
	maxErrorText  = 4096             // the longest release error Agent-Reach takes, in bytes
	settleTimeout = 10 * time.Second // to report or release one outcome
	minBackoff    = 200 * time.Millisecond
	maxBackoff    = 10 * time.Second
)

// puller is a pull agent's state: its worker slots and how many of them
// hold a delivery.
type puller struct {
	workers     int
	wait        time.Duration
	grace       time.Duration
	claimClient *http.Client // the agent's client, with room for a long poll

	mu    sync.Mutex
	held  int           // deliveries claimed and not yet let go
	freed chan struct{} // a token each time held drops
}

func newPuller(cfg *Config, reg *Registration) *puller {
	if reg.MaxConcurrent <= 0 {
		reg.MaxConcurrent = 1
	}
	if cfg.ClaimWait <= 0 {
		cfg.ClaimWait = 20 * time.Second
	}
	cfg.ClaimWait = min(cfg.ClaimWait, 60*time.Second)
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = 30 * time.Second
	}
	client := *cfg.HTTPClient
	if client.Timeout > 0 {
		client.Timeout = max(client.Timeout, cfg.ClaimWait+10*time.Second)
	}
	return &puller{workers: reg.MaxConcurrent, wait: cfg.ClaimWait, grace: cfg.ShutdownGrace,
		claimClient: &client, freed: make(chan struct{}, 1)}
}

func (p *puller) holding() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

func (p *puller) hold() {
	p.mu.Lock()
	p.held++
	p.mu.Unlock()
}

// letGo frees a delivery's slot.
func (p *puller) letGo() {
	p.mu.Lock()
	p.held--
	p.mu.Unlock()
	select {
	case p.freed <- struct{}{}:
	default:
	}
}

// waitFree returns the number of free workers once there is one, or false
// when ctx ends first.
func (p *puller) waitFree(ctx context.Context) (int, bool) {
	for {
		if free := p.workers - p.holding(); free > 0 {
			return free, ctx.Err() == nil
		}
		select {
		case <-ctx.Done():
			return 0, false
		case <-p.freed:
		}
	}
}

// waitIdle reports whether every delivery was let go within d.
func (p *puller) waitIdle(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for p.holding() > 0 {
		select {
		case <-t.C:
			return false
		case <-p.freed:
		}
	}
	return true
}

// runPull is Run of a pull agent: it registers and heartbeats, and claims
// as many deliveries as it has free workers until ctx ends. Then it stops
// claiming, waits for the deliveries it holds (heartbeating meanwhile) and
// goes offline, which gives back whatever is still in its inbox.
func (a *Agent) runPull(ctx context.Context) error {
	if a.reg.Endpoint != "" || a.reg.HealthURL != "" {
		return errors.New("sdk: a pull agent registers no endpoint or health_url")
	}
	if a.reg.Protocol != "" && a.reg.Protocol != "http" {
		return fmt.Errorf("sdk: a pull agent speaks protocol http, not %q", a.reg.Protocol)
	}
	a.startJitter(ctx)
	life, stop := context.WithCancel(context.WithoutCancel(ctx)) // heartbeats go on while held work finishes
	defer stop()
	hbDone := make(chan struct{})
	go func() { defer close(hbDone); a.heartbeatLoop(life) }()

	a.claimLoop(ctx)
	a.drain()
	stop()
	<-hbDone
	if a.currentToken() != "" {
		octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := a.call(octx, http.MethodPost, "/v1/agents/"+a.reg.AgentID+"/offline", map[string]string{"reason": "shutdown"}, nil); err != nil {
			a.log.Warn("sdk: going offline", "err", err)
		}
	}
	return nil
}

// claimLoop claims deliveries for the free workers and starts one per
// delivery, until ctx ends. It never holds more than MaxConcurrent
// deliveries. An error backs off; a 404 or 401 (the registry forgot the
// agent, or it went offline) also registers again.
func (a *Agent) claimLoop(ctx context.Context) {
	backoff := minBackoff
	fail := func(what string, err error) {
		a.log.Warn("sdk: "+what, "err", err, "retry_in", backoff)
		sleep(ctx, backoff)
		backoff = min(backoff*2, maxBackoff)
	}
	for {
		free, ok := a.pull.waitFree(ctx)
		if !ok {
			return
		}
		token := a.currentToken()
		if token == "" {
			if err := a.register(ctx); err != nil && ctx.Err() == nil {
				fail("registering", err)
			}
			continue
		}
		free = min(free, maxClaim)
		start := time.Now()
		ds, err := a.claim(ctx, token, free)
		if ctx.Err() != nil {
			a.giveBack(ctx, ds) // claimed as the agent stopped: not started
			return
		}
		var se *StatusError
		switch {
		case errors.As(err, &se) && (se.Status == http.StatusNotFound || se.Status == http.StatusUnauthorized):
			a.forgetToken(token)
			fail("the registry does not know this agent any more; registering again", err)
			continue
		case err != nil:
			fail("claiming", err)
			continue
		}
		backoff = minBackoff
		if len(ds) > free { // more than asked for: never hold more than MaxConcurrent
			a.giveBack(ctx, ds[free:])
			ds = ds[:free]
		}
		for _, d := range ds {
			a.pull.hold()
			go a.work(ctx, d)
		}
		if len(ds) == 0 && time.Since(start) < 100*time.Millisecond {
			sleep(ctx, 100*time.Millisecond) // a server that does not long-poll is not hammered
		}
	}
}

// claim asks for at most n deliveries, waiting up to ClaimWait for some.
func (a *Agent) claim(ctx context.Context, token string, n int) ([]Delivery, error) {
	var resp struct {
		Deliveries []Delivery `json:"deliveries"`
	}
	body := map[string]int{"max": n, "wait_ms": int(a.pull.wait.Milliseconds())}
	if err := a.do(ctx, a.pull.claimClient, token, http.MethodPost, "/v1/agents/"+a.reg.AgentID+"/claim", body, &resp); err != nil {
		return nil, fmt.Errorf("sdk: claim: %w", err)
	}
	for i := range resp.Deliveries {
		resp.Deliveries[i].Traceparent = resp.Deliveries[i].traceparent() // one span for the handler and the report
	}
	return resp.Deliveries, nil
}

// forgetToken drops the token a call was refused with, unless the agent
// registered again meanwhile.
func (a *Agent) forgetToken(token string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.token == token {
		a.token = ""
	}
}

// work runs the handler on one claimed delivery and sends its outcome: a
// Result is reported, ErrRefused releases the attempt unstarted, another
// error releases it as failed, and ErrAccepted keeps it held until Report
// or its deadline. If the outcome cannot be sent, the attempt times out at
// its deadline on the server.
func (a *Agent) work(runCtx context.Context, d Delivery) {
	ctx, done := a.jobContext(context.WithoutCancel(runCtx), d)
	res, err := a.serve(ctx, d)
	if errors.Is(context.Cause(ctx), ErrJobCancelled) { // the job is over: nothing to send
		a.log.Info("sdk: job cancelled by Agent-Reach", "job_id", d.JobID, "attempt", d.Attempt)
		done(false)
		a.pull.letGo()
		return
	}
	if errors.Is(err, ErrAccepted) {
		done(true)
		context.AfterFunc(ctx, a.pull.letGo) // Report, a deadline or a shutdown ends it
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(runCtx), settleTimeout)
	defer cancel()
	switch {
	case errors.Is(err, ErrRefused):
		err = a.release(sctx, []Delivery{d}, "")
	case err != nil:
		err = a.release(sctx, []Delivery{d}, err.Error())
	default:
		err = a.Report(sctx, d, res)
	}
	if err != nil {
		a.log.Warn("sdk: the outcome of a delivery was not sent; it times out at its deadline", "job_id", d.JobID, "attempt", d.Attempt, "err", err)
	}
	done(false)
	a.pull.letGo()
}

// serve calls the handler; a panic is a handler error, as the HTTP server
// of push mode makes it a failed request.
func (a *Agent) serve(ctx context.Context, d Delivery) (res Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			a.log.Error("sdk: handler panicked", "job_id", d.JobID, "panic", p)
			err = fmt.Errorf("sdk: handler panicked: %v", p)
		}
	}()
	return a.handler(ctx, d)
}

// giveBack releases deliveries that were claimed and not started, without
// an error, so they are routed again at once.
func (a *Agent) giveBack(ctx context.Context, ds []Delivery) {
	if len(ds) == 0 {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if err := a.release(sctx, ds, ""); err != nil {
		a.log.Warn("sdk: giving back unstarted deliveries; they time out at their deadlines", "n", len(ds), "err", err)
	}
}

// attempt names one attempt of a job, as releases and heartbeats do.
type attempt struct {
	JobID   string `json:"job_id"`
	Attempt int    `json:"attempt"`
}

// cancelAttempt cancels the context of the attempt, if it runs here, with
// ErrJobCancelled: the job was cancelled, and its outcome is not sent.
func (a *Agent) cancelAttempt(c attempt) {
	a.jobsMu.Lock()
	j := a.jobs[c.JobID]
	a.jobsMu.Unlock()
	if j != nil && j.attempt == c.Attempt {
		j.cancel(ErrJobCancelled)
	}
}

// release gives claimed attempts back to Agent-Reach: with no errText as
// unstarted work, with one (cut to 4096 bytes) as failed attempts. ds must
// not be empty (an empty list would give back the whole inbox).
func (a *Agent) release(ctx context.Context, ds []Delivery, errText string) error {
	body := struct {
		Jobs  []attempt `json:"jobs"`
		Error string    `json:"error,omitempty"`
	}{Error: clip(errText, maxErrorText)}
	for _, d := range ds {
		body.Jobs = append(body.Jobs, attempt{d.JobID, d.Attempt})
	}
	if err := a.call(ctx, http.MethodPost, "/v1/agents/"+a.reg.AgentID+"/release", body, nil); err != nil {
		return fmt.Errorf("sdk: release %d deliveries: %w", len(ds), err)
	}
	return nil
}

// drain waits up to ShutdownGrace for the held deliveries to be let go;
// then it cancels those still running (cause ErrShutdown) and gives their
// workers a little longer to release them.
func (a *Agent) drain() {
	if a.pull.waitIdle(max(a.pull.grace, 0)) {
		return
	}
	a.log.Warn("sdk: shutdown grace over; cancelling the jobs still running", "held", a.pull.holding())
	a.jobsMu.Lock()
	for _, j := range a.jobs {
		j.cancel(ErrShutdown)
	}
	a.jobsMu.Unlock()
	if !a.pull.waitIdle(5 * time.Second) {
		a.log.Warn("sdk: jobs still running at shutdown; they time out at their deadlines", "held", a.pull.holding())
	}
}

// clip cuts s to at most n bytes, at a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
