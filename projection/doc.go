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
	switch name {
	case Jobs{}.Name():
		return []string{"jobs"}
	case AgentStats{}.Name():
		return []string{"agent_stats_minute", "agent_stats_hour"}
	case Alerts{}.Name():
		return []string{"alerts"}
	}
	return nil
}
