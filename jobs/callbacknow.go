package jobs

import (
	"context"
	"errors"
	"time"

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
		if err := s.callbackByRiver(ctx, l); err != nil && !errors.Is(err, context.Canceled) {
			s.logger.WarnContext(ctx, "hand a callback to River (the callback timer brings it back)", "job_id", l.JobID, "err", err)
		}
		return
	}
	go func() {
		defer func() { <-s.sending }()
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		s.sendCallbackNow(ctx, l, cause)
	}()
}

// sendCallbackNow makes the try at l's callback made at once (attempt 0;
// River's tries are 1 to CallbackMaxAttempts). A failure to record leaves
// the timer to bring the callback back after the grace.
func (s *Service) sendCallbackNow(ctx context.Context, l *jobstore.Loaded, cause string) {
	if err := s.callBack(ctx, l, callbackTry{cause: cause}); err != nil && !errors.Is(err, context.Canceled) {
		s.logger.WarnContext(ctx, "a callback tried at once (the callback timer brings it back)", "job_id", l.JobID, "err", err)
	}
}

// callbackByRiver queues l's River callback job, available at once:
// River sends it and retries it. Should that fail, the callback timer
// brings it back after the grace.
func (s *Service) callbackByRiver(ctx context.Context, l *jobstore.Loaded) error {
	return s.writeUnlessAcked(ctx, l, func(l *jobstore.Loaded) *jobstore.Write {
		return &jobstore.Write{L: l, Effects: domain.Effects{RequeueCallback: true}}
	})
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
