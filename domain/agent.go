package domain

import (
	"time"
)

// AgentState is where an agent stands in its lease and health life cycle.
// It answers one question for the router: may this agent get new work?
type AgentState string

// Agent states. The string values are stored, so they never change.
const (
	// AgentProbing is a (re)registered agent that has not yet proved it can
	// serve: it heartbeats but gets no jobs until a probe succeeds.
	AgentProbing AgentState = "PROBING"
	// AgentHealthy is a proved agent that heartbeats on time.
	AgentHealthy AgentState = "HEALTHY"
	// AgentSuspect still holds its lease but is late with heartbeats, failed
	// a health probe or tripped its breaker. It still gets work, down-weighted,
	// because a single slow heartbeat is more often the network than the agent.
	AgentSuspect AgentState = "SUSPECT"
	// AgentDown let its lease expire. It gets no work until it heartbeats
	// again, and then it must prove itself again (PROBING).
	AgentDown AgentState = "DOWN"
	// AgentDraining asked to leave: it gets no new work but keeps finishing
	// what it holds. Only an explicit Offline or a new registration ends it.
	AgentDraining AgentState = "DRAINING"
	// AgentOffline is gone. Only a new registration brings it back.
	AgentOffline AgentState = "OFFLINE"
)

// Routable reports whether the router may give new work to an agent in this
// state. SUSPECT is routable on purpose: it is down-weighted, not excluded,
// so a flapping network does not empty the pool.
func (s AgentState) Routable() bool {
	return s == AgentHealthy || s == AgentSuspect
}

// AgentSignal is a fact about an agent that may move its state. The values
// are snake_case strings so they read well in logs and events.
type AgentSignal string

// Agent signals.
const (
	// SignalRegistered is a (re)registration. From any state it leads to
	// PROBING: a re-registration is a restart and the agent must prove
	// itself again.
	SignalRegistered AgentSignal = "registered"
	// SignalProbeSucceeded is a health probe that got a good answer.
	SignalProbeSucceeded AgentSignal = "probe_succeeded"
	// SignalClaimed is a pull agent's claim: like a successful probe, it
	// proves the agent can serve (its first claim makes it HEALTHY).
	SignalClaimed AgentSignal = "claimed"
	// SignalProbeFailed is a health probe that did not.
	SignalProbeFailed AgentSignal = "probe_failed"
	// SignalHeartbeat is an on-time heartbeat: the lease is renewed.
	SignalHeartbeat AgentSignal = "heartbeat"
	// SignalHeartbeatLate says heartbeats were missed but the lease still
	// holds (more than the suspect fraction of the TTL has passed).
	SignalHeartbeatLate AgentSignal = "heartbeat_late"
	// SignalLeaseExpired says the TTL passed without a heartbeat.
	SignalLeaseExpired AgentSignal = "lease_expired"
	// SignalBreakerOpened says the agent's circuit breaker opened.
	SignalBreakerOpened AgentSignal = "breaker_opened"
	// SignalBreakerClosed says the agent's circuit breaker closed again.
	SignalBreakerClosed AgentSignal = "breaker_closed"
	// SignalOffline is an explicit shutdown (or the end of draining). From
	// any state it leads to OFFLINE.
	SignalOffline AgentSignal = "offline"
	// SignalDeregistered is a graceful goodbye: the agent drains first, so
	// work it already holds is not lost.
	SignalDeregistered AgentSignal = "deregistered"
	// SignalDrain is an operator's drain: no new work; the work it holds
	// finishes, then the agent goes OFFLINE.
	SignalDrain AgentSignal = "drain"
	// SignalConfirmDown is an operator confirming an agent down: no traffic
	// until it registers again or is brought up; heartbeats do not revive it.
	SignalConfirmDown AgentSignal = "confirm_down"
	// SignalUp is an operator bringing an agent up: its probe window ends
	// now, a confirmed down or a drain is lifted. The lease still rules: an
	// expired one sends it DOWN at the next sweep.
	SignalUp AgentSignal = "up"
)

// Operator holds an agent may be under, kept through heartbeats, its
// registrations and restarts, until an operator brings it up.
const (
	HoldNone  = ""
	HoldDrain = "drain" // DRAINING on an operator's word; OFFLINE once it holds nothing
	HoldDown  = "down"  // DOWN on an operator's word; heartbeats do not revive it
)

// ErrIllegalAgentTransition is wrapped by every error AgentTransition returns.
// Callers match it with errors.Is and usually drop the signal: most illegal
// pairs are stale facts that arrived after the agent moved on (a probe result
// for an agent that went DOWN meanwhile). The one to answer is a heartbeat on
// an OFFLINE agent: tell it to register again.
var ErrIllegalAgentTransition = NewError(ErrConflict, "illegal agent transition")

