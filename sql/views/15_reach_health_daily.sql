-- Daily series per agent, for trends past the per-hour figures' keep
-- (--hour-figures-kept): the days the per-hour figures rolled up into,
-- and the days they still cover.
CREATE OR REPLACE VIEW reach_health_daily AS
WITH d AS (
    SELECT bucket, namespace, agent_id, attempted, delivered, succeeded, failed, timed_out, result_hist
    FROM agent_stats_day
    UNION ALL
    SELECT date_trunc('day', bucket, 'UTC'), namespace, agent_id, attempted, delivered, succeeded, failed, timed_out, result_hist
    FROM agent_stats_hour
)
SELECT bucket AS day, namespace, agent_id,
       sum(attempted)::integer AS attempted, sum(delivered)::integer AS delivered,
       sum(succeeded)::integer AS succeeded, sum(failed)::integer AS failed, sum(timed_out)::integer AS timed_out,
       sum(delivered)::double precision / nullif(sum(attempted), 0) AS reach_rate,
       sum(succeeded)::double precision / nullif(sum(attempted), 0) AS success_rate,
       reach_hist_quantile(reach_hist_sum(result_hist), 0.95) AS latency_p95_ms
FROM d GROUP BY 1, 2, 3;
