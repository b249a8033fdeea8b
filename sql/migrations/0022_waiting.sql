-- An attempt waiting for a slot (or a routable agent) says what it waits
-- for on its retry timer: the capability, and its rank among the waiters
-- (when its wait began, pushed back a minute a lane below high). A slot
-- given back wakes the waiter of the lowest rank for that agent at once,
-- in the transaction that gives it back. Only columns and an index are
-- added: a release before this one ignores them.
ALTER TABLE job_timers ADD COLUMN capability text, ADD COLUMN rank_at timestamptz;
CREATE INDEX job_timers_waiting_idx ON job_timers (namespace, capability, rank_at)
    WHERE capability IS NOT NULL;
