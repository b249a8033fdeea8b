package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/jobs/jobstore"
	"github.com/agentreach/agentreach/jobs/jobwait"
	"github.com/agentreach/agentreach/webhook"
)

type submitRequest struct {
	Capability    string             `json:"capability"`
	Payload       json.RawMessage    `json:"payload"`
	Namespace     string             `json:"namespace"`
	Hint          string             `json:"hint"`
	Priority      string             `json:"priority"`
	TimeoutMS     int                `json:"timeout_ms"`
	MaxAttempts   int                `json:"max_attempts"`
	CallbackURL   string             `json:"callback_url"`
	ParentJobID   string             `json:"parent_job_id"`
	Constraints   domain.Constraints `json:"constraints"`
	RetryOnFailed bool               `json:"retry_on_failed"`
	BackoffBaseMS int                `json:"backoff_base_ms"`
	BackoffMaxMS  int                `json:"backoff_max_ms"`
	RouteWaitMS   int                `json:"route_wait_ms"`
	// OrderingKey delivers the namespace's jobs of the same key one at a
	// time, in submit order.
	OrderingKey string `json:"ordering_key"`
	// Intent, instead of Capability: the caller's words, resolved to a
	// capability of the namespace's catalogue before the job is submitted.
	Intent string `json:"intent"`
	// WaitMS asks the answer to wait up to that long for the job's end:
	// 200 with the ended job, else 202 as without it.
	WaitMS int `json:"wait_ms"`
}

type submitResponse struct {
	JobID    string    `json:"job_id"`
	Status   string    `json:"status"`
	TraceID  string    `json:"trace_id"`
	Warnings []warning `json:"warnings,omitempty"`
}

// warning is something the caller of an accepted request should know: the
// job is accepted all the same.
type warning struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// submitWarnings says, from the router's view (a moment old at most),
// why the job just accepted may wait: no registered agent of its
// namespace offers its capability, or every one that does is unavailable.
func (s *Server) submitWarnings(sub domain.Submitted) []warning {
	if w := s.routeWarning(sub.Namespace, sub.Capability, sub.RouteWaitMS, false); w != nil {
		return []warning{*w}
	}
	return nil
}

// routeWarning is why a job of capability in namespace ns cannot be
// routed now, from the router's view: no_agent, all_unavailable, or (with
// capacity) at_capacity; nil when an agent can take it.
func (s *Server) routeWarning(ns, capability string, routeWaitMS int, capacity bool) *warning {
	if capability == "" {
		return nil
	}
	res := s.deps.Agents.Snapshot().Route(domain.RouteRequest{Namespace: ns, Capability: capability})
	bound := "its route_wait_ms"
	if routeWaitMS == 0 {
		bound = "the service's route wait (route_wait_ms)"
	}
	switch {
	case res.Chosen != "":
		return nil
	case res.AllAtCapacity:
		if !capacity {
			return nil
		}
		return &warning{Code: "at_capacity", Message: fmt.Sprintf(
			"every agent of namespace %s offering %s is at capacity (max_concurrent): the job waits for a slot for %s", ns, capability, bound)}
	case len(res.Rejected) == 0:
		return &warning{Code: "no_agent", Message: fmt.Sprintf(
			"no registered agent of namespace %s offers %s: the job waits for one for %s, then its attempt is spent as no_agent",
			ns, capability, bound)}
	case res.Unavailable():
		return &warning{Code: "all_unavailable", Message: fmt.Sprintf(
			"every agent of namespace %s offering %s is unavailable now (probing, down, draining, paused or its breaker open): the job waits for one for %s",
			ns, capability, bound)}
	}
	return nil
}

// DecodeSubmit turns a submit body into a checked submission for
// namespace ns (used when the body names none). Every error is a 4xx:
// *Error or *domain.FieldError.
func DecodeSubmit(body io.Reader, ns string) (domain.Submitted, error) {
	var req submitRequest
	if err := decodeJSON(body, &req, true); err != nil {
		return domain.Submitted{}, err
	}
	if req.Namespace == "" {
		req.Namespace = ns
	}
	sub := submission(req)
	return sub, domain.NormalizeSubmission(&sub, domain.DefaultMaxPayloadBytes)
}

