-- Submit: an Idempotency-Key maps to the job it created, with a hash of the
-- request so a reuse with another body is a conflict.
CREATE TABLE idempotency_keys (
    namespace    text        NOT NULL,
    key          text        NOT NULL,
    job_id       uuid        NOT NULL,
    request_hash bytea       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, key)
);

-- Fan-out guard: how many descendants each root job has.
CREATE TABLE job_roots (
    root_job_id uuid    PRIMARY KEY,
    descendants integer NOT NULL
);

-- Each unfinished piece of work of a job has one timer, written in the
-- same transaction as what sets it; the deadline sweep reads due rows:
--   queued     a River job (river_job_id) should be working on the job: if
--              it is stuck (its process died) or gone, enqueue another;
--   routed     an attempt must record its outcome by due_at, or it is lost;
--   delivered  an attempt must have its result by due_at, or TIMEOUT;
--   retry      the next attempt starts at due_at;
--   callback   the caller's callback job (river_job_id) must be alive;
--   approval   a job awaiting approval is rejected at due_at.
-- Not the log: rows are deleted when their work is done.
CREATE TABLE job_timers (
    job_id       uuid        PRIMARY KEY,
    attempt      integer     NOT NULL,
    agent_id     text        NOT NULL DEFAULT '',
    phase        text        NOT NULL CHECK (phase IN ('queued', 'routed', 'delivered', 'retry', 'callback', 'approval')),
    due_at       timestamptz NOT NULL,
    river_job_id bigint
);

CREATE INDEX job_timers_due_idx ON job_timers (due_at);

-- Secrets that sign outgoing requests (caller callbacks).
CREATE TABLE signing_secrets (
    name       text        PRIMARY KEY,
    secret     text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- The jobs read model also answers the compensation sweeps.
ALTER TABLE jobs ADD COLUMN callback_url text;
-- callback_done: acknowledged, or given up after its last attempt.
ALTER TABLE jobs ADD COLUMN callback_done boolean NOT NULL DEFAULT false;
ALTER TABLE jobs ADD COLUMN replay_of uuid;
CREATE INDEX jobs_open_idx ON jobs (updated_at) WHERE status IN ('SUBMITTED', 'TIMEOUT');
CREATE INDEX jobs_callback_due_idx ON jobs (finished_at)
    WHERE finished_at IS NOT NULL AND callback_url IS NOT NULL AND NOT callback_done;
