-- Statements of the tools and harnesses beside the service: scratch
-- databases for bench and demo, the counts chaos and demo wait on, and the
-- row counts `agentreach projections rebuild` reports. Taken by their
-- packages under internal/.

-- name: HarnessCreateDatabase :template
-- A scratch database next to the server's others; %s is its sanitised name.
CREATE DATABASE %s;

-- name: HarnessDropDatabase :template
-- Drop a scratch database, ending whatever is still connected to it.
DROP DATABASE IF EXISTS %s WITH (FORCE);

-- name: HarnessCountRows :template
-- Rows of one read-model table; %s is its sanitised name.
SELECT count(*) FROM %s;

-- name: ChaosJobCounts
-- Jobs not yet terminal, jobs whose callback is not acknowledged, and all
-- jobs: a chaos run is over when the first two are 0 and the last has every
-- accepted job.
SELECT count(*) FILTER (WHERE status NOT IN ('SUCCESS', 'FAILED', 'DEAD_LETTER', 'CANCELLED', 'REJECTED')),
       count(*) FILTER (WHERE NOT callback_done),
       count(*)
FROM jobs;

-- name: ChaosCheckpoints
-- Every projection's checkpoint as name@tx/position, for a run that timed out.
SELECT coalesce(string_agg(name || '@' || tx_id::text || '/' || position, ' '), '')
FROM projection_checkpoints;

-- name: DemoCountOpenJobs
-- Jobs not finished yet.
SELECT count(*) FROM jobs WHERE finished_at IS NULL;

-- name: BenchCommits
-- Transactions the current database has committed, for the bench's
-- transactions a job.
SELECT xact_commit FROM pg_stat_database WHERE datname = current_database();

-- name: BenchBackends
-- The backends connected to the current database, whose CPU time the bench
-- reads from /proc.
SELECT pid FROM pg_stat_activity WHERE datname = current_database();

-- name: BenchProjectionsBehind
-- Whether a projection has events of the log still to fold: the bench
-- waits for none before a measurement.
SELECT EXISTS (SELECT 1 FROM projection_checkpoints c
    WHERE EXISTS (SELECT 1 FROM (SELECT 1 FROM events e WHERE (e.tx_id, e.position) > (c.tx_id, c.position)
                                 ORDER BY e.tx_id, e.position LIMIT 1) AS next));

-- name: BenchTableSizes
-- Each table of the current schema with its size on disk, indexes and
-- TOAST included, for the bench's growth (bytes a job by table); a
-- partition counts as its table's (the log's are events_kept, events_p…).
SELECT coalesce((SELECT i.inhparent::regclass::text FROM pg_inherits i WHERE i.inhrelid = c.oid), c.relname::text),
       pg_total_relation_size(c.oid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'm') AND n.nspname = current_schema();

-- name: BenchFillAgentFigures
-- Fills the agents' figures of the bench's agents (bench-0 … bench-$3-1,
-- capability bench.echo) as if they had run $1 days: per-minute rows for
-- the last $2 minutes, per-hour rows for the last $1 days, each with the
-- histograms of a figure already there. Buckets the agents filled
-- themselves stay as they are.
WITH h AS (
    SELECT delivery_hist, result_hist FROM agent_stats_hour LIMIT 1
), agents AS (
    SELECT 'bench-' || i AS agent_id FROM generate_series(0, $3::int - 1) AS i
), minutes AS (
    INSERT INTO agent_stats_minute (namespace, agent_id, capability, bucket, attempted, delivered, succeeded, delivery_hist, result_hist)
    SELECT 'default', a.agent_id, 'bench.echo', b, 60, 60, 60, h.delivery_hist, h.result_hist
    FROM agents a CROSS JOIN h CROSS JOIN generate_series(date_trunc('minute', now()) - ($2::int - 1) * interval '1 minute',
        date_trunc('minute', now()), interval '1 minute') AS b
    ON CONFLICT DO NOTHING RETURNING 1
), hours AS (
    INSERT INTO agent_stats_hour (namespace, agent_id, capability, bucket, attempted, delivered, succeeded, delivery_hist, result_hist)
    SELECT 'default', a.agent_id, 'bench.echo', b, 3600, 3600, 3600, h.delivery_hist, h.result_hist
    FROM agents a CROSS JOIN h CROSS JOIN generate_series(date_trunc('hour', now()) - ($1::int * 24 - 1) * interval '1 hour',
        date_trunc('hour', now()), interval '1 hour') AS b
    ON CONFLICT DO NOTHING RETURNING 1
)
SELECT (SELECT count(*) FROM minutes), (SELECT count(*) FROM hours);