func submission(req submitRequest) domain.Submitted {
	return domain.Submitted{
		Namespace: req.Namespace, Capability: req.Capability, Hint: req.Hint, Payload: req.Payload,
		Priority: domain.Priority(req.Priority), TimeoutMS: req.TimeoutMS, MaxAttempts: req.MaxAttempts,
		CallbackURL: req.CallbackURL, ParentJobID: req.ParentJobID, Constraints: req.Constraints,
		RetryOnFailed: req.RetryOnFailed, BackoffBaseMS: req.BackoffBaseMS, BackoffMaxMS: req.BackoffMaxMS,
		RouteWaitMS: req.RouteWaitMS, Intent: req.Intent, OrderingKey: req.OrderingKey,
	}
}

func (s *Server) submitJob(c *gin.Context) {
	var req submitRequest
	if err := bindJSON(c, &req, true); err != nil {
		_ = c.Error(err)
		return
	}
	ns, err := defaultNamespace(c, req.Namespace)
	if err != nil {
		_ = c.Error(err)
		return
	}
	if req.Capability != "" && !principal(c).CanSubmit(req.Capability) {
		_ = c.Error(&Error{Code: CodePermissionDenied, Field: "capability", Message: "this key may not submit jobs for " + req.Capability})
		return
	}
	req.Namespace = ns
	idempotencyKey := c.GetHeader("Idempotency-Key")
	if !storableText(idempotencyKey) {
		_ = c.Error(Invalid("Idempotency-Key", "the Idempotency-Key header must be UTF-8 text without NUL characters"))
		return
	}
	// The wait is taken before the intent is resolved (which may ask a
	// model and remember its answer): a refusal costs nothing.
	wait, err := s.reserveWait(c, req.WaitMS)
	if err != nil {
		_ = c.Error(err)
		return
	}
	if wait != nil {
		defer wait.Close()
	}
	resolution, err := s.resolveSubmit(c, &req)
	if err != nil {
		_ = c.Error(err)
		return
	}
	sub := submission(req)
	sub.Resolution = resolution
	sub.IdempotencyKey = idempotencyKey
	var watch func(string)
	watched := ""
	if wait != nil {
		// Watched before its commit: its end cannot come before the watch,
		// and a new job needs no read to know it has not ended.
		watch = func(id string) { wait.Watch(id); watched = id }
	}
	res, err := s.deps.Jobs.SubmitWatching(c.Request.Context(), sub, s.meta(c, principal(c).Actor()), watch)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.Header("Location", "/v1/jobs/"+res.JobID)
	if wait != nil {
		fresh := res.JobID == watched && !res.Existing
		if !fresh { // the job an earlier submit with its Idempotency-Key made
			wait.Watch(res.JobID)
		}
		l, err := s.awaitEnd(c, wait, res.JobID, time.Now().Add(time.Duration(req.WaitMS)*time.Millisecond), fresh)
		if err == nil && l != nil && l.Status.Terminal() {
			c.JSON(http.StatusOK, toJobResponse(l))
			return
		} // else answered as without wait_ms: the job was accepted
	}
	c.JSON(http.StatusAccepted, submitResponse{JobID: res.JobID, Status: string(res.Status), TraceID: res.TraceID, Warnings: s.submitWarnings(sub)})
}

// reserveWait checks wait_ms (0 to jobwait.MaxWait) and takes one of the
// key's waits for it: nil when it is 0.
func (s *Server) reserveWait(c *gin.Context, ms int) (*jobwait.Wait, error) {
	if ms < 0 || int64(ms) > jobwait.MaxWait.Milliseconds() {
		return nil, Invalid("wait_ms", "wait_ms must be between 0 and %d (milliseconds)", jobwait.MaxWait.Milliseconds())
	}
	if ms == 0 {
		return nil, nil
	}
	return s.deps.Waits.Reserve(principal(c).Actor())
}

// awaitEnd waits until job id has ended or deadline passes, woken by the
// commits that may have ended it: wait watches it already, and the job
// is read first, unless read says it was read (or made) after the watch
// and had not ended. It answers the ended job, else the job as it last
// read it (nil if it read none).
func (s *Server) awaitEnd(c *gin.Context, wait *jobwait.Wait, id string, deadline time.Time, read bool) (*jobstore.Loaded, error) {
	ctx := c.Request.Context()
	var l *jobstore.Loaded
	for {
		if !read {
			var err error
			if l, err = s.deps.Jobs.Load(ctx, nil, id); err != nil || l.Status.Terminal() {
				return l, err
			}
		}
		if !wait.Until(ctx, deadline) {
			return l, nil
		}
		if f := wait.Fold(); f != nil {
			return f, nil // as the commit that ended it left it
		}
		read = false
	}
}

