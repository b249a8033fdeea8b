-- The log, partitioned so that retention drops whole partitions and never
-- deletes a row.
--
-- Each event carries stream_at, a function of its stream alone: for a job's
-- stream the time in its UUIDv7 id (when it was submitted), for every other
-- stream (agents, registries, policies, keys) -infinity. A job's stream
-- thus lives in one time partition, dropped once every job in it is past
-- retention; long-lived streams live in events_kept, which is never dropped.
--
-- The table as it was becomes events_kept, whole (no copy): its rows get
-- stream_at -infinity, so history recorded before this migration is kept.
-- A binary that predates stream_at inserts -infinity as well, and readers
-- of one stream look in its time partition and in events_kept.
CREATE FUNCTION events_stream_at(stream text) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN starts_with(stream, 'job:') AND length(stream) = 40 AND substr(stream, 19, 1) = '7'
            AND substr(stream, 5, 8) || substr(stream, 14, 4) ~ '^[0-9a-f]{12}$'
        THEN to_timestamp(('x' || substr(stream, 5, 8) || substr(stream, 14, 4))::bit(48)::bigint / 1000.0)
        ELSE '-infinity'::timestamptz
    END
$$;

ALTER TABLE events RENAME TO events_kept;
ALTER TABLE events_kept ALTER COLUMN position DROP IDENTITY;
ALTER TABLE events_kept ADD COLUMN stream_at timestamptz NOT NULL DEFAULT '-infinity';
ALTER TABLE events_kept DROP CONSTRAINT events_pkey;
ALTER TABLE events_kept DROP CONSTRAINT events_stream_version_key;
ALTER INDEX events_tx_position_idx RENAME TO events_kept_tx_id_position_idx;
ALTER INDEX events_agent_marks_idx RENAME TO events_kept_stream_id_position_idx;
DROP TRIGGER events_no_update_delete ON events_kept;
DROP TRIGGER events_no_truncate ON events_kept;

CREATE TABLE events (
    position    bigint      GENERATED ALWAYS AS IDENTITY,
    tx_id       xid8        NOT NULL DEFAULT pg_current_xact_id(),
    stream_id   text        NOT NULL,
    version     integer     NOT NULL CONSTRAINT events_version_check CHECK (version > 0),
    type        text        NOT NULL,
    data        jsonb       NOT NULL DEFAULT '{}',
    metadata    jsonb       NOT NULL DEFAULT '{}',
    recorded_at timestamptz NOT NULL DEFAULT now(),
    stream_at   timestamptz NOT NULL DEFAULT '-infinity',
    CONSTRAINT events_pkey PRIMARY KEY (position, stream_at),
    CONSTRAINT events_stream_version_key UNIQUE (stream_id, version, stream_at)
) PARTITION BY RANGE (stream_at);

CREATE INDEX events_tx_position_idx ON events (tx_id, position);
CREATE INDEX events_agent_marks_idx ON events (stream_id, position)
    WHERE type IN ('HEALTH_DEGRADED', 'HEALTH_RECOVERED', 'AGENT_STATE_CHANGED');

SELECT setval(pg_get_serial_sequence('events', 'position'),
              (SELECT coalesce(max(position), 0) + 1 FROM events_kept), false);

ALTER TABLE events ATTACH PARTITION events_kept FOR VALUES FROM (MINVALUE) TO ('1970-01-01');

-- Still the audit trail: rows of every partition refuse change (the row
-- trigger is cloned onto each partition); a partition goes only whole.
CREATE TRIGGER events_no_update_delete
    BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION events_immutable();

CREATE TRIGGER events_no_truncate
    BEFORE TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION events_immutable();

CREATE TRIGGER events_kept_no_truncate
    BEFORE TRUNCATE ON events_kept
    FOR EACH STATEMENT EXECUTE FUNCTION events_immutable();

-- The time partitions: created ahead of need, dropped by retention. A row
-- outlives its partition as the record of what was dropped and when.
CREATE TABLE event_partitions (
    name        text        PRIMARY KEY,
    low         timestamptz NOT NULL,
    high        timestamptz NOT NULL CHECK (high > low),
    created_at  timestamptz NOT NULL DEFAULT now(),
    archived_to text,
    dropping_at timestamptz,
    dropped_at  timestamptz
);

-- How long a namespace keeps its finished jobs' history, when it asks for
-- less than the deployment's period (0: it gave its own up).
CREATE TABLE retention_policies (
    namespace    text        PRIMARY KEY,
    keep_seconds bigint      NOT NULL CHECK (keep_seconds >= 0),
    version    integer     NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
