package cli

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/projection"
	"github.com/agentreach/agentreach/sql/queries"
)

const projectionsHelp = `agentreach projections rebuild [NAME...]

Rebuilds read models from position 0 of the event log: every projection, or
the ones named (%s). Shows progress, then the events folded, the rows of
each read model and the time taken. Readers see the read model refill while
it runs; the log itself is only read.
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

// ParseProjections parses `agentreach projections rebuild [NAME...]` with
// fs, the flags before or after the names, and returns the projections
// named (every one when none is). Another subcommand, or a name no
// projection has, is an ErrUsage.
func ParseProjections(fs *flag.FlagSet, args []string) ([]eventstore.Projection, error) {
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), projectionsHelp, strings.Join(ProjectionNames(), ", "))
		fs.PrintDefaults()
	}
	if len(args) == 0 || args[0] != "rebuild" {
		fs.Usage()
		return nil, fmt.Errorf("%w: agentreach projections rebuild [NAME...]", ErrUsage)
	}
	named, err := (&Flags{FlagSet: fs}).ParsePositional(args[1:])
	if err != nil {
		return nil, err
	}
	return ChooseProjections(named)
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

// RebuildProjections refolds each of chosen from position 0 of the log,
// drawing its progress on Stderr, and says on Stdout how many events it
// folded into how many rows of which tables, in how long.
func RebuildProjections(ctx context.Context, env Env, pool *pgxpool.Pool, logger *slog.Logger, chosen []eventstore.Projection) error {
	projector := eventstore.NewProjector(eventstore.New(pool), logger, chosen...)
	for _, p := range chosen {
		start := time.Now()
		bar := ProgressBar{W: env.Stderr, Label: p.Name()}
		n, err := projector.Rebuild(ctx, p, bar.Update)
		bar.Done()
		if err != nil {
			return err
		}
		rows, err := countRows(ctx, pool, projection.Tables(p.Name()))
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "rebuilt %s: %d events folded into %s in %s\n", p.Name(), n, strings.Join(rows, ", "),
			time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// countRows says "table N rows" for each table.
func countRows(ctx context.Context, pool *pgxpool.Pool, tables []string) ([]string, error) {
	var rows []string
	for _, table := range tables {
		var count int64
		if err := pool.QueryRow(ctx, fmt.Sprintf(qHarnessCountRows, pgx.Identifier{table}.Sanitize())).Scan(&count); err != nil {
			return nil, err
		}
		rows = append(rows, fmt.Sprintf("%s %d rows", table, count))
	}
	return rows, nil
}
