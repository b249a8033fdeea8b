-- A job whose A2A agent awaits input waits at most the input timeout; its
-- timer has its own phase.
ALTER TABLE job_timers DROP CONSTRAINT job_timers_phase_check;
ALTER TABLE job_timers ADD CONSTRAINT job_timers_phase_check
    CHECK (phase IN ('queued', 'routed', 'delivered', 'retry', 'callback', 'approval', 'input'));
