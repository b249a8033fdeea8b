package chaos

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/pgtest"
)

// The fleet report counts successes by the mode of the agent whose they
// were and attempts not claimed, and finds what a pull agent held when it
// died that did not time out or whose job was not retried elsewhere.
func TestReadFleetReport(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(t.Context(), pgtest.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	store := eventstore.New(pool)
	pusher := &agent{id: "pusher", mode: modePush}
	puller := &agent{id: "puller", mode: modePull}
	dier := &agent{id: "dier", behaviour: pullDies, mode: modePull,
		held: []domain.HeldAttempt{{JobID: "timed-out", Attempt: 1}, {JobID: "stuck", Attempt: 2}, {JobID: "last-attempt", Attempt: 1}}}
	md := domain.Metadata{}
	routed := func(n int, a string) domain.Event {
		return domain.NewEvent(domain.EventRouted, domain.Routed{Attempt: n, AgentID: a}, md)
	}
	delivered := func(n int, a string) domain.Event {
		return domain.NewEvent(domain.EventDelivered, domain.Delivered{Attempt: n, AgentID: a, Claimed: true}, md)
	}
	success := func(n int, a string) domain.Event {
		return domain.NewEvent(domain.EventSuccess, domain.Outcome{Attempt: n, AgentID: a}, md)
	}
	timeout := func(n int, a string) domain.Event {
		return domain.NewEvent(domain.EventTimeout, domain.TimedOut{Attempt: n, AgentID: a}, md)
	}
	notClaimed := func(n int, a string) domain.Event {
		return domain.NewEvent(domain.EventAttemptFailed, domain.AttemptFailed{Attempt: n, AgentID: a, Reason: domain.ReasonNotClaimed}, md)
	}
	submitted := domain.NewEvent(domain.EventSubmitted, nil, md)
	for id, evs := range map[string][]domain.Event{
		"timed-out": {submitted, routed(1, "dier"), delivered(1, "dier"), timeout(1, "dier"), routed(2, "pusher"), success(2, "pusher")},
		"inbox":     {submitted, routed(1, "dier"), notClaimed(1, "dier"), routed(2, "puller"), delivered(2, "puller"), success(2, "puller")},
		"flaky":     {submitted, routed(1, "puller"), notClaimed(1, "puller"), routed(2, "puller"), delivered(2, "puller"), success(2, "puller")},
		// Held at its death, yet neither timed out nor retried.
		"stuck": {submitted, routed(1, "pusher"), timeout(1, "pusher"), routed(2, "dier"), delivered(2, "dier")},
		// Its last attempt: dead-lettered, not retried, and that is right.
		"last-attempt": {submitted, routed(1, "dier"), delivered(1, "dier"), timeout(1, "dier"),
			domain.NewEvent(domain.EventDeadLetter, domain.DeadLettered{Attempts: 1, Reason: "timeout"}, md)},
	} {
		_, err := store.Append(t.Context(), domain.JobStream(id), eventstore.NoStream, evs...)
		require.NoError(t, err)
	}

	f, violations, err := readFleetReport(t.Context(), store, []*agent{pusher, puller, dier})
	require.NoError(t, err)
	require.Equal(t, map[string]int{modePush: 1, modePull: 2}, f.Successes)
	require.Equal(t, 2, f.NotClaimed)
	require.Equal(t, []Death{{AgentID: "dier", Held: 3, TimedOut: 2, RetriedElsewhere: 1, NotClaimed: 1}}, f.Deaths)
	require.ElementsMatch(t, []string{
		"attempt 2 of job stuck, held by dier when it died, did not time out",
		"job stuck, held by dier when it died, was neither retried elsewhere nor dead-lettered",
	}, violations)
	require.Contains(t, f.String(), "jobs ended SUCCESS by push agents: 1, by pull agents: 2\n")
	require.Contains(t, f.String(), "pull agent dier died holding 3 claimed attempts: 2 timed out at their deadline, 1 retried elsewhere; 1 left in its inbox routed again as not claimed\n")

	_, _, err = readFleetReport(canceled(t), store, nil)
	require.Error(t, err, "a log it cannot read is an error")
}

func canceled(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx
}
