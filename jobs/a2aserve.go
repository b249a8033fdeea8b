package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/registry"
)

// This file is the job side of Agent-Reach as an A2A agent: jobs
// submitted by A2A SendMessage, their push-notification configs, and a
// job read as an A2A task.

// PushConfig is an A2A caller's push-notification config of a job: where
// the task goes when the job ends, and the credentials to present.
type PushConfig struct {
	ID          string
	URL         string
	Token       string
	Scheme      string // "Bearer" or "Basic"; empty: no Authorization header
	Credentials string
}

// ErrPushConfig: the job takes no push configs (it was submitted without
// one, so it has no callback to carry them).
var ErrPushConfig = domain.NewError(domain.ErrInvalid, "push configs must come with the message")

// SubmitA2A submits a job that came as an A2A message, with the caller's
// push config, if any, as its callback: the config is written in the
// job's SUBMITTED transaction, so the job never ends unannounced.
func (s *Service) SubmitA2A(ctx context.Context, sub domain.Submitted, md domain.Metadata, push *PushConfig) (SubmitResult, error) {
	if push != nil {
		sub.CallbackURL = push.URL
		if push.ID == "" {
			push.ID = "default"
		}
	}
	if err := s.prepare(ctx, &sub); err != nil {
		return SubmitResult{}, err
	}
	var res SubmitResult
	err := s.store.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		if res, err = s.submitTx(ctx, tx, sub, md, nil); err != nil || res.Existing || push == nil {
			return err
		}
		return insertPushConfig(ctx, tx, res.JobID, *push)
	})
	return res, err
}

func insertPushConfig(ctx context.Context, tx pgx.Tx, jobID string, p PushConfig) error {
	_, err := tx.Exec(ctx, `INSERT INTO a2a_push_configs (job_id, config_id, url, token, auth_scheme, credentials)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (job_id, config_id) DO UPDATE SET url = excluded.url, token = excluded.token,
			auth_scheme = excluded.auth_scheme, credentials = excluded.credentials`,
		jobID, p.ID, p.URL, p.Token, p.Scheme, p.Credentials)
	if err != nil {
		return fmt.Errorf("save push config of job %s: %w", jobID, err)
	}
	return nil
}

