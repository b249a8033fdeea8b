package projection

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qTruncateAlerts = queries.Must("TruncateAlerts")
	qInsertAlerts   = queries.Must("InsertAlerts")
)

// AlertKinds are the events the alerts read model keeps: an agent's health
// and breaker turns, a namespace's self-preservation episodes, a lane's
// watermark crossings, and an agent's lease going DOWN and back.
var AlertKinds = domain.AlertKinds

// AlertAgentDown and AlertAgentBack are the alerts of an agent's lease:
// an AGENT_STATE_CHANGED to DOWN (its lease lapsed, or an operator
// confirmed it down), and the next one out of DOWN into service (PROBING,
// HEALTHY or SUSPECT; not OFFLINE or DRAINING). They are alert kinds,
// not event types: the alert's position names the AGENT_STATE_CHANGED.
const (
	AlertAgentDown = domain.AlertAgentDown
	AlertAgentBack = domain.AlertAgentBack
)

// AlertKind is the alert r raises ("" for none).
func AlertKind(r eventstore.Record) domain.EventType {
	if alerting[r.Type] {
		return r.Type
	}
	if r.Type != domain.EventAgentStateChanged {
		return ""
	}
	var d domain.AgentStateChanged
	if json.Unmarshal(r.Data, &d) != nil {
		return ""
	}
	switch {
	case d.To == domain.AgentDown && d.From != domain.AgentDown:
		return AlertAgentDown
	case d.From == domain.AgentDown && (d.To == domain.AgentProbing || d.To == domain.AgentHealthy || d.To == domain.AgentSuspect):
		return AlertAgentBack // out of DOWN into service (not OFFLINE or DRAINING)
	}
	return ""
}

// Alerts keeps the alerts table: one row per alerting event, with its
// namespace and subject (the agent, the namespace, or the lane) read from
// its stream, so the dashboard's alerts view is one indexed read.
type Alerts struct{}

// Name implements eventstore.Projection.
func (Alerts) Name() string { return "alerts" }

// Reset implements eventstore.Projection.
func (Alerts) Reset(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, qTruncateAlerts)
	return err
}

var alerting = func() map[domain.EventType]bool {
	m := map[domain.EventType]bool{}
	for _, k := range AlertKinds {
		m[k] = true
	}
	return m
}()

// Apply implements eventstore.Projection: one insert per batch.
func (Alerts) Apply(ctx context.Context, tx pgx.Tx, batch []eventstore.Record) error {
	var positions []int64
	var namespaces, kinds, subjects, streams []string
	var data [][]byte
	var at []time.Time
	for _, r := range batch {
		kind := AlertKind(r)
		if kind == "" {
			continue
		}
		ns, subject := AlertSubject(r.StreamID)
		positions = append(positions, r.Position)
		namespaces, kinds, subjects, streams = append(namespaces, ns), append(kinds, string(kind)), append(subjects, subject), append(streams, r.StreamID)
		data, at = append(data, r.Data), append(at, r.RecordedAt)
	}
	if len(positions) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, qInsertAlerts, positions, namespaces, kinds, subjects, streams, data, at)
	return err
}

// AlertSubject reads an alert's namespace and subject from its stream:
// agent:<ns>/<id> is the agent, registry:<ns> the namespace, queue:<ns>/<lane>
// the lane. An agent stream from before namespaced ids (agent:<id>) is of
// the default namespace.
func AlertSubject(stream string) (namespace, subject string) {
	kind, rest, _ := strings.Cut(stream, ":")
	switch kind {
	case "registry":
		return rest, rest
	case "agent", "queue":
		if ns, id, ok := strings.Cut(rest, "/"); ok {
			return ns, id
		}
		return domain.DefaultNamespace, rest
	}
	return domain.DefaultNamespace, stream
}
