-- Why a PROBING agent is still probing: the last probe's error and time.
-- A failed probe is a finished probe (its River job completes, so the
-- probes' backoff holds), and the agent says what it answered. Only
-- columns are added: a process before this one ignores them.
ALTER TABLE agents ADD COLUMN last_probe_error text, ADD COLUMN last_probe_at timestamptz;