// PushConfigs returns a job's push configs, oldest first.
func (s *Service) PushConfigs(ctx context.Context, jobID string) ([]PushConfig, error) {
	rows, err := s.pool.Query(ctx, `SELECT config_id, url, token, auth_scheme, credentials FROM a2a_push_configs
		WHERE job_id = $1 ORDER BY created_at, config_id`, jobID)
	if err != nil {
		return nil, fmt.Errorf("push configs of job %s: %w", jobID, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (PushConfig, error) {
		var p PushConfig
		return p, r.Scan(&p.ID, &p.URL, &p.Token, &p.Scheme, &p.Credentials)
	})
}

// SetPushConfig adds or replaces a push config of a job that was submitted
// with one (ErrPushConfig otherwise). The URL passes the SSRF guard.
func (s *Service) SetPushConfig(ctx context.Context, l *Loaded, p PushConfig) (PushConfig, error) {
	if l.CallbackURL == "" {
		return p, fmt.Errorf("job %s was submitted without a push config: %w", l.JobID, ErrPushConfig)
	}
	if err := registry.CheckURLs(ctx, s.cfg.Guard, map[string]string{"callback_url": p.URL}); err != nil {
		return p, err
	}
	if p.ID == "" {
		p.ID = uuid.Must(uuid.NewV7()).String()
	}
	err := s.store.InTx(ctx, func(tx pgx.Tx) error { return insertPushConfig(ctx, tx, l.JobID, p) })
	return p, err
}

// DeletePushConfig removes a push config; ErrNotFound if there is none.
func (s *Service) DeletePushConfig(ctx context.Context, jobID, configID string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM a2a_push_configs WHERE job_id = $1 AND config_id = $2`, jobID, configID)
	if err != nil {
		return fmt.Errorf("delete push config of job %s: %w", jobID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("push config %s of job %s: %w", configID, jobID, ErrNotFound)
	}
	return nil
}

// A2ATask is a job as an A2A task: its id is the job id, its state the
// job's status in A2A terms, its result the one artifact.
func A2ATask(l *Loaded) *a2a.Task {
	t := &a2a.Task{ID: a2a.TaskID(l.JobID), ContextID: l.JobID,
		Metadata: map[string]any{"reach_status": string(l.Status), "capability": l.Capability, "attempts": l.Attempts,
			"trace_id": l.TraceID}}
	if l.AgentID != "" {
		t.Metadata["agent_id"] = l.AgentID
	}
	ts := l.UpdatedAt.UTC()
	t.Status = a2a.TaskStatus{State: A2AState(l.Status, l.Attempts), Timestamp: &ts}
	if len(l.Result) > 0 && (l.Status == domain.StatusSuccess || l.Status == domain.StatusFailed) {
		t.Artifacts = []*a2a.Artifact{{ID: "result", Name: "result", Parts: a2a.ContentParts{PartOf(l.Result)}}}
	}
	if l.Error != "" && l.Status.Terminal() && l.Status != domain.StatusSuccess {
		t.Status.Message = &a2a.Message{ID: l.JobID + ".status", Role: a2a.MessageRoleAgent, TaskID: t.ID, ContextID: t.ContextID,
			Parts: a2a.ContentParts{a2a.TextPart{Text: l.Error}}}
	}
	return t
}

// A2AState is a job status in A2A terms.
func A2AState(s domain.JobStatus, attempts int) a2a.TaskState {
	switch s {
	case domain.StatusSuccess:
		return a2a.TaskStateCompleted
	case domain.StatusFailed, domain.StatusDeadLetter:
		return a2a.TaskStateFailed
	case domain.StatusCancelled:
		return a2a.TaskStateCanceled
	case domain.StatusRejected:
		return a2a.TaskStateRejected
	case domain.StatusAwaitingInput:
		return a2a.TaskStateInputRequired
	case domain.StatusDelivered, domain.StatusTimeout:
		return a2a.TaskStateWorking
	case domain.StatusSubmitted:
		if attempts > 0 {
			return a2a.TaskStateWorking
		}
	}
	return a2a.TaskStateSubmitted
}

// PartOf is a JSON value as an A2A part: an object as a data part, a
// string as a text part, anything else as data {"value": …}.
func PartOf(v json.RawMessage) a2a.Part {
	var obj map[string]any
	if json.Unmarshal(v, &obj) == nil && obj != nil {
		return a2a.DataPart{Data: obj}
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return a2a.TextPart{Text: s}
	}
	var x any
	_ = json.Unmarshal(v, &x)
	return a2a.DataPart{Data: map[string]any{"value": x}}
}

// postA2APushes sends the ended job as an A2A task to every push config,
// as A2A agents push: the task as JSON, the config's credentials in
// Authorization and its token in X-A2A-Notification-Token. It answers the
// status of the first config that did not take it (or the last 2xx).
func (s *Service) postA2APushes(ctx context.Context, l *Loaded, configs []PushConfig) (int, error) {
	body, err := json.Marshal(A2ATask(l))
	if err != nil {
		return 0, err
	}
	code := 0
	for _, p := range configs {
		c, err := s.postA2APush(ctx, l, p, body)
		if err != nil || c/100 != 2 {
			return c, err
		}
		code = c
	}
	return code, nil
}

func (s *Service) postA2APush(ctx context.Context, l *Loaded, p PushConfig, body []byte) (int, error) {
	h := http.Header{}
	if p.Token != "" {
		h.Set("X-A2A-Notification-Token", p.Token)
	}
	if p.Scheme != "" && p.Credentials != "" {
		h.Set("Authorization", p.Scheme+" "+p.Credentials)
	}
	return s.postToCaller(ctx, l, p.URL, body, h)
}
