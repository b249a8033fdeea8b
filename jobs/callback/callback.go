// Package callback is the callbacks' room: the one sender that calls a
// caller back with its job's terminal outcome (Sender.Try), who runs it
// (at once in the process that ended the job, or River's callback job),
// and the secrets that sign the callbacks of each namespace.
package callback

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/telemetry"
	"github.com/agentreach/agentreach/jobs/jobstore"
	"github.com/agentreach/agentreach/webhook"
)

// Body is what the caller's callback_url receives (API.md).
type Body struct {
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

// Config tunes a Sender.
type Config struct {
	// Secret, when set, signs every namespace's callbacks
	// (AGENTREACH_CALLBACK_SECRET); empty means each namespace's secret
	// kept in the database, created on first use.
	Secret string
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Hold, when set, says why no callback may go now (nil: they may), as
	// while the database acknowledges commits that one node's loss would
	// erase: a try at once goes to River, and River's try is an error
	// River retries later, so that no caller hears of an outcome a
	// failover may still undo.
	Hold func(context.Context) error
}

// A2APushes calls back a job submitted over A2A: each of its push configs
// gets an A2A task, and is retried on its own (a2a/adapter.Adapter).
type A2APushes interface {
	// Uses reports whether l is called back through its push configs.
	Uses(ctx context.Context, l *jobstore.Loaded) (bool, error)
	// Deliver makes River's try at them.
	Deliver(ctx context.Context, l *jobstore.Loaded, try Try) error
}

// ErrHeld is what A2APushes.Deliver answers when another run holds every
// push config that waits, and what a try answers while Config.Hold holds
// callbacks: the try is neither an acknowledgement nor a failure of its
// own, and River looks again a few seconds later, spending no attempt.
var ErrHeld = errors.New("another run holds the push configs")

// Try is one try at a job's callback: attempt 0 is made at once by the
// process that ended the job (Now), 1 to Max by River's callback job.
type Try struct {
	Attempt, Max int
	// Cause is what the events record as their causation.
	Cause string
}

// Sender calls callers back.
type Sender struct {
	pool   *pgxpool.Pool
	events *eventstore.Store
	jobs   *jobstore.Store
	http   *http.Client
	logger *slog.Logger
	cfg    Config
	pushes A2APushes
	tracer trace.Tracer
	// tries counts tries, by whether the caller acknowledged (ack, nack:
	// their attribute sets, built once).
	tries     metric.Int64Counter
	ack, nack metric.MeasurementOption
	sending   chan struct{}  // the tries made at once under way
	queued    chan queuedTry // the tries waiting for one of them to end
	secretsMu sync.Mutex
	secrets   map[string]cachedSecrets // namespace → its callback secrets, for secretsFor
}

// New returns a Sender that posts with client, and calls back jobs
// submitted over A2A through pushes.
func New(pool *pgxpool.Pool, events *eventstore.Store, jobs *jobstore.Store, client *http.Client, pushes A2APushes,
	logger *slog.Logger, cfg Config) *Sender {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Sender{pool: pool, events: events, jobs: jobs, http: client, pushes: pushes, logger: logger, cfg: cfg,
		tracer: tracenoop.NewTracerProvider().Tracer(""), sending: make(chan struct{}, callbacksNow),
		queued: make(chan queuedTry, callbacksQueued), secrets: map[string]cachedSecrets{}}
}

// SetTelemetry gives the sender its tracer and the counter of its tries
// (attribute "acknowledged").
func (c *Sender) SetTelemetry(tracer trace.Tracer, tries metric.Int64Counter) {
	c.tracer, c.tries = tracer, tries
	c.ack = metric.WithAttributes(attribute.Bool("acknowledged", true))
	c.nack = metric.WithAttributes(attribute.Bool("acknowledged", false))
}

// Try is the one callback sender. It posts l's terminal outcome to its
// caller, signed in the Standard Webhooks style (callCaller), and records
// what domain.CallbackTry decides of it (CALLBACK_DELIVERED on a 2xx,
// CALLBACK_FAILED otherwise), unless the callback was acknowledged
// meanwhile. A job submitted over A2A has its callback delivered to each
// of its push configs by River's try (A2APushes). What the try made at
// once cannot do, it hands to River's callback job; a River try the
// caller did not acknowledge is an error, which River retries.
func (c *Sender) Try(ctx context.Context, l *jobstore.Loaded, try Try) error {
	ctx = telemetry.JobContext(ctx, l.TraceID)
	ctx, span := c.tracer.Start(ctx, "callback", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("job_id", l.JobID), attribute.Int("attempt", try.Attempt)))
	defer span.End()
	atOnce := try.Attempt == 0
	if c.cfg.Hold != nil {
		if err := c.cfg.Hold(ctx); err != nil {
			if atOnce {
				return c.byRiver(ctx, l)
			}
			return fmt.Errorf("callback of job %s held (%w): %w", l.JobID, err, ErrHeld)
		}
	}
	a2aPushes, err := c.pushes.Uses(ctx, l)
	switch {
	case (err != nil || a2aPushes) && atOnce:
		return c.byRiver(ctx, l)
	case err != nil:
		return err
	case a2aPushes:
		return c.pushes.Deliver(ctx, l, try)
	}
	code, postErr, err := c.callCaller(ctx, l)
	if err != nil && atOnce {
		return c.byRiver(ctx, l)
	}
	if err != nil {
		return err
	}
	md := domain.Metadata{TraceID: l.TraceID, Actor: "callbacks", CausationID: try.Cause}
	ev, fx, ok := domain.CallbackTry(try.Attempt, try.Max, code, errText(postErr), md)
	if c.tries != nil {
		if ok {
			c.tries.Add(ctx, 1, c.ack)
		} else {
			c.tries.Add(ctx, 1, c.nack)
		}
	}
	// Written in a transaction shared with concurrent writes, at the
	// version of the fold held; reloaded on a conflict.
	err = c.writeUnlessAcked(ctx, l, func(l *jobstore.Loaded) *jobstore.Write {
		return &jobstore.Write{L: l, Effects: fx, Events: []domain.Event{ev}}
	})
	switch {
	case err != nil || ok || atOnce:
		return err
	case postErr != nil:
		return fmt.Errorf("callback to %s: %w", l.CallbackURL, postErr)
	}
	return fmt.Errorf("callback to %s answered %d", l.CallbackURL, code)
}

