-- The waits handed a slot of an agent (their timer names it) are counted
-- whenever a slot of that agent is taken or looks free: an index makes
-- that count read those waits alone, however deep the backlog. Only an
-- index is added: a release before this one ignores it.
CREATE INDEX job_timers_agent_waits_idx ON job_timers (namespace, agent_id)
    WHERE capability IS NOT NULL;
