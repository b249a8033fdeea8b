package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Client is a caller's client of Agent-Reach: brokered jobs, lookups with
// their cache, direct invocations and their reports. It is safe for
// concurrent use; Close it to stop its goroutines and flush its reports.
type Client struct {
	base   string
	key    string
	cfg    config
	http   *http.Client
	stream *http.Client // the watch feed's: no overall timeout
	logger *slog.Logger

	cache   *cache
	reports *reporter
	memory  *memory // Invoke's: latencies and quarantined agents

	ctx    context.Context // ended by Close; parent of the background goroutines
	cancel context.CancelFunc
	wg     sync.WaitGroup

	watchMu  sync.Mutex
	watching bool

	flightMu sync.Mutex
	flights  map[string]*flight // lookups under way, by question
}

// config is what the options set.
type config struct {
	http             *http.Client
	logger           *slog.Logger
	maxRetries       int
	maxRetryWait     time.Duration
	cacheSize        int
	cacheFile        string
	lookupTimeout    time.Duration
	candidateTimeout time.Duration
	quarantine       time.Duration
	reportBatch      int
	reportEvery      time.Duration
	maxPending       int
	pollFirst        time.Duration
	pollMax          time.Duration
	watch            bool
	onChange         func(AgentChange)
	now              func() time.Time
}

// Option configures a Client.
type Option func(*config)

// HTTPClient makes the client send every request (to Agent-Reach and to
// agents) with h. The default has a 30 s timeout; the watch feed uses a
// copy of h without its timeout.
func HTTPClient(h *http.Client) Option { return func(c *config) { c.http = h } }

// Logger is where the background goroutines (report flusher, watch feed)
// say what went wrong; the default is slog.Default().
func Logger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// Retry sets how often a request answered 429 or 503 is sent again (3 by
// default), and the longest wait before one (10 s): an answer whose
// Retry-After asks for longer is returned as it is. 401 and 403 are never
// retried.
func Retry(maxRetries int, maxWait time.Duration) Option {
	return func(c *config) { c.maxRetries, c.maxRetryWait = maxRetries, maxWait }
}

// CacheSize bounds how many lookup answers (one per capability, hint,
// namespace, constraints and limit) the client keeps, least recently used
// out first; 256 by default. 0 turns serving from memory off; with a
// CacheFile, 256 lists are still kept for stale use.
func CacheSize(n int) Option { return func(c *config) { c.cacheSize = n } }

// CacheFile makes the client keep its last candidate lists in the file at
// path (written atomically after every answer of the registry, mode 0600:
// it holds grants) and read it in New, so that a client started while
// Agent-Reach is unreachable, or losing it later, serves those lists,
// marked Stale, until the registry answers again.
func CacheFile(path string) Option { return func(c *config) { c.cacheFile = path } }

// LookupTimeout bounds one lookup request (5 s by default); past it the
// registry counts as unreachable and a known list is served stale.
func LookupTimeout(d time.Duration) Option {
	return func(c *config) { c.lookupTimeout = d }
}

// CandidateTimeout is the longest Invoke waits for one candidate before
// trying the next (30 s by default; InvokeOptions.Timeout overrides it).
// Once ten calls of a capability have answered, a candidate gets 3 × the
// p99 of its last 64 answers instead (at least 1 s, at most this). The
// HTTPClient's own Timeout, when shorter, cuts it.
func CandidateTimeout(d time.Duration) Option { return func(c *config) { c.candidateTimeout = d } }

// QuarantineFor is how long Invoke tries a candidate it could not reach,
// or that did not answer in time, after every other one (30 s by
// default), without waiting for its lease to lapse.
func QuarantineFor(d time.Duration) Option { return func(c *config) { c.quarantine = d } }

// ReportBatch sets when outcome reports are sent: as soon as size are
// pending (100 by default, at most 1000), or every interval (1 s by
// default), whichever comes first.
func ReportBatch(size int, interval time.Duration) Option {
	return func(c *config) { c.reportBatch, c.reportEvery = size, interval }
}

// PollInterval sets Wait's polling: first after first (100 ms by default),
// then doubling up to max (2 s).
func PollInterval(first, maxInterval time.Duration) Option {
	return func(c *config) { c.pollFirst, c.pollMax = first, maxInterval }
}

// WatchAgents makes New start the watch feed (see Client.Watch) for the
// client's whole life.
func WatchAgents() Option { return func(c *config) { c.watch = true } }

// OnAgentChange calls f with every change the watch feed reads, after the
// cache has applied it. f runs on the feed's goroutine: keep it short.
func OnAgentChange(f func(AgentChange)) Option { return func(c *config) { c.onChange = f } }

