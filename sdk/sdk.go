package sdk

import (
	"bytes"
	"cmp"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentreach/agentreach/webhook"
)

// Registration is what the agent tells the registry about itself. Endpoint
// is filled in by the SDK from the address it listens on unless set. Mode
// is ModePush (or empty) for an agent that is sent its deliveries, ModePull
// for one that claims them: a pull agent has no Endpoint or HealthURL.
type Registration struct {
	AgentID        string         `json:"agent_id"`
	Namespace      string         `json:"namespace,omitempty"`
	Capabilities   []string       `json:"capabilities"`
	Aliases        []string       `json:"aliases,omitempty"`
	Mode           string         `json:"mode,omitempty"`
	Endpoint       string         `json:"endpoint,omitempty"`
	HealthURL      string         `json:"health_url,omitempty"`
	Protocol       string         `json:"protocol,omitempty"`
	Weight         int            `json:"weight,omitempty"`
	MaxConcurrent  int            `json:"max_concurrent,omitempty"`
	Version        string         `json:"version,omitempty"`
	RolloutPercent *int           `json:"rollout_percent,omitempty"`
	TTLSeconds     int            `json:"ttl_seconds,omitempty"`
	Context        map[string]any `json:"context,omitempty"`
	Metadata       map[string]any `json:"metadata,omitempty"`
	// CapabilityInfo publishes what some of its capabilities do, by
	// capability: the words intent resolution reads (the capability
	// catalogue, GET /v1/capabilities).
	CapabilityInfo map[string]CapabilityDoc `json:"capability_info,omitempty"`
}

// CapabilityDoc says what a capability does, for the catalogue that
// resolves callers' intents: a short title, a sentence or two, and
// requests a caller might make of it, in any language.
type CapabilityDoc struct {
	Title       string   `json:"title,omitempty"`
	Description string   `json:"description,omitempty"`
	Examples    []string `json:"examples,omitempty"`
	Tags        []string `json:"tags,omitempty"`
}

// Delivery is one attempt of a job, as Agent-Reach sends it: the
// envelope of the push protocol (package webhook), and how it came.
type Delivery struct {
	webhook.Envelope
	// Traceparent is the W3C trace context the delivery came with; Report
	// sends it back, so the result stays in the job's trace.
	Traceparent string `json:"-"`
	// Direct: a caller called the agent itself, with an invocation grant
	// from a lookup (lookup mode); it must be answered inline.
	Direct bool `json:"-"`
}

