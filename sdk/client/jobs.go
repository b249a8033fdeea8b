package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// Status is a job's status.
type Status string

// A job's statuses (docs/api.md).
const (
	StatusSubmitted        Status = "SUBMITTED"
	StatusAwaitingApproval Status = "AWAITING_APPROVAL"
	StatusDelivered        Status = "DELIVERED"
	StatusAwaitingInput    Status = "AWAITING_INPUT"
	StatusTimeout          Status = "TIMEOUT"
	StatusSuccess          Status = "SUCCESS"
	StatusFailed           Status = "FAILED"
	StatusDeadLetter       Status = "DEAD_LETTER"
	StatusCancelled        Status = "CANCELLED"
	StatusRejected         Status = "REJECTED"
)

// Terminal reports whether a job in status s is finished for good. TIMEOUT
// is not: the attempt timed out and the job waits for its next one.
func (s Status) Terminal() bool {
	switch s {
	case StatusSuccess, StatusFailed, StatusDeadLetter, StatusCancelled, StatusRejected:
		return true
	}
	return false
}

// Priority is a job's lane.
type Priority string

// The lanes; empty is normal.
const (
	PriorityHigh   Priority = "high"
	PriorityNormal Priority = "normal"
	PriorityLow    Priority = "low"
)

// Constraints narrow the agents a job or lookup may go to.
type Constraints struct {
	// Version is the agent version wanted (exact, or a prefix like 2.*).
	Version string `json:"version,omitempty"`
	// Protocol is http or a2a.
	Protocol string `json:"protocol,omitempty"`
	// ProtocolVersions are the protocol versions the caller speaks (1.* is
	// a prefix).
	ProtocolVersions []string `json:"protocol_versions,omitempty"`
}

func (c Constraints) empty() bool {
	return c.Version == "" && c.Protocol == "" && len(c.ProtocolVersions) == 0
}

// SubmitRequest is a job to submit (POST /v1/jobs). Zero fields take the
// service's defaults.
type SubmitRequest struct {
	// Capability names what the job needs; it or Intent is required.
	Capability string `json:"capability,omitempty"`
	// Intent, instead of Capability: the caller's words ("where is my
	// parcel"), resolved by the service to a capability of the
	// namespace's catalogue before the job is submitted; the job's
	// events then hold INTENT_RESOLVED with the explanation.
	Intent string `json:"intent,omitempty"`
	// Payload is the job's input: any JSON value but null. A
	// json.RawMessage is sent as it is.
	Payload       any          `json:"payload"`
	Namespace     string       `json:"namespace,omitempty"`
	Hint          string       `json:"hint,omitempty"`
	Priority      Priority     `json:"priority,omitempty"`
	TimeoutMS     int64        `json:"timeout_ms,omitempty"`
	MaxAttempts   int          `json:"max_attempts,omitempty"`
	CallbackURL   string       `json:"callback_url,omitempty"`
	ParentJobID   string       `json:"parent_job_id,omitempty"`
	Constraints   *Constraints `json:"constraints,omitempty"`
	RetryOnFailed bool         `json:"retry_on_failed,omitempty"`
	BackoffBaseMS int64        `json:"backoff_base_ms,omitempty"`
	BackoffMaxMS  int64        `json:"backoff_max_ms,omitempty"`
	RouteWaitMS   int64        `json:"route_wait_ms,omitempty"`
	// OrderingKey delivers the namespace's jobs of the same key one at a
	// time, in submit order (the next when the one before is terminal).
	OrderingKey string `json:"ordering_key,omitempty"`
	// IdempotencyKey, sent as the Idempotency-Key header, makes a retry of
	// the same submit answer the same job for 24 hours (the same key with
	// another body is ErrConflict).
	IdempotencyKey string `json:"-"`
}

// what names the job in an error: its capability, or its intent.
func (r SubmitRequest) what() string {
	if r.Capability == "" && r.Intent != "" {
		return fmt.Sprintf("intent %q", r.Intent)
	}
	return r.Capability
}