// AgentTransitionError says which signal was refused in which state. It
// unwraps to ErrIllegalAgentTransition.
type AgentTransitionError struct {
	From   AgentState
	Signal AgentSignal
}

// Error reads "<signal> in <state>: illegal agent transition".
func (e *AgentTransitionError) Error() string {
	from := string(e.From)
	if from == "" {
		from = "(unregistered)"
	}
	return string(e.Signal) + " in " + from + ": " + ErrIllegalAgentTransition.Error()
}

// Unwrap lets errors.Is find ErrIllegalAgentTransition.
func (e *AgentTransitionError) Unwrap() error { return ErrIllegalAgentTransition }

// agentTransitions is the one table of allowed moves, apart from the two
// signals that apply from every state, known or not (see AgentTransition).
// A pair is listed when it changes the state or is a routine repeat that the
// state absorbs (a heartbeat while HEALTHY, a breaker change while PROBING,
// where the agent gets no traffic anyway). A pair is missing when the state
// cannot act on the signal: a probe result for a DOWN or DRAINING agent, or
// anything but a registration for an OFFLINE one.
//
// The breaker rows only mark SUSPECT as a visible hint; the router reads the
// breaker itself, so a later heartbeat that turns the agent HEALTHY again does
// not send traffic to an open breaker.
var agentTransitions = map[AgentState]map[AgentSignal]AgentState{
	AgentProbing: {
		SignalProbeSucceeded: AgentHealthy,
		SignalClaimed:        AgentHealthy,
		SignalProbeFailed:    AgentProbing, // retried later; still no traffic
		SignalHeartbeat:      AgentProbing, // alive, but not proved yet
		SignalHeartbeatLate:  AgentProbing,
		SignalLeaseExpired:   AgentDown,
		SignalBreakerOpened:  AgentProbing,
		SignalBreakerClosed:  AgentProbing,
		SignalDeregistered:   AgentDraining,
		SignalDrain:          AgentDraining,
		SignalConfirmDown:    AgentDown,
		SignalUp:             AgentHealthy,
	},
	AgentHealthy: {
		SignalProbeSucceeded: AgentHealthy,
		SignalClaimed:        AgentHealthy,
		SignalProbeFailed:    AgentSuspect,
		SignalHeartbeat:      AgentHealthy,
		SignalHeartbeatLate:  AgentSuspect,
		SignalLeaseExpired:   AgentDown,
		SignalBreakerOpened:  AgentSuspect,
		SignalBreakerClosed:  AgentHealthy,
		SignalDeregistered:   AgentDraining,
		SignalDrain:          AgentDraining,
		SignalConfirmDown:    AgentDown,
		// No SignalUp: a HEALTHY agent is up already (409).
	},
	AgentSuspect: {
		SignalProbeSucceeded: AgentHealthy,
		SignalClaimed:        AgentSuspect, // the lease, not claims, decides SUSPECT
		SignalProbeFailed:    AgentSuspect, // the lease, not probes, decides DOWN
		SignalHeartbeat:      AgentHealthy,
		SignalHeartbeatLate:  AgentSuspect,
		SignalLeaseExpired:   AgentDown,
		SignalBreakerOpened:  AgentSuspect,
		SignalBreakerClosed:  AgentHealthy,
		SignalDeregistered:   AgentDraining,
		SignalDrain:          AgentDraining,
		SignalConfirmDown:    AgentDown,
		SignalUp:             AgentSuspect, // back in service, down-weighted until a heartbeat
	},
	AgentDown: {
		SignalHeartbeat:     AgentProbing, // back, but must prove itself again
		SignalHeartbeatLate: AgentDown,
		SignalLeaseExpired:  AgentDown,
		SignalBreakerOpened: AgentDown,
		SignalBreakerClosed: AgentDown,
		SignalDeregistered:  AgentDraining, // it may still hold work that can finish
		SignalDrain:         AgentDraining,
		SignalConfirmDown:   AgentDown,
		SignalUp:            AgentHealthy,
	},
	AgentDraining: {
		// Draining ends only by SignalOffline (or a new registration): the
		// lease keeps running so the agent can report what it holds.
		SignalHeartbeat:     AgentDraining,
		SignalHeartbeatLate: AgentDraining,
		SignalLeaseExpired:  AgentDraining,
		SignalBreakerOpened: AgentDraining,
		SignalBreakerClosed: AgentDraining,
		SignalDeregistered:  AgentDraining,
		SignalDrain:         AgentDraining,
		SignalConfirmDown:   AgentDown,
		SignalUp:            AgentHealthy,
	},
	AgentOffline: {
		SignalDeregistered: AgentOffline, // a repeated goodbye is harmless
		// Up and heartbeats only under a drain's hold (ApplyAgentSignal):
		// a drained agent stays registered, held, until an operator's up.
		SignalUp:        AgentHealthy,
		SignalHeartbeat: AgentOffline,
	},
}

