package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	sdk "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/agentreach/agentreach/auth"
	"github.com/agentreach/agentreach/domain"
)

// blockingWait bounds how long a blocking SendMessage waits for the job
// to end before it answers with the task as it is.
const blockingWait = 25 * time.Second

// handler implements a2asrv.RequestHandler over Jobs. Each method checks
// the caller's key as its REST twin does.
type handler struct{ s *Server }

var _ a2asrv.RequestHandler = (*handler)(nil)

func (h *handler) jobs() Jobs { return h.s.cfg.Jobs }

func (h *handler) rpcError(err error) error { return h.s.cfg.Error(err) }

func metaString(ms ...map[string]any) func(key string) string {
	return func(key string) string {
		for _, m := range ms {
			if v, ok := m[key].(string); ok && v != "" {
				return v
			}
		}
		return ""
	}
}

func metaInt(m map[string]any, key string) int {
	if v, ok := m[key].(float64); ok {
		return int(v)
	}
	return 0
}

// payloadOf turns a message's parts into a job payload: the data of a lone
// data part, the text of a lone text part, else the parts as sent.
func payloadOf(parts sdk.ContentParts) (json.RawMessage, error) {
	if len(parts) == 1 {
		switch p := parts[0].(type) {
		case sdk.DataPart:
			return json.Marshal(p.Data)
		case sdk.TextPart:
			return json.Marshal(p.Text)
		}
	}
	return json.Marshal(struct {
		Parts sdk.ContentParts `json:"parts"`
	}{parts})
}

func (h *handler) OnSendMessage(ctx context.Context, params *sdk.MessageSendParams) (sdk.SendMessageResult, error) {
	id, done, err := h.send(ctx, params)
	if err != nil {
		return nil, err
	}
	wait := blockingWait
	if params.Config != nil && params.Config.Blocking != nil && !*params.Config.Blocking {
		wait = 0
	}
	j, err := h.waitJob(ctx, id, wait, done)
	if err != nil {
		return nil, h.rpcError(err)
	}
	return Task(j), nil
}

func (h *handler) OnSendMessageStream(ctx context.Context, params *sdk.MessageSendParams) iter.Seq2[sdk.Event, error] {
	return func(yield func(sdk.Event, error) bool) {
		id, _, err := h.send(ctx, params)
		if err != nil {
			yield(nil, err)
			return
		}
		h.stream(ctx, id)(yield)
	}
}

func (h *handler) OnResubscribeToTask(ctx context.Context, p *sdk.TaskIDParams) iter.Seq2[sdk.Event, error] {
	return func(yield func(sdk.Event, error) bool) {
		if p == nil {
			yield(nil, sdk.ErrInvalidParams)
			return
		}
		j, err := h.readableTask(ctx, p.ID)
		if err != nil {
			yield(nil, err)
			return
		}
		if versionOf(ctx) == VersionV1 && j.Status.Terminal() {
			// v1.0 refuses to subscribe to a task that ended (v0.3 callers
			// get it once, as it ended).
			yield(nil, fmt.Errorf("%w: task %s has ended (%s); read it with GetTask", sdk.ErrUnsupportedOperation,
				j.JobID, State(j.Status, j.Attempts)))
			return
		}
		h.stream(ctx, j.JobID)(yield)
	}
}

// stream yields the job as a task now and at every change of its status,
// until it ends (or the client goes): SSE fed by the log's LISTEN/NOTIFY.
func (h *handler) stream(ctx context.Context, id string) iter.Seq2[sdk.Event, error] {
	return func(yield func(sdk.Event, error) bool) {
		var last domain.JobStatus
		_, err := h.followJob(ctx, id, nil, func(j *Job) bool {
			if j.Status != last {
				last = j.Status
				if !yield(Task(j), nil) {
					return true
				}
			}
			return j.Status.Terminal()
		})
		if err != nil {
			yield(nil, h.rpcError(err))
		}
	}
}

