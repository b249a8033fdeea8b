package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qLockLiveAgents = queries.Must("LockLiveAgents")
	qSetProbeStreak = queries.Must("SetProbeStreak")
	qRecordProbe    = queries.Must("RecordProbe")
	qSetBreakerOpen = queries.Must("SetBreakerOpen")
)

// ProbeEvery is how often a newly PROBING agent is probed: the
// registration probes at once, then every lease sweep queues one, at most
// one per instance per period (a probe is not retried on its own); the
// period doubles with the time spent PROBING (domain.ProbeInterval: 1 s,
// 2 s, 4 s … 30 s).
const ProbeEvery = time.Second

// Probe is the probe of one agent instance, queued at most once per
// Every (the first at once).
type Probe struct {
	Agent      domain.AgentKey
	InstanceID string
	Every      time.Duration
}

// ProbeQueue queues probes in a transaction of the registry's and answers
// how many it queued: a probe of an instance already queued within its
// period is dropped (riverwork.Probes).
type ProbeQueue interface {
	EnqueueProbesTx(ctx context.Context, tx pgx.Tx, probes []Probe) (int, error)
}

// ProbeInstance probes one instance of an agent: a GET of its health_url
// (or, without one, its endpoint) that must answer 2xx within
// Config.ProbeTimeout. A success moves PROBING to HEALTHY; an agent that
// moved on (another instance, deregistered, no longer probing) is left
// alone. causation is what the events record as their cause.
func (r *Registry) ProbeInstance(ctx context.Context, k domain.AgentKey, instanceID, causation string) error {
	a, err := r.load(ctx, r.pool, k, false)
	if errors.Is(err, domain.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if a.Deregistered || a.InstanceID != instanceID || a.State != domain.AgentProbing || a.ProbeOK {
		return nil // a stale probe: the agent moved on
	}
	if err := r.probe(ctx, a); err != nil {
		// A failed probe is a finished one: the agent keeps its error for
		// whoever asks why it is PROBING, a flapping agent starts its
		// streak over, and the probe's River job completes (a discarded
		// one would not hold back the next within its period, and the
		// backoff of domain.ProbeInterval would not hold).
		r.logger.DebugContext(ctx, "probe failed", "agent_id", a.AgentID, "namespace", a.Namespace, "err", err)
		msg := err.Error()
		if len(msg) > 500 {
			msg = strings.ToValidUTF8(msg[:500], "")
		}
		if _, werr := r.pool.Exec(ctx, qRecordProbe, a.Namespace, a.AgentID, msg, r.now().UTC(), a.InstanceID); werr != nil {
			return fmt.Errorf("record the failed probe of agent %s: %w", a.AgentID, werr)
		}
		return nil
	}
	if a.LastProbeError != "" {
		if _, err := r.pool.Exec(ctx, qRecordProbe, a.Namespace, a.AgentID, "", r.now().UTC(), a.InstanceID); err != nil {
			return fmt.Errorf("record the probe of agent %s: %w", a.AgentID, err)
		}
	}
	if need := domain.ProbesNeeded(a.RecentRestarts); a.ProbeStreak+1 < need {
		// A flapping agent must pass several probes in a row.
		_, err := r.pool.Exec(ctx, qSetProbeStreak, a.Namespace, a.AgentID, a.ProbeStreak+1)
		return err
	}
	md := domain.Metadata{Actor: "registry", CausationID: causation}
	_, err = r.signal(ctx, a.Key(), a.InstanceID, domain.SignalProbeSucceeded, "probe answered 2xx", md)
	return err
}

// ProbeTimeout is how long one probe may take.
func (r *Registry) ProbeTimeout() time.Duration { return r.cfg.ProbeTimeout }

func (r *Registry) probe(ctx context.Context, a *Agent) error {
	if a.Protocol == domain.ProtocolMCP && a.HealthURL == "" {
		ctx, cancel := context.WithTimeout(ctx, max(r.cfg.ProbeTimeout, 5*time.Second))
		defer cancel()
		return r.probeMCP(ctx, a)
	}
	target := a.HealthURL
	if target == "" {
		target = a.Endpoint
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.ProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-Reach-Probe", "1")
	resp, err := r.http.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("GET %s answered %d", target, resp.StatusCode)
	}
	return nil
}

// SweepReport says what one sweep changed.
type SweepReport struct {
	Changed          int
	ProbesQueued     int
	SelfPreservation []string // namespaces held back this sweep
}

// Sweep judges every lease at once: HEALTHY agents late with heartbeats
// become SUSPECT, expired leases DOWN, DOWN agents that heartbeat again
// PROBING, and every PROBING agent has a probe queued. All in one
// transaction; agents locked by a concurrent change are left for the next
// sweep. If more than Config.SelfPreservation of a namespace's live agents
// would go DOWN at once, none of them does (the likelier cause is our own
// network), and a SELF_PRESERVATION event records it once per episode.
func (r *Registry) Sweep(ctx context.Context) (SweepReport, error) {
	var rep SweepReport
	if err := r.flushHeartbeats(ctx); err != nil {
		r.logger.Warn("flush heartbeats before sweep", "err", err)
	}
	err := r.store.InTx(ctx, func(tx pgx.Tx) error {
		rep = SweepReport{}
		return r.sweepTx(ctx, tx, &rep)
	})
	if err != nil {
		return rep, fmt.Errorf("sweep: %w", err)
	}
	if rep.Changed > 0 {
		r.changed(ctx)
	}
	return rep, nil
}

// leaseChange is a state a sweep found an agent's lease calls for.
type leaseChange struct {
	a  *Agent
	to domain.AgentState
}

// sweepTx is one sweep in tx: judge every lease, apply the changes
// namespace by namespace, and queue the probes PROBING agents need.
func (r *Registry) sweepTx(ctx context.Context, tx pgx.Tx, rep *SweepReport) error {
	agents, err := lockLiveAgents(ctx, tx)
	if err != nil {
		return err
	}
	// First, so the lease changes below append after these events.
	if err := r.recordBreakers(ctx, tx, agents); err != nil {
		return err
	}
	byNS, live := r.judgeLeases(agents, r.now().UTC())
	for ns, changes := range byNS {
		if err := r.sweepNamespace(ctx, tx, ns, changes, live[ns], rep); err != nil {
			return err
		}
	}
	if err := r.finishDrains(ctx, tx, agents, rep); err != nil {
		return err
	}
	return r.queueProbes(ctx, tx, agents, rep)
}

// recordBreakers appends BREAKER_OPENED or BREAKER_CLOSED to the stream of
// every agent whose breaker (as the snapshot judges it) turned since it was
// last recorded: once per turn, whichever process sweeps.
func (r *Registry) recordBreakers(ctx context.Context, tx pgx.Tx, agents []*Agent) error {
	for _, a := range agents {
		b := r.snap.Breaker(a.Key())
		open := b.State != domain.BreakerClosed
		if open == a.breakerOpen || a.Deregistered {
			continue
		}
		typ := domain.EventBreakerClosed
		if open {
			typ = domain.EventBreakerOpened
			r.logger.WarnContext(ctx, "agent breaker opened", "agent_id", a.AgentID, "namespace", a.Namespace,
				"error_rate", b.ErrorRate, "attempts", b.Attempts)
		}
		recs, err := r.store.AppendTx(ctx, tx, domain.AgentStream(a.Key()), a.StreamVersion,
			domain.NewEvent(typ, domain.BreakerTurned{ErrorRate: b.ErrorRate, Attempts: b.Attempts}, domain.Metadata{Actor: "registry"}))
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, qSetBreakerOpen, a.Namespace, a.AgentID, open, recs[0].Version); err != nil {
			return fmt.Errorf("record breaker of agent %s: %w", a.Key(), err)
		}
		a.breakerOpen, a.StreamVersion = open, recs[0].Version
	}
	return nil
}