// A job that ends in the process that recorded its end (its dispatcher,
// for an inline answer; the result's request, for a result through
// result_url) is called back by that process at once, from the fold it
// holds: no River job to queue, fetch and complete, no stream to load.
// The write that ends the job sets the callback timer as for any other
// end: it is the durable promise. When the caller acknowledges,
// CALLBACK_DELIVERED clears it; when the caller does not, or every sender
// is busy, a River callback job is queued (with the timer naming it) and
// River retries it as any other callback; when the process dies first,
// the deadline sweep finds the timer due after the callback grace with no
// River job and queues one (TimerRequeueCallback).

// callbacksNow bounds the callbacks sent at once this way, as the
// callbacks queue's workers bound River's; callbacksQueued more wait in
// the process for one of them to end (a burst of results), and only past
// those is a callback handed to River.
const (
	callbacksNow    = 32
	callbacksQueued = 1024
)

// queuedTry is a callback waiting for a sender (Now).
type queuedTry struct {
	ctx   context.Context // its own, for its trace
	l     *jobstore.Loaded
	cause string
}

// Now sends the callback of l, which just ended, from a goroutine of its
// own, or queues it for one of those when callbacksNow are being sent
// already, or hands it to River when callbacksQueued wait too. cause is
// what the events record as their causation.
func (c *Sender) Now(ctx context.Context, l *jobstore.Loaded, cause string) {
	ctx = context.WithoutCancel(ctx) // it outlives the request that ended the job
	// A fold of its own: recording the callback's outcome moves it on,
	// while the caller (a result's request) still answers from l.
	own := *l
	l = &own
	select {
	case c.sending <- struct{}{}:
		go c.sendAndDrain(&queuedTry{ctx: ctx, l: l, cause: cause})
		return
	default:
	}
	select {
	case c.queued <- queuedTry{ctx: ctx, l: l, cause: cause}:
	default:
		if err := c.byRiver(ctx, l); err != nil && !errors.Is(err, context.Canceled) {
			c.logger.WarnContext(ctx, "hand a callback to River (the callback timer brings it back)", "job_id", l.JobID, "err", err)
		}
		return
	}
	// Queued while every sender was busy: should they all have ended
	// since, none would look at the queue again, so take a slot to drain
	// it (a sender still busy looks after it ends: sendAndDrain).
	select {
	case c.sending <- struct{}{}:
		go c.sendAndDrain(nil)
	default:
	}
}

