package jobstore

import (
	"cmp"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
)

// TestListPlansWalkAnIndex: every filter of the job list, alone and with
// the cursor, has a plan that walks an index in the page's order and stops
// at its end, so a page costs the same at ten jobs or ten million: with
// sequential scans, bitmaps and sorts priced out, the plan holds an index
// scan and no sort. (The planner may prefer a scan on a small table; what
// is pinned is that the index can serve the order.)
func TestListPlansWalkAnIndex(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	cursor := uuid.Must(uuid.NewV7()).String()
	for _, f := range []ListFilter{
		{},
		{Namespace: "default"},
		{Namespace: "default", Status: domain.StatusDeadLetter},
		{Namespace: "default", Capability: "doc:parse"},
		{Namespace: "default", AgentID: "a1"},
		{Before: cursor},
		{Namespace: "default", Before: cursor},
		{Namespace: "default", Status: domain.StatusSuccess, Before: cursor},
		{Namespace: "default", Capability: "doc:parse", Before: cursor},
		{Namespace: "default", AgentID: "a1", Before: cursor},
		{Status: domain.StatusDeadLetter}, // across namespaces: a page of each, merged
		{Capability: "doc:parse", Before: cursor},
		{AgentID: "a1"},
		{Namespace: "default", Via: "mcp"},
		{Namespace: "default", Via: "rest", Before: cursor},
		{Via: "a2a"},
	} {
		f.Limit = 50
		sql, args := listQuery(f, []string{"default", "team"})
		text := explain(t, s, "SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_sort = off", sql, args)
		require.Contains(t, text, "Index Scan", "filter %+v:\n%s", f, text)
		require.NotContains(t, text, "Seq Scan", "filter %+v:\n%s", f, text)
		sorts := 0 // across namespaces, the merge of their pages only
		if f.Namespace == "" && (f.Status != "" || f.Capability != "" || f.AgentID != "" || f.Via != "") {
			sorts = 1
		}
		require.Equal(t, sorts, strings.Count(text, "Sort  ("), "filter %+v:\n%s", f, text)
	}
}

// TestListAcrossNamespaces: a filtered list with no namespace merges each
// namespace's page, newest first, and pages on with the cursor.
func TestListAcrossNamespaces(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	var dead []string // newest first, as the list answers
	for i, ns := range []string{"default", "team", "default", "team", "default"} {
		id := uuid.Must(uuid.NewV7()).String()
		status := domain.StatusSuccess
		if i != 2 {
			status = domain.StatusDeadLetter
			dead = append([]string{id}, dead...)
		}
		_, err := s.pool.Exec(ctx, `INSERT INTO jobs (job_id, namespace, capability, status, attempts, max_attempts, priority, version,
			submitted_at, updated_at) VALUES ($1, $2, 'doc:parse', $3, 1, 3, 'normal', 1, now(), now())`, id, ns, string(status))
		require.NoError(t, err)
	}
	var got []string
	cursor := ""
	for range 3 {
		page, err := s.List(ctx, ListFilter{Status: domain.StatusDeadLetter, Limit: 2, Before: cursor})
		require.NoError(t, err)
		for _, j := range page {
			got = append(got, j.JobID)
			cursor = j.JobID
		}
	}
	require.Equal(t, dead, got, "every namespace's dead letters, newest first, page by page")
}

// TestListByFace: via filters by the face a job was submitted through
// (rest: none recorded), and each job says its face.
func TestListByFace(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	ids := map[string]string{}
	for _, via := range []string{"", "mcp", "a2a"} {
		id := uuid.Must(uuid.NewV7()).String()
		ids[cmp.Or(via, "rest")] = id
		_, err := s.pool.Exec(ctx, `INSERT INTO jobs (job_id, namespace, capability, status, attempts, max_attempts, priority, version,
			submitted_at, updated_at, via) VALUES ($1, 'default', 'doc:parse', 'SUCCESS', 1, 3, 'normal', 1, now(), now(), nullif($2, ''))`, id, via)
		require.NoError(t, err)
	}
	for _, face := range []string{"rest", "mcp", "a2a"} {
		for _, ns := range []string{"default", ""} {
			page, err := s.List(ctx, ListFilter{Namespace: ns, Via: face, Limit: 10})
			require.NoError(t, err)
			require.Len(t, page, 1, "via %s in %q", face, ns)
			require.Equal(t, ids[face], page[0].JobID)
			require.Equal(t, face, page[0].Via)
		}
	}
}

// TestSearchPlansUseAnIndex: each search can be served by an index, never
// a scan of the whole table: a trace id prefix by jobs_trace_idx, a job id
// prefix and a time range by the job id, error text by its trigram index
// (or, where pg_trgm is missing, by its required time range).
func TestSearchPlansUseAnIndex(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	since := time.Now().Add(-time.Hour)
	for _, c := range []struct {
		f     ListFilter
		index string
	}{
		{ListFilter{TraceID: "4bf92f35"}, "jobs_trace_idx"},
		{ListFilter{Namespace: "default", TraceID: "4bf92f35"}, ""},
		{ListFilter{Query: "01a2409b-fb18"}, ""},
		{ListFilter{Query: "timeout", Since: since}, ""},
		{ListFilter{Namespace: "default", Query: "timeout", Since: since}, ""},
		{ListFilter{Since: since, Until: time.Now()}, ""},
	} {
		f := c.f
		f.Limit = 50
		sql, args := listQuery(f, nil)
		text := explain(t, s, "SET LOCAL enable_seqscan = off", sql, args)
		require.NotContains(t, text, "Seq Scan", "filter %+v:\n%s", f, text)
		require.Contains(t, text, "Index", "filter %+v:\n%s", f, text)
		if c.index != "" {
			require.Contains(t, text, c.index, "filter %+v:\n%s", f, text)
		}
	}
}

func TestSearchHelpers(t *testing.T) {
	t.Parallel()
	for q, ids := range map[string]bool{"01a2": true, "01A2-409B": true, "01a": false, "timeout": false, "no_agent": false,
		"4bf92f3577b34da6a3ce929d0e0e4736": true, "4bf92f3577b34da6a3ce929d0e0e47361": false} {
		require.Equal(t, ids, SearchesIDs(q), q)
	}
	lo, hi := idRange("01A2-409b")
	require.Equal(t, "01a2409b-0000-0000-0000-000000000000", lo)
	require.Equal(t, "01a2409b-ffff-ffff-ffff-ffffffffffff", hi)
	at := time.UnixMilli(0x0123_4567_89ab)
	require.Equal(t, "01234567-89ab-0000-0000-000000000000", idAt(at))
	id := uuid.Must(uuid.NewV7())
	require.LessOrEqual(t, idAt(time.Now().Add(-time.Second)), id.String(), "a job submitted since is at or above the bound")
	require.Equal(t, `50\%\_off\\`, likeEscape(`50%_off\`))
}

// explain is the plan of sql with args, under the planner settings given.
func explain(t *testing.T, s *Store, settings, sql string, args []any) string {
	t.Helper()
	ctx := context.Background()
	var plan []string
	err := s.events.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, settings); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "EXPLAIN "+sql, args...)
		if err != nil {
			return err
		}
		plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	require.NoError(t, err)
	return strings.Join(plan, "\n")
}
