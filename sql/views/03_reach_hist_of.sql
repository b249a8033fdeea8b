-- The histogram of a list of latencies.
CREATE OR REPLACE FUNCTION reach_hist_of(ms double precision[]) RETURNS integer[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT array_agg(coalesce(c.n, 0)::integer ORDER BY b.k)
    FROM generate_series(0, 80) AS b(k)
    LEFT JOIN (SELECT reach_latency_bucket(m) AS k, count(*) AS n FROM unnest(ms) AS m GROUP BY 1) c ON c.k = b.k
$$;
