-- Read model: the alerts an operator looks back on, folded from the log by
-- projection.Alerts: an agent's HEALTH_DEGRADED and HEALTH_RECOVERED, its
-- BREAKER_OPENED and BREAKER_CLOSED, a namespace's SELF_PRESERVATION and
-- SELF_PRESERVATION_ENDED, a lane's QUEUE_HIGH and QUEUE_NORMAL. One row
-- per event, keyed by its position, so a refold writes each once.
-- (Numbered 0020 to leave 0016-0019 to work on other branches.)
CREATE TABLE alerts (
    position    bigint      PRIMARY KEY,
    namespace   text        NOT NULL,
    kind        text        NOT NULL,
    subject     text        NOT NULL,
    stream_id   text        NOT NULL,
    data        jsonb       NOT NULL,
    recorded_at timestamptz NOT NULL
);

CREATE INDEX alerts_namespace_recorded_at ON alerts (namespace, recorded_at DESC);
CREATE INDEX alerts_recorded_at ON alerts (recorded_at DESC);
