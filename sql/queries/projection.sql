-- Statements of package projection: the read models folded from the log.
-- The log itself is read through eventstore.

-- name: TruncateAgentStats
-- Empties the agent_stats read model before a rebuild.
TRUNCATE agent_stats_minute, agent_stats_hour, agent_stats_day;

-- name: UpsertAgentStatsMinute
-- Adds a batch's counts and latency histograms (domain.LatencyHistogram,
-- added element by element in the statement itself: no SQL function to
-- plan a call) to an agent's minute bucket.
INSERT INTO agent_stats_minute AS s (agent_id, capability, bucket, namespace, attempted, delivered, succeeded,
        failed, timed_out, dead_lettered, delivery_hist, result_hist,
        direct_attempted, direct_delivered, direct_succeeded, direct_failed)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::int[], $12::int[],
        $13, $14, $15, $16)
    ON CONFLICT (namespace, agent_id, capability, bucket) DO UPDATE SET
        attempted = s.attempted + excluded.attempted, delivered = s.delivered + excluded.delivered,
        succeeded = s.succeeded + excluded.succeeded, failed = s.failed + excluded.failed,
        timed_out = s.timed_out + excluded.timed_out, dead_lettered = s.dead_lettered + excluded.dead_lettered,
        delivery_hist = (SELECT array_agg(coalesce(x, 0) + coalesce(y, 0) ORDER BY i)
            FROM unnest(s.delivery_hist, excluded.delivery_hist) WITH ORDINALITY AS u(x, y, i)),
        result_hist = (SELECT array_agg(coalesce(x, 0) + coalesce(y, 0) ORDER BY i)
            FROM unnest(s.result_hist, excluded.result_hist) WITH ORDINALITY AS u(x, y, i)),
        direct_attempted = s.direct_attempted + excluded.direct_attempted,
        direct_delivered = s.direct_delivered + excluded.direct_delivered,
        direct_succeeded = s.direct_succeeded + excluded.direct_succeeded,
        direct_failed = s.direct_failed + excluded.direct_failed;

-- name: UpsertAgentStatsHour
-- Adds a batch's counts and latency histograms to an agent's hour bucket,
-- as UpsertAgentStatsMinute does.
INSERT INTO agent_stats_hour AS s (agent_id, capability, bucket, namespace, attempted, delivered, succeeded,
        failed, timed_out, dead_lettered, delivery_hist, result_hist,
        direct_attempted, direct_delivered, direct_succeeded, direct_failed)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::int[], $12::int[],
        $13, $14, $15, $16)
    ON CONFLICT (namespace, agent_id, capability, bucket) DO UPDATE SET
        attempted = s.attempted + excluded.attempted, delivered = s.delivered + excluded.delivered,
        succeeded = s.succeeded + excluded.succeeded, failed = s.failed + excluded.failed,
        timed_out = s.timed_out + excluded.timed_out, dead_lettered = s.dead_lettered + excluded.dead_lettered,
        delivery_hist = (SELECT array_agg(coalesce(x, 0) + coalesce(y, 0) ORDER BY i)
            FROM unnest(s.delivery_hist, excluded.delivery_hist) WITH ORDINALITY AS u(x, y, i)),
        result_hist = (SELECT array_agg(coalesce(x, 0) + coalesce(y, 0) ORDER BY i)
            FROM unnest(s.result_hist, excluded.result_hist) WITH ORDINALITY AS u(x, y, i)),
        direct_attempted = s.direct_attempted + excluded.direct_attempted,
        direct_delivered = s.direct_delivered + excluded.direct_delivered,
        direct_succeeded = s.direct_succeeded + excluded.direct_succeeded,
        direct_failed = s.direct_failed + excluded.direct_failed;

-- name: TruncateJobs
-- Empties the jobs read model before a rebuild.
TRUNCATE jobs;

-- name: UpsertJobRows
-- Writes the jobs read model's rows of a batch's jobs as folded so far, in
-- one statement ($1..$21 are parallel arrays, one element a job; '' is NULL).
INSERT INTO jobs (job_id, namespace, capability, status, agent_id, attempts, max_attempts,
        priority, biz_code, error, trace_id, parent_job_id, root_job_id, version,
        submitted_at, updated_at, finished_at, callback_url, callback_done, replay_of, via)
SELECT u.job_id, u.namespace, u.capability, u.status, nullif(u.agent_id, ''), u.attempts, u.max_attempts,
        u.priority, nullif(u.biz_code, ''), nullif(u.error, ''), nullif(u.trace_id, ''),
        nullif(u.parent_job_id, '')::uuid, nullif(u.root_job_id, '')::uuid, u.version,
        u.submitted_at, u.updated_at, u.finished_at, nullif(u.callback_url, ''), u.callback_done, nullif(u.replay_of, '')::uuid,
        nullif(u.via, '')
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::int[],
        $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::int[],
        $15::timestamptz[], $16::timestamptz[], $17::timestamptz[], $18::text[], $19::bool[], $20::text[], $21::text[])
    AS u(job_id, namespace, capability, status, agent_id, attempts, max_attempts,
        priority, biz_code, error, trace_id, parent_job_id, root_job_id, version,
        submitted_at, updated_at, finished_at, callback_url, callback_done, replay_of, via)
ORDER BY u.job_id
ON CONFLICT (job_id) DO UPDATE SET via = coalesce(jobs.via, excluded.via), status = excluded.status, agent_id = excluded.agent_id,
    attempts = excluded.attempts, biz_code = excluded.biz_code, error = excluded.error,
    version = excluded.version, updated_at = excluded.updated_at, finished_at = excluded.finished_at,
    callback_done = excluded.callback_done;

-- name: LoadJobRows
-- The jobs read model's rows of some jobs, to fold a batch onto.
SELECT job_id::text, namespace, capability, status, coalesce(agent_id, ''), attempts,
       max_attempts, priority, coalesce(biz_code, ''), coalesce(error, ''), coalesce(trace_id, ''),
       coalesce(parent_job_id::text, ''), coalesce(root_job_id::text, ''), version,
       submitted_at, updated_at, finished_at, coalesce(callback_url, ''), callback_done, coalesce(replay_of::text, ''),
       coalesce(via, '')
FROM jobs WHERE job_id = ANY($1::uuid[]);

-- name: TruncateAlerts
-- Empties the alerts read model before a rebuild.
TRUNCATE alerts;

-- name: InsertAlerts
-- Adds a batch's alerts, one row per event position ($1..$7 are parallel arrays); a refolded event changes nothing.
INSERT INTO alerts (position, namespace, kind, subject, stream_id, data, recorded_at)
SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::jsonb[], $7::timestamptz[])
ON CONFLICT (position) DO NOTHING;
