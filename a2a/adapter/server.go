package adapter

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentreach/agentreach/sql/queries"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"

	"github.com/agentreach/agentreach/a2a/server"
	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/internal/telemetry"
	"github.com/agentreach/agentreach/jobs/callback"
	"github.com/agentreach/agentreach/jobs/dispatch"
	"github.com/agentreach/agentreach/jobs/jobstore"
	"github.com/agentreach/agentreach/registry"
)

var (
	qInsertPushConfig       = queries.Must("A2AInsertPushConfig")
	qPushConfigs            = queries.Must("A2APushConfigs")
	qLegacyPushConfigsExist = queries.Must("LegacyPushConfigsExist")
	qDeletePushConfig       = queries.Must("A2ADeletePushConfig")
	qClaimPushConfigs       = queries.Must("A2AClaimPushConfigs")
	qPushDelivered          = queries.Must("A2APushDelivered")
	qPushFailed             = queries.Must("A2APushFailed")
	qPushesPending          = queries.Must("A2APushesPending")
)

// a2aCallback ends the callback_url of a job submitted over A2A: its
// callback is its push configs (those given with the message, and those
// added while it runs), never a POST to the URL itself, which is the
// namespace's A2A endpoint.
const a2aCallback = "#a2a-push-notification-configs"

// a2aCallbackURL is the callback_url of a job submitted over A2A in
// namespace ns.
func (ad *Adapter) a2aCallbackURL(ns string) string {
	return ad.cfg.PublicURL() + "/a2a/" + ns + a2aCallback
}

// isA2ACallback reports whether a job's callback is its A2A push configs.
func isA2ACallback(callbackURL string) bool { return strings.HasSuffix(callbackURL, a2aCallback) }

// face is the job service as the A2A server uses it: server.Jobs.
type face struct{ ad *Adapter }

var _ server.Jobs = face{}

// A2A returns the job service as the A2A server uses it.
func (ad *Adapter) A2A() server.Jobs { return face{ad} }

// asJob is a loaded job as the server shows it.
func asJob(l *jobstore.Loaded) *server.Job {
	j := &server.Job{Job: l.Job, TraceID: l.TraceID, UpdatedAt: l.UpdatedAt}
	if len(l.Records) > 0 {
		j.LastEvent = l.Records[len(l.Records)-1].Type
	}
	return j
}

func asJobOrErr(l *jobstore.Loaded, err error) (*server.Job, error) {
	if err != nil {
		return nil, err
	}
	return asJob(l), nil
}

// refusedOn marks ErrConflict, the job's state refusing the request, as
// the server's ErrRefused.
func refusedOn(err error) error {
	if errors.Is(err, jobstore.ErrConflict) {
		return server.Refused(err)
	}
	return err
}

// Submit submits a job that came as an A2A message. Its callback is its
// push configs, whether or not one came with the message (the caller may
// add some while it runs): the one given, if any, is written in the job's
// SUBMITTED transaction, so the job never ends unannounced. The config's
// URL must be an http(s) URL the SSRF guard lets through.
func (f face) Submit(ctx context.Context, sub domain.Submitted, md domain.Metadata, push *server.PushConfig) (string, error) {
	ad := f.ad
	if push != nil {
		if err := ad.checkPushConfig(ctx, *push); err != nil {
			return "", err
		}
		if push.ID == "" {
			push.ID = "default"
		}
	}
	// The callback_url is ours: not for the SSRF guard, never posted to.
	return ad.core.SubmitA2A(ctx, sub, md, ad.a2aCallbackURL, func(ctx context.Context, tx pgx.Tx, jobID string) error {
		if push == nil {
			return nil
		}
		return insertPushConfig(ctx, tx, jobID, *push)
	})
}

// checkPushConfig refuses a push config Agent-Reach could not deliver to:
// a *domain.FieldError for a URL that is not http(s), or the SSRF guard's
// error.
func (ad *Adapter) checkPushConfig(ctx context.Context, p server.PushConfig) error {
	if err := domain.ValidateHTTPURL("url", p.URL); err != nil {
		return err
	}
	return registry.CheckURLs(ctx, ad.cfg.Guard, map[string]string{"url": p.URL})
}

// Job loads a job; domain.ErrNotFound if there is none.
func (f face) Job(ctx context.Context, id string) (*server.Job, error) {
	return asJobOrErr(f.ad.jobs.Load(ctx, nil, id))
}