// Submitted is the answer to a submit or a replay.
type Submitted struct {
	JobID string `json:"job_id"`
	// Status is SUBMITTED or AWAITING_APPROVAL; for a repeated idempotency
	// key, the job's current status.
	Status  Status `json:"status"`
	TraceID string `json:"trace_id"`
	// ReplayOf is the dead-lettered job a replay submitted again.
	ReplayOf string `json:"replay_of,omitempty"`
	// Raw is the answer as the service wrote it.
	Raw json.RawMessage `json:"-"`
}

// Job is a job's state, folded from its events (GET /v1/jobs/{id}).
type Job struct {
	JobID       string          `json:"job_id"`
	Namespace   string          `json:"namespace"`
	Status      Status          `json:"status"`
	Capability  string          `json:"capability"`
	AgentID     string          `json:"agent_id"`
	Attempts    int             `json:"attempts"`
	MaxAttempts int             `json:"max_attempts"`
	Result      json.RawMessage `json:"result"`
	BizCode     string          `json:"biz_code"`
	Error       string          `json:"error"`
	TraceID     string          `json:"trace_id"`
	ReplayOf    string          `json:"replay_of"`
	SubmittedAt time.Time       `json:"submitted_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
	FinishedAt  *time.Time      `json:"finished_at"`
	// Raw is the answer as the service wrote it, with any fields this
	// package does not model.
	Raw json.RawMessage `json:"-"`
}

// Event is one event of a job's audit trail.
type Event struct {
	Position   int64           `json:"position"`
	StreamID   string          `json:"stream_id"`
	Version    int             `json:"version"`
	Type       string          `json:"type"`
	Data       json.RawMessage `json:"data"`
	Metadata   json.RawMessage `json:"metadata,omitempty"`
	RecordedAt time.Time       `json:"recorded_at"`
}

// ListOptions filter a job list; zero fields do not filter.
type ListOptions struct {
	Status     Status
	Capability string
	AgentID    string
	Namespace  string
	// Limit is the page's size (the service's default when 0, at most 500).
	Limit int
	// Cursor is a page's NextCursor, to read the page after it.
	Cursor string
}

// JobPage is one page of a job list, newest first.
type JobPage struct {
	Jobs []Job `json:"jobs"`
	// NextCursor reads the next page; empty on the last one.
	NextCursor string `json:"next_cursor"`
}

// Submit submits a job and answers once it is committed. Errors:
// ErrInvalidArgument (naming the field), ErrConflict (idempotency key
// reused with another body), ErrRateLimited (overloaded, after the
// retries), ErrPermissionDenied, ErrUnreachable.
func (c *Client) Submit(ctx context.Context, req SubmitRequest) (Submitted, error) {
	var h http.Header
	if req.IdempotencyKey != "" {
		h = http.Header{"Idempotency-Key": {req.IdempotencyKey}}
	}
	var raw json.RawMessage
	if err := c.do(ctx, http.MethodPost, "/v1/jobs", h, req, &raw); err != nil {
		return Submitted{}, fmt.Errorf("submit a job of %s: %w", req.what(), err)
	}
	return decodeSubmitted(raw)
}

func decodeSubmitted(raw json.RawMessage) (Submitted, error) {
	var s Submitted
	if err := json.Unmarshal(raw, &s); err != nil {
		return Submitted{}, fmt.Errorf("read a submit's answer: %w", err)
	}
	s.Raw = raw
	return s, nil
}

func decodeJob(raw json.RawMessage) (Job, error) {
	var j Job
	if err := json.Unmarshal(raw, &j); err != nil {
		return Job{}, fmt.Errorf("read a job: %w", err)
	}
	j.Raw = raw
	return j, nil
}

// Resolution is how an intent resolved to a capability: the deciding
// resolver, its confidence against its threshold, the reason, the
// candidates and every resolver's step (Raw holds the whole answer).
type Resolution struct {
	Intent     string  `json:"intent"`
	Namespace  string  `json:"namespace"`
	Capability string  `json:"capability"`
	Resolver   string  `json:"resolver"`
	Model      string  `json:"model,omitempty"`
	Confidence float64 `json:"confidence"`
	Threshold  float64 `json:"threshold"`
	Reason     string  `json:"reason"`
	Candidates []struct {
		Capability string   `json:"capability"`
		Score      float64  `json:"score"`
		Matched    []string `json:"matched,omitempty"`
	} `json:"candidates"`
	Raw json.RawMessage `json:"-"`
}

// Resolve resolves an intent to a capability of namespace's catalogue
// (empty: the key's), and says why. Errors: ErrAmbiguousIntent when no
// resolver is confident of any capability (the error holds the
// suggestions), ErrPermissionDenied, ErrUnreachable.
func (c *Client) Resolve(ctx context.Context, namespace, intent string) (Resolution, error) {
	body := map[string]string{"intent": intent}
	if namespace != "" {
		body["namespace"] = namespace
	}
	var raw json.RawMessage
	if err := c.do(ctx, http.MethodPost, "/v1/resolve", nil, body, &raw); err != nil {
		return Resolution{}, fmt.Errorf("resolve %q: %w", intent, err)
	}
	var r Resolution
	if err := json.Unmarshal(raw, &r); err != nil {
		return Resolution{}, fmt.Errorf("read a resolution: %w", err)
	}
	r.Raw = raw
	return r, nil
}

// Get answers a job's state, never stale. Errors: ErrNotFound (also for
// another namespace's job), ErrUnreachable.
func (c *Client) Get(ctx context.Context, jobID string) (Job, error) {
	var raw json.RawMessage
	if err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(jobID), nil, nil, &raw); err != nil {
		return Job{}, fmt.Errorf("get job %s: %w", jobID, err)
	}
	return decodeJob(raw)
}

// List answers a page of jobs, newest first.
func (c *Client) List(ctx context.Context, opts ListOptions) (JobPage, error) {
	q := url.Values{}
	for k, v := range map[string]string{"status": string(opts.Status), "capability": opts.Capability,
		"agent_id": opts.AgentID, "namespace": opts.Namespace, "cursor": opts.Cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	path := "/v1/jobs"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var raw struct {
		Jobs       []json.RawMessage `json:"jobs"`
		NextCursor string            `json:"next_cursor"`
	}
	if err := c.do(ctx, http.MethodGet, path, nil, nil, &raw); err != nil {
		return JobPage{}, fmt.Errorf("list jobs: %w", err)
	}
	page := JobPage{Jobs: make([]Job, 0, len(raw.Jobs)), NextCursor: raw.NextCursor}
	for _, r := range raw.Jobs {
		j, err := decodeJob(r)
		if err != nil {
			return JobPage{}, err
		}
		page.Jobs = append(page.Jobs, j)
	}
	return page, nil
}

// Events answers a job's audit trail, in order.
func (c *Client) Events(ctx context.Context, jobID string) ([]Event, error) {
	var out struct {
		Events []Event `json:"events"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(jobID)+"/events", nil, nil, &out); err != nil {
		return nil, fmt.Errorf("events of job %s: %w", jobID, err)
	}
	return out.Events, nil
}

