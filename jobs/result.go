package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/jobs/jobstore"
	"github.com/agentreach/agentreach/registry"
	"github.com/agentreach/agentreach/webhook"
	"github.com/jackc/pgx/v5"
)

// ReportResult records an agent's result for an attempt of a job. token
// must be the token of the agent the attempt was routed to. A result for
// the latest, delivered attempt decides it; anything else (a second result,
// a result after TIMEOUT, a result for an earlier attempt) is recorded as
// RESULT_DUPLICATE and changes nothing.
func (s *Service) ReportResult(ctx context.Context, id, token string, rep domain.ResultReport, md domain.Metadata) (domain.Recorded, *jobstore.Loaded, error) {
	recorded, l, _, err := s.ReportResultAndClaim(ctx, id, token, rep, md)
	return recorded, l, err
}

// ReportResultAndClaim is ReportResult, and for a pull agent asking
// rep.ClaimNext deliveries, its next deliveries claimed in the report's
// own transaction (after the waiter its slot woke was routed): the
// deliveries it answers are the agent's, as a claim's are. Fewer than
// asked (none for a duplicate report, or an agent gone OFFLINE) leaves
// the agent to claim.
func (s *Service) ReportResultAndClaim(ctx context.Context, id, token string, rep domain.ResultReport, md domain.Metadata) (domain.Recorded, *jobstore.Loaded, []webhook.Envelope, error) {
	if rep.ClaimNext < 0 || rep.ClaimNext > domain.MaxClaimNext {
		return "", nil, nil, &domain.FieldError{Field: "claim_next", Message: fmt.Sprintf("must be 0 to %d", domain.MaxClaimNext)}
	}
	if rep.Status != domain.StatusSuccess && rep.Status != domain.StatusFailed {
		return "", nil, nil, &domain.FieldError{Field: "status", Message: "must be SUCCESS or FAILED"}
	}
	if len(rep.BizCode) > 128 {
		return "", nil, nil, &domain.FieldError{Field: "biz_code", Message: "must be at most 128 characters"}
	}
	if len(rep.Result) > 0 && !json.Valid(rep.Result) {
		return "", nil, nil, &domain.FieldError{Field: "result", Message: "must be valid JSON"}
	}
	if len(rep.Result) > s.cfg.MaxPayloadBytes {
		return "", nil, nil, &domain.FieldError{Field: "result", Message: fmt.Sprintf("must be at most %d bytes", s.cfg.MaxPayloadBytes), TooLarge: true}
	}
	caller, l, attempt, err := s.heldBy(ctx, id, token, rep.Attempt)
	if err != nil {
		return "", nil, nil, err
	}
	if rep.ClaimNext > 0 && !caller.Pull() {
		return "", nil, nil, &domain.FieldError{Field: "claim_next", Message: "only a pull agent claims deliveries"}
	}
	agentID := caller.AgentID
	md.Actor = "agent:" + agentID
	// Decided on the fold read above and written in a transaction shared
	// with concurrent writes (write.go), at its version: reloaded only on
	// a conflict. The agent is answered once it committed; a job it ends
	// is called back from here at once (callBackNow).
	var recorded domain.Recorded
	var last *jobstore.Write
	var claimed []webhook.Envelope
	var folds []*jobstore.Loaded
	var then func(context.Context, pgx.Tx) error
	if rep.ClaimNext > 0 && !caller.Gone() { // as a claim
		if _, err := s.registry.Claimed(ctx, caller, md); err != nil { // a claim renews the lease
			return "", nil, nil, err
		}
		then = func(ctx context.Context, tx pgx.Tx) error {
			out, fs, err := s.inbox.ClaimIn(ctx, tx, caller, rep.ClaimNext-len(last.Taken))
			if err == nil {
				claimed, folds = out, fs
			}
			return err
		}
	}
	err = s.jobs.WriteRetrying(ctx, func(retry bool) (*jobstore.Write, error) {
		if retry {
			var err error
			if l, err = s.Load(ctx, nil, id); err != nil {
				return nil, err
			}
		}
		evs, fx, rec := domain.Result(&l.Job, attempt, agentID, l.RoutedAt, rep.Status, rep.Result, rep.BizCode,
			s.now().UTC(), s.jitter(), md)
		claimed, folds = nil, nil
		recorded, last = rec, &jobstore.Write{L: l, Events: evs, Effects: fx, CallbackNow: true}
		if rec == domain.RecordedOutcome && then != nil { // a duplicate (a report sent again) claims nothing
			// The waiter the slot given back woke, routed to this agent in
			// the same transaction, is claimed by that route's own write;
			// the rest from the inbox (then).
			last.Then, last.TakeMax = then, rep.ClaimNext
			last.TakeRouted = func(r *jobstore.Write) bool { return s.inbox.ClaimRouted(r, caller) }
			last.OnRun = func() { claimed, folds = nil, nil } // what a run rolled back gathered (one that takes a route skips then)
		}
		return last, nil
	})
	if err != nil {
		return "", nil, nil, err
	}
	if len(last.Taken) > 0 {
		taken := make([]webhook.Envelope, 0, len(last.Taken)+len(claimed))
		for _, r := range last.Taken {
			env, l := s.inbox.Delivery(r)
			taken = append(taken, env)
			folds = append(folds, l)
		}
		claimed = append(taken, claimed...)
	}
	if last.CallsBack() {
		s.callbacks.Now(ctx, l, md.CausationID)
	}
	s.inbox.Claimed(ctx, folds)
	return recorded, l, claimed, nil
}

