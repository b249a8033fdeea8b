-- Statements of retention (package retention): the namespaces' periods,
-- and what the jobs born in one of the log's partitions say about it.

-- name: RetentionPolicyOf
-- A namespace's own period, if it asked for one.
SELECT keep_seconds, version FROM retention_policies WHERE namespace = $1;

-- name: LockRetentionPolicy
-- A namespace's own period, locked for a change.
SELECT keep_seconds, version FROM retention_policies WHERE namespace = $1 FOR UPDATE;

-- name: UpsertRetentionPolicy
-- Writes a namespace's own period in seconds (0: none, the deployment's).
INSERT INTO retention_policies (namespace, keep_seconds, version) VALUES ($1, $2, $3)
ON CONFLICT (namespace) DO UPDATE SET keep_seconds = excluded.keep_seconds, version = excluded.version, updated_at = now();

-- name: PartitionJobs
-- The jobs submitted in [$1, $2) (their ids' UUIDv7 bounds): how many are
-- not done with (unfinished, or a callback still owed), and when the last
-- finished one reaches the end of its namespace's period (never more than
-- the deployment's, $3 seconds); and whether the jobs projection has folded every
-- event of their partition (their rows say all).
SELECT count(*) FILTER (WHERE j.finished_at IS NULL OR (j.callback_url IS NOT NULL AND NOT j.callback_done)),
       max(j.finished_at + least(coalesce(nullif(p.keep_seconds, 0), $3::bigint), $3::bigint) * interval '1 second'),
       coalesce((SELECT e.tx_id FROM events e WHERE e.stream_at >= $4::timestamptz AND e.stream_at < $5::timestamptz ORDER BY e.tx_id DESC LIMIT 1)
                <= (SELECT c.tx_id FROM projection_checkpoints c WHERE c.name = 'jobs'), true)
FROM jobs j LEFT JOIN retention_policies p ON p.namespace = j.namespace
WHERE j.job_id >= $1::uuid AND j.job_id < $2::uuid;

-- name: DeletePartitionJobs
-- Deletes the rows of the jobs submitted in [$1, $2) (their ids' UUIDv7
-- bounds) from every table that keeps them, as their partition goes.
WITH gone AS (
    DELETE FROM jobs WHERE job_id >= $1::uuid AND job_id < $2::uuid RETURNING 1
), keys AS (
    DELETE FROM idempotency_keys WHERE job_id >= $1::uuid AND job_id < $2::uuid
), timers AS (
    DELETE FROM job_timers WHERE job_id >= $1::uuid AND job_id < $2::uuid
), slots AS (
    DELETE FROM agent_slots WHERE job_id >= $1::uuid AND job_id < $2::uuid
), ordered AS (
    DELETE FROM ordered_jobs WHERE job_id >= $1::uuid AND job_id < $2::uuid
), pushes AS (
    DELETE FROM a2a_push_configs WHERE job_id >= $1::uuid AND job_id < $2::uuid
)
SELECT count(*) FROM gone;

-- name: ImportEvents
-- Loads archived events ($1..$7 parallel arrays: position, stream, version,
-- type, data, metadata, recorded_at) into the log at their positions, in
-- the importing transaction; one the log holds already is skipped.
INSERT INTO events (position, stream_id, version, type, data, metadata, recorded_at, stream_at)
OVERRIDING SYSTEM VALUE
SELECT u.p, u.s, u.v, u.t, u.d::jsonb, u.m::jsonb, u.r, events_stream_at(u.s)
FROM unnest($1::bigint[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[], $7::timestamptz[]) AS u(p, s, v, t, d, m, r)
ON CONFLICT ON CONSTRAINT events_stream_version_key DO NOTHING;

-- name: AdvanceLogPositions
-- Moves the log's next position past the highest it holds, after an
-- import placed events at positions of their own.
SELECT setval(pg_get_serial_sequence('events', 'position'), greatest(
    (SELECT coalesce(max(position), 0) FROM events),
    (SELECT last_value FROM events_position_seq)));
