package jobs

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/jobs/jobstore"
)

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
// callbacks queue's workers bound River's.
const callbacksNow = 32

// callBackNow sends the callback of l, which just ended, from a goroutine
// of its own, or hands it to River when callbacksNow are being sent
// already. cause is what the events record as their causation.
func (s *Service) callBackNow(ctx context.Context, l *jobstore.Loaded, cause string) {
	ctx = context.WithoutCancel(ctx) // it outlives the request that ended the job
	// A fold of its own: recording the callback's outcome moves it on,
	// while the caller (a result's request) still answers from l.
	own := *l
	l = &own
	select {
	case s.sending <- struct{}{}:
	default:
		s.callbackByRiver(ctx, l, nil)
		return
	}
	go func() {
		defer func() { <-s.sending }()
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		s.sendCallbackNow(ctx, l, cause)
	}()
}

// sendCallbackNow posts l's outcome to its caller and records what came of
// it as attempt 0 (River's tries are 1 to CallbackMaxAttempts): on a 2xx
// CALLBACK_DELIVERED, which clears the callback timer; otherwise
// CALLBACK_FAILED, with the River callback job that retries it. A failure
// to record leaves the timer to bring the callback back after the grace.
func (s *Service) sendCallbackNow(ctx context.Context, l *jobstore.Loaded, cause string) {
	ctx, span := s.tracer.Start(ctx, "callback", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("job_id", l.JobID), attribute.Int("attempt", 0)))
	defer span.End()
	md := domain.Metadata{TraceID: l.TraceID, Actor: "callbacks", CausationID: cause}
	a2aPushes, err := s.usesA2APushes(ctx, l)
	if err != nil || a2aPushes {
		// A2A push configs are each delivered and retried on their own,
		// by the River callback job (deliverA2APushes).
		s.callbackByRiver(ctx, l, nil)
		return
	}
	code, postErr, err := s.callCaller(ctx, l)
	if err != nil {
		s.callbackByRiver(ctx, l, nil)
		return
	}
	ev, fx, ok := domain.CallbackTry(0, 0, code, errText(postErr), md)
	s.metrics.callbacks.Add(ctx, 1, withAttrs(attribute.Bool("acknowledged", ok)))
	if !ok {
		s.callbackByRiver(ctx, l, []domain.Event{ev})
		return
	}
	err = s.writeUnlessAcked(ctx, l, func(l *jobstore.Loaded) *jobstore.Write {
		return &jobstore.Write{L: l, Effects: fx, Events: []domain.Event{ev}}
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		s.logger.WarnContext(ctx, "record a callback's acknowledgement (the callback timer sends it again)", "job_id", l.JobID, "err", err)
	}
}

// callbackByRiver queues l's River callback job, available at once, with
// evs (what came of an attempt, if any): River sends it and retries it.
// Should that fail, the callback timer brings it back after the grace.
func (s *Service) callbackByRiver(ctx context.Context, l *jobstore.Loaded, evs []domain.Event) {
	err := s.writeUnlessAcked(ctx, l, func(l *jobstore.Loaded) *jobstore.Write {
		return &jobstore.Write{L: l, Events: evs, Effects: domain.Effects{RequeueCallback: true}}
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		s.logger.WarnContext(ctx, "hand a callback to River (the callback timer brings it back)", "job_id", l.JobID, "err", err)
	}
}

// writeUnlessAcked writes what decide makes of l, reloading l after a
// conflict, unless the job's callback is acknowledged by then.
func (s *Service) writeUnlessAcked(ctx context.Context, l *jobstore.Loaded, decide func(*jobstore.Loaded) *jobstore.Write) error {
	return s.jobs.WriteRetrying(ctx, func(retry bool) (*jobstore.Write, error) {
		if retry {
			var err error
			if l, err = s.Load(ctx, nil, l.JobID); err != nil {
				return nil, err
			}
		}
		if l.CallbackAcked {
			return nil, nil
		}
		return decide(l), nil
	})
}
