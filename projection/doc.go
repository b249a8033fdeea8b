// Package projection holds Agent-Reach's read models: folds of the event
// log kept by eventstore.Projector, each rebuildable from position 0.
package projection

import "github.com/agentreach/agentreach/eventstore"

// All returns every projection Agent-Reach keeps, in the order they are
// stepped. AgentStats remembers the last 100,000 jobs' submissions.
func All() []eventstore.Projection {
	return []eventstore.Projection{Jobs{}, AgentStats{Recent: NewRecentSubmissions(100_000)}, Alerts{}}
}

// Tables names the read-model tables of each projection, for reports.
func Tables(name string) []string {
	for _, p := range All() {
		if t, ok := p.(eventstore.Tabled); ok && p.Name() == name {
			return t.Tables()
		}
	}
	return nil
}

// Tables implements eventstore.Tabled.
func (Jobs) Tables() []string { return []string{"jobs"} }

// Tables implements eventstore.Tabled: the per-day figures are the
// per-hour ones rolled up, kept with them.
func (AgentStats) Tables() []string {
	return []string{"agent_stats_minute", "agent_stats_hour", "agent_stats_day"}
}

// Tables implements eventstore.Tabled.
func (Alerts) Tables() []string { return []string{"alerts"} }
