-- Health analytics: per-agent, per-capability time buckets folded from the
-- event log by the agent_stats projection, and the views analysts query.

-- Latency histograms are arrays of 81 counts. Bucket k (array index k+1)
-- holds latencies in (1.25^(k-1), 1.25^k] milliseconds; bucket 0 holds
-- everything up to 1 ms and bucket 80 everything above 1.25^79 ms (~12 h).
-- Adjacent bounds differ by 25 %, so a percentile read from a histogram is
-- within one bucket of the exact value.
CREATE FUNCTION reach_latency_bucket(ms double precision) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN ms <= 1 THEN 0 ELSE least(80, ceil(ln(ms) / ln(1.25))::integer) END
$$;

CREATE FUNCTION reach_latency_bound(bucket integer) RETURNS double precision
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT power(1.25, bucket)
$$;

-- The histogram of a list of latencies.
CREATE FUNCTION reach_hist_of(ms double precision[]) RETURNS integer[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT array_agg(coalesce(c.n, 0)::integer ORDER BY b.k)
    FROM generate_series(0, 80) AS b(k)
    LEFT JOIN (SELECT reach_latency_bucket(m) AS k, count(*) AS n FROM unnest(ms) AS m GROUP BY 1) c ON c.k = b.k
$$;

-- Element-wise sum of two histograms (NULL counts as empty).
CREATE FUNCTION reach_hist_add(a integer[], b integer[]) RETURNS integer[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN a IS NULL THEN b WHEN b IS NULL THEN a ELSE
        (SELECT array_agg(x + y ORDER BY i) FROM unnest(a, b) WITH ORDINALITY AS u(x, y, i)) END
$$;

CREATE AGGREGATE reach_hist_sum(integer[]) (SFUNC = reach_hist_add, STYPE = integer[]);

-- The q-quantile (0..1) of a histogram: the upper bound of the bucket in
-- which it falls; NULL for an empty histogram.
CREATE FUNCTION reach_hist_quantile(hist integer[], q double precision) RETURNS double precision
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    WITH c AS (
        SELECT i - 1 AS k, sum(n) OVER (ORDER BY i) AS cum, sum(n) OVER () AS total
        FROM unnest(hist) WITH ORDINALITY AS u(n, i))
    SELECT reach_latency_bound(min(k)::integer) FROM c WHERE total > 0 AND cum >= ceil(q * total)
$$;

CREATE TABLE agent_stats_minute (
    agent_id      text             NOT NULL,
    capability    text             NOT NULL,
    bucket        timestamptz      NOT NULL,
    namespace     text             NOT NULL,
    attempted     integer          NOT NULL DEFAULT 0,
    delivered     integer          NOT NULL DEFAULT 0,
    succeeded     integer          NOT NULL DEFAULT 0,
    failed        integer          NOT NULL DEFAULT 0,
    timed_out     integer          NOT NULL DEFAULT 0,
    dead_lettered integer          NOT NULL DEFAULT 0,
    delivery_hist integer[]        NOT NULL,
    result_hist   integer[]        NOT NULL,
    PRIMARY KEY (agent_id, capability, bucket)
);
CREATE INDEX agent_stats_minute_bucket_idx ON agent_stats_minute (bucket);

-- The same per hour: a 24 h window reads 24 rows per agent and capability.
CREATE TABLE agent_stats_hour (LIKE agent_stats_minute INCLUDING ALL);

-- Tunable weights and alert thresholds (one row).
CREATE TABLE health_settings (
    id              boolean          PRIMARY KEY DEFAULT true CHECK (id),
    reach_weight    double precision NOT NULL DEFAULT 0.4,
    success_weight  double precision NOT NULL DEFAULT 0.6,
    reach_alert     double precision NOT NULL DEFAULT 0.99,
    success_alert   double precision NOT NULL DEFAULT 0.95,
    alert_window    text             NOT NULL DEFAULT '5m',
    alert_min_attempts integer       NOT NULL DEFAULT 5
);
INSERT INTO health_settings DEFAULT VALUES;

-- The windows the views offer. A window covers the last span rounded out
-- to whole buckets: '5m' is the current minute and the five before it.
CREATE VIEW reach_windows (name, span, source) AS VALUES
    ('1m',  interval '1 minute',  'minute'),
    ('5m',  interval '5 minutes', 'minute'),
    ('1h',  interval '1 hour',    'minute'),
    ('24h', interval '24 hours',  'hour');

-- Per agent and window: counts, rates, health score and latency percentiles
-- (latency = time from routing to result; delivery = the HTTP round trip).
CREATE VIEW reach_health AS
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
)
SELECT a."window", a.namespace, a.agent_id, a.attempted, a.delivered, a.succeeded, a.failed, a.timed_out, a.dead_lettered,
       a.delivered::double precision / nullif(a.attempted, 0) AS reach_rate,
       a.succeeded::double precision / nullif(a.attempted, 0) AS success_rate,
       h.reach_weight * a.delivered / nullif(a.attempted, 0)
         + h.success_weight * a.succeeded / nullif(a.attempted, 0) AS health_score,
       reach_hist_quantile(a.result_hist, 0.50) AS latency_p50_ms,
       reach_hist_quantile(a.result_hist, 0.95) AS latency_p95_ms,
       reach_hist_quantile(a.result_hist, 0.99) AS latency_p99_ms,
       reach_hist_quantile(a.delivery_hist, 0.50) AS delivery_p50_ms,
       reach_hist_quantile(a.delivery_hist, 0.95) AS delivery_p95_ms
FROM agg a CROSS JOIN health_settings h;

-- Hourly series per agent, for trends.
CREATE VIEW reach_health_hourly AS
SELECT bucket AS hour, namespace, agent_id,
       sum(attempted)::integer AS attempted, sum(delivered)::integer AS delivered,
       sum(succeeded)::integer AS succeeded, sum(failed)::integer AS failed, sum(timed_out)::integer AS timed_out,
       sum(delivered)::double precision / nullif(sum(attempted), 0) AS reach_rate,
       sum(succeeded)::double precision / nullif(sum(attempted), 0) AS success_rate,
       reach_hist_quantile(reach_hist_sum(result_hist), 0.95) AS latency_p95_ms
FROM agent_stats_hour GROUP BY 1, 2, 3;

-- Agents below the alert thresholds in the alert window, with enough
-- attempts to judge.
CREATE VIEW reach_alerts AS
SELECT r.*, r.reach_rate < h.reach_alert AS reach_low, r.success_rate < h.success_alert AS success_low
FROM reach_health r CROSS JOIN health_settings h
WHERE r."window" = h.alert_window AND r.attempted >= h.alert_min_attempts
  AND (r.reach_rate < h.reach_alert OR r.success_rate < h.success_alert);

-- Whether an agent's health alert is raised: HEALTH_DEGRADED and
-- HEALTH_RECOVERED are appended once per crossing.
ALTER TABLE agents ADD COLUMN health_degraded boolean NOT NULL DEFAULT false;
