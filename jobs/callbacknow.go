package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentreach/agentreach/domain"
)

// A job that ends in its dispatcher (an agent answered inline) is called
// back by that dispatcher at once, from the fold it holds, with no River
// job to fetch and no stream to load. The outcome's transaction still
// queues the River callback job and its timer, as for any other end, but
// scheduled callbackFallback later: it is the durable promise. When the
// caller acknowledges, the acknowledgement deletes that job in its own
// transaction; when the caller does not, or every sender is busy, the job
// is made available at once and River retries it as any other callback;
// when the process dies first, River runs it when it comes due.

// callbackFallback is how long the River callback job of a job whose
// dispatcher calls back waits before it runs: longer than a callback post
// may take (15 s), so that the two rarely both post.
const callbackFallback = 20 * time.Second

// callbacksNow bounds the callbacks dispatchers send at once, as the
// callbacks queue's workers bound River's.
const callbacksNow = 32

// callBackNow sends the callback of l (just ended, its River callback job
// riverJobID) from a goroutine of its own, or hands it to River when
// callbacksNow are being sent already.
func (s *Service) callBackNow(ctx context.Context, l *Loaded, riverJobID int64) {
	select {
	case s.sending <- struct{}{}:
	default:
		s.callbackByRiver(ctx, riverJobID)
		return
	}
	ctx = context.WithoutCancel(ctx) // it outlives the dispatch
	go func() {
		defer func() { <-s.sending }()
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if !s.sendCallbackNow(ctx, l, riverJobID) {
			s.callbackByRiver(ctx, riverJobID)
		}
	}()
}

// callbackByRiver makes the job's scheduled River callback job available
// now: River sends it, and retries it with its backoff.
func (s *Service) callbackByRiver(ctx context.Context, riverJobID int64) {
	if _, err := s.client.JobRetry(ctx, riverJobID); err != nil {
		s.logger.WarnContext(ctx, "hand a callback to River (it runs when it comes due)", "river_job_id", riverJobID, "err", err)
	}
}

// sendCallbackNow posts l's outcome to its caller and records what came of
// it as attempt 0 (River's tries are 1 to CallbackMaxAttempts): on a 2xx
// CALLBACK_DELIVERED, with the callback timer cleared and the River
// callback job deleted, in one write; otherwise CALLBACK_FAILED, and it
// answers false for River to take over. A failure to record leaves the
// River job to post again when it comes due.
func (s *Service) sendCallbackNow(ctx context.Context, l *Loaded, riverJobID int64) bool {
	ctx, span := s.tracer.Start(ctx, "callback", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("job_id", l.JobID), attribute.Int("attempt", 0)))
	defer span.End()
	code, postErr, err := s.callCaller(ctx, l)
	if err != nil {
		return false
	}
	ok := postErr == nil && code/100 == 2
	s.metrics.callbacks.Add(ctx, 1, metric.WithAttributes(attribute.Bool("acknowledged", ok)))
	md := domain.Metadata{TraceID: l.TraceID, Actor: "callbacks", CausationID: fmt.Sprintf("river:%d", riverJobID)}
	err = s.writeRetrying(ctx, func(retry bool) (*write, error) {
		if retry {
			var err error
			if l, err = s.Load(ctx, nil, l.JobID); err != nil {
				return nil, err
			}
		}
		if l.CallbackAcked {
			return nil, nil
		}
		if ok {
			return &write{l: l, fx: domain.Effects{ClearTimer: true}, dropRiverJob: riverJobID, evs: []domain.Event{
				domain.NewEvent(domain.EventCallbackSent, domain.CallbackOutcome{Attempt: 0, StatusCode: code}, md)}}, nil
		}
		co := domain.CallbackOutcome{Attempt: 0, StatusCode: code}
		if postErr != nil {
			co.Error = postErr.Error()
		}
		return &write{l: l, evs: []domain.Event{domain.NewEvent(domain.EventCallbackFailed, co, md)}}, nil
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		s.logger.WarnContext(ctx, "record a callback (River posts it again when it comes due)", "job_id", l.JobID, "err", err)
	}
	return ok
}
