package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/retention"
)

type retentionJSON struct {
	Namespace                  string `json:"namespace"`
	RetentionSeconds           int64  `json:"retention_seconds"`
	OwnRetentionSeconds        int64  `json:"own_retention_seconds"`
	DeploymentRetentionSeconds int64  `json:"deployment_retention_seconds"`
	PartitionSeconds           int64  `json:"partition_seconds"`
	Version                    int    `json:"version"`
}

// A namespace asks for a retention shorter than the deployment's, within
// bounds; a bad period is refused with the field named and nothing kept.
func TestRetentionPolicy(t *testing.T) {
	t.Parallel()
	svc := start(t, map[string]string{"DATABASE_URL": newDatabase(t)}, "serve", "--insecure", "--addr", "127.0.0.1:0", "--log-level", "warn")
	base := svc.m.URL()
	waitReady(t, base)

	var p retentionJSON
	getJSON(t, base+"/v1/policies/retention?namespace=default", http.StatusOK, &p)
	require.Equal(t, retentionJSON{Namespace: "default", RetentionSeconds: 30 * 86400, DeploymentRetentionSeconds: 30 * 86400, PartitionSeconds: 86400}, p)

	for _, bad := range []string{`{"namespace":"default"}`, `{"namespace":"default","retention_seconds":5}`,
		`{"namespace":"default","retention_seconds":2592001}`, `{"namespace":"default","retention_seconds":-1}`,
		`{"namespace":"*","retention_seconds":3600}`, `{"namespace":"default","retention_seconds":"1h"}`,
		`{"namespace":"Bad Name!","retention_seconds":3600}`} {
		code, body := call(t, http.MethodPut, base+"/v1/policies/retention", "", bad)
		require.Equal(t, http.StatusBadRequest, code, "%s: %s", bad, body)
		require.Contains(t, body, `"invalid_argument"`, bad)
	}
	getJSON(t, base+"/v1/policies/retention?namespace=default", http.StatusOK, &p)
	require.Zero(t, p.Version, "nothing kept of the refused changes")

	code, body := call(t, http.MethodPut, base+"/v1/policies/retention", "", `{"namespace":"default","retention_seconds":3600}`)
	require.Equal(t, http.StatusOK, code, body)
	getJSON(t, base+"/v1/policies/retention?namespace=default", http.StatusOK, &p)
	require.Equal(t, retentionJSON{Namespace: "default", RetentionSeconds: 3600, OwnRetentionSeconds: 3600,
		DeploymentRetentionSeconds: 30 * 86400, PartitionSeconds: 86400, Version: 1}, p)
	code, body = call(t, http.MethodPut, base+"/v1/policies/retention", "", `{"namespace":"default","retention_seconds":0}`)
	require.Equal(t, http.StatusOK, code, body)
	getJSON(t, base+"/v1/policies/retention?namespace=default", http.StatusOK, &p)
	require.Equal(t, int64(30*86400), p.RetentionSeconds, "0 gives the namespace's own period up")
	require.Equal(t, 2, p.Version)

	for _, args := range [][]string{{"serve", "--retention", "30s"}, {"serve", "--partition-width", "90s"}, {"dev", "--retention", "-1h"},
		{"archive", "bogus", "/tmp"}, {"archive", "bogus"}} {
		out := &syncBuffer{}
		m := NewMain()
		m.Stdout, m.Stderr = out, out
		m.Getenv = func(string) string { return "" }
		err := m.Run(t.Context(), args)
		require.ErrorIs(t, err, errUsage, "%v: %s", args, out)
	}
}