// resolveSubmit resolves a submit's intent to the capability it names,
// which the key must be allowed to submit, as if the caller had named it.
// A submit without an intent resolves nothing.
func (s *Server) resolveSubmit(c *gin.Context, req *submitRequest) (*domain.IntentResolution, error) {
	if req.Intent == "" {
		return nil, nil
	}
	if req.Capability != "" {
		return nil, Invalid("intent", "give either capability or intent, not both")
	}
	res, err := s.deps.Intent.Resolve(c.Request.Context(), req.Namespace, req.Intent)
	if err != nil {
		return nil, err
	}
	if !principal(c).CanSubmit(res.Capability) {
		return nil, &Error{Code: CodePermissionDenied, Field: "intent",
			Message: "the intent resolved to " + res.Capability + ", and this key may not submit jobs for it"}
	}
	req.Capability = res.Capability
	return &res, nil
}

type jobResponse struct {
	JobID       string          `json:"job_id"`
	Namespace   string          `json:"namespace"`
	Status      string          `json:"status"`
	Capability  string          `json:"capability"`
	Intent      string          `json:"intent,omitempty"`
	AgentID     string          `json:"agent_id,omitempty"`
	Attempts    int             `json:"attempts"`
	MaxAttempts int             `json:"max_attempts"`
	Priority    string          `json:"priority"`
	Result      json.RawMessage `json:"result,omitempty"`
	// Progress is what the agent last said of its progress on the
	// attempt (PROGRESS); Deadline the running attempt's deadline.
	Progress    json.RawMessage `json:"progress,omitempty"`
	Deadline    *time.Time      `json:"deadline,omitempty"`
	BizCode     string          `json:"biz_code,omitempty"`
	Error       string          `json:"error,omitempty"`
	TraceID     string          `json:"trace_id"`
	ParentJobID string          `json:"parent_job_id,omitempty"`
	RootJobID   string          `json:"root_job_id,omitempty"`
	ReplayOf    string          `json:"replay_of,omitempty"`
	OrderingKey string          `json:"ordering_key,omitempty"`
	// Via is the face the job was submitted through: rest, a2a or mcp.
	Via         string         `json:"via"`
	Callback    *callbackState `json:"callback,omitempty"`
	SubmittedAt time.Time      `json:"submitted_at"`
	UpdatedAt   time.Time      `json:"updated_at"`
	FinishedAt  *time.Time     `json:"finished_at,omitempty"`
	// Waiting says why a job not under way (SUBMITTED, or TIMEOUT before
	// its retry) cannot be routed now, from the router's view: no_agent,
	// all_unavailable or at_capacity (GET /v1/jobs/{job_id} only).
	Waiting *warning `json:"waiting,omitempty"`
}

type callbackState struct {
	URL          string `json:"url"`
	Acknowledged bool   `json:"acknowledged"`
	Attempts     int    `json:"attempts"`
	GaveUp       bool   `json:"gave_up"`
}

func toJobResponse(l *jobstore.Loaded) jobResponse {
	r := jobResponse{JobID: l.JobID, Namespace: l.Namespace, Status: string(l.Status), Capability: l.Capability, Intent: l.Intent,
		AgentID: l.AgentID, Attempts: l.Attempts, MaxAttempts: l.MaxAttempts, Priority: string(l.Priority),
		Result: l.Result, BizCode: l.BizCode, Error: l.Error, TraceID: l.TraceID, ParentJobID: l.ParentJobID,
		RootJobID: l.RootJobID, ReplayOf: l.ReplayOf, OrderingKey: l.OrderingKey, Via: cmp.Or(l.Via, "rest"), SubmittedAt: l.SubmittedAt.UTC(),
		UpdatedAt: l.UpdatedAt.UTC()}
	if !l.FinishedAt.IsZero() {
		t := l.FinishedAt.UTC()
		r.FinishedAt = &t
	}
	if l.CallbackURL != "" {
		r.Callback = &callbackState{URL: l.CallbackURL, Acknowledged: l.CallbackAcked, Attempts: l.Callbacks, GaveUp: l.CallbackGaveUp}
	}
	if l.Status == domain.StatusDelivered && !l.Deadline.IsZero() {
		d := l.Deadline.UTC()
		r.Deadline = &d
	}
	if l.Status == domain.StatusDelivered {
		r.Progress = l.Progress
	}
	return r
}

