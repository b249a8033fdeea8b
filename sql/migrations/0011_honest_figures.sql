-- Honest health figures.
--   * An attempt delivered and still waiting for its result (an async 202
--     inside its deadline) is pending, not a failure: it counts in neither
--     success_rate nor health_score until it ends.
--   * business_success_rate is succeeded over delivered (settled) attempts,
--     so an agent's own failures can be told from reach failures.
--   * Every registered agent has a row in every window, also one never
--     reached (attempted 0, rates NULL).
CREATE OR REPLACE VIEW reach_health AS
WITH buckets AS (
    SELECT w.name AS "window", s.*
    FROM reach_windows w JOIN agent_stats_minute s
      ON w.source = 'minute' AND s.bucket >= date_trunc('minute', now()) - w.span
    UNION ALL
    SELECT w.name, s.*
    FROM reach_windows w JOIN agent_stats_hour s
      ON w.source = 'hour' AND s.bucket >= date_trunc('hour', now()) - w.span
), agg AS (
    SELECT "window", namespace, agent_id,
           sum(attempted)::integer AS attempted, sum(delivered)::integer AS delivered,
           sum(succeeded)::integer AS succeeded, sum(failed)::integer AS failed,
           sum(timed_out)::integer AS timed_out, sum(dead_lettered)::integer AS dead_lettered,
           reach_hist_sum(result_hist) AS result_hist, reach_hist_sum(delivery_hist) AS delivery_hist
    FROM buckets GROUP BY 1, 2, 3
), known AS (
    SELECT w.name AS "window", g.namespace, g.agent_id
    FROM reach_windows w CROSS JOIN agents g WHERE NOT g.deregistered
), j AS (
    SELECT coalesce(a."window", k."window") AS "window", coalesce(a.namespace, k.namespace) AS namespace,
           coalesce(a.agent_id, k.agent_id) AS agent_id,
           coalesce(a.attempted, 0) AS attempted, coalesce(a.delivered, 0) AS delivered,
           coalesce(a.succeeded, 0) AS succeeded, coalesce(a.failed, 0) AS failed,
           coalesce(a.timed_out, 0) AS timed_out, coalesce(a.dead_lettered, 0) AS dead_lettered,
           greatest(0, coalesce(a.delivered, 0) - coalesce(a.succeeded, 0) - coalesce(a.failed, 0) - coalesce(a.timed_out, 0)) AS pending,
           a.result_hist, a.delivery_hist
    FROM agg a FULL JOIN known k ON k."window" = a."window" AND k.namespace = a.namespace AND k.agent_id = a.agent_id
)
SELECT j."window", j.namespace, j.agent_id, j.attempted, j.delivered, j.succeeded, j.failed, j.timed_out, j.dead_lettered,
       j.delivered::double precision / nullif(j.attempted, 0) AS reach_rate,
       j.succeeded::double precision / nullif(j.attempted - j.pending, 0) AS success_rate,
       h.reach_weight * j.delivered / nullif(j.attempted, 0)
         + h.success_weight * j.succeeded / nullif(j.attempted - j.pending, 0) AS health_score,
       reach_hist_quantile(j.result_hist, 0.50) AS latency_p50_ms,
       reach_hist_quantile(j.result_hist, 0.95) AS latency_p95_ms,
       reach_hist_quantile(j.result_hist, 0.99) AS latency_p99_ms,
       reach_hist_quantile(j.delivery_hist, 0.50) AS delivery_p50_ms,
       reach_hist_quantile(j.delivery_hist, 0.95) AS delivery_p95_ms,
       j.pending,
       j.succeeded::double precision / nullif(j.delivered - j.pending, 0) AS business_success_rate
FROM j CROSS JOIN health_settings h;

-- Flap damping: how many times an agent re-registered in the hour before
-- its latest registration, and how many probes in a row it has passed
-- since (a flapping one needs several).
ALTER TABLE agents ADD COLUMN recent_restarts integer NOT NULL DEFAULT 0,
    ADD COLUMN probe_streak integer NOT NULL DEFAULT 0;

-- Whether the agent's breaker was last recorded open (BREAKER_OPENED) or
-- closed (BREAKER_CLOSED), so each turn is recorded once.
ALTER TABLE agents ADD COLUMN breaker_open boolean NOT NULL DEFAULT false;
