-- Agents below the alert thresholds in the alert window, with enough
-- attempts to judge. Its columns are reach_health's as they were when it was
-- made (migration 5), named one by one: a view keeps the columns its *
-- stood for then, and later columns of reach_health are not here.
CREATE OR REPLACE VIEW reach_alerts AS
SELECT r."window", r.namespace, r.agent_id, r.attempted, r.delivered,
       r.succeeded, r.failed, r.timed_out, r.dead_lettered, r.reach_rate,
       r.success_rate, r.health_score, r.latency_p50_ms, r.latency_p95_ms,
       r.latency_p99_ms, r.delivery_p50_ms, r.delivery_p95_ms,
       r.reach_rate < h.reach_alert AS reach_low, r.success_rate < h.success_alert AS success_low
FROM reach_health r CROSS JOIN health_settings h
WHERE r."window" = h.alert_window AND r.attempted >= h.alert_min_attempts
  AND (r.reach_rate < h.reach_alert OR r.success_rate < h.success_alert);