// loadJob loads the job of the path for a principal that must see its
// namespace: another namespace's job is not found.
func (s *Server) loadJob(c *gin.Context) (*jobstore.Loaded, bool) {
	l, err := s.deps.Jobs.Load(c.Request.Context(), nil, c.Param("job_id"))
	if err == nil && !principal(c).Sees(l.Namespace) {
		err = fmt.Errorf("job %s: %w", c.Param("job_id"), domain.ErrNotFound) // as if there were none
	}
	if err != nil {
		_ = c.Error(err)
		return nil, false
	}
	return l, true
}

// loadOwnJob is loadJob for a principal that must also be allowed to
// submit the job's capability (cancel, replay).
func (s *Server) loadOwnJob(c *gin.Context) (*jobstore.Loaded, bool) {
	l, ok := s.loadJob(c)
	if ok && !principal(c).CanSubmit(l.Capability) {
		_ = c.Error(&Error{Code: CodePermissionDenied, Message: "this key may not act on jobs for " + l.Capability})
		return nil, false
	}
	return l, ok
}

func (s *Server) getJob(c *gin.Context) {
	ms, err := queryInt(c, "wait_ms", 0, 0, jobwait.MaxWait.Milliseconds())
	if err != nil {
		_ = c.Error(err)
		return
	}
	wait, err := s.reserveWait(c, int(ms))
	if err != nil {
		_ = c.Error(err)
		return
	}
	if wait != nil {
		defer wait.Close()
		wait.Watch(c.Param("job_id")) // before the read: an end after it wakes the wait
	}
	l, ok := s.loadJob(c)
	if !ok {
		return
	}
	if wait != nil && !l.Status.Terminal() {
		// The job is the key's to see; wait for its end, then answer
		// what it is then.
		if again, err := s.awaitEnd(c, wait, l.JobID, time.Now().Add(time.Duration(ms)*time.Millisecond), true); err == nil && again != nil {
			l = again
		}
	}
	resp := toJobResponse(l)
	if l.Status == domain.StatusSubmitted || l.Status == domain.StatusTimeout {
		resp.Waiting = s.routeWarning(l.Namespace, l.Capability, l.RouteWaitMS, true) // why it is not under way
	}
	c.JSON(http.StatusOK, resp)
}

func (s *Server) jobEvents(c *gin.Context) {
	l, ok := s.loadJob(c)
	if !ok {
		return
	}
	out := make([]eventResponse, len(l.Records))
	for i, r := range l.Records {
		out[i] = toEventResponse(r)
	}
	c.JSON(http.StatusOK, gin.H{"job_id": l.JobID, "events": out})
}

func (s *Server) listJobs(c *gin.Context) {
	limit, err := queryInt(c, "limit", 50, 1, 500)
	if err != nil {
		_ = c.Error(err)
		return
	}
	ns, err := scopeNamespace(c, c.Query("namespace"))
	if err != nil {
		_ = c.Error(err)
		return
	}
	f := jobstore.ListFilter{Namespace: ns, Status: domain.JobStatus(strings.ToUpper(c.Query("status"))),
		Capability: c.Query("capability"), AgentID: c.Query("agent_id"), Via: c.Query("via"), Before: c.Query("cursor"), Limit: int(limit)}
	if f.Via != "" && f.Via != "rest" && f.Via != domain.ViaA2A && f.Via != domain.ViaMCP {
		_ = c.Error(Invalid("via", "via must be rest, a2a or mcp"))
		return
	}
	if f.Before != "" {
		if _, err := uuid.Parse(f.Before); err != nil {
			_ = c.Error(Invalid("cursor", "cursor must be the next_cursor of an earlier page"))
			return
		}
	}
	if f.Status != "" && !validStatus(f.Status) {
		_ = c.Error(Invalid("status", "unknown status %q", f.Status))
		return
	}
	if err := searchFilter(c, &f); err != nil {
		_ = c.Error(err)
		return
	}
	list, err := s.deps.Jobs.List(c.Request.Context(), f)
	if err != nil {
		_ = c.Error(err)
		return
	}
	next := ""
	if len(list) == f.Limit {
		next = list[len(list)-1].JobID
	}
	c.JSON(http.StatusOK, gin.H{"jobs": each(list, toJobSummary), "next_cursor": next})
}

