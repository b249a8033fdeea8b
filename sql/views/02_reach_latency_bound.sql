-- reach_latency_bound: its present definition (the migrations keep its history).
CREATE OR REPLACE FUNCTION reach_latency_bound(bucket integer) RETURNS double precision
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT power(1.25, bucket)
$$;