// longPoll is how long one read of Wait or Run asks the service to wait
// (wait_ms), below the HTTP client's default 30 s timeout.
const longPoll = 20 * time.Second

// hold is how long the next read may ask the service to wait: longPoll,
// at most half the HTTP client's Timeout, and a second short of ctx's
// deadline, so that the answer comes before either cuts the read.
func (c *Client) hold(ctx context.Context) time.Duration {
	h := longPoll
	if t := c.http.Timeout; t > 0 {
		h = min(h, t/2)
	}
	if d, ok := ctx.Deadline(); ok {
		h = min(h, time.Until(d)-time.Second)
	}
	return max(h, 0)
}

// Wait answers the job once its status is terminal. It asks the service
// to hold each read until the job ends (wait_ms, up to 20 s a read, or
// what is left of ctx), so the job comes back as soon as it ends, without
// polling; against a service that answers at once (one older than
// wait_ms, or one whose bound on a key's waits is reached) it polls,
// first after PollInterval's first interval, then doubling. It ends with
// ctx; an error of a read ends it too (after the retries of 429 and 503).
// On an error it answers the last state it saw.
func (c *Client) Wait(ctx context.Context, jobID string) (Job, error) {
	var last Job
	polling := false
	for try := 0; ; try++ {
		hold := c.hold(ctx)
		if polling {
			hold = 0
		}
		began := c.cfg.now()
		var raw json.RawMessage
		path := "/v1/jobs/" + url.PathEscape(jobID)
		if hold > 0 {
			path += "?wait_ms=" + strconv.FormatInt(hold.Milliseconds(), 10)
		}
		err := c.do(ctx, http.MethodGet, path, nil, nil, &raw)
		if hold > 0 && errors.Is(err, ErrRateLimited) {
			polling = true // the key holds as many waits as the service allows: poll
			continue
		}
		if err != nil {
			return last, fmt.Errorf("wait for job %s: %w", jobID, err)
		}
		j, err := decodeJob(raw)
		if err != nil {
			return last, err
		}
		last = j
		if j.Status.Terminal() {
			return j, nil
		}
		if hold > 0 && c.cfg.now().Sub(began) >= hold/2 {
			continue // the service held the read: ask again at once
		}
		wait := c.cfg.pollFirst << min(try, 20)
		if wait > c.cfg.pollMax || wait <= 0 {
			wait = c.cfg.pollMax
		}
		if err := sleepCtx(ctx, wait); err != nil {
			return j, fmt.Errorf("wait for job %s (%s): %w", jobID, j.Status, err)
		}
	}
}

