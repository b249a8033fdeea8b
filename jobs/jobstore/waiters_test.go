package jobstore

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/pgtest"
)

// agentRow registers agent id of namespace default offering caps, as the
// registry's read model holds it (the unit of work reads its
// capabilities).
func agentRow(t *testing.T, s *Store, id string, caps ...string) {
	t.Helper()
	_, err := s.pool.Exec(context.Background(), `INSERT INTO agents (agent_id, namespace, capabilities, endpoint, state, instance_id,
		token_hash, registered_at, last_seen_at, lease_expires_at, state_changed_at, stream_version, max_concurrent)
		VALUES ($1, $2, $3, 'http://127.0.0.1:9/', 'UP', $4, '\x00', now(), now(), now() + interval '1 hour', now(), 1, 1)`,
		id, domain.DefaultNamespace, caps, uuid.New())
	require.NoError(t, err)
}

// newJobOf writes a submitted job of the capability and priority, as a
// write that creates its stream.
func newJobOf(t *testing.T, s *Store, capability string, p domain.Priority) *Loaded {
	t.Helper()
	ctx := context.Background()
	sub := domain.Submitted{Capability: capability, Payload: json.RawMessage(`{}`), Priority: p}
	require.NoError(t, domain.NormalizeSubmission(&sub, domain.DefaultMaxPayloadBytes))
	sub.JobID = uuid.Must(uuid.NewV7()).String()
	evs, _ := domain.SubmitEvents(sub, false, time.Now(), time.Hour, domain.Metadata{Actor: "test"})
	w := &Write{L: &Loaded{Job: domain.Job{Submitted: domain.Submitted{JobID: sub.JobID}}}, Events: evs}
	require.NoError(t, w.Decide())
	s.Commit(ctx, []*Write{w}, nil)
	require.NoError(t, w.Err)
	l, err := s.Load(ctx, nil, sub.JobID)
	require.NoError(t, err)
	return l
}

func takeSlot(s *Store, l *Loaded, agentID string, rank time.Time) error {
	return s.Write(context.Background(), &Write{L: l, Events: []domain.Event{routedEvent(l, agentID)},
		Effects: domain.Effects{Timer: &domain.Timer{Attempt: l.Attempts + 1, AgentID: agentID, Phase: domain.PhaseRouted, Due: time.Now().Add(time.Hour)}},
		Slot:    &Slot{Agent: domain.AgentKey{Namespace: l.Namespace, ID: agentID}, MaxConcurrent: 1, Attempt: l.Attempts + 1, Rank: rank}})
}

func endAttempt(t *testing.T, s *Store, l *Loaded) {
	t.Helper()
	ev := domain.NewEvent(domain.EventAttemptFailed, domain.AttemptFailed{Attempt: l.Attempts, AgentID: l.AgentID, Reason: "http_503"},
		domain.Metadata{Actor: "test"})
	require.NoError(t, s.Write(context.Background(), &Write{L: l, Events: []domain.Event{ev}, Effects: domain.Effects{ClearTimer: true}}))
}

// dueNow reports whether the job's timer is due.
func dueNow(t *testing.T, s *Store, id string) bool {
	t.Helper()
	var due bool
	require.NoError(t, s.pool.QueryRow(context.Background(), `SELECT due_at <= now() FROM job_timers WHERE job_id = $1`, id).Scan(&due))
	return due
}