// Result is the outcome of a job: SUCCESS with a result, or FAILED (a
// business failure: the work ran and could not be done) with a biz_code.
type Result struct {
	Status  string `json:"status"`
	Result  any    `json:"result,omitempty"`
	BizCode string `json:"biz_code,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
}

// Success is a SUCCESS result.
func Success(result any) Result { return Result{Status: "SUCCESS", Result: result} }

// Failure is a FAILED result with a business code.
func Failure(bizCode string, detail any) Result {
	return Result{Status: "FAILED", BizCode: bizCode, Result: detail}
}

// ErrAccepted, returned by a Handler, answers the delivery with 202: the
// agent took the work and will call Agent.Report before the deadline. In
// pull mode the delivery stays held (a worker's slot) until that Report or
// the deadline.
var ErrAccepted = errors.New("accepted: result follows")

// ErrRefused, returned by a Handler, answers 503: the attempt was not
// taken, and Agent-Reach tries again, possibly with another agent. In pull
// mode the attempt is released without an error: given back unstarted.
var ErrRefused = errors.New("refused")

// Handler does the work of one delivery and returns its result inline, or
// ErrAccepted to report later, or ErrRefused. Any other error answers 500,
// which Agent-Reach treats as a delivery that did not happen; in pull mode
// it releases the attempt with the error's text, a failed attempt.
type Handler func(ctx context.Context, d Delivery) (Result, error)

// DefaultServerURL is where an agent finds Agent-Reach when neither
// Config.ServerURL nor AGENTREACH_URL says: a `make run` on this machine.
const DefaultServerURL = "http://127.0.0.1:8080"

// Config tunes an Agent.
type Config struct {
	// ServerURL is Agent-Reach's base URL, e.g. http://127.0.0.1:8080
	// (default: the environment's AGENTREACH_URL, else DefaultServerURL).
	ServerURL string
	// Addr is where deliveries are served (default 127.0.0.1:0).
	Addr string
	// AdvertiseURL is the endpoint registered, when the agent is reached
	// at another address than it listens on (default http://<listener>/).
	AdvertiseURL string
	// StartJitter is the largest random wait before registering
	// (default 10 s; negative: none).
	StartJitter time.Duration
	// HTTPClient talks to Agent-Reach (default: 10 s timeout).
	HTTPClient *http.Client
	// Logger (default: text to standard error, Info and above; pass
	// slog.New(slog.DiscardHandler) for none).
	Logger *slog.Logger
	// SkipVerify accepts deliveries without checking their signature.
	SkipVerify bool
	// APIKey registers the agent: a key with the agents:write scope in
	// the agent's namespace (default: the environment's AGENTREACH_KEY).
	// Heartbeats and results use the agent's own token, which
	// registration returns. A registration refused for good (400, 401,
	// 403) ends Run with that error.
	APIKey string
	// ClaimWait is how long a pull agent's claim waits for work when
	// there is none (default 20 s, at most 60 s).
	ClaimWait time.Duration
	// ShutdownGrace is how long a pull agent, once Run's context ends,
	// waits for the deliveries it holds to finish before it cancels them
	// (default 30 s; negative: it cancels them at once).
	ShutdownGrace time.Duration
}

// Agent is one running agent.
type Agent struct {
	cfg     Config
	reg     Registration
	handler Handler
	log     *slog.Logger

	mu       sync.Mutex
	token    string
	interval time.Duration

	inFlight   atomic.Int64
	jobsMu     sync.Mutex
	jobs       map[string]*job // the running jobs, by job id
	regMu      sync.Mutex      // one registration at a time
	registered chan struct{}
	regOnce    sync.Once
	// abort ends Run's context with the cause Run returns (a registration
	// refused for good); fatal is that cause.
	abort    context.CancelCauseFunc
	fatal    error
	listener net.Listener
	pull     *puller // nil in push mode
}

// job is the entry of a running job: its attempt and its context's cancel.
// A pointer, so an ending context removes its own entry, not a later
// attempt's.
type job struct {
	attempt int
	cancel  context.CancelCauseFunc
}

// New returns an Agent; Run starts it.
func New(cfg Config, reg Registration, h Handler) *Agent {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.StartJitter == 0 {
		cfg.StartJitter = 10 * time.Second
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if cfg.ServerURL == "" {
		cfg.ServerURL = os.Getenv("AGENTREACH_URL")
	}
	if cfg.ServerURL == "" {
		cfg.ServerURL = DefaultServerURL
	}
	if cfg.APIKey == "" {
		cfg.APIKey = os.Getenv("AGENTREACH_KEY")
	}
	cfg.ServerURL = strings.TrimRight(cfg.ServerURL, "/")
	a := &Agent{cfg: cfg, reg: reg, handler: h, log: cfg.Logger, registered: make(chan struct{})}
	if reg.Mode == ModePull {
		a.pull = newPuller(&a.cfg, &a.reg)
	}
	return a
}

// Registered is closed once the first registration succeeded.
func (a *Agent) Registered() <-chan struct{} { return a.registered }

// Endpoint is the URL deliveries are served at (after Run has started
// listening; see Registered), or "" for a pull agent.
func (a *Agent) Endpoint() string {
	if a.pull != nil {
		return ""
	}
	if a.cfg.AdvertiseURL != "" {
		return a.cfg.AdvertiseURL
	}
	return "http://" + a.listener.Addr().String() + "/"
}

// InFlight is how many deliveries the agent holds now.
func (a *Agent) InFlight() int {
	if a.pull != nil {
		return a.pull.holding()
	}
	return int(a.inFlight.Load())
}

// Run serves deliveries, registers and heartbeats until ctx ends, then goes
// offline and stops serving. It returns nil after a graceful stop, and
// the registry's answer when it refuses the registration for good (400,
// 401, 403: a missing or wrong key, an invalid registration). A pull
// agent (Mode ModePull) listens on nothing: Run claims its deliveries
// instead (see the package doc).
func (a *Agent) Run(ctx context.Context) error {
	if u, err := url.Parse(a.cfg.ServerURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		err := fmt.Errorf("sdk: the server URL %q is not an absolute http(s) URL (Config.ServerURL or AGENTREACH_URL)", a.cfg.ServerURL)
		a.log.Error(err.Error())
		return err
	}
	ctx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	a.mu.Lock()
	a.abort = abort
	a.mu.Unlock()
	err := a.run(ctx)
	if fatal := a.fatalErr(); fatal != nil {
		return fatal
	}
	return err
}

// stop ends Run with err.
func (a *Agent) stop(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fatal == nil {
		a.fatal = err
	}
	if a.abort != nil {
		a.abort(err)
	}
}

func (a *Agent) fatalErr() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fatal
}

func (a *Agent) run(ctx context.Context) error {
	switch a.reg.Mode {
	case "", ModePush:
	case ModePull:
		return a.runPull(ctx)
	default:
		return fmt.Errorf("sdk: unknown registration mode %q (push or pull)", a.reg.Mode)
	}
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", a.cfg.Addr)
	if err != nil {
		return fmt.Errorf("sdk: listen on %s: %w", a.cfg.Addr, err)
	}
	a.listener = l
	if a.reg.Endpoint == "" {
		a.reg.Endpoint = a.Endpoint()
	}
	srv := &http.Server{Handler: a, ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(l) }()

	a.startJitter(ctx)
	hbDone := make(chan struct{})
	go func() { defer close(hbDone); a.heartbeatLoop(ctx) }()

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		return fmt.Errorf("sdk: serve: %w", err)
	}
	<-hbDone
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if a.currentToken() != "" {
		if err := a.call(octx, http.MethodPost, "/v1/agents/"+a.reg.AgentID+"/offline", map[string]string{"reason": "shutdown"}, nil); err != nil {
			a.log.Warn("sdk: going offline", "err", err)
		}
	}
	return srv.Shutdown(octx)
}

// startJitter waits a random time up to StartJitter, so a fleet
// restarting together does not register all at once.
func (a *Agent) startJitter(ctx context.Context) {
	if a.cfg.StartJitter > 0 {
		wait := rand.N(a.cfg.StartJitter)
		a.log.Info("sdk: start-up jitter before registering", "wait", wait)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// heartbeatLoop registers, then heartbeats every interval the registry
// asks for; a 404 means the registry forgot us (or we went offline): it
// registers again. It runs on its own goroutine, so slow work never delays
// a heartbeat.
func (a *Agent) heartbeatLoop(ctx context.Context) {
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		if a.currentToken() == "" {
			if err := a.register(ctx); err != nil {
				a.log.Warn("sdk: register", "err", err)
				sleep(ctx, backoff)
				backoff = min(backoff*2, 10*time.Second)
				continue
			}
			backoff = 200 * time.Millisecond
		}
		sleep(ctx, a.heartbeatInterval())
		if ctx.Err() != nil {
			return
		}
		n := a.InFlight()
		var resp struct {
			HeartbeatEveryMS int64     `json:"heartbeat_interval_ms"`
			Cancelled        []attempt `json:"cancelled"` // a pull agent's: it has no endpoint for a notice
		}
		err := a.call(ctx, http.MethodPut, "/v1/agents/"+a.reg.AgentID+"/heartbeat", map[string]any{"in_flight": n}, &resp)
		var se *StatusError
		switch {
		case errors.As(err, &se) && (se.Status == http.StatusNotFound || se.Status == http.StatusUnauthorized):
			a.log.Info("sdk: registry does not know this agent any more; registering again", "status", se.Status)
			a.setToken("", 0)
		case err != nil:
			a.log.Warn("sdk: heartbeat", "err", err)
		case resp.HeartbeatEveryMS > 0:
			a.mu.Lock()
			a.interval = time.Duration(resp.HeartbeatEveryMS) * time.Millisecond
			a.mu.Unlock()
		}
		for _, c := range resp.Cancelled {
			a.cancelAttempt(c)
		}
	}
}

// CancelNotices is the registration metadata key by which an agent says it
// takes cancel notices: Agent-Reach then POSTs a signed notice (header
// X-Reach-Cancel: 1) to its endpoint when a job it holds is cancelled. The
// SDK sets it and cancels the job's context.
const CancelNotices = "cancel_notices"

// ErrJobCancelled is the cause of a job context cancelled by a notice.
var ErrJobCancelled = errors.New("sdk: the job was cancelled")

func (a *Agent) register(ctx context.Context) error {
	a.regMu.Lock()
	defer a.regMu.Unlock()
	if a.currentToken() != "" {
		return nil // registered meanwhile by another loop
	}
	if a.pull == nil { // a pull agent has no endpoint to be told at
		if a.reg.Metadata == nil {
			a.reg.Metadata = map[string]any{}
		}
		a.reg.Metadata[CancelNotices] = true
	}
	var resp struct {
		Token            string `json:"token"`
		HeartbeatEveryMS int64  `json:"heartbeat_interval_ms"`
	}
	if err := a.callWith(ctx, a.cfg.APIKey, http.MethodPost, "/v1/agents", a.reg, &resp); err != nil {
		var se *StatusError
		if errors.As(err, &se) && (se.Status == http.StatusBadRequest || se.Status == http.StatusUnauthorized || se.Status == http.StatusForbidden) {
			err = fmt.Errorf("sdk: registration of agent %s refused (check the API key, AGENTREACH_KEY, and the registration): %w", a.reg.AgentID, err)
			a.log.Error(err.Error())
			a.stop(err)
		}
		return err
	}
	a.setToken(resp.Token, time.Duration(resp.HeartbeatEveryMS)*time.Millisecond)
	a.log.Info("sdk: registered", "agent_id", a.reg.AgentID, "endpoint", a.reg.Endpoint)
	a.regOnce.Do(func() { close(a.registered) })
	return nil
}

func (a *Agent) setToken(t string, every time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.token = t
	if every > 0 {
		a.interval = every
	}
}

func (a *Agent) currentToken() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.token
}

func (a *Agent) heartbeatInterval() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.interval <= 0 {
		return 10 * time.Second
	}
	return a.interval
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// StatusError is a non-2xx answer of Agent-Reach.
type StatusError struct {
	Status int
	Body   string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("agent-reach answered %d: %s", e.Status, e.Body)
}

func (a *Agent) call(ctx context.Context, method, path string, body, into any) error {
	return a.callWith(ctx, a.currentToken(), method, path, body, into)
}

func (a *Agent) callWith(ctx context.Context, bearer, method, path string, body, into any) error {
	return a.do(ctx, a.cfg.HTTPClient, bearer, method, path, body, into)
}

// do sends body as JSON to Agent-Reach with client and decodes a 2xx
// answer into into; any other answer is a *StatusError. A 429 or 503, or
// a request that never left, is tried again (send).
func (a *Agent) do(ctx context.Context, client *http.Client, bearer, method, path string, body, into any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	status, rb, err := send(ctx, client, false, func() (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, method, a.cfg.ServerURL+path, bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		return req, nil
	})
	if err != nil {
		return err
	}
	if status/100 != 2 {
		return &StatusError{Status: status, Body: string(rb)}
	}
	if into != nil && len(rb) > 0 {
		return json.Unmarshal(rb, into)
	}
	return nil
}

// sendRetries is how many times send tries a call again.
const sendRetries = 4

// send makes the request newReq builds, and makes it again, up to
// sendRetries times within ctx, when Agent-Reach answered 429 or 503 (it
// wrote nothing: after its Retry-After, else after 100 ms doubling), or
// when the request never left (connection refused); an idempotent call
// (a result: a repeat is a harmless duplicate) also after a broken
// connection. It answers the last status and body.
func send(ctx context.Context, client *http.Client, idempotent bool, newReq func() (*http.Request, error)) (int, []byte, error) {
	wait := 100 * time.Millisecond
	for try := 0; ; try++ {
		req, err := newReq()
		if err != nil {
			return 0, nil, err
		}
		var status int
		var body []byte
		var after time.Duration
		resp, err := client.Do(req)
		if err == nil {
			body, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			status = resp.StatusCode
			if status != http.StatusTooManyRequests && status != http.StatusServiceUnavailable {
				return status, body, nil
			}
			after = retryAfter(resp.Header.Get("Retry-After"))
		} else if ctx.Err() != nil || !idempotent && !errors.Is(err, syscall.ECONNREFUSED) {
			return 0, nil, err
		}
		d := cmp.Or(after, wait)
		if dl, ok := ctx.Deadline(); try == sendRetries || ok && time.Now().Add(d).After(dl) {
			return status, body, err // no time left to try again
		}
		sleep(ctx, d)
		if ctx.Err() != nil {
			return status, body, cmp.Or(err, ctx.Err())
		}
		wait *= 2
	}
}

// retryAfter reads a Retry-After of seconds (at most a minute); anything
// else is zero.
func retryAfter(v string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n <= 0 {
		return 0
	}
	return min(time.Duration(n)*time.Second, time.Minute)
}

// Report sends the outcome of an accepted (202) delivery to its result URL
// and ends the job's context. A non-2xx answer is a *StatusError.
func (a *Agent) Report(ctx context.Context, d Delivery, r Result) error {
	if a.pull == nil { // a pull agent's job is let go when its context ends
		defer a.inFlight.Add(-1)
	}
	defer a.endJob(d.JobID)
	r.Attempt = d.Attempt
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	status, rb, err := send(ctx, a.cfg.HTTPClient, true, func() (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.ResultURL, bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+a.currentToken())
		if tp := d.traceparent(); tp != "" {
			req.Header.Set("traceparent", tp)
		}
		return req, nil
	})
	if err != nil {
		return fmt.Errorf("sdk: report result of job %s: %w", d.JobID, err)
	}
	if status/100 != 2 {
		return &StatusError{Status: status, Body: string(rb[:min(len(rb), 4096)])}
	}
	return nil
}

// ServeHTTP answers probes (GET) and deliveries (POST).
func (a *Agent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok"}`)
		return
	case http.MethodPost:
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		http.Error(w, "read delivery: "+err.Error(), http.StatusBadRequest)
		return
	}
	grant := r.Header.Get(GrantHeader)
	if !a.cfg.SkipVerify && grant == "" {
		if err := VerifyDelivery(a.currentToken(), r.Header, body, time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
	}
	d := Delivery{Traceparent: r.Header.Get("traceparent")}
	if err := json.Unmarshal(body, &d); err != nil {
		http.Error(w, "bad delivery: "+err.Error(), http.StatusBadRequest)
		return
	}
	if grant != "" {
		// A direct call by a caller that looked the agent up: its grant,
		// not a signature, says Agent-Reach let it in.
		if !a.cfg.SkipVerify {
			if _, err := VerifyGrant(a.currentToken(), grant, a.reg.AgentID, d.Capability, time.Now()); err != nil {
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			}
		}
		d.Direct = true
	}
	if r.Header.Get("X-Reach-Cancel") == "1" {
		a.cancelJob(d.JobID)
		w.WriteHeader(http.StatusOK)
		return
	}
	if !a.takeSlot(w) {
		return
	}
	ctx, done := a.jobContext(r.Context(), d)
	res, err := a.handler(ctx, d)
	switch {
	case errors.Is(err, ErrAccepted) && d.Direct:
		done(false)
		a.inFlight.Add(-1)
		http.Error(w, "a direct call is answered inline: there is no result_url to report to", http.StatusNotImplemented)
		return
	case errors.Is(err, ErrAccepted):
		done(true)                         // the context lives on until Report, the deadline or a cancel notice
		w.WriteHeader(http.StatusAccepted) // in flight until Report
		return
	case errors.Is(err, ErrRefused):
		done(false)
		a.inFlight.Add(-1)
		http.Error(w, "refused", http.StatusServiceUnavailable)
		return
	case err != nil:
		done(false)
		a.inFlight.Add(-1)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	done(false)
	a.inFlight.Add(-1)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(res)
}

// takeSlot counts a delivery in flight; when every one of the
// max_concurrent slots it registered is busy it answers "not now" (503
// with Retry-After, which pauses the agent a second without counting
// against it) and reports false.
func (a *Agent) takeSlot(w http.ResponseWriter) bool {
	if n := a.inFlight.Add(1); a.reg.MaxConcurrent > 0 && n > int64(a.reg.MaxConcurrent) {
		a.inFlight.Add(-1)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "busy: every one of its max_concurrent slots is taken", http.StatusServiceUnavailable)
		return false
	}
	return true
}