// Retention drops a partition of the log whole once every job in it is
// finished and past its namespace's period: not while a job in it is
// live, not while a job of a namespace that keeps longer is within its
// period. The jobs' events and rows go; agents' streams stay.
func TestRetentionDropsFinishedHistory(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t)
	clock := &atomicTime{}
	start0 := time.Now()
	clock.set(start0)
	archive := t.TempDir()
	svc := startTuned(t, map[string]string{"DATABASE_URL": dsn}, func(c *Config) {
		fastSweeps(c)
		c.Retention.Now = clock.now
		c.Retention.Every = 50 * time.Millisecond
		c.Retention.ArchiveDir = archive
	}, "serve", "--insecure", "--addr", "127.0.0.1:0", "--log-level", "warn")
	base := svc.m.URL()
	waitReady(t, base)
	pool, err := pgxpool.New(t.Context(), dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	agent := newConcurrencyAgent(t, 0)
	postJSON(t, base+"/v1/agents", fmt.Sprintf(`{"agent_id":"keeper","capabilities":["t.keep"],"endpoint":%q,"ttl_seconds":3600}`, agent.srv.URL+"/d"),
		http.StatusCreated, &agentJSON{})
	postJSON(t, base+"/v1/agents", fmt.Sprintf(`{"agent_id":"keeper-other","namespace":"other","capabilities":["t.keep"],"endpoint":%q,"ttl_seconds":3600}`, agent.srv.URL+"/d"),
		http.StatusCreated, &agentJSON{})
	waitState(t, base, "keeper", "HEALTHY", 20*time.Second)
	code, body := call(t, http.MethodPut, base+"/v1/policies/retention", "", `{"namespace":"default","retention_seconds":60}`)
	require.Equal(t, http.StatusOK, code, body)

	var done []string
	for range 3 {
		done = append(done, submitOK(t, base, `{"capability":"t.keep","payload":{}}`))
	}
	other := submitOK(t, base, `{"namespace":"other","capability":"t.keep","payload":{}}`)
	live := submitOK(t, base, `{"capability":"t.nobody","payload":{},"route_wait_ms":3600000}`)
	for _, id := range append([]string{other}, done...) {
		waitJob(t, base, id, func(j jobJSON) bool { return j.Status == "SUCCESS" }, 20*time.Second)
	}
	part := partitionOf(t, pool, live)

	// Two days on: the default namespace's jobs are past their minute,
	// but one of them is live and the other namespace keeps 30 days.
	sweptAt(t, pool, clock, start0.Add(48*time.Hour))
	sweptAt(t, pool, clock, start0.Add(72*time.Hour)) // the sweep at 48 h ran to its end
	require.False(t, dropping(t, pool, part), "a live job keeps its partition")
	require.Equal(t, "SUBMITTED", getJob(t, base, live).Status)

	code, body = call(t, http.MethodPost, base+"/v1/jobs/"+live+"/cancel", "", `{}`)
	require.Equal(t, http.StatusOK, code, body)
	waitTerminal(t, base, live, 20*time.Second)
	sweptAt(t, pool, clock, start0.Add(96*time.Hour))
	sweptAt(t, pool, clock, start0.Add(120*time.Hour))
	require.False(t, dropping(t, pool, part), "a namespace that keeps 30 days keeps the partition its job is in")

	// A month on, every job is past its period: the partition goes whole,
	// archived first.
	kept := map[string][]string{}
	for _, id := range append([]string{live, other}, done...) {
		kept[id] = types(jobEvents(t, base, id))
	}
	var droppedAt int64
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT max(position) FROM events WHERE stream_id = 'job:' || $1`, done[0]).Scan(&droppedAt))
	clock.set(start0.Add(31 * 24 * time.Hour))
	deadline := time.Now().Add(30 * time.Second)
	for !gone(t, pool, part) {
		require.True(t, time.Now().Before(deadline), "partition %s not dropped within 30 s", part)
		time.Sleep(50 * time.Millisecond) // poll interval while waiting on the condition
	}
	for _, id := range append([]string{live, other}, done...) {
		code, body := call(t, http.MethodGet, base+"/v1/jobs/"+id, "", "")
		require.Equal(t, http.StatusNotFound, code, body)
		code, body = call(t, http.MethodGet, base+"/v1/jobs/"+id+"/events", "", "")
		require.Equal(t, http.StatusNotFound, code, body)
		var n int
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM events WHERE stream_id = 'job:' || $1`, id).Scan(&n))
		require.Zero(t, n, "job %s's events went with the partition", id)
	}
	var agentEvents int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM events WHERE stream_id LIKE 'agent:%'`).Scan(&agentEvents))
	require.Positive(t, agentEvents, "agents' streams are kept")
	getJSON(t, base+"/v1/agents/keeper", http.StatusOK, &agentJSON{})
	code, body = call(t, http.MethodGet, base+"/v1/events?limit=10", "", "")
	require.Equal(t, http.StatusOK, code, body)
	code, body = call(t, http.MethodGet, base+fmt.Sprintf("/v1/events?after=%d", droppedAt), "", "")
	require.Equal(t, http.StatusGone, code, body)
	require.Contains(t, body, `"code":"history_dropped"`)

	checkRebuildFromSnapshot(t, pool, dsn)
	checkArchive(t, archive, part, kept)
}

// checkRebuildFromSnapshot: after a drop, a rebuild (from the snapshots,
// by default) gives back the read models the live projector holds,
// figures of the dropped jobs included (the month-old hours are rolled
// up into days by now).
func checkRebuildFromSnapshot(t *testing.T, pool *pgxpool.Pool, dsn string) {
	t.Helper()
	tables := []string{"jobs", "agent_stats_minute", "agent_stats_hour", "agent_stats_day", "alerts"}
	dump := func() map[string][]string {
		out := map[string][]string{}
		for _, table := range tables {
			rows, err := pool.Query(t.Context(), `SELECT to_jsonb(r)::text FROM `+table+` r ORDER BY 1`)
			require.NoError(t, err)
			out[table], err = pgx.CollectRows(rows, pgx.RowTo[string])
			require.NoError(t, err)
		}
		return out
	}
	// The sweep that dropped the partition may have rolled the figures up
	// before the projector folded them: the next one does.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var attempted int
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT coalesce(sum(attempted), 0) FROM agent_stats_day`).Scan(&attempted))
		if attempted >= 4 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the dropped jobs' attempts not rolled up into days within 30 s")
		time.Sleep(20 * time.Millisecond) // poll interval while waiting on the condition
	}
	before := dump()
	out := &syncBuffer{}
	rm := NewMain()
	rm.Stdout, rm.Stderr = out, out
	rm.Getenv = func(string) string { return "" }
	require.NoError(t, rm.Run(t.Context(), []string{"projections", "rebuild", "--database-url", dsn}), out.String())
	require.Contains(t, out.String(), "rebuilt agent_stats from the snapshot of ")
	require.Equal(t, before, dump(), "the read models rebuilt from their snapshots")
}