// finishDrains takes every agent an operator drained OFFLINE once it holds
// no attempt (no slot in agent_slots).
func (r *Registry) finishDrains(ctx context.Context, tx pgx.Tx, agents []*Agent, rep *SweepReport) error {
	var draining []*Agent
	for _, a := range agents {
		if a.State == domain.AgentDraining && a.Hold == domain.HoldDrain {
			draining = append(draining, a)
		}
	}
	if len(draining) == 0 {
		return nil
	}
	held, err := slotsHeld(ctx, tx)
	if err != nil {
		return err
	}
	for _, a := range draining {
		if held[a.Key()] > 0 {
			continue
		}
		lease, err := domain.ApplyAgentSignal(a.lease(), domain.SignalOffline, r.now().UTC())
		if err != nil {
			return err
		}
		if _, err := r.applyStateTx(ctx, tx, a, lease, domain.SignalOffline, "drained", domain.Metadata{Actor: "registry"}); err != nil {
			return err
		}
		rep.Changed++
	}
	return nil
}

// lockLiveAgents reads and locks every agent the sweep judges; agents a
// concurrent change holds are left for the next sweep.
func lockLiveAgents(ctx context.Context, tx pgx.Tx) ([]*Agent, error) {
	rows, err := tx.Query(ctx, qLockLiveAgents)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var agents []*Agent
	for rows.Next() {
		a, err := scanAgent(rows)
		if err != nil {
			return nil, err
		}
		agents = append(agents, a)
	}
	return agents, rows.Err()
}

