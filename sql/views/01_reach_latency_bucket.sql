-- Latency histograms are arrays of 81 counts. Bucket k (array index k+1)
-- holds latencies in (1.25^(k-1), 1.25^k] milliseconds; bucket 0 holds
-- everything up to 1 ms and bucket 80 everything above 1.25^79 ms (~12 h).
-- Adjacent bounds differ by 25 %, so a percentile read from a histogram is
-- within one bucket of the exact value.
CREATE OR REPLACE FUNCTION reach_latency_bucket(ms double precision) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN ms <= 1 THEN 0 ELSE least(80, ceil(ln(ms) / ln(1.25))::integer) END
$$;
