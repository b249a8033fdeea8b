-- Where the log's time partitions begin. A job submitted before the log
-- was partitioned (migration 28), or within the hour after it, while
-- processes of the previous version may still be writing, keeps its whole
-- stream in events_kept: its later events must not land in a time
-- partition apart from its first ones. events_stream_at gives such a
-- stream -infinity, and no time partition is made below the cutoff.
--
-- The cutoff: where the partitions 28 made begin, when it made some; an
-- hour from now when jobs were written before; -infinity for a log that
-- never held a job.
CREATE TABLE event_log (
    singleton        boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    partitioned_from timestamptz NOT NULL
);

DO $migration$
DECLARE
    cutoff timestamptz;
BEGIN
    SELECT CASE
        WHEN EXISTS (SELECT 1 FROM event_partitions) THEN (SELECT min(low) FROM event_partitions)
        WHEN EXISTS (SELECT 1 FROM events_kept WHERE starts_with(stream_id, 'job:')) THEN now() + interval '1 hour'
        ELSE '-infinity'::timestamptz
    END INTO cutoff;
    INSERT INTO event_log (partitioned_from) VALUES (cutoff);
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
                ELSE '-infinity'::timestamptz
            END
        $body$$f$, cutoff);
END
$migration$;
