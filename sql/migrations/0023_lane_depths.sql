-- Exact backpressure: how many jobs of each namespace's lane wait for an
-- attempt (SUBMITTED or TIMEOUT), kept by the transactions that change it.
-- A submit locks its lane's row, so no two submits to one lane decide on
-- the same count, and adds the jobs it admits; a job that comes back to
-- waiting (a failed or timed-out attempt, an approval) adds a row to
-- lane_entries, taking no lock. Jobs leaving the wait are not subtracted:
-- depth + entries is never below the truth, and a recount (a submit that
-- would pass the limit, and the pressure sweep every second) sets depth to
-- the waiting timers' count and folds the entries it saw. Timers say
-- their lane for it. Only columns and tables are added.
ALTER TABLE job_timers ADD COLUMN lane text;

CREATE TABLE lane_depths (
    namespace text    NOT NULL,
    lane      text    NOT NULL,
    depth     integer NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace, lane)
);

CREATE TABLE lane_entries (
    namespace text    NOT NULL,
    lane      text    NOT NULL,
    n         integer NOT NULL
);