// sendAndDrain, holding a slot of c.sending, sends first (when not nil)
// and then what is queued, and gives the slot back once the queue is
// empty, looking once more after that: a callback queued just then is
// sent by its own Now or by this.
func (c *Sender) sendAndDrain(first *queuedTry) {
	if first != nil {
		c.sendWithin(first.ctx, first.l, first.cause)
	}
	for {
		select {
		case q := <-c.queued:
			c.sendWithin(q.ctx, q.l, q.cause)
			continue
		default:
		}
		<-c.sending
		if len(c.queued) == 0 {
			return
		}
		select {
		case c.sending <- struct{}{}:
		default:
			return // a sender busy now drains it
		}
	}
}

// sendWithin sends l's callback within a minute.
func (c *Sender) sendWithin(ctx context.Context, l *jobstore.Loaded, cause string) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	c.Send(ctx, l, cause)
}

// Send makes the try at l's callback made at once (attempt 0; River's
// tries are 1 to its most attempts), in the caller's goroutine. A failure
// to record leaves the timer to bring the callback back after the grace.
func (c *Sender) Send(ctx context.Context, l *jobstore.Loaded, cause string) {
	if err := c.Try(ctx, l, Try{Cause: cause}); err != nil && !errors.Is(err, context.Canceled) {
		c.logger.WarnContext(ctx, "a callback tried at once (the callback timer brings it back)", "job_id", l.JobID, "err", err)
	}
}

// byRiver queues l's River callback job, available at once: River sends
// it and retries it. Should that fail, the callback timer brings it back
// after the grace.
func (c *Sender) byRiver(ctx context.Context, l *jobstore.Loaded) error {
	return c.writeUnlessAcked(ctx, l, func(l *jobstore.Loaded) *jobstore.Write {
		return &jobstore.Write{L: l, Effects: domain.Effects{RequeueCallback: true}}
	})
}

// writeUnlessAcked writes what decide makes of l, reloading l after a
// conflict, unless the job's callback is acknowledged by then.
func (c *Sender) writeUnlessAcked(ctx context.Context, l *jobstore.Loaded, decide func(*jobstore.Loaded) *jobstore.Write) error {
	return c.jobs.WriteRetrying(ctx, func(retry bool) (*jobstore.Write, error) {
		if retry {
			var err error
			if l, err = c.jobs.Load(ctx, nil, l.JobID); err != nil {
				return nil, err
			}
		}
		if l.CallbackAcked {
			return nil, nil
		}
		return decide(l), nil
	})
}

// callCaller posts the job's terminal outcome to its caller and answers
// the caller's status code or why the post failed (postErr); err is a
// failure to prepare it (the database).
func (c *Sender) callCaller(ctx context.Context, l *jobstore.Loaded) (code int, postErr, err error) {
	secrets, err := c.CallbackSecrets(ctx, l.Namespace)
	if err != nil {
		return 0, nil, err
	}
	body, _ := json.Marshal(Body{JobID: l.JobID, Status: l.Status, Result: l.Result, BizCode: l.BizCode, Error: l.Error,
		Attempts: l.Attempts, AgentID: l.AgentID, FinishedAt: l.FinishedAt.UTC(), TraceID: l.TraceID})
	code, postErr = c.postCallback(ctx, l, secrets, body)
	return code, postErr, nil
}

func (c *Sender) postCallback(ctx context.Context, l *jobstore.Loaded, secrets []string, body []byte) (int, error) {
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
	return c.Post(ctx, l, l.CallbackURL, body, h)
}

// Post POSTs a JSON body to a caller's URL with header (its Content-Type,
// application/json if it names none), the trace context and the job id,
// within 15 s, and answers the status.
func (c *Sender) Post(ctx context.Context, l *jobstore.Loaded, url string, body []byte, header http.Header) (int, error) {
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
	resp, err := c.http.Do(req)
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
