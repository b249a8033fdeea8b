// Package alertwork is alerting's River side: the notifier that turns each
// alert of the log into River jobs in the transaction that reads it, and
// the River worker that POSTs them to the namespace's alert webhooks,
// signed, with retries.
package alertwork

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentreach/agentreach/alerting"
	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/netguard"
	"github.com/agentreach/agentreach/projection"
	"github.com/agentreach/agentreach/webhook"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// MaxAge is how old an alert may be when the notifier reads it and still
// be sent: after an outage of every process, the alerts of the outage's
// start are history (the dashboard shows them), not news.
const MaxAge = 15 * time.Minute

// MaxAttempts is how many times River tries one alert at one webhook
// (backing off 1 s, 2 s, 4 s … 5 min: about 20 minutes in all).
const MaxAttempts = 10

// Config is what the sender needs from the process.
type Config struct {
	// Guard dials webhook URLs (nil: the default policy).
	Guard *netguard.Policy
	// Secrets answers the secrets that sign a namespace's callbacks; alerts
	// are signed with them too (nil: unsigned).
	Secrets func(ctx context.Context, namespace string) ([]string, error)
	// PublicURL answers the service's base URL, for the links in alerts.
	PublicURL func() string
}

// Sender turns alerts into River jobs and sends them.
type Sender struct {
	policies *alerting.Service
	logger   *slog.Logger
	cfg      Config
	http     *http.Client
	river    *river.Client[pgx.Tx]
}

