-- The face each job was submitted through (SUBMITTED's via: a2a or mcp;
-- NULL: the REST API), in the jobs read model so that lists show it and
-- filter by it (GET /v1/jobs?via=) along an index. Only a column and an
-- index are added (the snapshot table, copied from it, gets the column
-- too): a process before this one ignores them.
ALTER TABLE jobs ADD COLUMN via text;
CREATE INDEX jobs_via_idx ON jobs (namespace, via, job_id DESC);
ALTER TABLE snapshot_jobs ADD COLUMN via text;
