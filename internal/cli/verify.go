package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/jobs"
	"github.com/agentreach/agentreach/projection"
	arsql "github.com/agentreach/agentreach/sql"
)

// Verify checks that the schema of the database at pool is current, then
// runs jobs.Verify over every projection: the invariants of every job, and
// every read model equal to a rebuild.
func Verify(ctx context.Context, pool *pgxpool.Pool) (jobs.VerifyReport, error) {
	if err := arsql.Check(ctx, pool); err != nil {
		return jobs.VerifyReport{}, err
	}
	store := eventstore.New(pool)
	tables := map[string][]string{}
	for _, p := range projection.All() {
		tables[p.Name()] = projection.Tables(p.Name())
	}
	return jobs.Verify(ctx, store, eventstore.NewProjector(store, slog.New(slog.DiscardHandler), projection.All()...), tables)
}

// PrintVerify writes rep to w, and fails when it found any violation.
func PrintVerify(w io.Writer, rep jobs.VerifyReport) error {
	fmt.Fprint(w, FormatVerify(rep))
	if !rep.OK() {
		return fmt.Errorf("%d invariant violations", len(rep.Violations))
	}
	return nil
}

// FormatVerify says what rep counted and each violation it found, a line
// each.
func FormatVerify(rep jobs.VerifyReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "jobs: %d, terminal: %d, by status: %v\n", rep.Jobs, rep.Terminal, rep.Statuses)
	if rep.OK() {
		b.WriteString("all invariants hold\n")
	}
	for _, v := range rep.Violations {
		fmt.Fprintf(&b, "VIOLATION: %s\n", v)
	}
	return b.String()
}
