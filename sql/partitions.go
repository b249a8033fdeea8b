package sql

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/sql/queries"
)

// The log's time partitions (sql/migrations/0028_partitioned_events.sql):
// made ahead of need here, dropped whole by retention (package retention).

var (
	qPartitionsLock         = queries.Must("PartitionsLock")
	qEventPartitions        = queries.Must("EventPartitions")
	qPartitionedFrom        = queries.Must("PartitionedFrom")
	qUnmarkPartition        = queries.Must("UnmarkPartitionDropping")
	qCreateEventPartition   = queries.Must("CreateEventPartition")
	qAttachEventPartition   = queries.Must("AttachEventPartition")
	qRecordEventPartition   = queries.Must("RecordEventPartition")
	qMarkPartitionDropping  = queries.Must("MarkPartitionDropping")
	qMarkPartitionPositions = queries.Must("MarkPartitionPositions")
	qMarkPartitionArchived  = queries.Must("MarkPartitionArchived")
	qPartitionAttachment    = queries.Must("PartitionAttachment")
	qPartitionTableExists   = queries.Must("PartitionTableExists")
	qDetachEventPartition   = queries.Must("DetachEventPartition")
	qFinalizeDetach         = queries.Must("FinalizeDetachEventPartition")
	qDropPartitionTable     = queries.Must("DropPartitionTable")
	qMarkPartitionDropped   = queries.Must("MarkPartitionDropped")
)

// EventPartition is one time partition of the log: the events of the jobs
// submitted within [Low, High).
type EventPartition struct {
	Name string
	domain.TimeRange
	ArchivedTo string
	// DroppingAt is when retention began to drop it (its jobs' rows go
	// first); DroppedAt when its table went.
	DroppingAt, DroppedAt *time.Time
}

// EventPartitions lists every time partition the log has or had, oldest
// first.
func EventPartitions(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) ([]EventPartition, error) {
	rows, err := q.Query(ctx, qEventPartitions)
	if err != nil {
		return nil, fmt.Errorf("event partitions: %w", err)
	}
	var p EventPartition
	var archived *string
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (EventPartition, error) {
		if err := r.Scan(&p.Name, &p.Low, &p.High, &archived, &p.DroppingAt, &p.DroppedAt); err != nil {
			return p, err
		}
		p.ArchivedTo = ""
		if archived != nil {
			p.ArchivedTo = *archived
		}
		return p, nil
	})
	if err != nil {
		return nil, fmt.Errorf("event partitions: %w", err)
	}
	return out, nil
}

// EnsureEventPartitions makes the log's partitions of width for the jobs
// submitted from a width before now to domain.PartitionsAhead(width) after
// it, where none exists (or existed), and answers the names it made. Every
// process runs it at start and the sweep leader runs it periodically;
// processes that race wait for each other.
func EnsureEventPartitions(ctx context.Context, db beginner, now time.Time, width time.Duration) ([]string, error) {
	now = now.UTC()
	return ensurePartitions(ctx, db, now.Add(-width), now.Add(domain.PartitionsAhead(width)), width)
}

// EnsureEventPartitionsFor makes the partitions the log needs to take the
// events of the jobs submitted in r (an archive's partition being
// imported), where none exists or existed.
func EnsureEventPartitionsFor(ctx context.Context, db beginner, r domain.TimeRange) ([]string, error) {
	return ensurePartitions(ctx, db, r.Low, r.High, r.High.Sub(r.Low))
}

type beginner interface {
	Begin(context.Context) (pgx.Tx, error)
}

// ensurePartitions makes partitions of width over [from, to) where none
// exists or existed, and answers their names.
func ensurePartitions(ctx context.Context, db beginner, from, to time.Time, width time.Duration) ([]string, error) {
	var made []string
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		made = nil
		if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '10s'"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, qPartitionsLock); err != nil {
			return err
		}
		have, err := EventPartitions(ctx, tx)
		if err != nil {
			return err
		}
		ranges := make([]domain.TimeRange, len(have))
		for i, p := range have {
			ranges[i] = p.TimeRange
		}
		var cutoff *time.Time
		if err := tx.QueryRow(ctx, qPartitionedFrom).Scan(&cutoff); err != nil {
			return err
		}
		if cutoff != nil { // below it, every stream is in events_kept
			ranges = append(ranges, domain.TimeRange{Low: from.Add(-width), High: *cutoff})
		}
		for _, r := range domain.PartitionsToCreate(ranges, from, to, width) {
			name := partitionName(r.Low)
			id := pgx.Identifier{name}.Sanitize()
			if _, err := tx.Exec(ctx, fmt.Sprintf(qCreateEventPartition, id, id)); err != nil {
				return fmt.Errorf("make partition %s: %w", name, err)
			}
			if _, err := tx.Exec(ctx, fmt.Sprintf(qAttachEventPartition, id, literal(r.Low), literal(r.High))); err != nil {
				return fmt.Errorf("attach partition %s: %w", name, err)
			}
			if _, err := tx.Exec(ctx, qRecordEventPartition, name, r.Low, r.High); err != nil {
				return err
			}
			made = append(made, name)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ensure the log's partitions: %w", err)
	}
	return made, nil
}

