package retention

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	arsql "github.com/agentreach/agentreach/sql"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qImportEvents        = queries.Must("ImportEvents")
	qAdvanceLogPositions = queries.Must("AdvanceLogPositions")
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

// ImportArchive loads the archive in dir into the database of pool (a
// migrated one, typically fresh), partition by partition, each in one
// transaction, after checking it whole against its manifests. Events keep
// their positions, streams and versions; each partition's events are
// readers' as of its transaction (the original tx_id stays in the
// archive). An event the database holds already is skipped, so an import
// may be run again. progress is told of each partition done.
func ImportArchive(ctx context.Context, pool *pgxpool.Pool, dir string, progress func(ImportReport)) ([]ImportReport, error) {
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
			var b eventBatch
			flush := func() error {
				if b.len() == 0 {
					return nil
				}
				tag, err := tx.Exec(ctx, qImportEvents, b.positions, b.streams, b.versions, b.types, b.datas, b.metas, b.recorded)
				if err != nil {
					return noPartition(m, err)
				}
				rep.Imported += int(tag.RowsAffected())
				b = eventBatch{}
				return nil
			}
			err := readEvents(dir, m, func(e ArchivedEvent) error {
				b.add(e)
				if b.len() < importBatch {
					return nil
				}
				return flush()
			}, flush)
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, qAdvanceLogPositions)
			return err
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

// eventBatch is events as the import statement's parallel arrays.
type eventBatch struct {
	positions                    []int64
	streams, types, datas, metas []string
	versions                     []int32
	recorded                     []any
}

func (b *eventBatch) len() int { return len(b.positions) }

func (b *eventBatch) add(e ArchivedEvent) {
	b.positions = append(b.positions, e.Position)
	b.streams = append(b.streams, e.StreamID)
	b.versions = append(b.versions, int32(e.Version))
	b.types = append(b.types, e.Type)
	b.datas = append(b.datas, string(e.Data))
	b.metas = append(b.metas, string(e.Metadata))
	b.recorded = append(b.recorded, e.RecordedAt)
}