// maxSearchText bounds q and trace_id.
const maxSearchText = 200

// searchFilter reads a job search's parameters into f: q (a job id or
// trace id prefix, or text of the error, which needs since), trace_id (or
// its prefix), since and until (RFC 3339, bounding the submit time).
func searchFilter(c *gin.Context, f *jobstore.ListFilter) error {
	f.Query, f.TraceID = strings.TrimSpace(c.Query("q")), strings.TrimSpace(c.Query("trace_id"))
	for field, v := range map[string]string{"q": f.Query, "trace_id": f.TraceID} {
		if len(v) > maxSearchText || !storableText(v) {
			return Invalid(field, "%s must be at most %d characters of UTF-8 text", field, maxSearchText)
		}
	}
	if f.TraceID != "" && !jobstore.SearchesIDs(f.TraceID) {
		return Invalid("trace_id", "trace_id must be a trace id or its first hex digits (at least 4)")
	}
	for field, into := range map[string]*time.Time{"since": &f.Since, "until": &f.Until} {
		if v := c.Query(field); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return Invalid(field, "%s must be an RFC 3339 time, e.g. 2026-12-04T09:00:00Z", field)
			}
			*into = t
		}
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.After(f.Since) {
		return Invalid("until", "until must be after since")
	}
	if f.Query != "" && !jobstore.SearchesIDs(f.Query) && f.Since.IsZero() {
		return Invalid("since", "a search of error text needs since (a time range), e.g. since=%s", time.Now().UTC().Add(-24*time.Hour).Format(time.RFC3339))
	}
	return nil
}

func validStatus(st domain.JobStatus) bool {
	for _, s := range domain.JobStatuses {
		if s == st && s != domain.StatusNone {
			return true
		}
	}
	return false
}

type resultRequest struct {
	Status    string          `json:"status"`
	Result    json.RawMessage `json:"result"`
	BizCode   string          `json:"biz_code"`
	Attempt   int             `json:"attempt"`
	ClaimNext int             `json:"claim_next"`
}

// reportResult serves POST /v1/jobs/{id}/result (agent token). A pull
// agent may ask claim_next deliveries with it: they are claimed in the
// report's transaction and answered beside the job, as a claim's are.
func (s *Server) reportResult(c *gin.Context) {
	var req resultRequest
	if err := bindJSON(c, &req, true); err != nil {
		_ = c.Error(err)
		return
	}
	ctx := c.Request.Context()
	recorded, l, next, err := s.deps.Jobs.ReportResultAndClaim(ctx, c.Param("job_id"), bearer(c),
		domain.ResultReport{Status: domain.JobStatus(req.Status), Result: req.Result, BizCode: req.BizCode, Attempt: req.Attempt,
			ClaimNext: req.ClaimNext},
		s.meta(c, "agent"))
	if err != nil {
		_ = c.Error(err)
		return
	}
	if req.ClaimNext == 0 {
		c.JSON(http.StatusOK, gin.H{"recorded": recorded, "job": toJobResponse(l)})
		return
	}
	if ctx.Err() != nil && len(next) > 0 {
		// The agent went away while its report was being answered: give
		// the deliveries back at once rather than let them time out.
		if a, err := s.deps.Agents.PullAgent(context.WithoutCancel(ctx), l.AgentID, bearer(c)); err == nil {
			s.releaseTo(ctx, a, next)
		}
		return
	}
	if next == nil {
		next = []webhook.Envelope{}
	}
	c.JSON(http.StatusOK, gin.H{"recorded": recorded, "job": toJobResponse(l), "deliveries": next})
}

type progressRequest struct {
	Attempt  int             `json:"attempt"`
	ExtendMS int64           `json:"extend_ms"`
	Progress json.RawMessage `json:"progress"`
}

