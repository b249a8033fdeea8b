package jobs

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/jobs/jobstore"
	"github.com/agentreach/agentreach/registry"
	"github.com/agentreach/agentreach/sql/queries"
)

func submitOne(t *testing.T, s *Service) *jobstore.Loaded {
	t.Helper()
	ctx := context.Background()
	res, err := s.Submit(ctx, domain.Submitted{Capability: "doc:parse", Payload: json.RawMessage(`{}`)}, domain.Metadata{Actor: "test"})
	require.NoError(t, err)
	l, err := s.Load(ctx, nil, res.JobID)
	require.NoError(t, err)
	return l
}

func slotsOf(t *testing.T, s *Service, agentID string) int {
	t.Helper()
	var n int
	require.NoError(t, s.pool.QueryRow(context.Background(), queries.Must("CountAgentSlots"), domain.DefaultNamespace, agentID).Scan(&n))
	return n
}

func routedEvent(l *jobstore.Loaded, agentID string) domain.Event {
	return domain.NewEvent(domain.EventRouted, domain.Routed{Attempt: l.Attempts + 1, AgentID: agentID}, domain.Metadata{Actor: "test"})
}

// recordRouted appends ROUTED as the dispatcher does: with the agent's
// slot, in a write of the unit of work.
func recordRouted(ctx context.Context, s *Service, l *jobstore.Loaded, agent *registry.Agent, routed domain.Event) error {
	attempt := l.Attempts + 1
	return s.jobs.Write(ctx, &jobstore.Write{L: l, Events: []domain.Event{routed},
		Effects: domain.Effects{Timer: &domain.Timer{Attempt: attempt, AgentID: agent.AgentID, Phase: domain.PhaseRouted, Due: time.Now().Add(time.Minute)}},
		Slot:    &jobstore.Slot{Agent: domain.AgentKey{Namespace: l.Namespace, ID: agent.AgentID}, MaxConcurrent: agent.MaxConcurrent, Attempt: attempt}})
}

// A write of ROUTED takes one of the agent's slots, is refused with
// jobstore.ErrNoSlot (and writes nothing) when every slot is taken, and
// AppendTx gives the slot back when an event ends the attempt.
func TestSlotsAreTakenAtRoutedAndGivenBack(t *testing.T) {
	t.Parallel()
	s := newService(t)
	ctx := context.Background()
	agent := &registry.Agent{AgentRegistration: domain.AgentRegistration{AgentID: "one-slot", MaxConcurrent: 1}}
	first, second := submitOne(t, s), submitOne(t, s)

	err := recordRouted(ctx, s, first, agent, routedEvent(first, agent.AgentID))
	require.NoError(t, err)
	require.Equal(t, agent.AgentID, first.SlotHolder)
	require.Equal(t, 1, slotsOf(t, s, agent.AgentID))

	err = recordRouted(ctx, s, second, agent, routedEvent(second, agent.AgentID))
	require.ErrorIs(t, err, jobstore.ErrNoSlot)
	again, err := s.Load(ctx, nil, second.JobID)
	require.NoError(t, err)
	require.Len(t, again.Records, 1, "a refused attempt writes nothing")
	require.Zero(t, again.Attempts)

	// The first attempt fails: its slot comes back in the same transaction.
	require.NoError(t, s.store.InTx(ctx, func(tx pgx.Tx) error {
		return s.jobs.AppendTx(ctx, tx, first, domain.Effects{}, domain.NewEvent(domain.EventAttemptFailed,
			domain.AttemptFailed{Attempt: 1, AgentID: agent.AgentID, Reason: "http_503"}, domain.Metadata{Actor: "test"}))
	}))
	require.Zero(t, slotsOf(t, s, agent.AgentID))
	err = recordRouted(ctx, s, again, agent, routedEvent(again, agent.AgentID))
	require.NoError(t, err)
	require.Equal(t, 1, slotsOf(t, s, agent.AgentID))

	// An agent without a limit still has its attempts counted.
	free := &registry.Agent{AgentRegistration: domain.AgentRegistration{AgentID: "unlimited"}}
	third := submitOne(t, s)
	err = recordRouted(ctx, s, third, free, routedEvent(third, free.AgentID))
	require.NoError(t, err)
	require.Equal(t, 1, slotsOf(t, s, free.AgentID))
}

// A retry timer that remembers when its attempt began waiting for a
// routable agent hands that time to the dispatch the deadline sweep
// enqueues, so the wait stays bounded across its rounds.
func TestRouteWaitIsCarriedFromTimerToDispatch(t *testing.T) {
	t.Parallel()
	s := newService(t)
	ctx := context.Background()
	l := submitOne(t, s)
	require.NoError(t, s.DropDispatchBacklog(ctx)) // only the sweep's dispatch is left to see
	since := time.Now().UTC().Add(-10 * time.Second).Truncate(time.Microsecond)
	require.NoError(t, s.store.InTx(ctx, func(tx pgx.Tx) error {
		return s.jobs.AppendTx(ctx, tx, l, domain.Effects{Timer: &domain.Timer{Attempt: 1, Phase: domain.PhaseRetry,
			Due: time.Now().Add(-time.Second), WaitingSince: since}})
	}))
	_, err := s.SweepDeadlines(ctx)
	require.NoError(t, err)

	res, err := s.client.JobList(ctx, river.NewJobListParams().Kinds(DispatchArgs{}.Kind()).States(rivertype.JobStateAvailable))
	require.NoError(t, err)
	require.Len(t, res.Jobs, 1)
	var args DispatchArgs
	require.NoError(t, json.Unmarshal(res.Jobs[0].EncodedArgs, &args))
	require.Equal(t, l.JobID, args.JobID)
	require.Equal(t, 1, args.Attempt)
	require.True(t, since.Equal(args.WaitingSince), "got %s, want %s", args.WaitingSince, since)
}
