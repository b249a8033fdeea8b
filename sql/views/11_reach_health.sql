-- reach_health: its present definition (the migrations keep its history).
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
           reach_hist_sum(result_hist) AS result_hist, reach_hist_sum(delivery_hist) AS delivery_hist,
           sum(direct_attempted)::integer AS direct_attempted, sum(direct_delivered)::integer AS direct_delivered,
           sum(direct_succeeded)::integer AS direct_succeeded, sum(direct_failed)::integer AS direct_failed
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
           a.result_hist, a.delivery_hist,
           coalesce(a.direct_attempted, 0) AS direct_attempted, coalesce(a.direct_delivered, 0) AS direct_delivered,
           coalesce(a.direct_succeeded, 0) AS direct_succeeded, coalesce(a.direct_failed, 0) AS direct_failed
    FROM agg a FULL JOIN known k ON k."window" = a."window" AND k.namespace = a.namespace AND k.agent_id = a.agent_id
), inbox AS (
    SELECT namespace, agent_id, count(*)::integer AS unclaimed FROM job_timers WHERE phase = 'inbox' GROUP BY 1, 2
), calling AS (
    -- Attempts routed to an agent that has not answered yet (an inline
    -- call under way): pending, never a failure.
    SELECT s.namespace, s.agent_id, count(*)::integer AS calling
    FROM agent_slots s JOIN job_timers t ON t.job_id = s.job_id AND t.phase = 'routed' GROUP BY 1, 2
), s AS (
    SELECT j.*, coalesce(i.unclaimed, 0) AS unclaimed, coalesce(c.calling, 0) AS calling,
           greatest(0, j.attempted - coalesce(i.unclaimed, 0) - coalesce(c.calling, 0)) AS settled
    FROM j LEFT JOIN inbox i ON i.namespace = j.namespace AND i.agent_id = j.agent_id
           LEFT JOIN calling c ON c.namespace = j.namespace AND c.agent_id = j.agent_id
)
SELECT j."window", j.namespace, j.agent_id, j.attempted, j.delivered, j.succeeded, j.failed, j.timed_out, j.dead_lettered,
       j.delivered::double precision / nullif(j.settled, 0) AS reach_rate,
       j.succeeded::double precision / nullif(j.settled - j.pending, 0) AS success_rate,
       h.reach_weight * j.delivered / nullif(j.settled, 0)
         + h.success_weight * j.succeeded / nullif(j.settled - j.pending, 0) AS health_score,
       reach_hist_quantile(j.result_hist, 0.50) AS latency_p50_ms,
       reach_hist_quantile(j.result_hist, 0.95) AS latency_p95_ms,
       reach_hist_quantile(j.result_hist, 0.99) AS latency_p99_ms,
       reach_hist_quantile(j.delivery_hist, 0.50) AS delivery_p50_ms,
       reach_hist_quantile(j.delivery_hist, 0.95) AS delivery_p95_ms,
       j.pending + j.calling AS pending,
       j.succeeded::double precision / nullif(j.delivered - j.pending, 0) AS business_success_rate,
       j.unclaimed,
       j.direct_attempted, j.direct_delivered, j.direct_succeeded, j.direct_failed
FROM s j CROSS JOIN health_settings h;
