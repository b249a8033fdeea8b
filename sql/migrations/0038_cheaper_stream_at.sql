-- events_stream_at again, with the same answer for every stream at a third
-- of the cost: each shared append evaluates it for its rows and for the
-- probe of each row's base event, and every read of one stream for its
-- partitions. The hex check is ltrim against the hex digits instead of a
-- regular expression; the division is in double precision, not numeric
-- (both give the double nearest the exact number of seconds, which
-- to_timestamp takes); and a log partitioned from -infinity (one that never
-- held a job before migration 28) compares with no cutoff. The cutoff of
-- migration 29 (event_log.partitioned_from) applies as before.
DO $migration$
DECLARE
    cutoff    timestamptz;
    job_at    text := $e$to_timestamp(('x' || substr(stream, 5, 8) || substr(stream, 14, 4))::bit(48)::bigint::float8 / 1000)$e$;
    direct_at text := $e$to_timestamp(('x' || substr(stream, length(stream) - 35, 8) || substr(stream, length(stream) - 26, 4))::bit(48)::bigint::float8 / 1000)$e$;
BEGIN
    SELECT partitioned_from INTO cutoff FROM event_log;
    IF cutoff IS DISTINCT FROM '-infinity' THEN -- a NULL cutoff (no row) compares as before: no stream gets a time
        job_at := format($e$CASE WHEN %1$s >= %2$L::timestamptz THEN %1$s ELSE '-infinity'::timestamptz END$e$, job_at, cutoff);
        direct_at := format($e$CASE WHEN %1$s >= %2$L::timestamptz THEN %1$s ELSE '-infinity'::timestamptz END$e$, direct_at, cutoff);
    END IF;
    EXECUTE format($f$
        CREATE OR REPLACE FUNCTION events_stream_at(stream text) RETURNS timestamptz
        LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $body$
            SELECT CASE
                WHEN starts_with(stream, 'job:') AND length(stream) = 40 AND substr(stream, 19, 1) = '7'
                    AND ltrim(substr(stream, 5, 8) || substr(stream, 14, 4), '0123456789abcdef') = ''
                THEN %1$s
                WHEN starts_with(stream, 'direct:') AND length(stream) > 44 AND substr(stream, length(stream) - 36, 1) = '/'
                    AND substr(stream, length(stream) - 21, 1) = '7'
                    AND ltrim(substr(stream, length(stream) - 35, 8) || substr(stream, length(stream) - 26, 4), '0123456789abcdef') = ''
                THEN %2$s
                ELSE '-infinity'::timestamptz
            END
        $body$$f$, job_at, direct_at);
END
$migration$;