// Input is ProvideInput; a job that awaits no input is server.ErrRefused
// (and ErrConflict).
func (f face) Input(ctx context.Context, id string, payload json.RawMessage, md domain.Metadata) (*server.Job, error) {
	l, err := f.ad.ProvideInput(ctx, id, payload, md)
	return asJobOrErr(l, refusedOn(err))
}

// Cancel is the jobs' Cancel; a job that has ended is server.ErrRefused (and
// ErrConflict).
func (f face) Cancel(ctx context.Context, id, reason string, md domain.Metadata) (*server.Job, error) {
	l, err := f.ad.core.Cancel(ctx, id, reason, md)
	return asJobOrErr(l, refusedOn(err))
}

// PushConfigs returns a job's push configs, oldest first.
func (f face) PushConfigs(ctx context.Context, id string) ([]server.PushConfig, error) {
	return f.ad.PushConfigs(ctx, id)
}

// SetPushConfig adds or replaces a push config of a job submitted over A2A
// (server.ErrPushConfig otherwise), running or ended: a job's final task goes to
// every config it has until its callback is settled (acknowledged by all,
// or given up). The URL must pass checkPushConfig.
func (f face) SetPushConfig(ctx context.Context, j *server.Job, p server.PushConfig) (server.PushConfig, error) {
	ad := f.ad
	if !isA2ACallback(j.CallbackURL) {
		// Jobs submitted over A2A before their callback was marked carry
		// their first config's URL, and have that config.
		configs, err := ad.PushConfigs(ctx, j.JobID)
		if err != nil {
			return p, err
		}
		if len(configs) == 0 {
			return p, fmt.Errorf("job %s was submitted over REST, and its callback is its callback_url: %w", j.JobID, server.ErrPushConfig)
		}
	}
	if err := ad.checkPushConfig(ctx, p); err != nil {
		return p, err
	}
	if p.ID == "" {
		p.ID = uuid.Must(uuid.NewV7()).String()
	}
	err := ad.events.InTx(ctx, func(tx pgx.Tx) error { return insertPushConfig(ctx, tx, j.JobID, p) })
	return p, err
}

