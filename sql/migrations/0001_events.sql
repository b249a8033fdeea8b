-- The event log: every fact of every stream, immutable.
--
-- position orders events globally for reference; readers of the global log
-- order by (tx_id, position) and read only below pg_snapshot_xmin, so an event
-- whose transaction commits late is never skipped (see eventstore.ReadAll).
CREATE TABLE events (
    position    bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tx_id       xid8        NOT NULL DEFAULT pg_current_xact_id(),
    stream_id   text        NOT NULL,
    version     integer     NOT NULL CHECK (version > 0),
    type        text        NOT NULL,
    data        jsonb       NOT NULL DEFAULT '{}',
    metadata    jsonb       NOT NULL DEFAULT '{}',
    recorded_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT events_stream_version_key UNIQUE (stream_id, version)
);

CREATE INDEX events_tx_position_idx ON events (tx_id, position);
CREATE INDEX events_type_recorded_idx ON events (type, recorded_at);

-- The log is the audit trail: the database itself refuses to change it.
CREATE FUNCTION events_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'events are immutable: % refused', TG_OP
        USING ERRCODE = 'restrict_violation', HINT = 'append a new event instead';
END;
$$;

CREATE TRIGGER events_no_update_delete
    BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION events_immutable();

CREATE TRIGGER events_no_truncate
    BEFORE TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION events_immutable();
