package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/agentreach/agentreach/webhook"
)

// InvokeOptions shape a direct invocation; zero fields take the defaults.
type InvokeOptions struct {
	// Hint, Namespace, Constraints, Limit and NoCache are the lookup's
	// (LookupOptions). Constraints.Protocol defaults to http, the only
	// protocol Invoke speaks.
	Hint        string
	Namespace   string
	Constraints Constraints
	Limit       int
	NoCache     bool
	// Timeout is how long one candidate has to answer before the next is
	// tried (by default: from the capability's answered calls, within the
	// client's CandidateTimeout); it is also the envelope's deadline.
	Timeout time.Duration
	// TraceParent continues the caller's W3C trace; without one each
	// invocation starts a trace of its own.
	TraceParent string
	// Hedge, when set, races a candidate that has not answered within
	// Hedge with the next one (and so on, one more each Hedge): the first
	// result wins and the calls still running are cancelled. Set it only
	// for an idempotent capability: two agents may both do the work. Zero:
	// one candidate at a time.
	Hedge time.Duration
}

// InvokeResult is what the agent that took a direct invocation answered.
type InvokeResult struct {
	// Status is SUCCESS or FAILED (a business failure, answered by the
	// agent: not failed over).
	Status  Status
	Result  json.RawMessage
	BizCode string
	// AgentID and Namespace name the agent that answered.
	AgentID   string
	Namespace string
	// InvocationID is the envelope's job_id (a UUID v7 the client made),
	// the same for every candidate tried.
	InvocationID string
	TraceID      string
	// Latency is the answering call's round trip.
	Latency time.Duration
	// Stale: the candidates came from a stale list (see LookupResult).
	Stale bool
	// Attempts are the candidates called, in order, the answering one
	// last; on an error, every one tried.
	Attempts []Attempt
}

// Attempt is one candidate's call.
type Attempt struct {
	AgentID   string
	Namespace string
	Endpoint  string
	// Reached: the agent took the invocation and answered a result.
	Reached bool
	// StatusCode is the agent's HTTP status, 0 without an answer.
	StatusCode int
	Latency    time.Duration
	// Err says why the candidate gave no result; nil for the one that did.
	Err error
}

// errGrantRefused: the agent refused the invocation grant (401 or 403),
// most likely an expired grant of a stale list.
var errGrantRefused = errors.New("the agent refused the grant")

// Invoke calls the best candidate for capability directly, with its grant,
// and answers its result. The candidates come from Lookup (so from the
// cache, or a stale list when the registry is unreachable). A connection
// error, a timeout (InvokeOptions.Timeout), a 5xx, a refused grant (401,
// 403: an expired grant of a stale list, say) or an answer that is not a
// result moves on to the next candidate; a 200 answer, SUCCESS or FAILED,
// ends it. Each agent receives the envelope of a brokered delivery
// (job_id the invocation's UUID v7, attempt counting the candidates
// tried, an empty result_url: the answer must be inline) with
// X-Reach-Grant, traceparent and X-Reach-Job-Id.
//
// Every call's outcome is queued as a report (agent, reached, ok, latency,
// biz_code) for POST /v1/reports, except a refused grant, which says
// nothing about the agent's health, and a call ended by ctx. Errors:
// ErrNoCandidates (InvokeResult.Attempts says what each did), the
// lookup's errors, ctx's error.
func (c *Client) Invoke(ctx context.Context, capability string, payload any, opts InvokeOptions) (InvokeResult, error) {
	body, err := marshalPayload(payload)
	if err != nil {
		return InvokeResult{}, err
	}
	cons := opts.Constraints
	switch cons.Protocol {
	case "":
		cons.Protocol = "http"
	case "http":
	default:
		return InvokeResult{}, fmt.Errorf("%w: Invoke speaks http, not %q", ErrInvalidArgument, cons.Protocol)
	}
	res, err := c.Lookup(ctx, capability, LookupOptions{Hint: opts.Hint, Namespace: opts.Namespace, Constraints: cons, Limit: opts.Limit, NoCache: opts.NoCache})
	if err != nil {
		return InvokeResult{}, fmt.Errorf("invoke %s: %w", capability, err)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return InvokeResult{}, fmt.Errorf("invoke %s: an invocation id: %w", capability, err)
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = c.memory.timeout(capability, c.cfg.candidateTimeout)
	}
	traceID, flags := traceOf(opts.TraceParent)
	out := InvokeResult{InvocationID: id.String(), TraceID: traceID, Stale: res.Stale}
	reportable := c.cfg.now().Sub(res.FetchedAt) < reportWindow
	var cands []Candidate
	for _, cand := range c.memory.order(res.Candidates, c.cfg.now()) {
		if (cand.Protocol == "" || cand.Protocol == "http") && cand.Endpoint != "" {
			cands = append(cands, cand)
		}
	}
	race := invokeRace{c: c, capability: capability, body: body, id: out.InvocationID, traceID: traceID, flags: flags,
		timeout: timeout, reportable: reportable}
	if err := race.run(ctx, cands, opts.Hedge, &out); err != nil {
		return out, err
	}
	if out.AgentID != "" {
		return out, nil
	}
	if len(out.Attempts) == 0 {
		return out, fmt.Errorf("invoke %s: %w: the lookup found no agent to call directly", capability, ErrNoCandidates)
	}
	why := make([]string, len(out.Attempts))
	for i, a := range out.Attempts {
		why[i] = a.AgentID + ": " + a.Err.Error()
	}
	return out, fmt.Errorf("invoke %s: %w: %s", capability, ErrNoCandidates, strings.Join(why, "; "))
}