// Run submits a job and answers it once it has ended: in one round trip
// when it ends within 20 s (wait_ms on the submit), else by Wait. Without
// an IdempotencyKey it makes one, so that a retry never submits twice.
// Against a service that refuses the wait (one older than wait_ms, or a
// key at its bound of waits) it submits without it, then waits. Errors
// are Submit's and Wait's.
func (c *Client) Run(ctx context.Context, req SubmitRequest) (Job, error) {
	if req.IdempotencyKey == "" {
		id, err := uuid.NewV7()
		if err != nil {
			return Job{}, fmt.Errorf("run a job of %s: an idempotency key: %w", req.what(), err)
		}
		req.IdempotencyKey = id.String()
	}
	h := http.Header{"Idempotency-Key": {req.IdempotencyKey}}
	body := struct {
		SubmitRequest
		WaitMS int64 `json:"wait_ms,omitempty"`
	}{req, c.hold(ctx).Milliseconds()}
	var raw json.RawMessage
	err := c.do(ctx, http.MethodPost, "/v1/jobs", h, body, &raw)
	var apiErr *APIError
	if body.WaitMS > 0 && (errors.Is(err, ErrRateLimited) || errors.As(err, &apiErr) && apiErr.Field == "wait_ms") {
		sub, err := c.Submit(ctx, req) // the same key: the job the first try made, if it made one
		if err != nil {
			return Job{}, err
		}
		return c.Wait(ctx, sub.JobID)
	}
	if err != nil {
		return Job{}, fmt.Errorf("run a job of %s: %w", req.what(), err)
	}
	j, err := decodeJob(raw)
	if err != nil {
		return Job{}, err
	}
	if j.Status.Terminal() {
		return j, nil // 200: it ended within wait_ms
	}
	return c.Wait(ctx, j.JobID) // 202: {job_id, status, trace_id}
}

// Cancel cancels a job that is not terminal, with an optional reason, and
// answers the job. Errors: ErrConflict (already terminal), ErrNotFound.
func (c *Client) Cancel(ctx context.Context, jobID, reason string) (Job, error) {
	var body any
	if reason != "" {
		body = map[string]string{"reason": reason}
	}
	var raw json.RawMessage
	if err := c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(jobID)+"/cancel", nil, body, &raw); err != nil {
		return Job{}, fmt.Errorf("cancel job %s: %w", jobID, err)
	}
	return decodeJob(raw)
}

// Replay submits a dead-lettered job again, as a new job whose ReplayOf is
// jobID. Errors: ErrConflict (not dead-lettered), ErrNotFound.
func (c *Client) Replay(ctx context.Context, jobID string) (Submitted, error) {
	var raw json.RawMessage
	if err := c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(jobID)+"/replay", nil, nil, &raw); err != nil {
		return Submitted{}, fmt.Errorf("replay job %s: %w", jobID, err)
	}
	return decodeSubmitted(raw)
}
