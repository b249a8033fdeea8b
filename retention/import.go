package retention

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentreach/agentreach/eventstore"
	arsql "github.com/agentreach/agentreach/sql"
)

// ImportReport is what an import did, by partition.
type ImportReport struct {
	Partition string `json:"partition"`
	Events    int    `json:"events"`
	// Imported is how many were new to the database (an import run again
	// adds none).
	Imported int `json:"imported"`
}

// importBatch is how many events go in one statement.
const importBatch = 1000

// ImportArchive loads the archive in dir into the log of store (a
// migrated one, typically fresh), partition by partition, each in one
// transaction, after checking it whole against its manifests. Events keep
// their positions, streams and versions; each partition's events are
// readers' as of its transaction (the original tx_id stays in the
// archive). An event the database holds already is skipped, so an import
// may be run again. progress is told of each partition done.
func ImportArchive(ctx context.Context, store *eventstore.Store, dir string, progress func(ImportReport)) ([]ImportReport, error) {
	pool := store.Pool()
	ms, err := VerifyArchive(dir)
	if err != nil {
		return nil, err
	}
	var out []ImportReport
	for _, m := range ms {
		if _, err := arsql.EnsureEventPartitionsFor(ctx, pool, m.TimeRange()); err != nil {
			return out, err
		}
		rep := ImportReport{Partition: m.Partition, Events: m.Events}
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			rep.Imported = 0
			var batch []eventstore.StoredEvent
			flush := func() error {
				if len(batch) == 0 {
					return nil
				}
				n, err := store.Import(ctx, tx, batch)
				if err != nil {
					return noPartition(m, err)
				}
				rep.Imported, batch = rep.Imported+n, batch[:0]
				return nil
			}
			return readEvents(dir, m, func(e ArchivedEvent) error {
				batch = append(batch, eventstore.StoredEvent{Position: e.Position, StreamID: e.StreamID, Version: e.Version,
					Type: e.Type, Data: e.Data, Metadata: e.Metadata, RecordedAt: e.RecordedAt})
				if len(batch) < importBatch {
					return nil
				}
				return flush()
			}, flush)
		})
		if err != nil {
			return out, fmt.Errorf("import partition %s: %w", m.Partition, err)
		}
		out = append(out, rep)
		if progress != nil {
			progress(rep)
		}
	}
	return out, nil
}

// noPartition says why the log took none of an archive's events when it
// has no partition for them: their range was dropped in this database.
func noPartition(m Manifest, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23514" {
		return fmt.Errorf("the log has no partition for the jobs submitted from %s to %s (dropped here by retention? import into a fresh database): %w",
			m.Low, m.High, err)
	}
	return err
}