// invokeRace calls an invocation's candidates in order, one at a time, or
// hedged: the next one starts when the last started has not answered
// within the hedge.
type invokeRace struct {
	c                       *Client
	capability, id, traceID string
	flags                   string
	body                    json.RawMessage
	timeout                 time.Duration
	reportable              bool
}

type called struct {
	cand Candidate
	att  Attempt
	ans  *webhook.Answer
}

// run fills out with the first result (its agent, and every attempt that
// ended before it), or leaves out.AgentID empty when none answered.
func (r *invokeRace) run(ctx context.Context, cands []Candidate, hedge time.Duration, out *InvokeResult) error {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel() // the calls still running when one answered
	results := make(chan called, len(cands))
	next, running := 0, 0
	start := func() {
		cand := cands[next]
		next++
		running++
		env := webhook.Envelope{JobID: r.id, Attempt: next, TraceID: r.traceID, Capability: r.capability, Payload: r.body}
		go func() {
			att, ans := r.c.call(cctx, cand, env, r.timeout, r.flags)
			results <- called{cand, att, ans}
		}()
	}
	var hedgeC <-chan time.Time
	rearm := func() {
		if hedge > 0 && next < len(cands) {
			hedgeC = time.After(hedge)
		} else {
			hedgeC = nil
		}
	}
	if len(cands) > 0 {
		start()
		rearm()
	}
	for running > 0 {
		select {
		case <-hedgeC:
			start()
			rearm()
		case d := <-results:
			running--
			out.Attempts = append(out.Attempts, d.att)
			if ctx.Err() != nil {
				return fmt.Errorf("invoke %s: %w", r.capability, ctx.Err())
			}
			r.record(d)
			if d.ans != nil {
				out.Status, out.Result, out.BizCode = Status(d.ans.Status), d.ans.Result, d.ans.BizCode
				out.AgentID, out.Namespace, out.Latency = d.cand.AgentID, d.cand.Namespace, d.att.Latency
				return nil
			}
			if running == 0 && next < len(cands) {
				start()
				rearm()
			}
		}
	}
	return nil
}

