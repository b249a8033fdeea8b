package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/registry"
	"github.com/agentreach/agentreach/webhook"
)

// Push is the native push carrier: it POSTs the attempt's envelope
// (webhook.Envelope), signed as Standard Webhooks, to the agent's
// endpoint, and reads its answer: a result (200), accepted (202: the
// result comes through result_url), or a failure.
type Push struct {
	HTTP *http.Client
	// ResultURL is where an agent posts the result of job id.
	ResultURL func(id string) string
	Now       func() time.Time
}

// answerBytes is how much of an agent's answer an event keeps to show what
// the agent said.
const answerBytes = 256

// Span implements Carrier.
func (Push) Span() string { return "deliver" }

// Carry implements Carrier.
func (p Push) Carry(ctx context.Context, a *registry.Agent, at Attempt) (obs domain.Observation) {
	l := at.L
	body, _ := json.Marshal(webhook.Envelope{JobID: l.JobID, TraceID: l.TraceID, Capability: l.Capability, Payload: l.Payload,
		Attempt: at.N, Deadline: at.Deadline, ResultURL: p.ResultURL(l.JobID)})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.Endpoint, bytes.NewReader(body))
	if err != nil {
		return domain.Observation{Kind: domain.ObservedFailed, Reason: "bad_endpoint", ErrText: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(req.Header)) // traceparent
	req.Header.Set("X-Reach-Job-Id", l.JobID)
	req.Header.Set("X-Reach-Attempt", strconv.Itoa(at.N))
	webhook.SetHeaders(req.Header, l.JobID+"."+strconv.Itoa(at.N), p.Now(), body, a.SigningKeys(p.Now())...)

	resp, err := p.HTTP.Do(req)
	if err != nil {
		// Past the longest inline wait, an agent that has the job must
		// post its result to result_url by the deadline.
		return Unanswered(ctx, at, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, webhook.MaxAnswerBytes+1))
	if err != nil {
		if ctx.Err() != nil {
			return domain.Observation{Kind: domain.ObservedHung, Reason: "timeout", ErrText: "answer not complete by the deadline"}
		}
		return domain.Observation{Kind: domain.ObservedFailed, Reason: "connection_error", ErrText: err.Error()}
	}
	defer func() { noteAnswer(&obs, resp.StatusCode, answer) }() // what the agent answered, for the timeline
	switch resp.StatusCode {
	case http.StatusOK:
		r, err := webhook.ParseAnswer(answer)
		if err != nil {
			return domain.Observation{Kind: domain.ObservedFailed, Reason: "bad_response", ErrText: err.Error()}
		}
		if at, bad := domain.UnstorableJSON(answer); bad || len(r.BizCode) > 128 {
			return domain.Observation{Kind: domain.ObservedFailed, Reason: "bad_response",
				ErrText: "the answer holds what cannot be stored (NUL, a lone surrogate, a number out of range, a biz_code over 128 characters) at " + at}
		}
		return domain.Observation{Kind: domain.ObservedResult, Status: domain.JobStatus(r.Status), Result: r.Result, BizCode: r.BizCode}
	case http.StatusAccepted:
		return domain.Observation{Kind: domain.ObservedAccepted}
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return RateLimited(resp.StatusCode, resp.Header.Get("Retry-After"), string(answer), p.Now())
	default:
		return domain.Observation{Kind: domain.ObservedFailed, Reason: "http_" + strconv.Itoa(resp.StatusCode), ErrText: Truncate(string(answer), 256)}
	}
}

// noteAnswer records on obs what the agent's HTTP answer was: its status,
// and the first bytes of a 200 that was not a usable result (for other
// statuses the observation's error text holds them already).
func noteAnswer(obs *domain.Observation, status int, answer []byte) {
	obs.HTTPStatus = status
	if obs.Kind == domain.ObservedFailed && obs.Reason == "bad_response" {
		obs.Body = Truncate(string(answer), answerBytes)
	}
}