// RegisteredState is the state a (re)registration leads to: PROBING, or,
// under an operator's hold, the hold's own state: a drain or a down
// survives the agent's registrations and restarts until an operator's up.
func RegisteredState(hold string) AgentState {
	switch hold {
	case HoldDown:
		return AgentDown
	case HoldDrain:
		return AgentDraining
	}
	return AgentProbing
}

// AgentTransition returns the state that signal sig leads to from state from.
// SignalRegistered leads to PROBING and SignalOffline to OFFLINE from every
// state, including the empty state of an agent never seen before; every other
// pair comes from one table. An illegal pair returns from unchanged and an
// *AgentTransitionError wrapping ErrIllegalAgentTransition.
func AgentTransition(from AgentState, sig AgentSignal) (AgentState, error) {
	switch sig {
	case SignalRegistered:
		return AgentProbing, nil
	case SignalOffline:
		return AgentOffline, nil
	}
	if to, ok := agentTransitions[from][sig]; ok {
		return to, nil
	}
	return from, &AgentTransitionError{From: from, Signal: sig}
}

// AgentLease is what the registry keeps to judge an agent's liveness.
type AgentLease struct {
	State        AgentState
	RegisteredAt time.Time
	// LastSeen is the time of the last heartbeat (or the registration).
	LastSeen time.Time
	// TTL is how long a heartbeat keeps the lease; it must be positive.
	TTL time.Duration
	// ProbeOK says a probe succeeded since the agent last entered PROBING.
	// It must be cleared whenever the agent enters PROBING, or a DOWN agent
	// that heartbeats again would skip its re-probe; ApplyAgentSignal does so.
	ProbeOK bool
	// Hold is an operator's hold (HoldDrain, HoldDown), or HoldNone.
	Hold string
}

// Expired reports whether the lease ran out at now: strictly more than TTL
// since LastSeen. Exactly TTL still holds, so a heartbeat sent at the deadline
// counts.
func (l AgentLease) Expired(now time.Time) bool {
	return now.After(l.LastSeen.Add(l.TTL))
}

// DefaultSuspectAfterFraction is the share of the TTL after the last
// heartbeat beyond which an agent is SUSPECT: half, so a single missed
// heartbeat at the usual TTL/3 cadence does not flag it, two do.
const DefaultSuspectAfterFraction = 0.5

// LeaseConfig tunes EvaluateLease.
type LeaseConfig struct {
	// SuspectAfterFraction in (0, 1]: SUSPECT once more than this share of
	// the TTL passed since the last heartbeat. Anything outside (0, 1] means
	// the default, 0.5, because zero would flag every agent at once. With 1,
	// agents go from HEALTHY straight to DOWN.
	SuspectAfterFraction float64
}

// DefaultLeaseConfig returns the lease configuration used in production.
func DefaultLeaseConfig() LeaseConfig {
	return LeaseConfig{SuspectAfterFraction: DefaultSuspectAfterFraction}
}

// EvaluateLease returns the state the lease implies at now. It is what a
// reaper calls on every tick; it only speaks for liveness:
//
//   - OFFLINE and DRAINING stay as they are: they are explicit shutdowns that
//     the clock does not override (a reaper that wants to end a dead drain
//     checks l.Expired and sends SignalOffline itself).
//   - An expired lease (now > LastSeen+TTL) is DOWN, whatever the state.
//   - DOWN with a live lease means it heartbeated again: PROBING, since a
//     returning agent must prove itself before it gets work.
//   - PROBING without ProbeOK stays PROBING.
//   - Otherwise (HEALTHY, SUSPECT, or PROBING with ProbeOK) it is HEALTHY
//     while now-LastSeen <= SuspectAfterFraction*TTL and SUSPECT after that.
//
// So a SUSPECT that came from a breaker or a failed probe reads HEALTHY here
// as long as heartbeats are on time; the router checks the breaker on its
// own, so nothing is routed to an open breaker because of that. A LastSeen in
// the future (clock skew) counts as just seen.
func EvaluateLease(l AgentLease, now time.Time, cfg LeaseConfig) AgentState {
	switch {
	case l.State == AgentOffline, l.State == AgentDraining:
		return l.State
	case l.Hold == HoldDown:
		return AgentDown // confirmed down: only a registration or up revives it
	}
	if l.Expired(now) {
		return AgentDown
	}
	switch {
	case l.State == AgentDown:
		return AgentProbing
	case l.State == AgentProbing && !l.ProbeOK:
		return AgentProbing
	}
	frac := cfg.SuspectAfterFraction
	if !(frac > 0 && frac <= 1) { // also catches NaN
		frac = DefaultSuspectAfterFraction
	}
	if now.Sub(l.LastSeen) > time.Duration(float64(l.TTL)*frac) {
		return AgentSuspect
	}
	return AgentHealthy
}