// partitionName names the partition that starts at low.
func partitionName(low time.Time) string {
	return "events_p" + low.UTC().Format("20060102_150405")
}

// literal quotes t as a timestamptz literal for DDL, which takes no
// parameters.
func literal(t time.Time) string {
	return "'" + t.UTC().Format(time.RFC3339Nano) + "'"
}

// MarkPartitionDropping records that retention began dropping partition
// name: it is detached next, and put back should its check fail.
func MarkPartitionDropping(ctx context.Context, q execer, name string) error {
	if _, err := q.Exec(ctx, qMarkPartitionDropping, name); err != nil {
		return fmt.Errorf("mark partition %s dropping: %w", name, err)
	}
	return nil
}

// MarkPartitionArchived records, in tx, where partition name was
// archived: the caller deletes the rows of its jobs in the same
// transaction.
func MarkPartitionArchived(ctx context.Context, q execer, name, archivedTo string) error {
	if _, err := q.Exec(ctx, qMarkPartitionArchived, name, archivedTo); err != nil {
		return fmt.Errorf("mark partition %s archived: %w", name, err)
	}
	return nil
}

// MarkPartitionPositions records the first and last positions of the
// events partition name holds, in q's transaction, before it goes.
func MarkPartitionPositions(ctx context.Context, q execer, name string, first, last int64) error {
	if _, err := q.Exec(ctx, qMarkPartitionPositions, name, first, last); err != nil {
		return fmt.Errorf("mark partition %s positions: %w", name, err)
	}
	return nil
}

type execer interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}

// DetachEventPartition detaches partition name from the log without
// blocking its readers and writers (finishing a detach that was cut
// short): from then on no write can reach it. Detached already, it does
// nothing.
func DetachEventPartition(ctx context.Context, pool *pgxpool.Pool, name string) error {
	id := pgx.Identifier{name}.Sanitize()
	var attached, pending bool
	if err := pool.QueryRow(ctx, qPartitionAttachment, name).Scan(&attached, &pending); err != nil {
		return fmt.Errorf("detach partition %s: %w", name, err)
	}
	switch {
	case pending:
		if _, err := pool.Exec(ctx, fmt.Sprintf(qFinalizeDetach, id)); err != nil {
			return fmt.Errorf("detach partition %s: finish its detach: %w", name, err)
		}
	case attached:
		if _, err := pool.Exec(ctx, fmt.Sprintf(qDetachEventPartition, id)); err != nil {
			return fmt.Errorf("detach partition %s: %w", name, err)
		}
	}
	return nil
}

// ReattachEventPartition puts the detached partition p back in the log
// and records that it is no longer going.
func ReattachEventPartition(ctx context.Context, pool *pgxpool.Pool, p EventPartition) error {
	id := pgx.Identifier{p.Name}.Sanitize()
	var attached, pending bool
	if err := pool.QueryRow(ctx, qPartitionAttachment, p.Name).Scan(&attached, &pending); err != nil {
		return fmt.Errorf("attach partition %s again: %w", p.Name, err)
	}
	if pending {
		if _, err := pool.Exec(ctx, fmt.Sprintf(qFinalizeDetach, id)); err != nil {
			return fmt.Errorf("attach partition %s again: finish its detach: %w", p.Name, err)
		}
	}
	if !attached || pending {
		if _, err := pool.Exec(ctx, fmt.Sprintf(qAttachEventPartition, id, literal(p.Low), literal(p.High))); err != nil {
			return fmt.Errorf("attach partition %s again: %w", p.Name, err)
		}
	}
	if _, err := pool.Exec(ctx, qUnmarkPartition, p.Name); err != nil {
		return fmt.Errorf("attach partition %s again: %w", p.Name, err)
	}
	return nil
}

// DropEventPartition drops the table of partition name, detached, and
// records it gone. Dropped already, it only records it.
func DropEventPartition(ctx context.Context, pool *pgxpool.Pool, name string) error {
	if err := DetachEventPartition(ctx, pool, name); err != nil {
		return err
	}
	id := pgx.Identifier{name}.Sanitize()
	if _, err := pool.Exec(ctx, fmt.Sprintf(qDropPartitionTable, id)); err != nil {
		return fmt.Errorf("drop partition %s: %w", name, err)
	}
	if _, err := pool.Exec(ctx, qMarkPartitionDropped, name); err != nil {
		return fmt.Errorf("drop partition %s: %w", name, err)
	}
	return nil
}

// PartitionTableExists reports whether the table of partition name is
// there, attached or detached: not yet dropped.
func PartitionTableExists(ctx context.Context, pool *pgxpool.Pool, name string) (bool, error) {
	var exists bool
	if err := pool.QueryRow(ctx, qPartitionTableExists, name).Scan(&exists); err != nil {
		return false, fmt.Errorf("partition %s: %w", name, err)
	}
	return exists, nil
}