// checkArchive checks that the archive holds partition part with exactly
// the jobs' events of kept, and that an import into a fresh database gives
// them back (once, however often it runs) for a rebuild to fold.
func checkArchive(t *testing.T, archive, part string, kept map[string][]string) {
	t.Helper()
	ms, err := retention.VerifyArchive(archive)
	require.NoError(t, err)
	var m *retention.Manifest
	for i := range ms {
		if ms[i].Partition == part {
			m = &ms[i]
		}
	}
	require.NotNil(t, m, "partition %s archived: %+v", part, ms)
	want := 0
	for _, evs := range kept {
		want += len(evs)
	}
	require.Equal(t, len(kept), m.Streams)
	require.Equal(t, want, m.Events)

	fresh := newDatabase(t)
	for round := range 2 {
		out := &syncBuffer{}
		im := NewMain()
		im.Stdout, im.Stderr = out, out
		im.Getenv = func(string) string { return "" }
		require.NoError(t, im.Run(t.Context(), []string{"archive", "import", archive, "--database-url", fresh}), out.String())
		if round == 1 {
			require.Contains(t, out.String(), ", 0 new events", "a second import adds nothing")
		}
	}
	pool, err := pgxpool.New(t.Context(), fresh)
	require.NoError(t, err)
	defer pool.Close()
	for id, evs := range kept {
		rows, err := pool.Query(t.Context(), `SELECT type FROM events WHERE stream_id = 'job:' || $1 ORDER BY version`, id)
		require.NoError(t, err)
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.Equal(t, evs, got, "job %s's events, imported", id)
	}
	out := &syncBuffer{}
	rm := NewMain()
	rm.Stdout, rm.Stderr = out, out
	rm.Getenv = func(string) string { return "" }
	require.NoError(t, rm.Run(t.Context(), []string{"projections", "rebuild", "jobs", "--database-url", fresh}), out.String())
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM jobs WHERE status IN ('SUCCESS', 'CANCELLED')`).Scan(&n))
	require.Equal(t, len(kept), n, "the imported jobs, folded by a rebuild")
}

// partitionOf is the name of the partition of the log job id's events are in.
func partitionOf(t *testing.T, pool *pgxpool.Pool, id string) string {
	t.Helper()
	var name string
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT tableoid::regclass::text FROM events WHERE stream_id = 'job:' || $1 LIMIT 1`, id).Scan(&name))
	require.Regexp(t, `^events_p\d{8}_\d{6}$`, name)
	return name
}

// sweptAt sets the retention clock to at and waits for a sweep to have
// made the partitions that time needs (a sweep makes them, then drops).
func sweptAt(t *testing.T, pool *pgxpool.Pool, clock *atomicTime, at time.Time) {
	t.Helper()
	clock.set(at)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM event_partitions WHERE high > $1`, at.Add(2*24*time.Hour)).Scan(&n))
		if n > 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "no sweep at %s within 30 s", at)
		time.Sleep(20 * time.Millisecond) // poll interval while waiting on the condition
	}
}

// dropping reports whether retention began to drop partition name.
func dropping(t *testing.T, pool *pgxpool.Pool, name string) bool {
	t.Helper()
	var b bool
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT dropping_at IS NOT NULL FROM event_partitions WHERE name = $1`, name).Scan(&b))
	return b
}

// gone reports whether partition name was dropped, table and all.
func gone(t *testing.T, pool *pgxpool.Pool, name string) bool {
	t.Helper()
	var dropped, table bool
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT dropped_at IS NOT NULL, to_regclass($1) IS NOT NULL FROM event_partitions WHERE name = $1`, name).Scan(&dropped, &table))
	return dropped && !table
}