// ReportProgress records an agent's progress on an attempt of a job it
// holds (PROGRESS), extending the attempt's deadline to now+extend when
// that is later (domain.Progress). token must be the token of the agent
// the attempt went to; a pull agent's report renews its lease, as a claim
// does. An attempt no longer running is a conflict.
func (s *Service) ReportProgress(ctx context.Context, id, token string, attempt int, extend time.Duration, progress json.RawMessage,
	md domain.Metadata) (*jobstore.Loaded, error) {
	if len(progress) > 0 && !json.Valid(progress) {
		return nil, &domain.FieldError{Field: "progress", Message: "must be valid JSON"}
	}
	if len(progress) > s.cfg.MaxPayloadBytes {
		return nil, &domain.FieldError{Field: "progress", Message: fmt.Sprintf("must be at most %d bytes", s.cfg.MaxPayloadBytes), TooLarge: true}
	}
	if extend < 0 || extend > domain.MaxExtend {
		return nil, &domain.FieldError{Field: "extend_ms", Message: fmt.Sprintf("must be 0 to %d", domain.MaxExtend.Milliseconds())}
	}
	caller, l, attempt, err := s.heldBy(ctx, id, token, attempt)
	if err != nil {
		return nil, err
	}
	if caller.Pull() {
		if _, err := s.registry.Claimed(ctx, caller, md); err != nil {
			return nil, err
		}
	}
	md.Actor = "agent:" + caller.AgentID
	err = s.jobs.WriteRetrying(ctx, func(retry bool) (*jobstore.Write, error) {
		if retry {
			var err error
			if l, err = s.Load(ctx, nil, id); err != nil {
				return nil, err
			}
		}
		evs, fx, err := domain.Progress(&l.Job, attempt, caller.AgentID, extend, progress, s.now().UTC(), md)
		if err != nil {
			return nil, err
		}
		return &jobstore.Write{L: l, Events: evs, Effects: fx}, nil
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// heldBy answers the agent of token, job id and its attempt (0: the
// latest), when that attempt went to that agent: the token first, so a
// caller without one learns nothing of the job, and an agent nothing of
// another namespace's (not found); another agent's attempt is forbidden.
func (s *Service) heldBy(ctx context.Context, id, token string, attempt int) (*registry.Agent, *jobstore.Loaded, int, error) {
	caller, err := s.registry.AgentByToken(ctx, token)
	if err != nil {
		return nil, nil, 0, err
	}
	// The fold a claim of this process kept, for the attempt it handed
	// out; else read.
	l := s.jobs.Kept(id)
	if l == nil || attempt == 0 || l.Attempts != attempt {
		l, err = s.Load(ctx, nil, id)
	}
	if err == nil && l.Namespace != caller.Namespace {
		err = fmt.Errorf("job %s: %w", id, domain.ErrNotFound)
	}
	if err != nil {
		return nil, nil, 0, err
	}
	if attempt == 0 {
		attempt = l.Attempts
	}
	agentID := l.AttemptAgents[attempt]
	if agentID == "" {
		return nil, nil, 0, &domain.FieldError{Field: "attempt", Message: fmt.Sprintf("job %s has no attempt %d at an agent", id, attempt)}
	}
	if caller.AgentID != agentID {
		return nil, nil, 0, fmt.Errorf("attempt %d of job %s: %w", attempt, id, ErrForbidden)
	}
	return caller, l, attempt, nil
}
