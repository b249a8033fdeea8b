-- Pull-mode agents (domain.ModePull): no endpoint; they claim their work.
ALTER TABLE agents ADD COLUMN mode text NOT NULL DEFAULT 'push' CHECK (mode IN ('push', 'pull'));

-- An attempt routed to a pull agent waits in its inbox: the job's timer in
-- phase 'inbox', due at the claim timeout, naming the agent by namespace
-- and id. A claim takes the oldest of them FOR UPDATE SKIP LOCKED.
ALTER TABLE job_timers DROP CONSTRAINT job_timers_phase_check;
ALTER TABLE job_timers ADD CONSTRAINT job_timers_phase_check
    CHECK (phase IN ('queued', 'routed', 'inbox', 'delivered', 'retry', 'callback', 'approval', 'input'));
ALTER TABLE job_timers ADD COLUMN namespace text NOT NULL DEFAULT '';
CREATE INDEX job_timers_inbox_idx ON job_timers (namespace, agent_id, due_at) WHERE phase = 'inbox';

-- A pull agent learns from its heartbeats which jobs it holds were
-- cancelled (it has no endpoint for a cancel notice).
CREATE INDEX jobs_cancelled_idx ON jobs (namespace, agent_id, finished_at) WHERE status = 'CANCELLED';
