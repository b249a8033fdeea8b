package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/a2a/server"
	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/registry"
	"github.com/agentreach/agentreach/sql/queries"
)

// This file is the job side of Agent-Reach as an A2A agent (a2a/server):
// jobs submitted by A2A SendMessage, their push-notification configs, and
// the pushes of a job's task when it ends.

var (
	qInsertPushConfig = queries.Must("A2AInsertPushConfig")
	qPushConfigs      = queries.Must("A2APushConfigs")
	qDeletePushConfig = queries.Must("A2ADeletePushConfig")
)

// ErrPushConfig: the job takes no push configs (it was submitted without
// one, so it has no callback to carry them).
var ErrPushConfig = domain.NewError(domain.ErrInvalid, "push configs must come with the message")

// A2A is the service as the A2A server uses it: it implements server.Jobs.
type A2A struct{ s *Service }

var _ server.Jobs = (*A2A)(nil)

// A2A returns the service as the A2A server uses it.
func (s *Service) A2A() *A2A { return &A2A{s: s} }

// asJob is a loaded job as the server shows it.
func asJob(l *Loaded) *server.Job {
	j := &server.Job{Job: l.Job, TraceID: l.TraceID, UpdatedAt: l.UpdatedAt}
	if len(l.Records) > 0 {
		j.LastEvent = l.Records[len(l.Records)-1].Type
	}
	return j
}

func asJobOrErr(l *Loaded, err error) (*server.Job, error) {
	if err != nil {
		return nil, err
	}
	return asJob(l), nil
}

// refusedOn marks ErrConflict, the job's state refusing the request, as
// the server's ErrRefused.
func refusedOn(err error) error {
	if errors.Is(err, ErrConflict) {
		return server.Refused(err)
	}
	return err
}

// Submit submits a job that came as an A2A message, with the caller's
// push config, if any, as its callback: the config is written in the
// job's SUBMITTED transaction, so the job never ends unannounced.
func (a *A2A) Submit(ctx context.Context, sub domain.Submitted, md domain.Metadata, push *server.PushConfig) (string, error) {
	s := a.s
	if push != nil {
		sub.CallbackURL = push.URL
		if push.ID == "" {
			push.ID = "default"
		}
	}
	if err := s.prepare(ctx, &sub); err != nil {
		return "", err
	}
	var res SubmitResult
	err := s.store.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		if res, err = s.submitTx(ctx, tx, sub, md, nil); err != nil || res.Existing || push == nil {
			return err
		}
		return insertPushConfig(ctx, tx, res.JobID, *push)
	})
	return res.JobID, err
}

// Job loads a job; ErrNotFound if there is none.
func (a *A2A) Job(ctx context.Context, id string) (*server.Job, error) {
	return asJobOrErr(a.s.Load(ctx, nil, id))
}

// Input is ProvideInput; a job that awaits no input is server.ErrRefused
// (and ErrConflict).
func (a *A2A) Input(ctx context.Context, id string, payload json.RawMessage, md domain.Metadata) (*server.Job, error) {
	l, err := a.s.ProvideInput(ctx, id, payload, md)
	return asJobOrErr(l, refusedOn(err))
}

// Cancel is Cancel; a job that has ended is server.ErrRefused (and
// ErrConflict).
func (a *A2A) Cancel(ctx context.Context, id, reason string, md domain.Metadata) (*server.Job, error) {
	l, err := a.s.Cancel(ctx, id, reason, md)
	return asJobOrErr(l, refusedOn(err))
}

// PushConfigs returns a job's push configs, oldest first.
func (a *A2A) PushConfigs(ctx context.Context, id string) ([]server.PushConfig, error) {
	return a.s.PushConfigs(ctx, id)
}

// SetPushConfig adds or replaces a push config of a job that was submitted
// with one (ErrPushConfig otherwise). The URL passes the SSRF guard.
func (a *A2A) SetPushConfig(ctx context.Context, j *server.Job, p server.PushConfig) (server.PushConfig, error) {
	s := a.s
	if j.CallbackURL == "" {
		return p, fmt.Errorf("job %s was submitted without a push config: %w", j.JobID, ErrPushConfig)
	}
	if err := registry.CheckURLs(ctx, s.cfg.Guard, map[string]string{"callback_url": p.URL}); err != nil {
		return p, err
	}
	if p.ID == "" {
		p.ID = uuid.Must(uuid.NewV7()).String()
	}
	err := s.store.InTx(ctx, func(tx pgx.Tx) error { return insertPushConfig(ctx, tx, j.JobID, p) })
	return p, err
}

// DeletePushConfig removes a push config; ErrNotFound if there is none.
func (a *A2A) DeletePushConfig(ctx context.Context, jobID, configID string) error {
	tag, err := a.s.pool.Exec(ctx, qDeletePushConfig, jobID, configID)
	if err != nil {
		return fmt.Errorf("delete push config of job %s: %w", jobID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("push config %s of job %s: %w", configID, jobID, ErrNotFound)
	}
	return nil
}

// Skills lists the capabilities of a namespace's healthy agents, from the
// router's snapshot.
func (a *A2A) Skills(namespace string) []server.Skill {
	var out []server.Skill
	for _, sk := range a.s.registry.Snapshot().Skills(namespace) {
		out = append(out, server.Skill{Capability: sk.Capability, Aliases: sk.Aliases, Agents: sk.Agents})
	}
	return out
}

// Subscribe wakes after commits to the event log.
func (a *A2A) Subscribe() (<-chan struct{}, func()) { return a.s.store.Subscribe() }

// PublicURL is the service's base URL.
func (a *A2A) PublicURL() string { return a.s.cfg.PublicURL }

func insertPushConfig(ctx context.Context, tx pgx.Tx, jobID string, p server.PushConfig) error {
	if _, err := tx.Exec(ctx, qInsertPushConfig, jobID, p.ID, p.URL, p.Token, p.Scheme, p.Credentials); err != nil {
		return fmt.Errorf("save push config of job %s: %w", jobID, err)
	}
	return nil
}

// PushConfigs returns a job's push configs, oldest first.
func (s *Service) PushConfigs(ctx context.Context, jobID string) ([]server.PushConfig, error) {
	rows, err := s.pool.Query(ctx, qPushConfigs, jobID)
	if err != nil {
		return nil, fmt.Errorf("push configs of job %s: %w", jobID, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (server.PushConfig, error) {
		var p server.PushConfig
		return p, r.Scan(&p.ID, &p.URL, &p.Token, &p.Scheme, &p.Credentials)
	})
}

// postA2APushes sends the ended job as an A2A task to every push config,
// as A2A agents push: the task as JSON, the config's credentials in
// Authorization and its token in X-A2A-Notification-Token. It answers the
// status of the first config that did not take it (or the last 2xx).
func (s *Service) postA2APushes(ctx context.Context, l *Loaded, configs []server.PushConfig) (int, error) {
	body, err := json.Marshal(server.Task(asJob(l)))
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

func (s *Service) postA2APush(ctx context.Context, l *Loaded, p server.PushConfig, body []byte) (int, error) {
	h := http.Header{}
	if p.Token != "" {
		h.Set("X-A2A-Notification-Token", p.Token)
	}
	if p.Scheme != "" && p.Credentials != "" {
		h.Set("Authorization", p.Scheme+" "+p.Credentials)
	}
	return s.postToCaller(ctx, l, p.URL, body, h)
}