// New returns a Sender of the policies' alerts; call SetClient before its
// notifier runs.
func New(policies *alerting.Service, logger *slog.Logger, cfg Config) *Sender {
	guard := cfg.Guard
	if guard == nil {
		p := netguard.DefaultPolicy()
		guard = &p
	}
	transport := &http.Transport{Proxy: nil, DialContext: guard.DialContext(&net.Dialer{Timeout: 5 * time.Second}), MaxIdleConnsPerHost: 4}
	return &Sender{policies: policies, logger: logger, cfg: cfg,
		http: &http.Client{Transport: transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// SetClient gives the notifier the River client it inserts with.
func (s *Sender) SetClient(c *river.Client[pgx.Tx]) { s.river = c }

// Notifier is the projection that sends alerts: for each alert of the log
// (projection.AlertKind) at most MaxAge old, one River job per webhook of
// its namespace that wants its kind, inserted in the transaction that
// moves the notifier's checkpoint, so each alert is sent once whichever
// process reads it. It has no read model: the projector follows it
// (eventstore.Projector.Follow), never rebuilds or snapshots it.
func (s *Sender) Notifier() eventstore.Projection { return notifier{s} }

type notifier struct{ s *Sender }

// NotifierName is the notifier's checkpoint.
const NotifierName = "alert_webhooks"

func (notifier) Name() string                        { return NotifierName }
func (notifier) Reset(context.Context, pgx.Tx) error { return nil }

func (n notifier) Apply(ctx context.Context, tx pgx.Tx, batch []eventstore.Record) error {
	type raised struct {
		r    eventstore.Record
		kind domain.EventType
	}
	var alerts []raised
	var namespaces []string
	for _, r := range batch {
		kind := projection.AlertKind(r)
		if kind == "" || time.Since(r.RecordedAt) > MaxAge {
			continue
		}
		ns, _ := projection.AlertSubject(r.StreamID)
		alerts, namespaces = append(alerts, raised{r, kind}), append(namespaces, ns)
	}
	if len(alerts) == 0 {
		return nil
	}
	policies, err := alerting.PoliciesOf(ctx, tx, namespaces)
	if err != nil || len(policies) == 0 {
		return nil
	}
	if n.s.river == nil {
		return errors.New("alert notifier: no River client yet")
	}
	base := ""
	if n.s.cfg.PublicURL != nil {
		base = n.s.cfg.PublicURL()
	}
	var params []river.InsertManyParams
	for _, a := range alerts {
		ns, subject := projection.AlertSubject(a.r.StreamID)
		for _, w := range policies[ns].Webhooks {
			if !w.Wants(a.kind) {
				continue
			}
			alert := domain.NewAlert(strconv.FormatInt(a.r.Position, 10), a.kind, ns, subjectKind(a.r.StreamID), subject, a.r.RecordedAt, a.r.Data, base)
			params = append(params, river.InsertManyParams{Args: DeliverArgs{Namespace: ns, URL: w.URL, Format: w.Format, Alert: alert}})
		}
	}
	if len(params) == 0 {
		return nil
	}
	_, err = n.s.river.InsertManyTx(ctx, tx, params)
	return err
}

// subjectKind names what an alert's stream is about.
func subjectKind(stream string) string {
	switch kind, _, _ := strings.Cut(stream, ":"); kind {
	case "registry":
		return "namespace"
	case "queue":
		return "lane"
	}
	return "agent"
}

// QueueAlerts is the River queue of alert deliveries.
const QueueAlerts = "callbacks"

// DeliverArgs is one alert for one webhook. The webhook's routing key is
// not in it (River's rows are shown in River UI): the worker reads it from
// the policy.
type DeliverArgs struct {
	Namespace string       `json:"namespace"`
	URL       string       `json:"url"`
	Format    string       `json:"format"`
	Alert     domain.Alert `json:"alert"`
}

// Kind implements river.JobArgs.
func (DeliverArgs) Kind() string { return "alert_webhook" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (DeliverArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueAlerts, MaxAttempts: MaxAttempts}
}

// AddWorkers registers the alert worker.
func (s *Sender) AddWorkers(workers *river.Workers) {
	river.AddWorker(workers, &deliverWorker{s: s})
}

type deliverWorker struct {
	river.WorkerDefaults[DeliverArgs]
	s *Sender
}

// NextRetry backs off 1 s, 2 s, 4 s … 5 min, with jitter.
func (w *deliverWorker) NextRetry(job *river.Job[DeliverArgs]) time.Time {
	d := min(time.Second<<min(job.Attempt-1, 20), 5*time.Minute)
	return time.Now().Add(time.Duration(float64(d) * (0.75 + 0.5*rand.Float64())))
}

func (w *deliverWorker) Timeout(*river.Job[DeliverArgs]) time.Duration { return 30 * time.Second }

// Work POSTs the alert to its webhook, if the namespace's policy still has
// it; anything but a 2xx is an error that River tries again.
func (w *deliverWorker) Work(ctx context.Context, job *river.Job[DeliverArgs]) error {
	a := job.Args
	p, err := w.s.policies.Policy(ctx, a.Namespace)
	if err != nil {
		return err
	}
	var hook *domain.AlertWebhook
	for i := range p.Webhooks {
		if p.Webhooks[i].URL == a.URL && p.Webhooks[i].Format == a.Format {
			hook = &p.Webhooks[i]
		}
	}
	if hook == nil {
		return nil // the webhook was removed or changed since: nobody to tell
	}
	body, err := domain.AlertBody(a.Format, a.Alert, hook.RoutingKey)
	if err != nil {
		return river.JobCancel(err)
	}
	h := http.Header{"Content-Type": {"application/json"}}
	if w.s.cfg.Secrets != nil {
		secrets, err := w.s.cfg.Secrets(ctx, a.Namespace)
		if err != nil {
			return err
		}
		var keys [][]byte
		for _, secret := range secrets {
			if key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_")); err == nil {
				keys = append(keys, key)
			}
		}
		webhook.SetHeaders(h, "alert_"+a.Alert.ID, time.Now(), body, keys...)
	}
	h.Set("X-Reach-Alert-Kind", string(a.Alert.Kind))
	code, err := w.s.post(ctx, a.URL, body, h)
	if err != nil {
		w.s.logger.WarnContext(ctx, "alert webhook not reached", "namespace", a.Namespace, "kind", a.Alert.Kind, "attempt", job.Attempt, "err", err)
		return err
	}
	if code < 200 || code > 299 {
		w.s.logger.WarnContext(ctx, "alert webhook refused", "namespace", a.Namespace, "kind", a.Alert.Kind, "attempt", job.Attempt, "status", code)
		return fmt.Errorf("alert webhook answered %d", code)
	}
	return nil
}

func (s *Sender) post(ctx context.Context, url string, body []byte, h http.Header) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header = h
	resp, err := s.http.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, nil
}
