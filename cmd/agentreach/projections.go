package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/projection"
	arsql "github.com/agentreach/agentreach/sql"
)

const projectionsHelp = `agentreach projections rebuild [NAME...]

Rebuilds read models from position 0 of the event log: every projection, or
the ones named (%s). Shows progress, then the events folded, the rows of
each read model and the time taken. Readers see the read model refill while
it runs; the log itself is only read.
`

func (m *Main) runProjections(ctx context.Context, args []string) error {
	var cfg Config
	fs := m.newFlagSet("projections")
	m.commonFlags(fs, &cfg, "")
	var names []string
	for _, p := range projection.All() {
		names = append(names, p.Name())
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), projectionsHelp, strings.Join(names, ", "))
		fs.PrintDefaults()
	}
	if len(args) == 0 || args[0] != "rebuild" {
		fs.Usage()
		return fmt.Errorf("%w: agentreach projections rebuild [NAME...]", errUsage)
	}
	cf := &cliFlags{FlagSet: fs}
	named, err := cf.parse(args[1:]) // flags before or after the names
	if err != nil {
		return err
	}
	if cfg.DatabaseURL == "" {
		cfg.DatabaseURL = defaultDatabaseURL
	}
	logger, err := m.logger(cfg)
	if err != nil {
		return err
	}
	chosen := projection.All()
	if len(named) > 0 {
		chosen = nil
		for _, name := range named {
			found := false
			for _, p := range projection.All() {
				if p.Name() == name {
					chosen, found = append(chosen, p), true
				}
			}
			if !found {
				return fmt.Errorf("%w: no projection %q (there are: %s)", errUsage, name, strings.Join(names, ", "))
			}
		}
	}
	pool, err := pgxpool.New(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := arsql.Check(ctx, pool); err != nil {
		return fmt.Errorf("database at %s: %w (run `agentreach migrate`)", redact(cfg.DatabaseURL), err)
	}
	projector := eventstore.NewProjector(eventstore.New(pool), logger, chosen...)
	for _, p := range chosen {
		start := time.Now()
		bar := progressBar{w: m.Stderr, label: p.Name()}
		n, err := projector.Rebuild(ctx, p, bar.update)
		bar.done()
		if err != nil {
			return err
		}
		var rows []string
		for _, table := range projection.Tables(p.Name()) {
			var count int64
			if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{table}.Sanitize()).Scan(&count); err != nil {
				return err
			}
			rows = append(rows, fmt.Sprintf("%s %d rows", table, count))
		}
		fmt.Fprintf(m.Stdout, "rebuilt %s: %d events folded into %s in %s\n", p.Name(), n, strings.Join(rows, ", "),
			time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// progressBar draws "label [#####.....] 50% 500/1000 events" on one line.
type progressBar struct {
	w     io.Writer
	label string
	unit  string // "events" when empty
	drawn bool
}

func (b *progressBar) update(done, total int64) {
	const width = 30
	if total <= 0 {
		total = 1
	}
	filled := int(float64(width) * float64(done) / float64(total))
	unit := b.unit
	if unit == "" {
		unit = "events"
	}
	fmt.Fprintf(b.w, "\r%s [%s%s] %3d%% %d/%d %s", b.label, strings.Repeat("#", filled),
		strings.Repeat(".", width-filled), 100*done/total, done, total, unit)
	b.drawn = true
}

func (b *progressBar) done() {
	if b.drawn {
		fmt.Fprintln(b.w)
	}
}