// reportProgress records an agent's progress on an attempt it holds and
// extends its deadline: POST /v1/jobs/{id}/progress (agent token).
func (s *Server) reportProgress(c *gin.Context) {
	var req progressRequest
	if err := bindJSON(c, &req, false); err != nil {
		_ = c.Error(err)
		return
	}
	if req.ExtendMS < 0 || req.ExtendMS > domain.MaxExtend.Milliseconds() {
		_ = c.Error(&domain.FieldError{Field: "extend_ms", Message: fmt.Sprintf("must be 0 to %d", domain.MaxExtend.Milliseconds())})
		return
	}
	l, err := s.deps.Jobs.ReportProgress(c.Request.Context(), c.Param("job_id"), bearer(c), req.Attempt,
		time.Duration(req.ExtendMS)*time.Millisecond, req.Progress, s.meta(c, "agent"))
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, toJobResponse(l))
}

type cancelRequest struct {
	Reason string `json:"reason"`
}

func (s *Server) cancelJob(c *gin.Context) {
	var req cancelRequest
	if err := bindJSON(c, &req, false); err != nil {
		_ = c.Error(err)
		return
	}
	if _, ok := s.loadOwnJob(c); !ok {
		return
	}
	l, err := s.deps.Jobs.Cancel(c.Request.Context(), c.Param("job_id"), req.Reason, s.meta(c, principal(c).Actor()))
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, toJobResponse(l))
}

func (s *Server) replayJob(c *gin.Context) {
	if _, ok := s.loadOwnJob(c); !ok {
		return
	}
	res, err := s.deps.Jobs.Replay(c.Request.Context(), c.Param("job_id"), s.meta(c, principal(c).Actor()))
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.Header("Location", "/v1/jobs/"+res.JobID)
	c.JSON(http.StatusAccepted, gin.H{"job_id": res.JobID, "status": res.Status, "trace_id": res.TraceID, "replay_of": c.Param("job_id")})
}

type decisionRequest struct {
	Reason string `json:"reason"`
}

type inputRequest struct {
	Payload json.RawMessage `json:"payload"`
}

// provideInput sends the caller's input to the A2A agent that awaits it:
// POST /v1/jobs/{id}/input {"payload": ...}.
func (s *Server) provideInput(c *gin.Context) {
	var req inputRequest
	if err := bindJSON(c, &req, true); err != nil {
		_ = c.Error(err)
		return
	}
	if _, ok := s.loadOwnJob(c); !ok {
		return
	}
	l, err := s.deps.Jobs.ProvideInput(c.Request.Context(), c.Param("job_id"), req.Payload, s.meta(c, principal(c).Actor()))
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, toJobResponse(l))
}

func (s *Server) approveJob(c *gin.Context) { s.decide(c, true) }

func (s *Server) rejectJob(c *gin.Context) { s.decide(c, false) }

func (s *Server) decide(c *gin.Context, approve bool) {
	var req decisionRequest
	if err := bindJSON(c, &req, false); err != nil {
		_ = c.Error(err)
		return
	}
	if len(req.Reason) > 1024 {
		_ = c.Error(Invalid("reason", "must be at most 1024 characters"))
		return
	}
	if _, ok := s.loadJob(c); !ok {
		return
	}
	decide := s.deps.Approvals.Reject
	if approve {
		decide = s.deps.Approvals.Approve
	}
	l, err := decide(c.Request.Context(), c.Param("job_id"), req.Reason, s.meta(c, principal(c).Actor()))
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, toJobResponse(l))
}

// readNamespace is the namespace a read is about: the one asked for (which
// the key must see, or it is not found) or the key's own.
func readNamespace(c *gin.Context, asked string) (string, error) {
	ns, err := scopeNamespace(c, asked)
	if ns == "" && err == nil {
		ns = domain.DefaultNamespace
	}
	return ns, err
}

func (s *Server) callbackSecret(c *gin.Context) {
	ns, err := readNamespace(c, c.Query("namespace"))
	if err != nil {
		_ = c.Error(err)
		return
	}
	secrets, err := s.deps.Callbacks.CallbackSecrets(c.Request.Context(), ns)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"namespace": ns, "secret": secrets[0], "secrets": secrets,
		"scheme": "Standard Webhooks: v1 HMAC-SHA256 over id.timestamp.body"})
}

func (s *Server) rotateCallbackSecret(c *gin.Context) {
	ns, err := readNamespace(c, c.Query("namespace"))
	if err != nil {
		_ = c.Error(err)
		return
	}
	secret, until, err := s.deps.Callbacks.RotateCallbackSecret(c.Request.Context(), ns, s.meta(c, principal(c).Actor()))
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"namespace": ns, "secret": secret, "previous_valid_until": until})
}
