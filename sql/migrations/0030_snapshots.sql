-- Snapshots of the read models, so that a rebuild starts from the latest
-- one instead of position 0 of the log, and the per-day agent figures the
-- per-hour ones roll up into.
--
-- A snapshot is each read-model table copied whole, with the checkpoint its
-- rows stand at, taken in one REPEATABLE READ transaction (the projector
-- moves a read model and its checkpoint together, so the copy is
-- consistent). What retention and the figures' roll-ups take from a read
-- model they take from its snapshot in the same statement, so a snapshot
-- plus the log after its checkpoint folds to what the live read model holds.
-- A snapshot table has its read model's columns in the same order
-- (TestSnapshotTablesMatchTheirReadModels).
CREATE TABLE projection_snapshots (
    name     text        PRIMARY KEY,
    tx_id    xid8        NOT NULL,
    position bigint      NOT NULL,
    events   bigint      NOT NULL,
    rows     bigint      NOT NULL,
    taken_at timestamptz NOT NULL DEFAULT now()
);

-- Per-day agent figures: per-hour ones older than --hour-figures-kept
-- (a month by default) are summed into these.
CREATE TABLE agent_stats_day (LIKE agent_stats_hour INCLUDING ALL);

CREATE TABLE snapshot_jobs (LIKE jobs INCLUDING DEFAULTS, PRIMARY KEY (job_id));
CREATE TABLE snapshot_agent_stats_minute (LIKE agent_stats_minute INCLUDING DEFAULTS);
CREATE TABLE snapshot_agent_stats_hour (LIKE agent_stats_hour INCLUDING DEFAULTS,
    PRIMARY KEY (namespace, agent_id, capability, bucket));
CREATE TABLE snapshot_agent_stats_day (LIKE agent_stats_day INCLUDING DEFAULTS,
    PRIMARY KEY (namespace, agent_id, capability, bucket));
CREATE TABLE snapshot_alerts (LIKE alerts INCLUDING DEFAULTS);

-- The first and last positions of the events a dropped partition held, so
-- that a reader resuming from a position retention dropped is told so
-- (410 history_dropped) rather than that it never existed.
ALTER TABLE event_partitions ADD COLUMN first_position bigint, ADD COLUMN last_position bigint;