// judgeLeases returns, by namespace, the agents whose lease calls for
// another state, and how many of each namespace's agents are live (neither
// DOWN nor DRAINING).
func (r *Registry) judgeLeases(agents []*Agent, now time.Time) (map[string][]leaseChange, map[string]int) {
	byNS := map[string][]leaseChange{}
	live := map[string]int{}
	for _, a := range agents {
		to := domain.EvaluateLease(a.lease(), now, r.cfg.Lease)
		if a.State != domain.AgentDown && a.State != domain.AgentDraining {
			live[a.Namespace]++
		}
		if to != a.State {
			byNS[a.Namespace] = append(byNS[a.Namespace], leaseChange{a, to})
		}
	}
	return byNS, live
}

// sweepNamespace applies one namespace's lease changes, but holds back
// every DOWN when too many of its live agents would lapse at once (self-
// preservation), recording the episode.
func (r *Registry) sweepNamespace(ctx context.Context, tx pgx.Tx, ns string, changes []leaseChange, live int, rep *SweepReport) error {
	lapsing := 0
	for _, c := range changes {
		if c.to == domain.AgentDown {
			lapsing++
		}
	}
	hold, err := r.selfPreservation(ctx, tx, ns, live, lapsing)
	if err != nil {
		return err
	}
	if hold {
		rep.SelfPreservation = append(rep.SelfPreservation, ns)
	}
	for _, c := range changes {
		if hold && c.to == domain.AgentDown {
			continue
		}
		if err := r.applyLeaseChange(ctx, tx, c); err != nil {
			return err
		}
		rep.Changed++
	}
	return nil
}

// applyLeaseChange records one lease change; an agent sent back to PROBING
// must prove itself again, so it gets a probe (queueProbes).
func (r *Registry) applyLeaseChange(ctx context.Context, tx pgx.Tx, c leaseChange) error {
	lease := c.a.lease()
	lease.State = c.to
	if c.to == domain.AgentProbing {
		lease.ProbeOK = false
	}
	if _, err := r.applyStateTx(ctx, tx, c.a, lease, sweepSignal(c.to), "lease sweep", domain.Metadata{Actor: "registry"}); err != nil {
		return err
	}
	if c.to == domain.AgentProbing {
		c.a.State = domain.AgentProbing
	}
	return nil
}

// queueProbes inserts a probe for every PROBING agent that has not passed
// one; River drops those already queued this period, which grows with the
// time the agent has been PROBING (domain.ProbeInterval), so an agent that
// never answers is probed less and less often, down to every 30 s.
func (r *Registry) queueProbes(ctx context.Context, tx pgx.Tx, agents []*Agent, rep *SweepReport) error {
	var probes []Probe
	now := r.now()
	for _, a := range agents {
		if a.State == domain.AgentProbing && !a.ProbeOK && !a.Pull() {
			probes = append(probes, Probe{Agent: a.Key(), InstanceID: a.InstanceID, Every: domain.ProbeInterval(now.Sub(a.StateChangedAt))})
		}
	}
	if len(probes) == 0 {
		return nil
	}
	n, err := r.probes.EnqueueProbesTx(ctx, tx, probes)
	if err != nil {
		return fmt.Errorf("queue probes: %w", err)
	}
	rep.ProbesQueued += n
	return nil
}

