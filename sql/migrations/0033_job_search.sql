-- Searching jobs (GET /v1/jobs?q=&trace_id=&since=&until=): a trace id
-- (or its prefix) walks an index of its own, a time range is a range of
-- job ids (UUIDv7: they begin with their submit time), and text in the
-- error is served by a trigram index within that range. pg_trgm is a
-- trusted extension (the database's owner may create it); where it may
-- not be created, text search still works, bounded by its required time
-- range, without the index. Only indexes are added: a process before this
-- one ignores them.
CREATE INDEX jobs_trace_idx ON jobs (trace_id text_pattern_ops) WHERE trace_id IS NOT NULL;

DO $migration$
BEGIN
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
    CREATE INDEX jobs_error_trgm_idx ON jobs USING gin (error gin_trgm_ops) WHERE error IS NOT NULL;
EXCEPTION WHEN insufficient_privilege OR feature_not_supported OR undefined_file THEN
    RAISE NOTICE 'pg_trgm is not available (%): a search of error text scans its time range', SQLERRM;
END
$migration$;
