package projection

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
)

// An agent's lease turns are alerts: into DOWN, and out of DOWN into
// service; out of DOWN into OFFLINE or DRAINING is no AGENT_BACK.
func TestAgentLeaseAlerts(t *testing.T) {
	rec := func(from, to domain.AgentState) eventstore.Record {
		data, err := json.Marshal(domain.AgentStateChanged{From: from, To: to})
		require.NoError(t, err)
		return eventstore.Record{Type: domain.EventAgentStateChanged, Data: data}
	}
	for _, c := range []struct {
		from, to domain.AgentState
		want     domain.EventType
	}{
		{domain.AgentHealthy, domain.AgentDown, AlertAgentDown},
		{domain.AgentSuspect, domain.AgentDown, AlertAgentDown},
		{domain.AgentDown, domain.AgentDown, ""},
		{domain.AgentDown, domain.AgentProbing, AlertAgentBack},
		{domain.AgentDown, domain.AgentHealthy, AlertAgentBack},
		{domain.AgentDown, domain.AgentOffline, ""},
		{domain.AgentDown, domain.AgentDraining, ""},
		{domain.AgentHealthy, domain.AgentSuspect, ""},
	} {
		require.Equal(t, c.want, AlertKind(rec(c.from, c.to)), "%s → %s", c.from, c.to)
	}
	require.Equal(t, domain.EventBreakerOpened, AlertKind(eventstore.Record{Type: domain.EventBreakerOpened}))
}