// send takes a message: a new job, or, for a message to an existing task,
// the caller's input to a job that awaits it. It answers the job's id and
// when a blocking send may answer.
func (h *handler) send(ctx context.Context, params *sdk.MessageSendParams) (string, func(*Job) bool, error) {
	call := callerOf(ctx)
	if params == nil || params.Message == nil {
		return "", nil, fmt.Errorf("message is required: %w", sdk.ErrInvalidParams)
	}
	msg := params.Message
	if msg.TaskID != "" {
		return h.continueTask(ctx, params)
	}
	meta := metaString(params.Metadata, msg.Metadata)
	skill := meta("skill")
	if skill == "" {
		skill = meta("capability")
	}
	var names []string
	for _, sk := range h.jobs().Skills(call.Namespace) {
		names = append(names, sk.Capability)
	}
	if skill == "" {
		if len(names) != 1 {
			return "", nil, fmt.Errorf("%w: name the skill in metadata.skill (this namespace offers: %s)", sdk.ErrInvalidParams, strings.Join(names, ", "))
		}
		skill = names[0]
	}
	if !h.jobs().Offers(call.Namespace, skill) {
		// Taken, the job could only wait for an agent and dead-letter.
		return "", nil, fmt.Errorf("%w: no agent in namespace %s offers the skill %q (it offers: %s)", sdk.ErrInvalidParams,
			call.Namespace, skill, strings.Join(names, ", "))
	}
	if !call.Principal.CanSubmit(skill) {
		return "", nil, errPermission("this key lacks the scope jobs:submit:%s", skill)
	}
	payload, err := payloadOf(msg.Parts)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %w", sdk.ErrInvalidParams, err)
	}
	sub := domain.Submitted{Namespace: call.Namespace, Capability: skill, Payload: payload, Via: domain.ViaA2A,
		Priority: domain.Priority(meta("priority")), TimeoutMS: metaInt(params.Metadata, "timeout_ms"),
		MaxAttempts: metaInt(params.Metadata, "max_attempts")}
	if msg.ID != "" {
		sub.IdempotencyKey = "a2a:" + msg.ID
	}
	var push *PushConfig
	if params.Config != nil && params.Config.PushConfig != nil {
		pc := pushConfigOf(ctx, *params.Config.PushConfig)
		push = &pc
	}
	id, err := h.jobs().Submit(ctx, sub, call.Metadata, push)
	if err != nil {
		return "", nil, h.rpcError(err)
	}
	return id, func(j *Job) bool { return j.Status.Terminal() || j.Status == domain.StatusAwaitingInput }, nil
}

// continueTask takes a message to an existing task as the caller's input
// to the job, which must await it (AWAITING_INPUT).
func (h *handler) continueTask(ctx context.Context, params *sdk.MessageSendParams) (string, func(*Job) bool, error) {
	call := callerOf(ctx)
	j, err := h.ownTask(ctx, params.Message.TaskID)
	if err != nil {
		return "", nil, err
	}
	if j.Status.Terminal() {
		return "", nil, fmt.Errorf("%w: task %s has ended (%s) and takes no more messages", sdk.ErrUnsupportedOperation,
			j.JobID, State(j.Status, j.Attempts))
	}
	payload, err := payloadOf(params.Message.Parts)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %w", sdk.ErrInvalidParams, err)
	}
	j, err = h.jobs().Input(ctx, j.JobID, payload, call.Metadata)
	if err != nil {
		if errors.Is(err, ErrRefused) {
			return "", nil, fmt.Errorf("%w: %w", sdk.ErrInvalidParams, err)
		}
		return "", nil, h.rpcError(err)
	}
	given := j.Version
	return j.JobID, func(j *Job) bool {
		// Done when the job ends, or the agent asks for input again.
		return j.Status.Terminal() || j.Status == domain.StatusAwaitingInput &&
			j.LastEvent == domain.EventAwaitingInput && j.Version > given
	}, nil
}

