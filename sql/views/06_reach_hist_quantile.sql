-- The q-quantile (0..1) of a histogram: the upper bound of the bucket in
-- which it falls; NULL for an empty histogram.
CREATE OR REPLACE FUNCTION reach_hist_quantile(hist integer[], q double precision) RETURNS double precision
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    WITH c AS (
        SELECT i - 1 AS k, sum(n) OVER (ORDER BY i) AS cum, sum(n) OVER () AS total
        FROM unnest(hist) WITH ORDINALITY AS u(n, i))
    SELECT reach_latency_bound(min(k)::integer) FROM c WHERE total > 0 AND cum >= ceil(q * total)
$$;
