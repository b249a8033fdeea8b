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
-- The snapshot first: statements that touch a read model and its snapshot
-- take the snapshot's lock first (eventstore.TakeSnapshot's order); the
-- caller holds eventstore.LockSnapshots.
WITH snapshot AS (
    DELETE FROM snapshot_jobs WHERE job_id >= $1::uuid AND job_id < $2::uuid
), gone AS (
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
-- Deletes what records history past its namespace's period (never more
-- than the deployment's, $2 seconds, before $1): the alerts (from the
-- read model and its snapshot) and the lookups. The agents' figures are
-- summaries, rolled up rather than pruned (RollUpAgentFigures).
WITH snapshot_alerts_gone AS (
    -- the snapshot's lock first (DeletePartitionJobs)
    DELETE FROM snapshot_alerts a WHERE a.recorded_at < $1::timestamptz - (
        SELECT least(coalesce(nullif(max(p.keep_seconds), 0), $2::bigint), $2::bigint)
        FROM retention_policies p WHERE p.namespace = a.namespace) * interval '1 second'
), alerts_gone AS (
    DELETE FROM alerts a WHERE a.recorded_at < $1::timestamptz - (
        SELECT least(coalesce(nullif(max(p.keep_seconds), 0), $2::bigint), $2::bigint)
        FROM retention_policies p WHERE p.namespace = a.namespace) * interval '1 second'
    RETURNING 1
), lookups_gone AS (
    -- never within the ten minutes a lookup's reports are taken for
    DELETE FROM lookups l WHERE l.looked_up_at < $1::timestamptz - greatest(600, (
        SELECT least(coalesce(nullif(max(p.keep_seconds), 0), $2::bigint), $2::bigint)
        FROM retention_policies p WHERE p.namespace = l.namespace)) * interval '1 second'
    RETURNING 1
)
SELECT (SELECT count(*) FROM alerts_gone), (SELECT count(*) FROM lookups_gone);

-- name: DatabaseIdentity
-- The database an archive's partitions come from: its cluster's system
-- identifier and its name.
SELECT system_identifier::text || '/' || current_database() FROM pg_control_system();

-- name: RollUpAgentFigures
-- Bounds the agents' figures: drops the per-minute ones older than $1
-- (the windows past an hour read the per-hour ones, which hold the same
-- counts) and sums the per-hour ones older than $2 into per-day ones, in
-- the read model and in its snapshot alike (the snapshot's locks first,
-- as in DeletePartitionJobs). Says how many minutes went and how many
-- hours were rolled up.
WITH snapshot_minutes AS (
    DELETE FROM snapshot_agent_stats_minute WHERE bucket < $1
), snapshot_hours AS (
    DELETE FROM snapshot_agent_stats_hour WHERE bucket < $2 RETURNING *
), snapshot_days AS (
    INSERT INTO snapshot_agent_stats_day AS s (agent_id, capability, bucket, namespace, attempted, delivered, succeeded,
            failed, timed_out, dead_lettered, delivery_hist, result_hist,
            direct_attempted, direct_delivered, direct_succeeded, direct_failed)
    SELECT agent_id, capability, date_trunc('day', bucket, 'UTC'), namespace, sum(attempted), sum(delivered), sum(succeeded),
           sum(failed), sum(timed_out), sum(dead_lettered), reach_hist_sum(delivery_hist), reach_hist_sum(result_hist),
           sum(direct_attempted), sum(direct_delivered), sum(direct_succeeded), sum(direct_failed)
    FROM snapshot_hours GROUP BY namespace, agent_id, capability, date_trunc('day', bucket, 'UTC')
    ON CONFLICT (namespace, agent_id, capability, bucket) DO UPDATE SET
        attempted = s.attempted + excluded.attempted, delivered = s.delivered + excluded.delivered,
        succeeded = s.succeeded + excluded.succeeded, failed = s.failed + excluded.failed,
        timed_out = s.timed_out + excluded.timed_out, dead_lettered = s.dead_lettered + excluded.dead_lettered,
        delivery_hist = reach_hist_add(s.delivery_hist, excluded.delivery_hist),
        result_hist = reach_hist_add(s.result_hist, excluded.result_hist),
        direct_attempted = s.direct_attempted + excluded.direct_attempted,
        direct_delivered = s.direct_delivered + excluded.direct_delivered,
        direct_succeeded = s.direct_succeeded + excluded.direct_succeeded,
        direct_failed = s.direct_failed + excluded.direct_failed
), minutes AS (
    DELETE FROM agent_stats_minute WHERE bucket < $1 RETURNING 1
), hours AS (
    DELETE FROM agent_stats_hour WHERE bucket < $2 RETURNING *
), days AS (
    INSERT INTO agent_stats_day AS s (agent_id, capability, bucket, namespace, attempted, delivered, succeeded,
            failed, timed_out, dead_lettered, delivery_hist, result_hist,
            direct_attempted, direct_delivered, direct_succeeded, direct_failed)
    SELECT agent_id, capability, date_trunc('day', bucket, 'UTC'), namespace, sum(attempted), sum(delivered), sum(succeeded),
           sum(failed), sum(timed_out), sum(dead_lettered), reach_hist_sum(delivery_hist), reach_hist_sum(result_hist),
           sum(direct_attempted), sum(direct_delivered), sum(direct_succeeded), sum(direct_failed)
    FROM hours GROUP BY namespace, agent_id, capability, date_trunc('day', bucket, 'UTC')
    ON CONFLICT (namespace, agent_id, capability, bucket) DO UPDATE SET
        attempted = s.attempted + excluded.attempted, delivered = s.delivered + excluded.delivered,
        succeeded = s.succeeded + excluded.succeeded, failed = s.failed + excluded.failed,
        timed_out = s.timed_out + excluded.timed_out, dead_lettered = s.dead_lettered + excluded.dead_lettered,
        delivery_hist = reach_hist_add(s.delivery_hist, excluded.delivery_hist),
        result_hist = reach_hist_add(s.result_hist, excluded.result_hist),
        direct_attempted = s.direct_attempted + excluded.direct_attempted,
        direct_delivered = s.direct_delivered + excluded.direct_delivered,
        direct_succeeded = s.direct_succeeded + excluded.direct_succeeded,
        direct_failed = s.direct_failed + excluded.direct_failed

)
SELECT (SELECT count(*) FROM minutes), (SELECT count(*) FROM hours);
