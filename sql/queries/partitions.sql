-- Statements of the log's time partitions (package sql): made ahead of
-- need, dropped whole by retention. sql/migrations/0028_partitioned_events.sql
-- says how the log is partitioned.

-- name: PartitionsLock
-- Serialises the making and dropping of partitions across processes, for
-- the transaction.
SELECT pg_advisory_xact_lock(hashtextextended('agentreach.event_partitions', 0));

-- name: PartitionedFrom
-- Where the log's time partitions begin (NULL: from the start of time);
-- sql/migrations/0029_partition_cutoff.sql says why.
SELECT nullif(partitioned_from, '-infinity') FROM event_log;

-- name: EventPartitions
-- Every time partition the log has or had, by its range.
SELECT name, low, high, archived_to, dropping_at, dropped_at FROM event_partitions ORDER BY low;

-- name: CreateEventPartition :template
-- Makes the table %s for a partition of the log, shaped as the log, and
-- refusing TRUNCATE as it does (rows refuse change through the trigger
-- the log's partitions share). Attached by AttachEventPartition.
CREATE TABLE %s (LIKE events INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION events_immutable();

-- name: AttachEventPartition :template
-- Attaches %s to the log for the submit times from %s up to %s (quoted
-- timestamps); the table is empty, so checking it costs nothing, and the
-- log stays open to writes.
ALTER TABLE events ATTACH PARTITION %s FOR VALUES FROM (%s) TO (%s);

-- name: RecordEventPartition
-- Records a partition made.
INSERT INTO event_partitions (name, low, high) VALUES ($1, $2, $3);

-- name: MarkPartitionDropping
-- Records that partition $1 is going: it is detached, checked again,
-- archived, its jobs' rows deleted, then its table dropped.
UPDATE event_partitions SET dropping_at = coalesce(dropping_at, now()) WHERE name = $1;

-- name: UnmarkPartitionDropping
-- Records that partition $1 stays after all: its check after the detach
-- failed, and it is attached again.
UPDATE event_partitions SET dropping_at = NULL WHERE name = $1;

-- name: MarkPartitionArchived
-- Records where partition $1 was archived.
UPDATE event_partitions SET archived_to = $2 WHERE name = $1;

-- name: MarkPartitionPositions
-- Records the first and last positions of the events partition $1 holds,
-- as it goes.
UPDATE event_partitions SET first_position = $2, last_position = $3 WHERE name = $1;

-- name: PartitionAttachment
-- Whether the table $1 is a partition of the log, and whether a
-- concurrent detach of it was interrupted.
SELECT EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass($1)),
       coalesce((SELECT inhdetachpending FROM pg_inherits WHERE inhrelid = to_regclass($1)), false);

-- name: PartitionTableExists
-- Whether the table $1 (a partition of the log, attached or detached) exists.
SELECT to_regclass($1) IS NOT NULL;

-- name: DetachEventPartition :template
-- Detaches %s from the log without blocking its readers and writers.
ALTER TABLE events DETACH PARTITION %s CONCURRENTLY;

-- name: FinalizeDetachEventPartition :template
-- Completes an interrupted concurrent detach of %s.
ALTER TABLE events DETACH PARTITION %s FINALIZE;

-- name: DropPartitionTable :template
-- Drops the detached partition table %s, whole.
DROP TABLE IF EXISTS %s;

-- name: MarkPartitionDropped
-- Records that partition $1 is gone.
UPDATE event_partitions SET dropped_at = now() WHERE name = $1;
