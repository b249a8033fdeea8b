package main

import (
	"context"
	"fmt"

	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/cli"
	"github.com/agentreach/agentreach/retention"
)

// runArchive checks an archive of dropped history against its manifests
// (verify), or loads it into a database (import).
func (m *Main) runArchive(ctx context.Context, args []string) error {
	if len(args) == 0 || cli.IsHelp(args[0]) {
		fmt.Fprint(m.Stdout, "Usage:\n  agentreach archive verify DIR\n  agentreach archive import DIR --database-url URL\n\n"+
			"verify checks every partition in DIR against its manifest (SHA-256, events, order).\n"+
			"import loads them into a migrated database, typically a fresh one, partition by partition;\n"+
			"run again, it adds nothing. Then `agentreach projections rebuild` folds them into the read models.\n"+
			"A service run on that database applies its retention to them again: give it a --retention longer than their age.\n")
		if len(args) == 0 {
			return fmt.Errorf("%w: agentreach archive verify|import DIR", errUsage)
		}
		return nil
	}
	verb := args[0]
	if verb != "verify" && verb != "import" {
		return fmt.Errorf("%w: agentreach archive verify|import DIR, not %q", errUsage, verb)
	}
	var dsn string
	fs := m.newFlagSet("archive " + verb)
	cli.SecretVar(fs, &dsn, "database-url", m.Getenv("DATABASE_URL"), "the database to import into (env DATABASE_URL; import only)")
	if err := cli.ParseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: agentreach archive %s DIR: name the archive's folder", errUsage, verb)
	}
	dir := fs.Arg(0)
	if err := cli.ParseFlags(fs, fs.Args()[1:]); err != nil { // flags after DIR
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: agentreach archive %s DIR: one folder, not %q too", errUsage, verb, fs.Args())
	}
	switch verb {
	case "verify":
		ms, err := retention.VerifyArchive(dir)
		if err != nil {
			return err
		}
		events := 0
		for _, mf := range ms {
			fmt.Fprintf(m.Stdout, "ok  %s  jobs submitted %s to %s  %d events of %d streams\n",
				mf.Partition, mf.Low.Format("2006-01-02 15:04"), mf.High.Format("2006-01-02 15:04"), mf.Events, mf.Streams)
			events += mf.Events
		}
		fmt.Fprintf(m.Stdout, "%d partitions, %d events: every file matches its manifest\n", len(ms), events)
		return nil
	case "import":
		return m.importArchive(ctx, dsn, dir)
	default:
		return fmt.Errorf("%w: agentreach archive verify|import DIR, not %q", errUsage, verb)
	}
}

func (m *Main) importArchive(ctx context.Context, dsn, dir string) error {
	if dsn == "" {
		return fmt.Errorf("%w: say which database to import into: --database-url or DATABASE_URL", errUsage)
	}
	pool, err := openMigrated(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	reps, err := retention.ImportArchive(ctx, eventstore.New(pool), dir, func(r retention.ImportReport) {
		fmt.Fprintf(m.Stdout, "imported %s: %d events, %d new\n", r.Partition, r.Events, r.Imported)
	})
	if err != nil {
		return err
	}
	total := 0
	for _, r := range reps {
		total += r.Imported
	}
	fmt.Fprintf(m.Stdout, "%d partitions, %d new events; `agentreach projections rebuild` folds them into the read models\n", len(reps), total)
	return nil
}