// New returns a client of the Agent-Reach at baseURL (http://host:port)
// with the API key apiKey (sent as a bearer token; empty sends none). It
// fails only on a base URL that is not an absolute http(s) URL; an
// unreadable cache file is logged and ignored.
func New(baseURL, apiKey string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: base URL %q is not an absolute http(s) URL", ErrInvalidArgument, baseURL)
	}
	cfg := config{
		maxRetries: 3, maxRetryWait: 10 * time.Second, cacheSize: 256, lookupTimeout: 5 * time.Second,
		candidateTimeout: 30 * time.Second, quarantine: 30 * time.Second, reportBatch: 100, reportEvery: time.Second, maxPending: 10_000,
		pollFirst: 100 * time.Millisecond, pollMax: 2 * time.Second, now: time.Now,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.http == nil {
		cfg.http = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	cfg.reportBatch = min(max(cfg.reportBatch, 1), maxReportsPerBatch)
	if cfg.reportEvery <= 0 {
		cfg.reportEvery = time.Second
	}
	stream := *cfg.http
	stream.Timeout = 0
	c := &Client{base: strings.TrimRight(baseURL, "/"), key: apiKey, cfg: cfg, http: cfg.http, stream: &stream, logger: cfg.logger}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.flights = map[string]*flight{}
	c.cache = newCache(cfg.cacheSize, cfg.cacheFile, cfg.logger)
	c.memory = newMemory()
	c.reports = newReporter(c)
	if cfg.watch {
		c.Watch(c.ctx)
	}
	return c, nil
}

// BaseURL answers the Agent-Reach base URL the client talks to.
func (c *Client) BaseURL() string { return c.base }

// Close stops the watch feed and the report flusher and sends the reports
// still pending (waiting at most 10 s); it answers the flush's error. The
// client must not be used afterwards.
func (c *Client) Close() error {
	c.watchMu.Lock() // so no Watch starts a goroutine once Wait below runs
	c.cancel()
	c.watchMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := c.reports.close(ctx)
	c.wg.Wait()
	return err
}

// Do sends a request to Agent-Reach and decodes its JSON answer into into,
// for the endpoints this client has no method for. path starts with /v1
// and may carry a query; body is nil, a json.RawMessage or []byte sent as
// it is, or any value sent as JSON; into is nil (answer dropped), a
// *json.RawMessage (kept as it is) or a pointer to decode into. An error
// answer is an *APIError; no answer at all wraps ErrUnreachable.
func (c *Client) Do(ctx context.Context, method, path string, body, into any) error {
	return c.do(ctx, method, path, nil, body, into)
}

// do is Do with extra request headers. 429 and 503 are retried (a bounded
// number of times, honouring Retry-After within a bound); nothing else is.
func (c *Client) do(ctx context.Context, method, path string, header http.Header, body, into any) error {
	var payload []byte
	switch b := body.(type) {
	case nil:
	case json.RawMessage:
		if b == nil {
			body = nil
		}
		payload = b
	case []byte:
		if b == nil {
			body = nil
		}
		payload = b
	default:
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return fmt.Errorf("encode the body of %s %s: %w", method, path, err)
		}
	}
	for try := 0; ; try++ {
		status, answer, retryAfter, err := c.send(ctx, method, path, header, payload, body != nil)
		if err != nil {
			return err
		}
		if status/100 == 2 {
			if into == nil || len(answer) == 0 {
				return nil
			}
			if raw, ok := into.(*json.RawMessage); ok {
				*raw = answer
				return nil
			}
			if err := json.Unmarshal(answer, into); err != nil {
				return fmt.Errorf("read the answer of %s %s: %w", method, path, err)
			}
			return nil
		}
		apiErr := answerError(status, answer, retryAfter)
		if (status != http.StatusTooManyRequests && status != http.StatusServiceUnavailable) || try >= c.cfg.maxRetries {
			return apiErr
		}
		wait := retryAfter
		if wait == 0 {
			wait = backoff(try, 100*time.Millisecond, 2*time.Second)
		}
		if wait > c.cfg.maxRetryWait {
			return apiErr
		}
		if err := sleepCtx(ctx, wait); err != nil {
			return fmt.Errorf("%s %s: %w (waiting to retry after %w)", method, path, err, apiErr)
		}
	}
}

// maxAnswer bounds an answer the client reads.
const maxAnswer = 64 << 20

// send makes one request and answers the status, the body and the
// Retry-After.
func (c *Client) send(ctx context.Context, method, path string, header http.Header, payload []byte, hasBody bool) (int, []byte, time.Duration, error) {
	var rd io.Reader
	if hasBody {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, nil, 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if hasBody {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil, 0, fmt.Errorf("%s %s: %w", method, path, ctx.Err())
		}
		return 0, nil, 0, fmt.Errorf("%s %s: %w: %w", method, path, ErrUnreachable, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil, 0, fmt.Errorf("%s %s: %w", method, path, ctx.Err())
		}
		return 0, nil, 0, fmt.Errorf("%s %s: read the answer: %w: %w", method, path, ErrUnreachable, err)
	}
	return resp.StatusCode, b, retryAfter(resp.Header.Get("Retry-After"), c.cfg.now()), nil
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// backoff is the wait before retry try (0-based): base doubling up to
// ceiling, with up to a quarter of jitter either way.
func backoff(try int, base, ceiling time.Duration) time.Duration {
	d := base << min(try, 20)
	if d > ceiling || d <= 0 {
		d = ceiling
	}
	return d - d/4 + rand.N(d/2+1)
}

// sleepCtx waits d, or until ctx ends (answering its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
