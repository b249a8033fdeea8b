package adapter

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	a2aclient "github.com/agentreach/agentreach/a2a/client"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/agentreach/agentreach/a2a"
	"github.com/agentreach/agentreach/a2a/server"
	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/jobs/dispatch"
	"github.com/agentreach/agentreach/jobs/jobstore"
	"github.com/agentreach/agentreach/registry"
)

// carrier is the A2A carrier (dispatch.Carrier): it sends the attempt
// to an A2A agent as SendMessage and reads what the agent answered into
// an outcome.
type carrier struct{ ad *Adapter }

// Span implements dispatch.Carrier.
func (carrier) Span() string { return "deliver a2a" }

// Carry implements dispatch.Carrier.
func (c carrier) Carry(ctx context.Context, a *registry.Agent, at dispatch.Attempt) domain.Observation {
	ad, l := c.ad, at.L
	send := a2aclient.Send{Endpoint: a.Endpoint, JobID: l.JobID, Attempt: at.N, Capability: l.Capability,
		Payload: l.Payload, Header: ad.a2aHeader(ctx, l, at.N)}
	if ad.takesPush(a) {
		send.Push = ad.pushTarget(a, l.JobID, at.N)
	}
	task, err := ad.client.SendMessage(ctx, send)
	var rpc *a2aclient.RPCError
	if errors.As(err, &rpc) && rpc.Code == a2aclient.CodePushNotSupported && send.Push != nil {
		// The card promised push, or said nothing: ask again without, and poll.
		ad.client.RefusedPush(a.Endpoint)
		send.Push = nil
		task, err = ad.client.SendMessage(ctx, send)
	}
	var httpErr *a2aclient.HTTPError
	switch {
	case errors.As(err, &rpc) && rpc.Incompatible():
		return domain.Observation{Kind: domain.ObservedRejected, Reason: domain.ReasonIncompatible, ErrText: rpc.Error()}
	case errors.As(err, &rpc):
		return domain.Observation{Kind: domain.ObservedFailed, Reason: "a2a_error_" + strconv.Itoa(-rpc.Code), ErrText: dispatch.Truncate(rpc.Error(), 256)}
	case errors.As(err, &httpErr) && (httpErr.Status == http.StatusTooManyRequests || httpErr.Status == http.StatusServiceUnavailable):
		return dispatch.RateLimited(httpErr.Status, httpErr.RetryAfter, httpErr.Body, ad.cfg.Now())
	case errors.As(err, &httpErr):
		return domain.Observation{Kind: domain.ObservedFailed, Reason: "http_" + strconv.Itoa(httpErr.Status), ErrText: httpErr.Body}
	case errors.Is(err, a2a.ErrBadTask):
		return domain.Observation{Kind: domain.ObservedFailed, Reason: "bad_response", ErrText: dispatch.Truncate(err.Error(), 256)}
	case err != nil:
		out := dispatch.Unanswered(ctx, at, err)
		out.Poll = out.Kind == domain.ObservedAccepted // the poller reads what the agent makes of it
		return out
	}
	// Every attempt an agent holds is looked after by the poller: it reads
	// the task of an agent that does not push, and watches that of one
	// that does for the agent losing it (a2aPollWorker).
	return a2aOutcome(task, true)
}

// takesPush reports whether A2A agent a is sent push configs: its card
// offers push notifications (or it was registered without a card), and
// it has not refused them since this process started.
func (ad *Adapter) takesPush(a *registry.Agent) bool {
	ci, byCard := a.A2AInfo()
	return (!byCard || ci.Push) && ad.client.TakesPush(a.Endpoint)
}

// a2aOutcome reads an agent's task into an outcome of the attempt.
func a2aOutcome(t a2a.Task, poll bool) domain.Observation {
	out := domain.Observation{RemoteTaskID: t.ID, Poll: poll}
	switch t.State {
	case a2a.StateCompleted:
		out.Kind, out.Status, out.Result = domain.ObservedResult, domain.StatusSuccess, t.Result
	case a2a.StateFailed:
		// The agent's words are the job's error; its artifacts, if any, the result.
		out.Kind, out.Status, out.Result, out.BizCode = domain.ObservedResult, domain.StatusFailed, t.Result, "a2a_failed"
		if out.ErrText = dispatch.Truncate(t.StatusText(), 1024); out.ErrText != "" && t.FromMessage {
			out.Result = nil
		}
	case a2a.StateRejected:
		out.Kind, out.Reason, out.ErrText, out.Result = domain.ObservedRejected, domain.ReasonRejected, "the agent rejected the task", t.Result
		if text := t.StatusText(); text != "" {
			out.ErrText = dispatch.Truncate(out.ErrText+": "+text, 256)
		}
	case a2a.StateCanceled:
		out.Kind, out.Result = domain.ObservedCancelled, t.Result
	case a2a.StateInputRequired, a2a.StateAuthRequired:
		out.Kind, out.A2AState, out.Result = domain.ObservedAwaiting, string(t.State), t.Message
	default: // submitted, working, unknown: the result comes by push or poll
		out.Kind = domain.ObservedAccepted
	}
	return out
}

func (ad *Adapter) a2aHeader(ctx context.Context, l *jobstore.Loaded, attempt int) http.Header {
	h := http.Header{}
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(h))
	h.Set("X-Reach-Job-Id", l.JobID)
	h.Set("X-Reach-Attempt", strconv.Itoa(attempt))
	return h
}

func (ad *Adapter) pushTarget(a *registry.Agent, jobID string, attempt int) *a2aclient.Push {
	return &a2aclient.Push{URL: ad.cfg.PublicURL() + server.PushPath + jobID + "/" + strconv.Itoa(attempt),
		Token: a2a.PushToken(a.SigningKeys(ad.cfg.Now())[0], jobID, attempt)}
}
