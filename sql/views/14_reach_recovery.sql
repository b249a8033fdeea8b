-- Time to recover, per agent, from its stream: from DOWN or HEALTH_DEGRADED
-- to HEALTHY or HEALTH_RECOVERED. Runs of the same mark collapse to their
-- first event, so an outage is measured from its start to the first good
-- mark after it. The last recovery, and the mean and count over 24 hours.
CREATE OR REPLACE VIEW reach_recovery AS
WITH marks AS (
    SELECT stream_id, position, recorded_at,
           CASE WHEN type = 'HEALTH_DEGRADED' OR (type = 'AGENT_STATE_CHANGED' AND data->>'to' = 'DOWN')
                THEN 'bad' ELSE 'good' END AS mark
    FROM events
    WHERE stream_id LIKE 'agent:%/%' AND stream_at = '-infinity' -- agents' streams live in events_kept
      AND (type IN ('HEALTH_DEGRADED', 'HEALTH_RECOVERED')
           OR (type = 'AGENT_STATE_CHANGED' AND data->>'to' IN ('DOWN', 'HEALTHY')))
), turns AS (
    SELECT * FROM (
        SELECT *, lag(mark) OVER (PARTITION BY stream_id ORDER BY position) AS prev FROM marks
    ) m WHERE prev IS DISTINCT FROM mark
), spans AS (
    SELECT stream_id, mark, recorded_at,
           lag(mark) OVER (PARTITION BY stream_id ORDER BY position) AS from_mark,
           recorded_at - lag(recorded_at) OVER (PARTITION BY stream_id ORDER BY position) AS took
    FROM turns
)
SELECT split_part(substr(stream_id, 7), '/', 1) AS namespace,
       substr(stream_id, strpos(stream_id, '/') + 1) AS agent_id,
       max(recorded_at) AS last_recovered_at,
       (array_agg(extract(epoch FROM took) * 1000 ORDER BY recorded_at DESC))[1]::double precision AS last_ms,
       (avg(extract(epoch FROM took) * 1000) FILTER (WHERE recorded_at >= now() - interval '24 hours'))::double precision AS mean_24h_ms,
       (count(*) FILTER (WHERE recorded_at >= now() - interval '24 hours'))::integer AS recoveries_24h
FROM spans
WHERE mark = 'good' AND from_mark = 'bad'
GROUP BY stream_id;
