-- Where each projection stands in the global log. A projection moves its
-- checkpoint in the same transaction as its read model.
CREATE TABLE projection_checkpoints (
    name       text        PRIMARY KEY,
    tx_id      xid8        NOT NULL DEFAULT '0',
    position   bigint      NOT NULL DEFAULT 0,
    events     bigint      NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- Read model: the current state of every job, for listing and filtering.
-- Polling a single job folds its stream instead, so it is never stale.
CREATE TABLE jobs (
    job_id          uuid        PRIMARY KEY,
    namespace       text        NOT NULL,
    capability      text        NOT NULL,
    status          text        NOT NULL,
    agent_id        text,
    attempts        integer     NOT NULL DEFAULT 0,
    max_attempts    integer     NOT NULL,
    priority        text        NOT NULL,
    biz_code        text,
    error           text,
    trace_id        text,
    parent_job_id   uuid,
    root_job_id     uuid,
    version         integer     NOT NULL,
    submitted_at    timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    finished_at     timestamptz
);

CREATE INDEX jobs_namespace_job_idx ON jobs (namespace, job_id DESC);
CREATE INDEX jobs_status_idx ON jobs (namespace, status, job_id DESC);
CREATE INDEX jobs_capability_idx ON jobs (namespace, capability, job_id DESC);
CREATE INDEX jobs_agent_idx ON jobs (agent_id, job_id DESC);
