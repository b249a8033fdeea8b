package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/jobs"
)

// Report is what a chaos run found: the invariant checker's report (with
// the fleet's own checks among its violations) and what the fleet did.
type Report struct {
	jobs.VerifyReport
	Fleet FleetReport
}

// FleetReport is what the fleet did, read from the log after the run.
type FleetReport struct {
	// Agents describes the fleet: its agents by mode and behaviour.
	Agents string
	// Successes counts the jobs that ended SUCCESS, by the mode ("push",
	// "pull") of the agent whose result it was.
	Successes map[string]int
	// NotClaimed counts the attempts routed again because their pull agent
	// did not claim them within the claim timeout.
	NotClaimed int
	// Deaths are the pull agents that died holding claimed work.
	Deaths []Death
}

// Death is a pull agent that died holding claimed attempts, and what
// became of its work.
type Death struct {
	AgentID string
	// Held counts the attempts it had claimed and held when it died;
	// TimedOut those of them that timed out at their deadline, and
	// RetriedElsewhere those whose job was then routed to another agent.
	Held, TimedOut, RetriedElsewhere int
	// NotClaimed counts the attempts left in its inbox and routed again as
	// not claimed.
	NotClaimed int
}

// String is the report a line a fact, for the run's output.
func (f FleetReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fleet: %s\n", f.Agents)
	fmt.Fprintf(&b, "jobs ended SUCCESS by push agents: %d, by pull agents: %d\n", f.Successes[modePush], f.Successes[modePull])
	fmt.Fprintf(&b, "attempts not claimed in time and routed again: %d\n", f.NotClaimed)
	for _, d := range f.Deaths {
		fmt.Fprintf(&b, "pull agent %s died holding %d claimed attempts: %d timed out at their deadline, %d retried elsewhere; %d left in its inbox routed again as not claimed\n",
			d.AgentID, d.Held, d.TimedOut, d.RetriedElsewhere, d.NotClaimed)
	}
	return b.String()
}

// attemptEvent is what the fleet report reads of a job's event.
type attemptEvent struct {
	Type    domain.EventType
	Attempt int    `json:"attempt"`
	AgentID string `json:"agent_id"`
	Reason  string `json:"reason"`
}

// readFleetReport reads the job streams of the log and says what the
// fleet's agents did; violations are what the death of a pull agent
// holding work must not leave behind: an attempt it held that did not time
// out, or a job of one that was neither retried elsewhere nor dead-lettered.
func readFleetReport(ctx context.Context, store *eventstore.Store, agents []*agent) (FleetReport, []string, error) {
	f := FleetReport{Agents: describeFleet(behaviours), Successes: map[string]int{}}
	modes := map[string]string{}
	for _, a := range agents {
		modes[a.id] = a.mode
	}
	byJob := map[string][]attemptEvent{}
	err := store.ReadStreams(ctx, nil, domain.JobStreamPrefix, func(r eventstore.Record) error {
		e := attemptEvent{Type: r.Type}
		switch r.Type {
		case domain.EventRouted, domain.EventTimeout, domain.EventAttemptFailed, domain.EventSuccess, domain.EventDeadLetter:
			if err := json.Unmarshal(r.Data, &e); err != nil {
				return fmt.Errorf("event %d of %s: %w", r.Version, r.StreamID, err)
			}
			id := strings.TrimPrefix(r.StreamID, domain.JobStreamPrefix)
			byJob[id] = append(byJob[id], e)
		}
		return nil
	})
	if err != nil {
		return f, nil, err
	}
	deaths := map[string]*Death{}
	for _, a := range agents {
		if held := a.heldAtDeath(); len(held) > 0 {
			deaths[a.id] = &Death{AgentID: a.id, Held: len(held)}
		}
	}
	for _, evs := range byJob {
		for _, e := range evs {
			switch {
			case e.Type == domain.EventSuccess:
				f.Successes[modes[e.AgentID]]++
			case e.Type == domain.EventAttemptFailed && e.Reason == domain.ReasonNotClaimed:
				f.NotClaimed++
				if d := deaths[e.AgentID]; d != nil {
					d.NotClaimed++
				}
			}
		}
	}
	var violations []string
	for _, a := range agents {
		d := deaths[a.id]
		for _, h := range a.heldAtDeath() {
			timedOut, retried, dead := heldFate(byJob[h.JobID], h.Attempt, a.id)
			if timedOut {
				d.TimedOut++
			} else {
				violations = append(violations, fmt.Sprintf("attempt %d of job %s, held by %s when it died, did not time out", h.Attempt, h.JobID, a.id))
			}
			if retried {
				d.RetriedElsewhere++
			} else if !dead {
				violations = append(violations, fmt.Sprintf("job %s, held by %s when it died, was neither retried elsewhere nor dead-lettered", h.JobID, a.id))
			}
		}
		if d != nil {
			f.Deaths = append(f.Deaths, *d)
		}
	}
	slices.SortFunc(f.Deaths, func(x, y Death) int { return strings.Compare(x.AgentID, y.AgentID) })
	return f, violations, nil
}

// heldFate says what became of attempt of a job (its events evs) that
// agentID held when it died: whether it timed out, whether the job was
// then routed to another agent, and whether it was dead-lettered.
func heldFate(evs []attemptEvent, attempt int, agentID string) (timedOut, retriedElsewhere, deadLettered bool) {
	for _, e := range evs {
		switch {
		case e.Type == domain.EventTimeout && e.Attempt == attempt && e.AgentID == agentID:
			timedOut = true
		case e.Type == domain.EventRouted && e.Attempt > attempt && e.AgentID != agentID:
			retriedElsewhere = true
		case e.Type == domain.EventDeadLetter:
			deadLettered = true
		}
	}
	return timedOut, retriedElsewhere, deadLettered
}
