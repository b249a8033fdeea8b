package projection_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/pgtest"
	"github.com/agentreach/agentreach/projection"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// appendJob writes a plausible job life of the given shape.
func appendJob(t *testing.T, s *eventstore.Store, shape int) string {
	t.Helper()
	id := uuid.Must(uuid.NewV7()).String()
	md := domain.Metadata{TraceID: "trace-" + id[:8], Actor: "test"}
	evs := []domain.Event{domain.NewEvent(domain.EventSubmitted, domain.Submitted{
		JobID: id, Namespace: "default", Capability: fmt.Sprintf("cap.%d", shape%3),
		Payload: json.RawMessage(`{}`), Priority: domain.PriorityNormal, MaxAttempts: 3, TimeoutMS: 1000,
	}, md)}
	routed := func(n int, agent string) domain.Event {
		return domain.NewEvent(domain.EventRouted, domain.Routed{Attempt: n, AgentID: agent}, md)
	}
	switch shape % 4 {
	case 0: // inline success
		evs = append(evs, routed(1, "a1"),
			domain.NewEvent(domain.EventDelivered, domain.Delivered{Attempt: 1, AgentID: "a1"}, md),
			domain.NewEvent(domain.EventSuccess, domain.Outcome{Attempt: 1, AgentID: "a1", Result: json.RawMessage(`1`)}, md))
	case 1: // retried then business failure
		evs = append(evs, routed(1, "a1"),
			domain.NewEvent(domain.EventAttemptFailed, domain.AttemptFailed{Attempt: 1, AgentID: "a1", Reason: "http_503"}, md),
			routed(2, "a2"),
			domain.NewEvent(domain.EventDelivered, domain.Delivered{Attempt: 2, AgentID: "a2"}, md),
			domain.NewEvent(domain.EventFailed, domain.Outcome{Attempt: 2, AgentID: "a2", BizCode: "bad_input"}, md))
	case 2: // timeout then dead letter
		evs = append(evs, routed(1, "a3"),
			domain.NewEvent(domain.EventDelivered, domain.Delivered{Attempt: 1, AgentID: "a3"}, md),
			domain.NewEvent(domain.EventTimeout, domain.TimedOut{Attempt: 1, AgentID: "a3"}, md),
			domain.NewEvent(domain.EventDeadLetter, domain.DeadLettered{Attempts: 1, Reason: "timeout"}, md))
	case 3: // still in flight
		evs = append(evs, routed(1, "a1"))
	}
	// Split the life over two transactions so batches cut through jobs.
	half := len(evs) / 2
	_, err := s.Append(context.Background(), domain.JobStream(id), eventstore.NoStream, evs[:half]...)
	require.NoError(t, err)
	_, err = s.Append(context.Background(), domain.JobStream(id), half, evs[half:]...)
	require.NoError(t, err)
	return id
}

type jobsRow struct {
	ID, Namespace, Capability, Status, Agent, BizCode, Error, Trace string
	Attempts, Version                                               int
	Finished                                                        bool
}

func dumpJobs(t *testing.T, s *eventstore.Store) []jobsRow {
	t.Helper()
	rows, err := s.Pool().Query(context.Background(), `SELECT job_id::text, namespace, capability, status,
		coalesce(agent_id, ''), coalesce(biz_code, ''), coalesce(error, ''), coalesce(trace_id, ''),
		attempts, version, finished_at IS NOT NULL FROM jobs ORDER BY job_id`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (jobsRow, error) {
		var j jobsRow
		err := r.Scan(&j.ID, &j.Namespace, &j.Capability, &j.Status, &j.Agent, &j.BizCode, &j.Error, &j.Trace, &j.Attempts, &j.Version, &j.Finished)
		return j, err
	})
	require.NoError(t, err)
	return out
}

func waitCaughtUp(t *testing.T, p *eventstore.Projector) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		lag, err := p.Lag(context.Background())
		require.NoError(t, err)
		if lag["jobs"] == 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "projector still %d events behind", lag["jobs"])
		time.Sleep(10 * time.Millisecond) // poll interval while waiting on the condition
	}
}

