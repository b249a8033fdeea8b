package jobs

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/internal/telemetry"
	"github.com/agentreach/agentreach/jobs/jobstore"
	"github.com/agentreach/agentreach/webhook"
)

// CallbackBody is what the caller's callback_url receives (API.md).
type CallbackBody struct {
	JobID      string           `json:"job_id"`
	Status     domain.JobStatus `json:"status"`
	Result     json.RawMessage  `json:"result,omitempty"`
	BizCode    string           `json:"biz_code,omitempty"`
	Error      string           `json:"error,omitempty"`
	Attempts   int              `json:"attempts"`
	AgentID    string           `json:"agent_id,omitempty"`
	FinishedAt time.Time        `json:"finished_at"`
	TraceID    string           `json:"trace_id,omitempty"`
}

type callbackWorker struct {
	river.WorkerDefaults[CallbackArgs]
	s *Service
}

// NextRetry backs off 1 s, 2 s, 4 s … up to 30 min, with jitter.
func (w *callbackWorker) NextRetry(job *river.Job[CallbackArgs]) time.Time {
	d := min(time.Second<<min(job.Attempt-1, 20), 30*time.Minute)
	return time.Now().Add(time.Duration(float64(d) * (0.75 + 0.5*rand.Float64())))
}

func (w *callbackWorker) Timeout(*river.Job[CallbackArgs]) time.Duration { return 30 * time.Second }

// Work makes River's try at a job's callback (callBack).
func (w *callbackWorker) Work(ctx context.Context, job *river.Job[CallbackArgs]) error {
	l, err := w.s.Load(ctx, nil, job.Args.JobID)
	if errors.Is(err, domain.ErrNotFound) {
		return river.JobCancel(err)
	}
	if err != nil {
		return err
	}
	if !l.Status.Terminal() || l.CallbackURL == "" || l.CallbackAcked {
		return nil
	}
	return w.s.callBack(ctx, l, callbackTry{attempt: job.Attempt, max: job.MaxAttempts, job: job, cause: fmt.Sprintf("river:%d", job.ID)})
}

// callbackTry is one try at a job's callback: attempt 0 is made at once by
// the process that ended the job (callBackNow), 1 to CallbackMaxAttempts
// by River's callback job (job).
type callbackTry struct {
	attempt, max int
	job          *river.Job[CallbackArgs] // nil for the try made at once
	cause        string                   // what the events record as their causation
}

// callBack is the one callback sender. It posts l's terminal outcome to
// its caller, signed in the Standard Webhooks style (callCaller), and
// records what domain.CallbackTry decides of it (CALLBACK_DELIVERED on a
// 2xx, CALLBACK_FAILED otherwise), unless the callback was acknowledged
// meanwhile. A job submitted over A2A has its callback delivered as an A2A
// task to each of its push configs by River's try (deliverA2APushes). What
// the try made at once cannot do, it hands to River's callback job; a
// River try the caller did not acknowledge is an error, which River
// retries, until CallbackMaxAttempts.
func (s *Service) callBack(ctx context.Context, l *jobstore.Loaded, try callbackTry) error {
	ctx = telemetry.JobContext(ctx, l.TraceID)
	ctx, span := s.tracer.Start(ctx, "callback", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("job_id", l.JobID), attribute.Int("attempt", try.attempt)))
	defer span.End()
	a2aPushes, err := s.usesA2APushes(ctx, l)
	switch {
	case (err != nil || a2aPushes) && try.job == nil:
		return s.callbackByRiver(ctx, l)
	case err != nil:
		return err
	case a2aPushes:
		// Each push config gets an A2A task, as agents push, and is
		// retried on its own.
		return s.deliverA2APushes(ctx, try.job, l)
	}
	code, postErr, err := s.callCaller(ctx, l)
	if err != nil && try.job == nil {
		return s.callbackByRiver(ctx, l)
	}
	if err != nil {
		return err
	}
	md := domain.Metadata{TraceID: l.TraceID, Actor: "callbacks", CausationID: try.cause}
	ev, fx, ok := domain.CallbackTry(try.attempt, try.max, code, errText(postErr), md)
	s.metrics.callbacks.Add(ctx, 1, withAttrs(attribute.Bool("acknowledged", ok)))
	// Written in a transaction shared with concurrent writes, at the
	// version of the fold held; reloaded on a conflict.
	err = s.writeUnlessAcked(ctx, l, func(l *jobstore.Loaded) *jobstore.Write {
		return &jobstore.Write{L: l, Effects: fx, Events: []domain.Event{ev}}
	})
	switch {
	case err != nil || ok || try.job == nil:
		return err
	case postErr != nil:
		return fmt.Errorf("callback to %s: %w", l.CallbackURL, postErr)
	}
	return fmt.Errorf("callback to %s answered %d", l.CallbackURL, code)
}

// callCaller posts the job's terminal outcome to its caller and answers
// the caller's status code or why the post failed (postErr); err is a
// failure to prepare it (the database).
func (s *Service) callCaller(ctx context.Context, l *jobstore.Loaded) (code int, postErr, err error) {
	secrets, err := s.CallbackSecrets(ctx, l.Namespace)
	if err != nil {
		return 0, nil, err
	}
	body, _ := json.Marshal(CallbackBody{JobID: l.JobID, Status: l.Status, Result: l.Result, BizCode: l.BizCode, Error: l.Error,
		Attempts: l.Attempts, AgentID: l.AgentID, FinishedAt: l.FinishedAt.UTC(), TraceID: l.TraceID})
	code, postErr = s.postCallback(ctx, l, secrets, body)
	return code, postErr, nil
}

func (s *Service) postCallback(ctx context.Context, l *jobstore.Loaded, secrets []string, body []byte) (int, error) {
	var keys [][]byte
	for _, secret := range secrets {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		if err != nil {
			return 0, fmt.Errorf("callback secret is not whsec_<base64>: %w", err)
		}
		keys = append(keys, key)
	}
	h := http.Header{}
	webhook.SetHeaders(h, "msg_"+l.JobID, time.Now(), body, keys...)
	return s.postToCaller(ctx, l, l.CallbackURL, body, h)
}

// postToCaller POSTs a JSON body to a caller's URL with header (its
// Content-Type, application/json if it names none), the trace context and
// the job id, within 15 s, and answers the status.
func (s *Service) postToCaller(ctx context.Context, l *jobstore.Loaded, url string, body []byte, header http.Header) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header = header
	if req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json") // an A2A v1.0 push says application/a2a+json
	}
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(req.Header)) // traceparent
	req.Header.Set("X-Reach-Job-Id", l.JobID)
	resp, err := s.http.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// errText is err's text, or "" for none.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
