-- Capacity: one row per attempt that holds one of its agent's
-- max_concurrent slots, from ROUTED until the attempt ends (an outcome, a
-- failed attempt, TIMEOUT, a cancel, the dead letter). It is written in the
-- same transaction as the job's events (jobs.Service.appendTx), and a slot
-- is taken only under the agent's advisory lock after counting its rows, so
-- no agent holds more than max_concurrent attempts across every process. It
-- is derived state, rebuilt from the log: a job holds a slot exactly when
-- its fold names a SlotHolder.
CREATE TABLE agent_slots (
    job_id    uuid        PRIMARY KEY,
    namespace text        NOT NULL,
    agent_id  text        NOT NULL,
    attempt   integer     NOT NULL,
    taken_at  timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX agent_slots_agent_idx ON agent_slots (namespace, agent_id);

-- Attempts already under way when this migration runs hold their slots.
INSERT INTO agent_slots (job_id, namespace, agent_id, attempt)
SELECT job_id, namespace, agent_id, attempts FROM jobs
WHERE status IN ('DELIVERED', 'AWAITING_INPUT') AND agent_id IS NOT NULL AND agent_id <> ''
ON CONFLICT DO NOTHING;

-- A retry timer of an attempt that found no routable agent remembers when it
-- began waiting, so the wait is bounded by the job's route_wait_ms.
ALTER TABLE job_timers ADD COLUMN waiting_since timestamptz;

-- An operator's hold on an agent: 'drain' (DRAINING until it holds nothing,
-- then OFFLINE) or 'down' (DOWN until it registers again or is brought up,
-- whatever its heartbeats say). A registration lifts it.
ALTER TABLE agents ADD COLUMN hold text NOT NULL DEFAULT '' CHECK (hold IN ('', 'drain', 'down'));

-- What an agent's heartbeats last reported of its own health; the queue
-- length joins the router's load term.
ALTER TABLE agents ADD COLUMN reported_queue_length integer NOT NULL DEFAULT 0,
    ADD COLUMN reported_error_rate double precision,
    ADD COLUMN reported_pool_usage double precision;

-- The version of its protocol an agent speaks ("1.0" for A2A v1.0), which
-- a caller may require.
ALTER TABLE agents ADD COLUMN protocol_version text NOT NULL DEFAULT '';
