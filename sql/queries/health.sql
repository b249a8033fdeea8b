-- Statements of package health: the reach_health views over the agent_stats
-- projection, and the alert thresholds of health_settings.

-- name: ReachHealthAgents
-- Every agent's figures over window $1, of namespace $2 or ('') of all, by agent id.
SELECT "window", namespace, agent_id, attempted, delivered, succeeded, failed, timed_out,
       dead_lettered, reach_rate, success_rate, health_score, latency_p50_ms, latency_p95_ms, latency_p99_ms,
       delivery_p50_ms, delivery_p95_ms, pending, business_success_rate, unclaimed,
       direct_attempted, direct_delivered, direct_succeeded, direct_failed
FROM reach_health WHERE "window" = $1 AND ($2 = '' OR namespace = $2) ORDER BY agent_id;

-- name: JudgeHealth
-- Whether each agent with enough attempts in the alert window is below an alert threshold.
SELECT r.namespace, r.agent_id, r.attempted, coalesce(r.reach_rate, 0), coalesce(r.success_rate, 0),
       (r.reach_rate < h.reach_alert OR r.success_rate < h.success_alert), h.alert_window
FROM reach_health r CROSS JOIN health_settings h
WHERE r."window" = h.alert_window AND r.attempted >= h.alert_min_attempts;

-- name: HealthSeries
-- Every agent's per-minute figures over the last hour, of namespace $1 or ('') of all, oldest first.
SELECT namespace, agent_id, bucket, sum(attempted)::int, sum(delivered)::int, sum(succeeded)::int
FROM agent_stats_minute WHERE bucket >= date_trunc('minute', now()) - interval '1 hour' AND ($1 = '' OR namespace = $1)
GROUP BY 1, 2, 3 ORDER BY 2, 1, 3;

-- name: AgentRecovery
-- An agent's time to recover: the last recovery and the mean over 24 hours; no row when it never recovered.
SELECT last_recovered_at, last_ms, mean_24h_ms, recoveries_24h FROM reach_recovery WHERE namespace = $1 AND agent_id = $2;

-- name: AgentMinuteSeries
-- One agent's per-minute figures over the last hour, oldest first: attempts, their outcomes, and the time to result (p50, p95).
SELECT bucket, sum(attempted)::int, sum(delivered)::int, sum(succeeded)::int, sum(failed)::int, sum(timed_out)::int,
       reach_hist_quantile(reach_hist_sum(result_hist), 0.50), reach_hist_quantile(reach_hist_sum(result_hist), 0.95)
FROM agent_stats_minute WHERE bucket >= date_trunc('minute', now()) - interval '1 hour' AND namespace = $1 AND agent_id = $2
GROUP BY 1 ORDER BY 1;

-- name: ListAlerts
-- Alerts newest first, of namespace $1 or ('') of all, of kinds $2 (empty: every kind), of subject $3 (''; any), before position $4 (0: the newest), at most $5.
SELECT position, namespace, kind, subject, data, recorded_at FROM alerts
WHERE ($1 = '' OR namespace = $1) AND (cardinality($2::text[]) = 0 OR kind = ANY($2)) AND ($3 = '' OR subject = $3)
  AND ($4 = 0 OR position < $4)
ORDER BY recorded_at DESC, position DESC LIMIT $5;

-- name: FleetMinutes
-- The fleet's figures per minute over the last hour, of namespace $1 or ('') of all, every minute present, oldest first: attempts, deliveries, outcomes, time to result (p50, p95).
WITH b AS (SELECT generate_series(date_trunc('minute', now()) - interval '59 minutes', date_trunc('minute', now()), interval '1 minute') AS bucket)
SELECT b.bucket, coalesce(sum(s.attempted), 0)::int, coalesce(sum(s.delivered), 0)::int, coalesce(sum(s.succeeded), 0)::int, coalesce(sum(s.failed), 0)::int,
       coalesce(sum(s.timed_out), 0)::int, coalesce(sum(s.dead_lettered), 0)::int,
       reach_hist_quantile(reach_hist_sum(s.result_hist), 0.50), reach_hist_quantile(reach_hist_sum(s.result_hist), 0.95)
FROM b LEFT JOIN agent_stats_minute s ON s.bucket = b.bucket AND ($1 = '' OR s.namespace = $1)
GROUP BY b.bucket ORDER BY b.bucket;

-- name: FleetHours
-- The fleet's figures per hour over the last $2 hours, of namespace $1 or ('') of all, every hour present, oldest first.
WITH b AS (SELECT generate_series(date_trunc('hour', now()) - ($2::int - 1) * interval '1 hour', date_trunc('hour', now()), interval '1 hour') AS bucket)
SELECT b.bucket, coalesce(sum(s.attempted), 0)::int, coalesce(sum(s.delivered), 0)::int, coalesce(sum(s.succeeded), 0)::int, coalesce(sum(s.failed), 0)::int,
       coalesce(sum(s.timed_out), 0)::int, coalesce(sum(s.dead_lettered), 0)::int,
       reach_hist_quantile(reach_hist_sum(s.result_hist), 0.50), reach_hist_quantile(reach_hist_sum(s.result_hist), 0.95)
FROM b LEFT JOIN agent_stats_hour s ON s.bucket = b.bucket AND ($1 = '' OR s.namespace = $1)
GROUP BY b.bucket ORDER BY b.bucket;