// record remembers what a call says of its candidate (its latency, or a
// quarantine) and queues its report.
func (r *invokeRace) record(d called) {
	c := r.c
	switch {
	case d.ans != nil:
		c.memory.answered(r.capability, d.att.Latency)
	case d.att.StatusCode == 0 && d.att.Err != nil && c.cfg.quarantine > 0:
		// Not reached, or no answer in time: tried last for a while.
		c.memory.quarantine(d.cand.Namespace, d.cand.AgentID, c.cfg.now().Add(c.cfg.quarantine))
	}
	if r.reportable && !errors.Is(d.att.Err, errGrantRefused) {
		rep := Report{Namespace: d.cand.Namespace, AgentID: d.cand.AgentID, Capability: r.capability, Reached: d.att.Reached,
			OK: d.ans != nil && d.ans.Status == webhook.StatusSuccess, LatencyMS: float64(d.att.Latency.Microseconds()) / 1000, At: c.cfg.now().UTC()}
		if d.ans != nil {
			rep.BizCode = d.ans.BizCode
		}
		c.reports.add(rep)
	}
}

// call POSTs env to cand within timeout and classifies what happened; the
// answer is non-nil when the agent answered a result.
func (c *Client) call(ctx context.Context, cand Candidate, env webhook.Envelope, timeout time.Duration, flags string) (Attempt, *webhook.Answer) {
	att := Attempt{AgentID: cand.AgentID, Namespace: cand.Namespace, Endpoint: cand.Endpoint}
	start := time.Now() // before the timeout starts, so a timed-out call's latency is at least the timeout
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	env.Deadline = c.cfg.now().Add(timeout).UTC()
	b, _ := json.Marshal(env)
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, cand.Endpoint, bytes.NewReader(b))
	if err != nil {
		att.Err, att.Latency = fmt.Errorf("bad endpoint: %w", err), time.Since(start)
		return att, nil
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Reach-Grant", cand.Grant)
	req.Header.Set("X-Reach-Job-Id", env.JobID)
	req.Header.Set("traceparent", "00-"+env.TraceID+"-"+randomHex(8)+"-"+flags)
	resp, err := c.http.Do(req)
	if err != nil {
		att.Latency = time.Since(start)
		if cctx.Err() != nil && ctx.Err() == nil {
			att.Err = fmt.Errorf("no answer within %s", timeout)
		} else {
			att.Err = err
		}
		return att, nil
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, webhook.MaxAnswerBytes+1))
	att.Latency, att.StatusCode = time.Since(start), resp.StatusCode
	switch {
	case err != nil:
		att.Err = fmt.Errorf("reading the answer: %w", err)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		att.Err = fmt.Errorf("%w (HTTP %d: %s)", errGrantRefused, resp.StatusCode, shorten(raw, 200))
	case resp.StatusCode != http.StatusOK:
		att.Err = fmt.Errorf("answered HTTP %d: %s", resp.StatusCode, shorten(raw, 200))
	default:
		ans, err := webhook.ParseAnswer(raw)
		if err != nil {
			att.Err = fmt.Errorf("answered 200 without a SUCCESS or FAILED result: %s", shorten(raw, 200))
			return att, nil
		}
		att.Reached = true
		return att, &ans
	}
	return att, nil
}

func marshalPayload(payload any) (json.RawMessage, error) {
	switch p := payload.(type) {
	case json.RawMessage:
		if !json.Valid(p) {
			return nil, fmt.Errorf("%w: payload is not JSON", ErrInvalidArgument)
		}
		return p, nil
	default:
		b, err := json.Marshal(payload)
		if err != nil {
			return nil, fmt.Errorf("%w: payload: %w", ErrInvalidArgument, err)
		}
		return b, nil
	}
}

// traceOf answers the trace id and flags of a W3C traceparent, or a new
// trace's when tp is not one.
func traceOf(tp string) (string, string) {
	parts := strings.Split(strings.TrimSpace(tp), "-")
	if len(parts) == 4 && len(parts[1]) == 32 && len(parts[2]) == 16 && len(parts[3]) == 2 && isHex(parts[1]) &&
		parts[1] != strings.Repeat("0", 32) && isHex(parts[3]) {
		return strings.ToLower(parts[1]), strings.ToLower(parts[3])
	}
	return randomHex(16), "01"
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func shorten(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