// jobContext is the context a job's handler runs with: it ends at the
// job's deadline, when the delivery's connection goes (while the handler
// answers inline), when a cancel notice for the job comes, or, for a job
// accepted with 202, at its Report. done(true) keeps it past the request;
// done(false) ends it.
func (a *Agent) jobContext(req context.Context, d Delivery) (context.Context, func(accepted bool)) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(req))
	keep := func() {}
	if !d.Deadline.IsZero() {
		ctx, keep = a.keepAlive(ctx, cancel, d)
	}
	if a.pull != nil {
		keep() // a claimed attempt is held at Agent-Reach from its claim on
	}
	stopReq := context.AfterFunc(req, func() { cancel(context.Canceled) })
	j := &job{attempt: d.Attempt, cancel: cancel}
	a.jobsMu.Lock()
	if a.jobs == nil {
		a.jobs = map[string]*job{}
	}
	a.jobs[d.JobID] = j
	a.jobsMu.Unlock()
	context.AfterFunc(ctx, func() { // however it ends, it is forgotten
		a.jobsMu.Lock()
		if a.jobs[d.JobID] == j {
			delete(a.jobs, d.JobID)
		}
		a.jobsMu.Unlock()
	})
	return ctx, func(accepted bool) {
		stopReq()
		if !accepted {
			cancel(context.Canceled)
		} else if a.pull == nil {
			keep() // a pushed attempt is held at Agent-Reach once it answered 202
		}
	}
}