// DeletePushConfig removes a push config; server.ErrNoPushConfig if there
// is none. A config deleted is never sent to again.
func (f face) DeletePushConfig(ctx context.Context, jobID, configID string) error {
	tag, err := f.ad.pool.Exec(ctx, qDeletePushConfig, jobID, configID)
	if err != nil {
		return fmt.Errorf("delete push config of job %s: %w", jobID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("push config %s of job %s: %w", configID, jobID, server.ErrNoPushConfig)
	}
	return nil
}

// Offers reports whether any agent of the namespace, of any health,
// offers the capability: the router has a candidate or a rejection for it.
func (f face) Offers(namespace, capability string) bool {
	r := f.ad.registry.Snapshot().Route(domain.RouteRequest{Namespace: namespace, Capability: capability})
	return len(r.Candidates)+len(r.Rejected) > 0
}

// Skills lists the capabilities of a namespace's healthy agents, from the
// router's snapshot.
func (f face) Skills(namespace string) []server.Skill {
	var out []server.Skill
	for _, sk := range f.ad.registry.Snapshot().Skills(namespace) {
		out = append(out, server.Skill{Capability: sk.Capability, Aliases: sk.Aliases, Agents: sk.Agents})
	}
	return out
}

// Subscribe wakes after commits to the event log.
func (f face) Subscribe() (<-chan struct{}, func()) { return f.ad.events.Subscribe() }

// PublicURL is the service's base URL.
func (f face) PublicURL() string { return f.ad.cfg.PublicURL() }

func insertPushConfig(ctx context.Context, tx pgx.Tx, jobID string, p server.PushConfig) error {
	if p.Version == "" {
		p.Version = server.VersionV03
	}
	if _, err := tx.Exec(ctx, qInsertPushConfig, jobID, p.ID, p.URL, p.Token, p.Scheme, p.Credentials, p.Version); err != nil {
		return fmt.Errorf("save push config of job %s: %w", jobID, err)
	}
	return nil
}

// PushConfigs returns a job's push configs, oldest first.
func (ad *Adapter) PushConfigs(ctx context.Context, jobID string) ([]server.PushConfig, error) {
	rows, err := ad.pool.Query(ctx, qPushConfigs, jobID)
	if err != nil {
		return nil, fmt.Errorf("push configs of job %s: %w", jobID, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (server.PushConfig, error) {
		var p server.PushConfig
		return p, r.Scan(&p.ID, &p.URL, &p.Token, &p.Scheme, &p.Credentials, &p.Version)
	})
}

// pushHold is how long one callback run holds the push configs it posts
// to: longer than a post may take (postToCaller's 15 s).
const pushHold = 60 * time.Second

// PushOutcome is what one push config answered a job's final task: its
// status code, or why there was none.
type PushOutcome struct {
	ConfigID   string `json:"config_id"`
	StatusCode int    `json:"status_code,omitempty"`
	Error      string `json:"error,omitempty"`
	Delivered  bool   `json:"delivered"`
}

// PushesOutcome is the data of CALLBACK_DELIVERED and CALLBACK_FAILED of a
// job whose callback is its A2A push configs: the callback's outcome, what
// each config posted to in this run answered, and how many configs still
// wait for the task (CALLBACK_DELIVERED: none).
type PushesOutcome struct {
	domain.CallbackOutcome
	Pushes  []PushOutcome `json:"pushes"`
	Pending int           `json:"pending,omitempty"`
}

// usesA2APushes reports whether the callback of l is its A2A push configs:
// it was submitted over A2A (or, before that was marked, has configs).
func (ad *Adapter) usesA2APushes(ctx context.Context, l *jobstore.Loaded) (bool, error) {
	if isA2ACallback(l.CallbackURL) {
		return true, nil
	}
	if legacy, err := ad.legacyPushes(ctx); err != nil || !legacy {
		return false, err
	}
	configs, err := ad.PushConfigs(ctx, l.JobID)
	return len(configs) > 0, err
}

// LegacyPushesFor is how long legacyPushes trusts what it read.
const LegacyPushesFor = time.Minute

// legacyPushes reports whether any job whose callback_url is not the A2A
// marker may have push configs waiting (an A2A job submitted by a release
// before the marker, which carries its first config's URL): read once a
// LegacyPushesFor, so that other jobs' callbacks need no query of their
// own. Jobs submitted over A2A since are marked, so once none is left
// there will be none.
func (ad *Adapter) legacyPushes(ctx context.Context) (bool, error) {
	ad.legacyMu.Lock()
	defer ad.legacyMu.Unlock()
	if now := ad.cfg.Now(); now.Before(ad.legacyUntil) {
		return ad.legacy, nil
	}
	if err := ad.pool.QueryRow(ctx, qLegacyPushConfigsExist, a2aCallback).Scan(&ad.legacy); err != nil {
		return false, fmt.Errorf("legacy push configs: %w", err)
	}
	ad.legacyUntil = ad.cfg.Now().Add(LegacyPushesFor)
	return ad.legacy, nil
}

// deliverA2APushes is one run of the callback of a job whose callback is
// its push configs: each config that has not acknowledged the job's final
// task (and that no other run holds) is sent it, at the same time, in the
// shape of its own protocol version. What each answered is recorded on
// its row and in one event, in one transaction: CALLBACK_DELIVERED once
// every config has acknowledged it, else CALLBACK_FAILED (final on the
// River job's last attempt). A config that acknowledged is never sent to
// again, whatever the others answer; the River job is retried only for
// those that did not.
func (ad *Adapter) deliverA2APushes(ctx context.Context, l *jobstore.Loaded, try callback.Try) error {
	claimed, err := ad.claimPushes(ctx, l.JobID)
	if err != nil {
		return err
	}
	outcomes := ad.postA2APushes(ctx, l, claimed)
	md := domain.Metadata{TraceID: l.TraceID, Actor: "callbacks", CausationID: try.Cause}
	var pending int
	err = ad.jobs.RetryTx(ctx, func(tx pgx.Tx) error {
		l, err := ad.jobs.Load(ctx, tx, l.JobID)
		if err != nil {
			return err
		}
		for _, o := range outcomes {
			q, args := qPushDelivered, []any{l.JobID, o.ConfigID, o.StatusCode}
			if !o.Delivered {
				q, args = qPushFailed, append(args, o.Error)
			}
			if _, err := tx.Exec(ctx, q, args...); err != nil {
				return fmt.Errorf("record push of job %s to config %s: %w", l.JobID, o.ConfigID, err)
			}
		}
		if err := tx.QueryRow(ctx, qPushesPending, l.JobID).Scan(&pending); err != nil {
			return fmt.Errorf("pending pushes of job %s: %w", l.JobID, err)
		}
		if l.CallbackAcked || (len(outcomes) == 0 && pending > 0) {
			return nil // settled, or every waiting config is another run's now
		}
		data := PushesOutcome{CallbackOutcome: domain.CallbackOutcome{Attempt: try.Attempt}, Pushes: outcomes, Pending: pending}
		// The callback's status is the first failure's, else the last 2xx.
		for _, o := range outcomes {
			switch {
			case !o.Delivered && data.Error == "":
				data.StatusCode, data.Error = o.StatusCode, o.ConfigID+": "+o.Error
			case o.Delivered && data.Error == "":
				data.StatusCode = o.StatusCode
			}
		}
		if pending == 0 {
			return ad.jobs.AppendTx(ctx, tx, l, domain.Effects{ClearTimer: true}, domain.NewEvent(domain.EventCallbackSent, data, md))
		}
		data.Final = try.Attempt >= try.Max
		return ad.jobs.AppendTx(ctx, tx, l, domain.Effects{ClearTimer: data.Final}, domain.NewEvent(domain.EventCallbackFailed, data, md))
	})
	if err != nil {
		return err
	}
	ad.tries.Add(ctx, 1, telemetry.WithAttrs(attribute.Bool("acknowledged", pending == 0)))
	switch {
	case pending == 0:
		return nil
	case len(outcomes) == 0:
		return callback.ErrHeld // another run holds them: look again after it
	}
	var failed []string
	for _, o := range outcomes {
		if !o.Delivered {
			failed = append(failed, o.ConfigID+" ("+o.Error+")")
		}
	}
	return fmt.Errorf("%d push config(s) of job %s did not take its task: %s", pending, l.JobID, strings.Join(failed, ", "))
}

// claimPushes holds, for pushHold, the push configs of a job that wait for
// its final task and no other run holds, oldest first.
func (ad *Adapter) claimPushes(ctx context.Context, jobID string) ([]server.PushConfig, error) {
	rows, err := ad.pool.Query(ctx, qClaimPushConfigs, jobID, pushHold.Seconds())
	if err != nil {
		return nil, fmt.Errorf("claim push configs of job %s: %w", jobID, err)
	}
	type claimed struct {
		server.PushConfig
		created time.Time
	}
	cs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (claimed, error) {
		var c claimed
		return c, r.Scan(&c.ID, &c.URL, &c.Token, &c.Scheme, &c.Credentials, &c.Version, &c.created)
	})
	if err != nil {
		return nil, fmt.Errorf("claim push configs of job %s: %w", jobID, err)
	}
	slices.SortFunc(cs, func(a, b claimed) int {
		return cmp.Or(a.created.Compare(b.created), strings.Compare(a.ID, b.ID))
	})
	out := make([]server.PushConfig, len(cs))
	for i, c := range cs {
		out[i] = c.PushConfig
	}
	return out, nil
}

// postA2APushes sends the ended job as an A2A task to each config at once,
// as A2A agents push: in the shape of the config's protocol version
// (server.PushBody), the config's credentials in Authorization and its
// token in X-A2A-Notification-Token. It answers what each answered, in
// the configs' order.
func (ad *Adapter) postA2APushes(ctx context.Context, l *jobstore.Loaded, configs []server.PushConfig) []PushOutcome {
	out := make([]PushOutcome, len(configs))
	var wg sync.WaitGroup
	for i, p := range configs {
		out[i].ConfigID = p.ID
		body, contentType, err := server.PushBody(asJob(l), p.Version)
		if err != nil {
			out[i].Error = err.Error()
			continue
		}
		wg.Go(func() {
			h := http.Header{}
			h.Set("Content-Type", contentType)
			if p.Token != "" {
				h.Set("X-A2A-Notification-Token", p.Token)
			}
			if p.Scheme != "" && p.Credentials != "" {
				h.Set("Authorization", p.Scheme+" "+p.Credentials)
			}
			code, err := ad.post(ctx, l, p.URL, body, h)
			out[i].StatusCode, out[i].Delivered = code, err == nil && code/100 == 2
			switch {
			case err != nil:
				out[i].Error = dispatch.Truncate(err.Error(), 256)
			case !out[i].Delivered:
				out[i].Error = "answered " + strconv.Itoa(code)
			}
		})
	}
	wg.Wait()
	return out
}

// Uses reports whether the callback of l is its A2A push configs
// (callback.A2APushes).
func (ad *Adapter) Uses(ctx context.Context, l *jobstore.Loaded) (bool, error) {
	return ad.usesA2APushes(ctx, l)
}

// Deliver is one run of the callback of a job whose callback is its push
// configs (callback.A2APushes).
func (ad *Adapter) Deliver(ctx context.Context, l *jobstore.Loaded, try callback.Try) error {
	return ad.deliverA2APushes(ctx, l, try)
}
