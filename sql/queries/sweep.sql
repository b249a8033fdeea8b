-- Statements of package sweep: the sweep leadership, a session advisory lock.

-- name: SweepTryLeadership
-- Takes the sweep leadership (session advisory lock $1) if no session holds it; true when taken.
SELECT pg_try_advisory_lock($1);

-- name: SweepStillLeading
-- Whether this session still holds the sweep leadership (lock $1): the high and low halves of the key are classid and objid.
SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = pg_backend_pid()
    AND classid = (($1::bigint >> 32) & 4294967295)::oid AND objid = ($1::bigint & 4294967295)::oid AND objsubid = 1);

-- name: SweepReleaseLeadership
-- Gives the sweep leadership (lock $1) back.
SELECT pg_advisory_unlock($1);