// keepAlive ends the job's context (cancel) at its deadline, and answers
// keep, which starts keeping the job once Agent-Reach holds it as
// delivered (a claim; a push answered 202): while the handler runs past
// two thirds of the attempt's time, it reports progress, extending the
// deadline by the attempt's whole time again, and so on until the context
// ends. An attempt Agent-Reach says no longer runs (409: finished, timed
// out, cancelled) ends the context with ErrJobCancelled; a report that
// fails otherwise leaves the deadline as it was. A handler answering a
// push inline has the deadline it came with.
func (a *Agent) keepAlive(parent context.Context, cancel context.CancelCauseFunc, d Delivery) (context.Context, func()) {
	ctx := &heldContext{Context: parent}
	ctx.deadline.Store(&d.Deadline)
	span := time.Until(d.Deadline)
	if span <= 0 {
		cancel(context.DeadlineExceeded)
		return ctx, func() {}
	}
	expire := time.AfterFunc(span, func() { cancel(context.DeadlineExceeded) })
	context.AfterFunc(ctx, func() { expire.Stop() })
	return ctx, func() { go a.extend(ctx, cancel, d, span, expire) }
}

// heldContext is a job's context, whose deadline moves when the job is
// kept (Agent.Progress).
type heldContext struct {
	context.Context
	deadline atomic.Pointer[time.Time]
}

