-- Direct calls' reports go with retention too. A batch of reports is a
-- stream of its own, direct:<namespace>/<agent_id>/<batch>, whose batch is
-- a UUIDv7: events_stream_at now gives it that time, as it gives a job its
-- submit time, so new reports land in the log's time partitions and go
-- with them (retention keeps a partition that holds reports at least the
-- deployment's period past its end). Reports written before stay in
-- events_kept: readers of one stream look there as well.
--
-- The cutoff of migration 29 (event_log.partitioned_from) applies alike.
DO $migration$
DECLARE
    cutoff timestamptz;
BEGIN
    SELECT partitioned_from INTO cutoff FROM event_log;
    EXECUTE format($f$
        CREATE OR REPLACE FUNCTION events_stream_at(stream text) RETURNS timestamptz
        LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $body$
            SELECT CASE
                WHEN starts_with(stream, 'job:') AND length(stream) = 40 AND substr(stream, 19, 1) = '7'
                    AND substr(stream, 5, 8) || substr(stream, 14, 4) ~ '^[0-9a-f]{12}$'
                THEN CASE
                    WHEN to_timestamp(('x' || substr(stream, 5, 8) || substr(stream, 14, 4))::bit(48)::bigint / 1000.0) >= %1$L::timestamptz
                    THEN to_timestamp(('x' || substr(stream, 5, 8) || substr(stream, 14, 4))::bit(48)::bigint / 1000.0)
                    ELSE '-infinity'::timestamptz
                END
                WHEN starts_with(stream, 'direct:') AND length(stream) > 44 AND substr(stream, length(stream) - 36, 1) = '/'
                    AND substr(stream, length(stream) - 21, 1) = '7'
                    AND substr(stream, length(stream) - 35, 8) || substr(stream, length(stream) - 26, 4) ~ '^[0-9a-f]{12}$'
                THEN CASE
                    WHEN to_timestamp(('x' || substr(stream, length(stream) - 35, 8) || substr(stream, length(stream) - 26, 4))::bit(48)::bigint / 1000.0) >= %1$L::timestamptz
                    THEN to_timestamp(('x' || substr(stream, length(stream) - 35, 8) || substr(stream, length(stream) - 26, 4))::bit(48)::bigint / 1000.0)
                    ELSE '-infinity'::timestamptz
                END
                ELSE '-infinity'::timestamptz
            END
        $body$$f$, cutoff);
END
$migration$;
