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
-- the deployment's, $3 seconds).
SELECT count(*) FILTER (WHERE j.finished_at IS NULL OR (j.callback_url IS NOT NULL AND NOT j.callback_done)),
       max(j.finished_at + least(coalesce(nullif(p.keep_seconds, 0), $3::bigint), $3::bigint) * interval '1 second')
FROM jobs j LEFT JOIN retention_policies p ON p.namespace = j.namespace
WHERE j.job_id >= $1::uuid AND j.job_id < $2::uuid;

-- name: DeletePartitionJobs
-- Deletes the rows of the jobs submitted in [$1, $2) (their ids' UUIDv7
-- bounds) from every table that keeps them, as their partition goes; not
-- job_roots, whose count a root's descendants submitted later still need.
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

-- name: PruneBeyondRetention
-- Deletes what summarises history past its namespace's period (never more
-- than the deployment's, $2 seconds, before $1): the alerts, the per-hour
-- agent figures and the lookups. The per-minute figures go after a day
-- (PruneMinuteStats).
WITH alerts_gone AS (
    DELETE FROM alerts a WHERE a.recorded_at < $1::timestamptz - (
        SELECT least(coalesce(nullif(max(p.keep_seconds), 0), $2::bigint), $2::bigint)
        FROM retention_policies p WHERE p.namespace = a.namespace) * interval '1 second'
    RETURNING 1
), hours_gone AS (
    DELETE FROM agent_stats_hour h WHERE h.bucket < $1::timestamptz - (
        SELECT least(coalesce(nullif(max(p.keep_seconds), 0), $2::bigint), $2::bigint)
        FROM retention_policies p WHERE p.namespace = h.namespace) * interval '1 second' - interval '1 hour'
    RETURNING 1
), lookups_gone AS (
    -- never within the ten minutes a lookup's reports are taken for
    DELETE FROM lookups l WHERE l.looked_up_at < $1::timestamptz - greatest(600, (
        SELECT least(coalesce(nullif(max(p.keep_seconds), 0), $2::bigint), $2::bigint)
        FROM retention_policies p WHERE p.namespace = l.namespace)) * interval '1 second'
    RETURNING 1
)
SELECT (SELECT count(*) FROM alerts_gone), (SELECT count(*) FROM hours_gone), (SELECT count(*) FROM lookups_gone);

-- name: DatabaseIdentity
-- The database an archive's partitions come from: its cluster's system
-- identifier and its name.
SELECT system_identifier::text || '/' || current_database() FROM pg_control_system();