// ApplyAgentSignal moves the lease by sig observed at at, keeping its
// bookkeeping consistent with the state: a registration resets RegisteredAt,
// LastSeen and ProbeOK; a heartbeat renews LastSeen; a successful probe sets
// ProbeOK; entering PROBING from another state clears ProbeOK. An illegal pair
// returns the lease unchanged with the AgentTransition error.
func ApplyAgentSignal(l AgentLease, sig AgentSignal, at time.Time) (AgentLease, error) {
	to, err := AgentTransition(l.State, sig)
	if err == nil && l.State == AgentOffline && (sig == SignalUp || sig == SignalHeartbeat) && l.Hold != HoldDrain {
		err = &AgentTransitionError{From: l.State, Signal: sig} // OFFLINE and not drained: it must register again
	}
	if err != nil {
		return l, err
	}
	switch sig {
	case SignalRegistered:
		l.RegisteredAt, l.LastSeen, l.ProbeOK = at, at, false
		to = RegisteredState(l.Hold)
	case SignalHeartbeat:
		l.LastSeen = at
		if l.Hold != HoldNone {
			return l, nil // alive, but held (down, or drained) until brought up
		}
	case SignalProbeSucceeded, SignalClaimed:
		l.ProbeOK = true
	case SignalDrain:
		l.Hold = HoldDrain
	case SignalConfirmDown:
		l.Hold = HoldDown
	case SignalUp:
		l.ProbeOK, l.Hold = true, HoldNone
	}
	if to == AgentProbing && l.State != AgentProbing {
		l.ProbeOK = false
	}
	l.State = to
	return l, nil
}

// DefaultSelfPreservationThreshold is the share of lapsing leases above which
// the registry stops expiring them.
const DefaultSelfPreservationThreshold = 0.5

// SelfPreservation reports whether the registry should hold off marking
// lapsing agents DOWN: when more than threshold of all agents lapse at once,
// the likelier cause is the registry's own network or a stalled database, and
// emptying the pool would turn a partial outage into a total one (Eureka's
// self-preservation). It needs at least two agents, since a lone agent
// lapsing is just that agent. A threshold that is not positive means the
// default, 0.5; above 1 it never triggers.
func SelfPreservation(total, lapsing int, threshold float64) bool {
	if !(threshold > 0) { // also catches NaN
		threshold = DefaultSelfPreservationThreshold
	}
	return total >= 2 && float64(lapsing) > threshold*float64(total)
}

// DefaultPreservationBound is how long one self-preservation episode may
// hold lapsed agents back: past it they are judged as any lapsed agent.
const DefaultPreservationBound = 5 * time.Minute

// Preservation is what one lease sweep does about a namespace's lapsing
// agents.
type Preservation int

const (
	// PreserveNone: not enough agents lapse at once; an open episode ends.
	PreserveNone Preservation = iota
	// PreserveBegin: an episode begins; the lapsing agents are held back.
	PreserveBegin
	// PreserveHold: the episode goes on; the agents are still held back.
	PreserveHold
	// PreserveExpired: the episode outlived its bound; it ends and the
	// lapsing agents go DOWN as they would have.
	PreserveExpired
)

// DecidePreservation decides a sweep's Preservation from how many of total
// agents lapse, the threshold (as SelfPreservation), when the namespace's
// open episode began (zero: none is open), now and the bound of an episode
// (not positive: DefaultPreservationBound).
func DecidePreservation(total, lapsing int, threshold float64, since, now time.Time, bound time.Duration) Preservation {
	if lapsing == 0 || !SelfPreservation(total, lapsing, threshold) {
		return PreserveNone
	}
	if bound <= 0 {
		bound = DefaultPreservationBound
	}
	switch {
	case since.IsZero():
		return PreserveBegin
	case now.Sub(since) < bound:
		return PreserveHold
	}
	return PreserveExpired
}

// MaxProbeInterval is the longest wait between two probes of a PROBING
// agent.
const MaxProbeInterval = 30 * time.Second

// ProbeInterval is how often an agent that has been PROBING for inProbing
// is probed: every second at first, then the power of two seconds at most
// its time in PROBING, up to MaxProbeInterval (1 s, 2 s, 4 s … 30 s), so an
// agent that never answers is not probed every second forever.
func ProbeInterval(inProbing time.Duration) time.Duration {
	d := time.Second
	for d*2 <= inProbing && d < MaxProbeInterval {
		d *= 2
	}
	return min(d, MaxProbeInterval)
}