// sweepSignal names the signal a lease change stands for, for the event.
func sweepSignal(to domain.AgentState) domain.AgentSignal {
	switch to {
	case domain.AgentDown:
		return domain.SignalLeaseExpired
	case domain.AgentSuspect:
		return domain.SignalHeartbeatLate
	default:
		return domain.SignalHeartbeat
	}
}

// selfPreservation decides whether this sweep holds back the namespace's
// lapsing agents (domain.DecidePreservation) and records an episode's
// start and end on the namespace's registry stream, whose last event says
// whether one is open and since when; every process sweeps by it. An
// episode is logged once when it starts and once when it ends.
func (r *Registry) selfPreservation(ctx context.Context, tx pgx.Tx, ns string, live, lapsing int) (bool, error) {
	stream := domain.RegistryStream(ns)
	last, _, err := eventstore.Last(ctx, tx, stream)
	if err != nil {
		return false, err
	}
	open, err := preservationOf(last)
	if err != nil {
		return false, err
	}
	var since time.Time
	if open != nil {
		since = open.Since
	}
	now := r.now()
	md := domain.Metadata{Actor: "registry"}
	end := func(reason string) error {
		d := now.Sub(since)
		r.logger.Warn("registry self-preservation ended", "namespace", ns, "reason", reason, "lasted", d.Round(time.Second).String())
		_, err := r.store.AppendTx(ctx, tx, stream, last.Version, domain.NewEvent(domain.EventSelfPreservationEnded,
			domain.SelfPreservationEnded{Namespace: ns, Reason: reason, DurationMS: d.Milliseconds()}, md))
		return err
	}
	switch domain.DecidePreservation(live, lapsing, r.cfg.SelfPreservation, since, now, r.cfg.SelfPreservationBound) {
	case domain.PreserveBegin:
		r.logger.Warn("registry self-preservation: most agents lapsed at once; not marking them DOWN",
			"namespace", ns, "agents", live, "lapsing", lapsing, "bound", r.cfg.SelfPreservationBound.String())
		_, err := r.store.AppendTx(ctx, tx, stream, last.Version, domain.NewEvent(domain.EventSelfPreservation,
			domain.SelfPreservationEntered{Namespace: ns, Total: live, Lapsing: lapsing, Since: now}, md))
		return true, err
	case domain.PreserveHold:
		return true, nil
	case domain.PreserveExpired:
		return false, end("bound")
	}
	if !since.IsZero() {
		return false, end("recovered")
	}
	return false, nil
}

// Preservation is a namespace's open self-preservation episode.
type Preservation struct {
	Namespace string    `json:"namespace"`
	Since     time.Time `json:"since"`
	Until     time.Time `json:"until"` // when it ends at the latest
	Total     int       `json:"total"`
	Lapsing   int       `json:"lapsing"`
}

// OpenPreservation answers the namespace's open self-preservation episode,
// or nil when none is open.
func (r *Registry) OpenPreservation(ctx context.Context, ns string) (*Preservation, error) {
	last, _, err := eventstore.Last(ctx, r.pool, domain.RegistryStream(ns))
	if err != nil {
		return nil, err
	}
	p, err := preservationOf(last)
	if p != nil {
		p.Until = p.Since.Add(r.cfg.SelfPreservationBound)
	}
	return p, err
}

// preservationOf reads the open episode from the registry stream's last
// event, or nil when the last event does not open one.
func preservationOf(last eventstore.Record) (*Preservation, error) {
	if last.Type != domain.EventSelfPreservation {
		return nil, nil
	}
	var d domain.SelfPreservationEntered
	if err := json.Unmarshal(last.Data, &d); err != nil {
		return nil, fmt.Errorf("self-preservation of %s: %w", last.StreamID, err)
	}
	if d.Since.IsZero() {
		d.Since = last.RecordedAt
	}
	return &Preservation{Namespace: d.Namespace, Since: d.Since, Total: d.Total, Lapsing: d.Lapsing}, nil
}
