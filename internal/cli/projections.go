package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/projection"
	"github.com/agentreach/agentreach/sql/queries"
)

const projectionsHelp = `agentreach projections rebuild [NAME...] [--from-start] --database-url URL [--json]
agentreach projections snapshot [NAME...] --database-url URL [--json]

rebuild refills read models: every projection, or the ones named (%s).
It starts from each one's latest snapshot and folds the log after it;
with --from-start (or when there is no snapshot) it empties the read
model and folds the log from position 0. Once retention has dropped part
of the log, a rebuild from the start cannot give back what the dropped
jobs added to the agents' figures: rebuild from the snapshot then.
Shows progress, then the events folded, the rows of each read model and
the time taken. Readers see the read model refill while it runs; the log
itself is only read.

snapshot copies read models, with the place in the log they stand at,
into their snapshot tables now (the service's leader also takes them, on
a schedule and before retention drops part of the log).

It acts on the database the service uses, named by --database-url or
DATABASE_URL (` + "`agentreach dev`" + ` prints it as Database); it never guesses one.

Flags:
`

var qHarnessCountRows = queries.Must("HarnessCountRows")

// ProjectionNames names every projection, in the order they are rebuilt.
func ProjectionNames() []string {
	var names []string
	for _, p := range projection.All() {
		names = append(names, p.Name())
	}
	return names
}

// ParseProjections parses `agentreach projections rebuild|snapshot
// [NAME...]` with fs, the flags before or after the names, and returns
// the command and the projections named (every one when none is).
// Another subcommand, or a name no projection has, is an ErrUsage.
func ParseProjections(fs *flag.FlagSet, args []string) (string, []eventstore.Projection, error) {
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), projectionsHelp, strings.Join(ProjectionNames(), ", "))
		fs.PrintDefaults()
	}
	if len(args) == 0 || args[0] != "rebuild" && args[0] != "snapshot" {
		fs.Usage()
		if len(args) > 0 {
			return "", nil, fmt.Errorf("%w: unknown projections command %q: agentreach projections rebuild|snapshot [NAME...]", ErrUsage, args[0])
		}
		return "", nil, fmt.Errorf("%w: agentreach projections rebuild|snapshot [NAME...]", ErrUsage)
	}
	named, err := (&Flags{FlagSet: fs}).ParsePositional(args[1:])
	if err != nil {
		return "", nil, err
	}
	chosen, err := ChooseProjections(named)
	return args[0], chosen, err
}

// ChooseProjections returns the projections named, in that order, or every
// one when none is; a name no projection has is an ErrUsage.
func ChooseProjections(names []string) ([]eventstore.Projection, error) {
	if len(names) == 0 {
		return projection.All(), nil
	}
	var chosen []eventstore.Projection
	for _, name := range names {
		found := false
		for _, p := range projection.All() {
			if p.Name() == name {
				chosen, found = append(chosen, p), true
			}
		}
		if !found {
			return nil, fmt.Errorf("%w: no projection %q (there are: %s)", ErrUsage, name, strings.Join(ProjectionNames(), ", "))
		}
	}
	return chosen, nil
}

// RebuildReport is what a rebuild did, projection by projection.
type RebuildReport struct {
	Projections []RebuiltProjection `json:"projections"`
}

// RebuiltProjection is one projection's rebuild: the snapshot it started
// from (none: position 0), the events it folded, the rows of each of its
// tables after it, and how long it took.
type RebuiltProjection struct {
	Name       string               `json:"name"`
	Snapshot   *eventstore.Snapshot `json:"from_snapshot,omitempty"`
	Events     int64                `json:"events"`
	Tables     []TableCount         `json:"tables"`
	DurationMS int64                `json:"duration_ms"`
}

// TableCount is how many rows a read-model table holds.
type TableCount struct {
	Table string `json:"table"`
	Rows  int64  `json:"rows"`
}

// RebuildProjections rebuilds each of chosen from its latest snapshot or,
// with eventstore.FromStart or none taken, from position 0 of the log,
// drawing its progress on Stderr, and reports how many events it folded
// into how many rows of which tables, in how long.
func RebuildProjections(ctx context.Context, env Env, pool *pgxpool.Pool, logger *slog.Logger, chosen []eventstore.Projection, from eventstore.RebuildFrom) (RebuildReport, error) {
	rep := RebuildReport{Projections: []RebuiltProjection{}}
	projector := eventstore.NewProjector(eventstore.New(pool), logger, chosen...)
	for _, p := range chosen {
		start := time.Now()
		bar := ProgressBar{W: env.Stderr, Label: p.Name()}
		done, err := projector.Rebuild(ctx, p, from, bar.Update)
		bar.Done()
		if err != nil {
			return rep, err
		}
		tables, err := countRows(ctx, pool, projection.Tables(p.Name()))
		if err != nil {
			return rep, err
		}
		rep.Projections = append(rep.Projections, RebuiltProjection{Name: p.Name(), Snapshot: done.Snapshot, Events: done.Events,
			Tables: tables, DurationMS: time.Since(start).Milliseconds()})
	}
	return rep, nil
}

// PrintRebuild writes rep a line per projection: "rebuilt NAME [from the
// snapshot of TIME]: N events folded into TABLE N rows, ... in DURATION".
func PrintRebuild(w io.Writer, rep RebuildReport) error {
	for _, p := range rep.Projections {
		var rows []string
		for _, t := range p.Tables {
			rows = append(rows, fmt.Sprintf("%s %d rows", t.Table, t.Rows))
		}
		from := ""
		if p.Snapshot != nil {
			from = fmt.Sprintf(" from the snapshot of %s (%d rows)", p.Snapshot.TakenAt.UTC().Format(time.RFC3339), p.Snapshot.Rows)
		}
		if _, err := fmt.Fprintf(w, "rebuilt %s%s: %d events folded into %s in %dms\n", p.Name, from, p.Events, strings.Join(rows, ", "),
			p.DurationMS); err != nil {
			return err
		}
	}
	return nil
}

// SnapshotReport is the snapshots taken, projection by projection.
type SnapshotReport struct {
	Snapshots []eventstore.Snapshot `json:"snapshots"`
}

// TakeSnapshots snapshots each of chosen now.
func TakeSnapshots(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger, chosen []eventstore.Projection) (SnapshotReport, error) {
	rep := SnapshotReport{Snapshots: []eventstore.Snapshot{}}
	projector := eventstore.NewProjector(eventstore.New(pool), logger, chosen...)
	for _, p := range chosen {
		snap, err := projector.TakeSnapshot(ctx, p)
		if err != nil {
			return rep, err
		}
		rep.Snapshots = append(rep.Snapshots, snap)
	}
	return rep, nil
}

// PrintSnapshots writes rep a line per projection: "snapshot NAME: N rows
// at N events".
func PrintSnapshots(w io.Writer, rep SnapshotReport) error {
	for _, s := range rep.Snapshots {
		if _, err := fmt.Fprintf(w, "snapshot %s: %d rows, %d events folded\n", s.Name, s.Rows, s.Events); err != nil {
			return err
		}
	}
	return nil
}

// countRows counts the rows of each table.
func countRows(ctx context.Context, pool *pgxpool.Pool, tables []string) ([]TableCount, error) {
	var out []TableCount
	for _, table := range tables {
		var count int64
		if err := pool.QueryRow(ctx, fmt.Sprintf(qHarnessCountRows, pgx.Identifier{table}.Sanitize())).Scan(&count); err != nil {
			return nil, err
		}
		out = append(out, TableCount{Table: table, Rows: count})
	}
	return out, nil
}