// Deadline implements context.Context.
func (c *heldContext) Deadline() (time.Time, bool) { return *c.deadline.Load(), true }

// extend is keepAlive's keeper of one job.
func (a *Agent) extend(ctx *heldContext, cancel context.CancelCauseFunc, d Delivery, span time.Duration, expire *time.Timer) {
	deadline := d.Deadline
	for {
		renew := time.NewTimer(time.Until(deadline) - span/3)
		select {
		case <-ctx.Done():
			renew.Stop()
			return
		case <-renew.C:
		}
		rctx, stop := context.WithDeadline(ctx, deadline)
		next, err := a.Progress(rctx, d, span, nil)
		stop()
		var se *StatusError
		switch {
		case errors.As(err, &se) && se.Status == http.StatusConflict:
			a.log.Info("sdk: the attempt no longer runs at Agent-Reach", "job_id", d.JobID, "attempt", d.Attempt)
			cancel(ErrJobCancelled)
			return
		case err != nil || next.IsZero():
			a.log.Warn("sdk: the deadline of a long job was not extended", "job_id", d.JobID, "attempt", d.Attempt, "err", err)
			return
		}
		deadline = next
		ctx.deadline.Store(&next)
		expire.Reset(time.Until(deadline))
	}
}

// Progress reports how far the work on delivery d got (progress: any JSON
// value, or nil), which the caller reads in the job's events, and extends
// the attempt's deadline to now+extend when that is later (0: as it is).
// It answers the attempt's deadline. The SDK calls it by itself for a
// handler that runs long (past two thirds of its time); a handler may
// call it to say more. A 409 *StatusError says the attempt no longer runs.
func (a *Agent) Progress(ctx context.Context, d Delivery, extend time.Duration, progress any) (time.Time, error) {
	body := map[string]any{"attempt": d.Attempt, "extend_ms": extend.Milliseconds()}
	if progress != nil {
		body["progress"] = progress
	}
	var out struct {
		Deadline time.Time `json:"deadline"`
	}
	if err := a.call(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(d.JobID)+"/progress", body, &out); err != nil {
		return time.Time{}, fmt.Errorf("sdk: progress of job %s: %w", d.JobID, err)
	}
	return out.Deadline, nil
}

