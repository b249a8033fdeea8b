-- Element-wise sum of two histograms (NULL counts as empty).
CREATE OR REPLACE FUNCTION reach_hist_add(a integer[], b integer[]) RETURNS integer[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN a IS NULL THEN b WHEN b IS NULL THEN a ELSE
        (SELECT array_agg(x + y ORDER BY i) FROM unnest(a, b) WITH ORDINALITY AS u(x, y, i)) END
$$;
