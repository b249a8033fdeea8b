-- Hourly series per agent, for trends.
CREATE OR REPLACE VIEW reach_health_hourly AS
SELECT bucket AS hour, namespace, agent_id,
       sum(attempted)::integer AS attempted, sum(delivered)::integer AS delivered,
       sum(succeeded)::integer AS succeeded, sum(failed)::integer AS failed, sum(timed_out)::integer AS timed_out,
       sum(delivered)::double precision / nullif(sum(attempted), 0) AS reach_rate,
       sum(succeeded)::double precision / nullif(sum(attempted), 0) AS success_rate,
       reach_hist_quantile(reach_hist_sum(result_hist), 0.95) AS latency_p95_ms
FROM agent_stats_hour GROUP BY 1, 2, 3;