// endJob ends the context of an accepted job once its result is reported.
func (a *Agent) endJob(jobID string) {
	a.jobsMu.Lock()
	j := a.jobs[jobID]
	a.jobsMu.Unlock()
	if j != nil {
		j.cancel(context.Canceled)
	}
}

// cancelJob cancels the context of the job, if it runs here.
func (a *Agent) cancelJob(jobID string) {
	a.jobsMu.Lock()
	j := a.jobs[jobID]
	a.jobsMu.Unlock()
	if j != nil {
		a.log.Info("sdk: job cancelled by Agent-Reach", "job_id", jobID)
		j.cancel(ErrJobCancelled)
	}
}

// ErrBadSignature is returned by VerifyDelivery for a delivery that was not
// signed with this agent's key, or whose timestamp is too old or too new.
var ErrBadSignature = errors.New("delivery signature does not verify")

// VerifyDelivery checks the Standard Webhooks signature Agent-Reach puts on
// every delivery: HMAC-SHA256 over "webhook-id.webhook-timestamp.body",
// keyed with the SHA-256 of the agent's token, within five minutes of now.
func VerifyDelivery(token string, h http.Header, body []byte, now time.Time) error {
	if token == "" {
		return fmt.Errorf("%w: the agent is not registered yet", ErrBadSignature)
	}
	if err := webhook.Verify(webhook.AgentKey(token), h, body, now, 5*time.Minute); err != nil {
		return fmt.Errorf("%w: %w", ErrBadSignature, err)
	}
	return nil
}

// traceparent is the delivery's trace context, or one made from its trace
// id (a delivery built by hand), or "" when it has neither.
func (d Delivery) traceparent() string {
	if d.Traceparent != "" {
		return d.Traceparent
	}
	if len(d.TraceID) != 32 || strings.Trim(d.TraceID, "0123456789abcdef") != "" || strings.Trim(d.TraceID, "0") == "" {
		return ""
	}
	var span [8]byte
	_, _ = crand.Read(span[:])
	return "00-" + d.TraceID + "-" + hex.EncodeToString(span[:]) + "-01"
}