// TestJobsProjectionLiveAndRebuild keeps the projection live (woken by
// NOTIFY, with polling set far away), then rebuilds it from position 0 and
// compares it row for row with the live one.
func TestJobsProjectionLiveAndRebuild(t *testing.T) {
	t.Parallel()
	s := eventstore.New(pgtest.NewPool(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := eventstore.NewProjector(s, quiet(), projection.Jobs{})
	p.BatchSize = 7
	p.PollInterval = time.Hour // only NOTIFY can wake it in time
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	go s.RunNotifier(ctx, quiet())

	ids := map[string]int{}
	for i := range 40 {
		ids[appendJob(t, s, i)] = i
	}
	waitCaughtUp(t, p)
	live := dumpJobs(t, s)
	require.Len(t, live, 40)
	want := map[int]string{0: "SUCCESS", 1: "FAILED", 2: "DEAD_LETTER", 3: "SUBMITTED"}
	for _, r := range live {
		shape := ids[r.ID]
		require.Equal(t, want[shape%4], r.Status, "job %s shape %d", r.ID, shape)
		require.Equal(t, r.Status != "SUBMITTED", r.Finished)
		require.Equal(t, "trace-"+r.ID[:8], r.Trace)
	}

	cancel()
	<-done
	var progressCalls int
	n, err := p.Rebuild(context.Background(), projection.Jobs{}, eventstore.FromStart, func(done, total int64) {
		progressCalls++
		require.LessOrEqual(t, done, total)
	})
	require.NoError(t, err)
	events, err := eventstore.CountEvents(context.Background(), s.Pool())
	require.NoError(t, err)
	require.Equal(t, events, n.Events)
	require.Nil(t, n.Snapshot)
	require.Greater(t, progressCalls, 1)
	require.Equal(t, live, dumpJobs(t, s))
}

// dumpTable is every row of table as text, in a stable order.
func dumpTable(t *testing.T, s *eventstore.Store, table string) []string {
	t.Helper()
	rows, err := s.Pool().Query(context.Background(), `SELECT to_jsonb(r)::text FROM `+pgx.Identifier{table}.Sanitize()+` r ORDER BY 1`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

// A rebuild from a snapshot refills each read model from it and folds only
// the log after it, and gives back what the live projector holds, even
// when the read model was damaged meanwhile.
func TestRebuildFromSnapshot(t *testing.T) {
	t.Parallel()
	s := eventstore.New(pgtest.NewPool(t))
	ctx := context.Background()
	p := eventstore.NewProjector(s, quiet(), projection.All()...)
	for i := range 12 {
		appendJob(t, s, i)
	}
	require.NoError(t, p.Settle(ctx))
	snaps := map[string]eventstore.Snapshot{}
	for _, proj := range p.Projections() {
		snap, err := p.TakeSnapshot(ctx, proj)
		require.NoError(t, err)
		snaps[proj.Name()] = snap
	}
	require.Equal(t, int64(12), snaps["jobs"].Rows)
	before, err := eventstore.CountEvents(ctx, s.Pool())
	require.NoError(t, err)
	for i := range 8 {
		appendJob(t, s, i)
	}
	require.NoError(t, p.Settle(ctx))
	after, err := eventstore.CountEvents(ctx, s.Pool())
	require.NoError(t, err)

	live := map[string][]string{}
	for _, proj := range p.Projections() {
		for _, table := range projection.Tables(proj.Name()) {
			live[table] = dumpTable(t, s, table)
		}
	}
	require.Equal(t, 20, len(live["jobs"]))
	require.NotEmpty(t, live["agent_stats_hour"])
	_, err = s.Pool().Exec(ctx, `UPDATE jobs SET status = 'DAMAGED'`)
	require.NoError(t, err)

	for _, proj := range p.Projections() {
		done, err := p.Rebuild(ctx, proj, eventstore.FromSnapshot, nil)
		require.NoError(t, err)
		require.NotNil(t, done.Snapshot, proj.Name())
		require.Equal(t, snaps[proj.Name()].Events, done.Snapshot.Events)
		require.Equal(t, after-before, done.Events, "%s folds only the log after its snapshot", proj.Name())
		for _, table := range projection.Tables(proj.Name()) {
			require.Equal(t, live[table], dumpTable(t, s, table), "%s after a rebuild from its snapshot", table)
		}
	}
	// From the start it folds the whole log to the same read models.
	done, err := p.Rebuild(ctx, projection.Jobs{}, eventstore.FromStart, nil)
	require.NoError(t, err)
	require.Nil(t, done.Snapshot)
	require.Equal(t, after, done.Events)
	require.Equal(t, live["jobs"], dumpTable(t, s, "jobs"))
}

// Each read model's snapshot table has its columns, in its order: a
// migration that adds a column to one adds it to the other.
func TestSnapshotTablesMatchTheirReadModels(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	for _, proj := range projection.All() {
		tabled, ok := proj.(eventstore.Tabled)
		require.True(t, ok, "%s has snapshot tables", proj.Name())
		for _, table := range tabled.Tables() {
			cols, err := eventstore.Columns(context.Background(), pool, table)
			require.NoError(t, err)
			snap, err := eventstore.Columns(context.Background(), pool, eventstore.SnapshotTable(table))
			require.NoError(t, err)
			require.NotEmpty(t, cols)
			require.Equal(t, cols, snap, table)
		}
	}
}

// TestJobsProjectionFoldsVersionsThatComeLate: a log written before
// appends onto a younger transaction's event were refused can hold a
// job's ROUTED (an older transaction) before its SUBMITTED; the
// projection folds the job in version order all the same, live and
// rebuilt, instead of stopping there.
func TestJobsProjectionFoldsVersionsThatComeLate(t *testing.T) {
	t.Parallel()
	s := eventstore.New(pgtest.NewPool(t))
	ctx := context.Background()
	p := eventstore.NewProjector(s, quiet(), projection.Jobs{})
	before := appendJob(t, s, 0)

	id := uuid.Must(uuid.NewV7()).String()
	md := domain.Metadata{TraceID: "trace-late", Actor: "test"}
	older, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	defer older.Rollback(ctx) //nolint:errcheck // a failed check leaves it open
	_, err = older.Exec(ctx, `SELECT pg_current_xact_id()`)
	require.NoError(t, err)
	_, err = s.Append(ctx, domain.JobStream(id), eventstore.NoStream, domain.NewEvent(domain.EventSubmitted, domain.Submitted{
		JobID: id, Namespace: "default", Capability: "cap.late", Payload: json.RawMessage(`{}`), Priority: domain.PriorityNormal,
		MaxAttempts: 3, TimeoutMS: 1000,
	}, md))
	require.NoError(t, err)
	routed := domain.NewEvent(domain.EventRouted, domain.Routed{Attempt: 1, AgentID: "a1"}, md)
	meta, err := json.Marshal(routed.Metadata)
	require.NoError(t, err)
	_, err = older.Exec(ctx, `INSERT INTO events (stream_id, version, type, data, metadata, stream_at)
		VALUES ($1, 2, $2, $3, $4, events_stream_at($1))`, domain.JobStream(id), string(routed.Type), string(routed.Data), string(meta))
	require.NoError(t, err, "written as such a log was, past the append's check")
	require.NoError(t, older.Commit(ctx))
	after := appendJob(t, s, 1)

	rows, err := s.Pool().Query(ctx, `SELECT version FROM events WHERE stream_id = $1 ORDER BY tx_id, position`, domain.JobStream(id))
	require.NoError(t, err)
	order, err := pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	require.Equal(t, []int{2, 1}, order, "the log's order has ROUTED first")

	require.NoError(t, p.Settle(ctx))
	live := dumpJobs(t, s)
	byID := map[string]jobsRow{}
	for _, r := range live {
		byID[r.ID] = r
	}
	require.Len(t, byID, 3, "the jobs before and after it folded too")
	require.Equal(t, jobsRow{ID: id, Namespace: "default", Capability: "cap.late", Status: "SUBMITTED", Agent: "a1", Trace: "trace-late",
		Attempts: 1, Version: 2}, byID[id], "routed to a1")
	require.Equal(t, "SUCCESS", byID[before].Status)
	require.Equal(t, "FAILED", byID[after].Status)

	_, err = p.Rebuild(ctx, projection.Jobs{}, eventstore.FromStart, nil)
	require.NoError(t, err)
	require.Equal(t, live, dumpJobs(t, s), "the rebuild equals the live read model")
}
