package client

import (
	"slices"
	"sync"
	"time"
)

// Fail-over in lookup mode: what Invoke remembers of earlier calls, so
// that a hung or dead agent costs a caller once, not on every call.
//
//   - Each capability's answered calls teach how long it takes: once
//     minSamples calls answered, a candidate gets 3 × the p99 of the last
//     latencySamples answers (at least minCallTimeout) instead of the
//     CandidateTimeout, which stays the ceiling.
//   - An agent that could not be reached or did not answer in time is
//     quarantined for QuarantineFor (30 s by default): Invoke tries it
//     after every other candidate until then, without waiting for the
//     registry to see its lease lapse.

const (
	latencySamples = 64
	minSamples     = 10
	minCallTimeout = time.Second
)

// memory is Invoke's recollection of earlier calls.
type memory struct {
	mu          sync.Mutex
	latencies   map[string][]time.Duration // by capability, the last latencySamples answered calls
	quarantined map[string]time.Time       // by namespace/agent_id: until when
}

func newMemory() *memory {
	return &memory{latencies: map[string][]time.Duration{}, quarantined: map[string]time.Time{}}
}

// answered remembers an answered call's latency.
func (m *memory) answered(capability string, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := append(m.latencies[capability], d)
	if len(l) > latencySamples {
		l = l[len(l)-latencySamples:]
	}
	m.latencies[capability] = l
}

// timeout is how long a candidate of capability has to answer.
func (m *memory) timeout(capability string, ceiling time.Duration) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return callTimeout(m.latencies[capability], ceiling)
}

// callTimeout is 3 × the p99 of samples, between minCallTimeout and
// ceiling; ceiling until minSamples calls answered.
func callTimeout(samples []time.Duration, ceiling time.Duration) time.Duration {
	if len(samples) < minSamples {
		return ceiling
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	p99 := s[min(len(s)-1, (len(s)*99+99)/100-1)]
	return min(max(3*p99, minCallTimeout), ceiling)
}

// quarantine keeps agent at the back of the line until until.
func (m *memory) quarantine(namespace, agentID string, until time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.quarantined[namespace+"/"+agentID] = until
}

// order answers cands with the quarantined ones (as of now) last, each
// group in its order.
func (m *memory) order(cands []Candidate, now time.Time) []Candidate {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, until := range m.quarantined {
		if !now.Before(until) {
			delete(m.quarantined, k)
		}
	}
	return orderCandidates(cands, func(c Candidate) bool {
		_, q := m.quarantined[c.Namespace+"/"+c.AgentID]
		return q
	})
}

// orderCandidates moves the candidates quarantined says are to the end,
// keeping the order within each group.
func orderCandidates(cands []Candidate, quarantined func(Candidate) bool) []Candidate {
	out := make([]Candidate, 0, len(cands))
	var later []Candidate
	for _, c := range cands {
		if quarantined(c) {
			later = append(later, c)
		} else {
			out = append(out, c)
		}
	}
	return append(out, later...)
}
