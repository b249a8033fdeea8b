package jobs

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/sql/queries"
)

var qVerifyDumpTable = queries.Must("VerifyDumpTable")

// VerifyReport is what Verify found. OK is true when no invariant broke.
type VerifyReport struct {
	Jobs       int
	Terminal   int
	Statuses   map[domain.JobStatus]int
	Violations []string
}

// OK reports whether every invariant held.
func (r VerifyReport) OK() bool { return len(r.Violations) == 0 }

func (r *VerifyReport) violate(format string, args ...any) {
	if len(r.Violations) < 100 {
		r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
	}
}

// settleWithin bounds how long Verify waits for the projections to catch
// up with the log.
const settleWithin = 2 * time.Minute

// Verify checks the invariants of every job in the log: each is terminal;
// each stream folds by the state machine with gap-free versions; no job
// has two successes; DEAD_LETTER comes only after max_attempts; every
// terminal job with a callback_url had its callback acknowledged; and every
// projection, caught up (within settleWithin), equals a rebuild from
// position 0 (which it then is). Run it when the service is quiet.
func Verify(ctx context.Context, store *eventstore.Store, projector *eventstore.Projector, tables map[string][]string) (VerifyReport, error) {
	rep := VerifyReport{Statuses: map[domain.JobStatus]int{}}
	var (
		cur      string
		evs      []domain.Event
		versions []int
		checkJob func()
	)
	checkJob = func() {
		if cur == "" {
			return
		}
		rep.Jobs++
		for i, v := range versions {
			if v != i+1 {
				rep.violate("%s: version %d at place %d (versions must be gap-free)", cur, v, i+1)
				break
			}
		}
		j, err := domain.FoldJob(evs)
		if err != nil {
			rep.violate("%s: %v", cur, err)
			return
		}
		rep.Statuses[j.Status]++
		if !j.Status.Terminal() {
			rep.violate("%s: not terminal (%s)", cur, j.Status)
			return
		}
		rep.Terminal++
		successes := 0
		for _, e := range evs {
			if e.Type == domain.EventSuccess {
				successes++
			}
		}
		if successes > 1 {
			rep.violate("%s: %d SUCCESS events", cur, successes)
		}
		if j.Status == domain.StatusDeadLetter && j.Spent() != j.MaxAttempts {
			rep.violate("%s: DEAD_LETTER after %d of %d attempts", cur, j.Spent(), j.MaxAttempts)
		}
		if j.CallbackURL != "" && !j.CallbackAcked {
			rep.violate("%s: callback to %s never acknowledged", cur, j.CallbackURL)
		}
	}
	err := store.ReadStreams(ctx, nil, domain.JobStream(""), func(r eventstore.Record) error {
		if r.StreamID != cur {
			checkJob()
			cur, evs, versions = r.StreamID, nil, nil
		}
		evs = append(evs, r.Event())
		versions = append(versions, r.Version)
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("verify: %w", err)
	}
	checkJob()

	// A read model is compared with its rebuild at the same place in the
	// log: a service stopped before its projector folded the last events
	// (a sweep's alert at shutdown) left it behind, which is no violation.
	sctx, cancel := context.WithTimeout(ctx, settleWithin)
	err = projector.Settle(sctx)
	cancel()
	if err != nil {
		return rep, fmt.Errorf("verify: catch up projections (within %s; a transaction left open anywhere on the server holds the log back): %w", settleWithin, err)
	}
	// Once retention has dropped part of the log, a read model is the
	// fold of its latest snapshot and the log after it.
	from := eventstore.FromStart
	if dropped, err := store.Dropped(ctx); err != nil {
		return rep, err
	} else if dropped {
		from = eventstore.FromSnapshot
	}
	for _, proj := range projector.Projections() {
		before, err := dumpTables(ctx, store, tables[proj.Name()])
		if err != nil {
			return rep, err
		}
		if _, err := projector.Rebuild(ctx, proj, from, nil); err != nil {
			return rep, err
		}
		after, err := dumpTables(ctx, store, tables[proj.Name()])
		if err != nil {
			return rep, err
		}
		if before != after {
			rep.violate("projection %s differs from its rebuild", proj.Name())
		}
	}
	return rep, nil
}

func dumpTables(ctx context.Context, store *eventstore.Store, tables []string) (string, error) {
	var b strings.Builder
	for _, t := range tables {
		rows, err := store.Pool().Query(ctx, fmt.Sprintf(qVerifyDumpTable, pgx.Identifier{t}.Sanitize()))
		if err != nil {
			return "", fmt.Errorf("verify: dump %s: %w", t, err)
		}
		list, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return "", fmt.Errorf("verify: dump %s: %w", t, err)
		}
		b.WriteString(strings.Join(list, "\n"))
	}
	return b.String(), nil
}