// TestSlotGoesToTheMostUrgentWaiter: a slot given back wakes, in the
// same transaction, the waiter of the lowest rank for that agent (high
// before normal before low, oldest first), and announces it on the inbox
// channel; until that waiter takes the slot, an attempt of a higher rank
// that looks again is refused it (it cannot steal the waiter's turn),
// while the waiter takes it.
func TestSlotGoesToTheMostUrgentWaiter(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	agentRow(t, s, "one-slot", "doc:parse", "doc:sum")
	agentRow(t, s, "elsewhere", "img:crop")

	holder := newJobOf(t, s, "doc:parse", domain.PriorityNormal)
	require.NoError(t, takeSlot(s, holder, "one-slot", time.Time{}))

	now := time.Now().UTC()
	wait := func(l *Loaded, since time.Time) {
		tm := domain.WaitTimer(&l.Job, 1, true, since, now, time.Hour, time.Hour) // looks again only in an hour
		require.NoError(t, s.events.InTx(ctx, func(tx pgx.Tx) error { return s.AppendTx(ctx, tx, l, domain.Effects{Timer: &tm}) }))
	}
	low := newJobOf(t, s, "doc:parse", domain.PriorityLow)
	wait(low, now.Add(-3*time.Second))
	normal := newJobOf(t, s, "doc:sum", domain.PriorityNormal) // another capability of the same agent
	wait(normal, now.Add(-2*time.Second))
	high := newJobOf(t, s, "doc:parse", domain.PriorityHigh)
	wait(high, now.Add(-time.Second))
	other := newJobOf(t, s, "img:crop", domain.PriorityHigh) // waits for another agent
	wait(other, now.Add(-time.Minute))

	conn, err := s.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, "LISTEN "+InboxChannel)
	require.NoError(t, err)

	endAttempt(t, s, holder)
	require.True(t, dueNow(t, s, high.JobID), "the high job's turn came")
	for _, l := range []*Loaded{low, normal, other} {
		require.False(t, dueNow(t, s, l.JobID), "%s still waits", l.Capability)
	}
	nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	n, err := conn.Conn().WaitForNotification(nctx)
	cancel()
	require.NoError(t, err)
	require.Equal(t, WakeWaiters, n.Payload)

	// The low job looks again before the high job's dispatch takes its
	// turn: the slot is free, but not for it.
	require.ErrorIs(t, takeSlot(s, low, "one-slot", domain.WaitRank(domain.PriorityLow, now.Add(-3*time.Second))), ErrNoSlot)
	// A fresh high job ranks before a normal one that waited two seconds,
	// but after the high job whose turn came.
	fresh := newJobOf(t, s, "doc:parse", domain.PriorityHigh)
	require.ErrorIs(t, takeSlot(s, fresh, "one-slot", domain.WaitRank(domain.PriorityHigh, now)), ErrNoSlot)
	require.NoError(t, takeSlot(s, high, "one-slot", domain.WaitRank(domain.PriorityHigh, now.Add(-time.Second))))

	// Its attempt ends: the normal job is next, then the low one.
	endAttempt(t, s, high)
	require.True(t, dueNow(t, s, normal.JobID))
	require.False(t, dueNow(t, s, low.JobID))
	require.NoError(t, takeSlot(s, normal, "one-slot", domain.WaitRank(domain.PriorityNormal, now.Add(-2*time.Second))))
	endAttempt(t, s, normal)
	require.True(t, dueNow(t, s, low.JobID))
	require.False(t, dueNow(t, s, other.JobID), "no slot of its agent came back")
}

// waitingWrite is a write submitting a job of doc:parse at priority p
// whose first attempt waits for a slot from its submit on (since: when
// the wait began, zero for now; it looks again only in an hour).
func waitingWrite(t *testing.T, p domain.Priority, since time.Time) *Write {
	t.Helper()
	sub := domain.Submitted{Capability: "doc:parse", Payload: json.RawMessage(`{}`), Priority: p}
	require.NoError(t, domain.NormalizeSubmission(&sub, domain.DefaultMaxPayloadBytes))
	sub.JobID = uuid.Must(uuid.NewV7()).String()
	evs, _ := domain.SubmitEvents(sub, false, time.Now(), time.Hour, domain.Metadata{Actor: "test"})
	w := &Write{L: &Loaded{Job: domain.Job{Submitted: sub}}, Events: evs, WaitsAtSubmit: true}
	tm := domain.WaitTimer(&w.L.Job, 1, true, since, time.Now().UTC(), time.Hour, time.Hour)
	w.Effects.Timer = &tm
	w.L.Job = domain.Job{Submitted: domain.Submitted{JobID: sub.JobID}}
	require.NoError(t, w.Decide())
	return w
}

// wokenStore is a store whose Config.Woken collects what its commits woke.
type wokenStore struct {
	*Store
	mu    sync.Mutex
	woken []Woken
}

func newWokenStore(t *testing.T) *wokenStore {
	t.Helper()
	pool := pgtest.NewPool(t)
	ws := &wokenStore{}
	ws.Store = New(pool, eventstore.New(pool), &queued{}, Config{LostAfter: 10 * time.Second, CallbackGrace: 45 * time.Second,
		Woken: func(w []Woken) { ws.mu.Lock(); ws.woken = append(ws.woken, w...); ws.mu.Unlock() }})
	return ws
}

