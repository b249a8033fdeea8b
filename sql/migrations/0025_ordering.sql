-- Ordered delivery per key: a job submitted with an ordering_key takes its
-- place (seq) in its namespace's queue of that key in its submit's
-- transaction, under the key's advisory lock; it leaves in the
-- transaction that ends it, which makes the next job's timer due. A job
-- behind others waits on a timer of its own phase, 'ordered'. Only a table
-- and a phase are added.
CREATE TABLE ordered_jobs (
    namespace    text      NOT NULL,
    ordering_key text      NOT NULL,
    seq          bigserial NOT NULL,
    job_id       uuid      NOT NULL UNIQUE,
    PRIMARY KEY (namespace, ordering_key, seq)
);

ALTER TABLE job_timers DROP CONSTRAINT job_timers_phase_check;
ALTER TABLE job_timers ADD CONSTRAINT job_timers_phase_check
    CHECK (phase IN ('queued', 'routed', 'inbox', 'delivered', 'retry', 'callback', 'approval', 'input', 'ordered'));