// waitJob loads a job, waiting up to d for done to hold of it.
func (h *handler) waitJob(ctx context.Context, id string, d time.Duration, done func(*Job) bool) (*Job, error) {
	if d <= 0 {
		return h.jobs().Job(ctx, id)
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	return h.followJob(ctx, id, deadline.C, done)
}

// followJob loads a job now and again after commits to the log (at least
// every second) until visit returns true, until fires (then it loads it
// once more) or ctx ends, and answers the job as last loaded.
func (h *handler) followJob(ctx context.Context, id string, until <-chan time.Time, visit func(*Job) bool) (*Job, error) {
	wake, unsubscribe := h.jobs().Subscribe()
	defer unsubscribe()
	tick := time.NewTicker(time.Second) // in case a notification is missed
	defer tick.Stop()
	for {
		j, err := h.jobs().Job(ctx, id)
		if err != nil || visit(j) {
			return j, err
		}
		select {
		case <-wake:
		case <-tick.C:
		case <-until:
			return h.jobs().Job(ctx, id)
		case <-ctx.Done():
			return j, nil
		}
	}
}

// task loads the job of a task id that the call's key may see.
func (h *handler) task(ctx context.Context, id sdk.TaskID) (*Job, error) {
	if id == "" {
		return nil, fmt.Errorf("%w: id is required", sdk.ErrInvalidParams)
	}
	call := callerOf(ctx)
	j, err := h.jobs().Job(ctx, string(id))
	if err != nil {
		return nil, h.rpcError(err)
	}
	if j.Namespace != call.Namespace || !call.Principal.Sees(j.Namespace) {
		return nil, sdk.ErrTaskNotFound
	}
	return j, nil
}

// errPermission is a JSON-RPC method refused for the key's scopes, as its
// REST twin refuses it with 403. A2A defines no code for it: it is an
// invalid request (-32600) whose message says why.
func errPermission(format string, args ...any) error {
	return fmt.Errorf("%w: permission denied: %s", sdk.ErrInvalidRequest, fmt.Sprintf(format, args...))
}

// readableTask is task for a key that may read jobs (jobs:read), as
// GET /v1/jobs/{id} demands.
func (h *handler) readableTask(ctx context.Context, id sdk.TaskID) (*Job, error) {
	j, err := h.task(ctx, id)
	if err == nil && !callerOf(ctx).Principal.Has(auth.ScopeJobsRead) {
		return nil, errPermission("this key lacks the scope %s", auth.ScopeJobsRead)
	}
	return j, err
}

// ownTask is task for a key that may submit the job's capability, as REST
// cancel and replay demand; push configs, which send the job's result
// elsewhere, demand it too.
func (h *handler) ownTask(ctx context.Context, id sdk.TaskID) (*Job, error) {
	j, err := h.task(ctx, id)
	if err == nil && !callerOf(ctx).Principal.CanSubmit(j.Capability) {
		return nil, errPermission("this key may not act on jobs for %s", j.Capability)
	}
	return j, err
}

func (h *handler) OnGetTask(ctx context.Context, q *sdk.TaskQueryParams) (*sdk.Task, error) {
	if q == nil {
		return nil, sdk.ErrInvalidParams
	}
	j, err := h.readableTask(ctx, q.ID)
	if err != nil {
		return nil, err
	}
	return Task(j), nil
}

func (h *handler) OnCancelTask(ctx context.Context, p *sdk.TaskIDParams) (*sdk.Task, error) {
	if p == nil {
		return nil, sdk.ErrInvalidParams
	}
	j, err := h.ownTask(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	j, err = h.jobs().Cancel(ctx, j.JobID, "cancelled over A2A", callerOf(ctx).Metadata)
	if errors.Is(err, ErrRefused) {
		return nil, fmt.Errorf("%w: %w", sdk.ErrTaskNotCancelable, err) // it ended already
	}
	if err != nil {
		return nil, h.rpcError(err)
	}
	return Task(j), nil
}

// pushConfigOf is a caller's push config, in the version of the call.
func pushConfigOf(ctx context.Context, c sdk.PushConfig) PushConfig {
	p := PushConfig{ID: c.ID, URL: c.URL, Token: c.Token, Version: versionOf(ctx)}
	if c.Auth != nil && len(c.Auth.Schemes) > 0 {
		p.Scheme, p.Credentials = c.Auth.Schemes[0], c.Auth.Credentials
	}
	return p
}

func toTaskPushConfig(id sdk.TaskID, p PushConfig) *sdk.TaskPushConfig {
	cfg := sdk.PushConfig{ID: p.ID, URL: p.URL, Token: p.Token}
	if p.Scheme != "" {
		cfg.Auth = &sdk.PushAuthInfo{Schemes: []string{p.Scheme}} // credentials are not read back
	}
	return &sdk.TaskPushConfig{TaskID: id, Config: cfg}
}

// pushConfigs lists the push configs of a task the call's key may see.
func (h *handler) pushConfigs(ctx context.Context, id sdk.TaskID) ([]PushConfig, error) {
	j, err := h.ownTask(ctx, id)
	if err != nil {
		return nil, err
	}
	return h.jobs().PushConfigs(ctx, j.JobID)
}

func (h *handler) OnGetTaskPushConfig(ctx context.Context, p *sdk.GetTaskPushConfigParams) (*sdk.TaskPushConfig, error) {
	configs, err := h.pushConfigs(ctx, p.TaskID)
	if err != nil {
		return nil, err
	}
	for _, c := range configs {
		if p.ConfigID == "" || c.ID == p.ConfigID {
			return toTaskPushConfig(p.TaskID, c), nil
		}
	}
	// As A2A says: a config that does not exist is not found.
	return nil, fmt.Errorf("%w: task %s has no push config %q", sdk.ErrTaskNotFound, p.TaskID, p.ConfigID)
}

func (h *handler) OnListTaskPushConfig(ctx context.Context, p *sdk.ListTaskPushConfigParams) ([]*sdk.TaskPushConfig, error) {
	configs, err := h.pushConfigs(ctx, p.TaskID)
	if err != nil {
		return nil, err
	}
	out := make([]*sdk.TaskPushConfig, 0, len(configs))
	for _, c := range configs {
		out = append(out, toTaskPushConfig(p.TaskID, c))
	}
	return out, nil
}

func (h *handler) OnSetTaskPushConfig(ctx context.Context, p *sdk.TaskPushConfig) (*sdk.TaskPushConfig, error) {
	if p == nil {
		return nil, sdk.ErrInvalidParams
	}
	j, err := h.ownTask(ctx, p.TaskID)
	if err != nil {
		return nil, err
	}
	saved, err := h.jobs().SetPushConfig(ctx, j, pushConfigOf(ctx, p.Config))
	if err != nil {
		return nil, h.rpcError(err)
	}
	return toTaskPushConfig(p.TaskID, saved), nil
}

func (h *handler) OnDeleteTaskPushConfig(ctx context.Context, p *sdk.DeleteTaskPushConfigParams) error {
	j, err := h.ownTask(ctx, p.TaskID)
	if err != nil {
		return err
	}
	// Deleting is idempotent, as A2A wants: a config already gone is fine.
	if err := h.jobs().DeletePushConfig(ctx, j.JobID, p.ConfigID); err != nil && !errors.Is(err, ErrNoPushConfig) {
		return h.rpcError(err)
	}
	return nil
}

func (h *handler) OnGetExtendedAgentCard(ctx context.Context) (*sdk.AgentCard, error) {
	b, _ := json.Marshal(h.s.Card(callerOf(ctx).Namespace))
	var card sdk.AgentCard
	if err := json.Unmarshal(b, &card); err != nil {
		return nil, err
	}
	return &card, nil
}