// take answers what was woken since the last take.
func (ws *wokenStore) take() []Woken {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	out := ws.woken
	ws.woken = nil
	return out
}

// commitAll commits ws in one transaction; none may fail.
func commitAll(t *testing.T, s *Store, ws []*Write) {
	t.Helper()
	s.Commit(context.Background(), ws, nil)
	for _, w := range ws {
		require.NoError(t, w.Err)
	}
}

// TestWaitAtSubmitTakesAFreeSlot: a submit whose job waits for a slot
// from its transaction on (the snapshot said every agent was full) is
// woken in that transaction when its agent has a slot free after all, the
// most urgent first and no more than the slots free; a slot held, or
// handed to a waiter already, wakes no one. The committing process is told
// of the woken (Config.Woken), whose timers are queued and name the agent.
func TestWaitAtSubmitTakesAFreeSlot(t *testing.T) {
	t.Parallel()
	ws := newWokenStore(t)
	s, pool := ws.Store, ws.pool
	ctx := context.Background()
	agentRow(t, s, "one-slot", "doc:parse")
	submitWaiting := func(p domain.Priority) []*Write {
		pair := []*Write{waitingWrite(t, p, time.Time{}), waitingWrite(t, p, time.Time{})}
		commitAll(t, s, pair)
		return pair
	}
	phase := func(id string) (p string, agent *string) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT phase, agent_id FROM job_timers WHERE job_id = $1`, id).Scan(&p, &agent))
		return p, agent
	}
	takeWoken := ws.take

	// The slot is free: of two low jobs, the older is woken, the other waits.
	low := submitWaiting(domain.PriorityLow)
	got := takeWoken()
	require.Len(t, got, 1, "one slot free, one waiter woken")
	require.Equal(t, low[0].jobID(), got[0].JobID)
	require.Equal(t, "one-slot", got[0].Agent)
	require.Equal(t, 1, got[0].Attempt)
	p, agent := phase(low[0].jobID())
	require.Equal(t, "queued", p, "the committing process dispatches it; should it die, the sweep does")
	require.Equal(t, "one-slot", *agent)
	p, agent = phase(low[1].jobID())
	require.Equal(t, "retry", p)
	require.True(t, agent == nil || *agent == "", "it names no agent")

	// The slot is the woken job's: high jobs submitted now wait.
	high := submitWaiting(domain.PriorityHigh)
	require.Empty(t, takeWoken(), "a slot handed to a waiter is not free")
	holder, err := s.Load(ctx, nil, low[0].jobID())
	require.NoError(t, err)
	require.NoError(t, takeSlot(s, holder, "one-slot", domain.WaitRank(domain.PriorityLow, time.Now().Add(-time.Minute))))
	submitWaiting(domain.PriorityNormal)
	require.Empty(t, takeWoken(), "a slot held is not free")

	// Its attempt ends: the slot goes to the most urgent waiter, a high job.
	endAttempt(t, s, holder)
	got = takeWoken()
	require.Len(t, got, 1)
	require.Equal(t, high[0].jobID(), got[0].JobID)
}

// TestWaitAtSubmitDealsOutFreeSlots: the free slots of several agents are
// dealt out to waiters begun at submit, one a slot: two agents with two
// and one free take three of four waiters, the most urgent, and the
// fourth waits.
func TestWaitAtSubmitDealsOutFreeSlots(t *testing.T) {
	t.Parallel()
	wst := newWokenStore(t)
	s, pool := wst.Store, wst.pool
	ctx := context.Background()
	agentRow(t, s, "two-slots", "doc:parse")
	agentRow(t, s, "one-slot", "doc:parse", "doc:sum")
	_, err := pool.Exec(ctx, `UPDATE agents SET max_concurrent = 2 WHERE agent_id = 'two-slots'`)
	require.NoError(t, err)
	var ws []*Write
	since := time.Now().UTC().Add(-time.Minute)
	for i := range 4 {
		ws = append(ws, waitingWrite(t, domain.PriorityNormal, since.Add(time.Duration(i)*time.Second)))
	}
	commitAll(t, s, ws)
	woken := wst.take()
	require.Len(t, woken, 3, "three slots free, three waiters woken")
	got, agents := map[string]bool{}, map[string]int{}
	for _, wk := range woken {
		got[wk.JobID] = true
		agents[wk.Agent]++
	}
	for _, w := range ws[:3] {
		require.True(t, got[w.jobID()], "the most urgent are woken")
	}
	require.Equal(t, map[string]int{"two-slots": 2, "one-slot": 1}, agents, "each agent as many as it has free")
}

// TestWaitForSlotTxTakesAFreeSlot: a dispatch that found every agent full
// in the registry's snapshot waits in its own transaction
// (WaitForSlotTx); should a slot be free after all by the exact count, the
// commit wakes it (due now, naming the agent), and with none free it
// waits, naming no agent.
func TestWaitForSlotTxTakesAFreeSlot(t *testing.T) {
	t.Parallel()
	ws := newWokenStore(t)
	s, pool := ws.Store, ws.pool
	ctx := context.Background()
	agentRow(t, s, "one-slot", "doc:parse")
	wait := func(l *Loaded) {
		t.Helper()
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		tm := domain.WaitTimer(&l.Job, l.Attempts+1, true, time.Time{}, time.Now().UTC(), time.Hour, time.Hour)
		require.NoError(t, s.WaitForSlotTx(ctx, tx, l, tm))
		require.NoError(t, tx.Commit(ctx))
	}
	named := func(id string) string {
		var agent *string
		require.NoError(t, pool.QueryRow(ctx, `SELECT agent_id FROM job_timers WHERE job_id = $1`, id).Scan(&agent))
		if agent == nil {
			return ""
		}
		return *agent
	}

	holder := newJobOf(t, s, "doc:parse", domain.PriorityNormal)
	require.NoError(t, takeSlot(s, holder, "one-slot", time.Now()))
	full := newJobOf(t, s, "doc:parse", domain.PriorityNormal)
	wait(full)
	require.Empty(t, named(full.JobID), "the one slot is held: it waits")
	require.False(t, dueNow(t, s, full.JobID))

	endAttempt(t, s, holder) // the slot goes to the waiter at once
	require.Equal(t, "one-slot", named(full.JobID))
	ws.take()

	// A slot free that the snapshot did not show: the wait's own commit wakes it.
	free := newJobOf(t, s, "doc:parse", domain.PriorityHigh)
	_, err := pool.Exec(ctx, `DELETE FROM job_timers WHERE job_id = $1`, full.JobID) // the woken one gave up its turn
	require.NoError(t, err)
	wait(free)
	require.Equal(t, "one-slot", named(free.JobID), "woken by its own wait's commit")
	require.True(t, dueNow(t, s, free.JobID), "due now: the deadline sweep dispatches it")
}

// A waiter handed a slot whose dispatch goes to River carries the agent
// of that slot, so its dispatch tries it first: the router's view counts
// the waiter's own claim on the slot as taken.
func TestQueuedWaiterCarriesItsAgent(t *testing.T) {
	t.Parallel()
	s, q := newStore(t)
	ctx := context.Background()
	l := newJobOf(t, s, "doc:parse", domain.PriorityLow)
	require.NoError(t, s.events.InTx(ctx, func(tx pgx.Tx) error {
		return s.AppendTx(ctx, tx, l, domain.Effects{Queue: &domain.QueuedAttempt{Attempt: 1, Agent: "one-slot",
			Capability: "doc:parse", WaitingSince: time.Now()}})
	}))
	q.mu.Lock()
	defer q.mu.Unlock()
	require.NotEmpty(t, q.jobs)
	last := q.jobs[len(q.jobs)-1]
	require.Equal(t, EnqueueDispatch, last.Kind)
	require.Equal(t, l.JobID, last.JobID)
	require.Equal(t, "one-slot", last.Agent)
}

// TestWokenWaiterRoutedInTheGivingTransaction: with Config.Route, the
// transaction that gives a slot back also routes the waiter it woke
// (ROUTED at the same transaction time, the slot taken, the routed timer
// set), and the waiter goes to Woken no more. A route that fails there (a
// stale fold) is rolled back to its savepoint alone: the slot given back
// stands, the waiter goes to Woken as without Route, and Done says so.
func TestWokenWaiterRoutedInTheGivingTransaction(t *testing.T) {
	t.Parallel()
	ws := newWokenStore(t)
	s := ws.Store
	ctx := context.Background()
	agentRow(t, s, "one-slot", "doc:parse")
	var done []bool
	stale := false
	s.cfg.Route = func(_ context.Context, woken []Woken, loaded map[string]*Loaded) []Routed {
		var out []Routed
		for _, w := range woken {
			l := loaded[w.JobID]
			require.NotNil(t, l, "read in the giving transaction")
			if stale {
				l.Version-- // another write came between: its append conflicts
			}
			out = append(out, Routed{JobID: w.JobID, Done: func(committed bool) { done = append(done, committed) },
				Write: &Write{L: l, Events: []domain.Event{routedEvent(l, w.Agent)},
					Effects: domain.Effects{Timer: &domain.Timer{Attempt: w.Attempt, AgentID: w.Agent, Phase: domain.PhaseRouted, Due: time.Now().Add(time.Hour)}},
					Slot:    &Slot{Agent: domain.AgentKey{Namespace: l.Namespace, ID: w.Agent}, MaxConcurrent: 1, Attempt: w.Attempt}}})
		}
		return out
	}
	at := func(id string, typ domain.EventType) (recorded time.Time) {
		require.NoError(t, s.pool.QueryRow(ctx, `SELECT max(recorded_at) FROM events WHERE stream_id = $1 AND type = $2`,
			domain.JobStream(id), string(typ)).Scan(&recorded))
		return recorded
	}
	slotOf := func(id string) (n int) {
		require.NoError(t, s.pool.QueryRow(ctx, `SELECT count(*) FROM agent_slots WHERE job_id = $1`, id).Scan(&n))
		return n
	}

	holder := newJobOf(t, s, "doc:parse", domain.PriorityNormal)
	require.NoError(t, takeSlot(s, holder, "one-slot", time.Time{}))
	waiter := waitingWrite(t, domain.PriorityNormal, time.Time{})
	commitAll(t, s, []*Write{waiter})
	require.Empty(t, ws.take(), "the slot is held")

	endAttempt(t, s, holder)
	require.Equal(t, []bool{true}, done)
	require.Empty(t, ws.take(), "routed already: nothing for Woken")
	require.Equal(t, at(holder.JobID, domain.EventAttemptFailed), at(waiter.jobID(), domain.EventRouted), "one transaction")
	require.Equal(t, 1, slotOf(waiter.jobID()))
	var phase string
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT phase FROM job_timers WHERE job_id = $1`, waiter.jobID()).Scan(&phase))
	require.Equal(t, "routed", phase)

	// The waiter's attempt ends in turn; the next waiter's route is stale.
	routed, err := s.Load(ctx, nil, waiter.jobID())
	require.NoError(t, err)
	next := waitingWrite(t, domain.PriorityNormal, time.Time{})
	commitAll(t, s, []*Write{next})
	stale, done = true, nil
	endAttempt(t, s, routed)
	require.Equal(t, []bool{false}, done)
	got := ws.take()
	require.Len(t, got, 1, "left to Woken")
	require.Equal(t, next.jobID(), got[0].JobID)
	require.Zero(t, slotOf(routed.JobID), "the slot given back stands")
	require.Zero(t, slotOf(next.jobID()), "the route was rolled back")
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT phase FROM job_timers WHERE job_id = $1`, next.jobID()).Scan(&phase))
	require.Equal(t, "queued", phase, "woken, for the committing process to dispatch")

	// Another transaction holds the agent's slot lock (a writer taking
	// one of its slots): the route does not wait for it, its waiter goes
	// to Woken.
	require.NoError(t, takeSlot(s, mustLoad(t, s, next.jobID()), "one-slot", time.Time{}))
	last := waitingWrite(t, domain.PriorityNormal, time.Time{})
	commitAll(t, s, []*Write{last})
	holder2 := mustLoad(t, s, next.jobID())
	lock, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = lock.Rollback(ctx) }()
	_, err = lock.Exec(ctx, qLockAgentSlots, domain.DefaultNamespace, "one-slot")
	require.NoError(t, err)
	stale, done = false, nil
	ended := make(chan struct{})
	go func() { defer close(ended); endAttempt(t, s, holder2) }()
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the slot given back waited for another transaction's slot lock")
	}
	require.Equal(t, []bool{false}, done)
	got = ws.take()
	require.Len(t, got, 1)
	require.Equal(t, last.jobID(), got[0].JobID)
}

func mustLoad(t *testing.T, s *Store, id string) *Loaded {
	t.Helper()
	l, err := s.Load(context.Background(), nil, id)
	require.NoError(t, err)
	return l
}
