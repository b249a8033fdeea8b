-- Each namespace has its own agent ids: an id is an agent's only within its
-- namespace, so one namespace can neither take nor learn another's ids, nor
-- sway another's breaker or health figures with an agent of the same name.
-- Agents' streams become agent:<namespace>/<id>; an agent's row starts that
-- stream afresh (its earlier events stay in agent:<id>, which no one appends
-- to any more).
ALTER TABLE agent_cards DROP CONSTRAINT agent_cards_agent_id_fkey;
ALTER TABLE agent_cards ADD COLUMN namespace text;
UPDATE agent_cards c SET namespace = a.namespace FROM agents a WHERE a.agent_id = c.agent_id;
DELETE FROM agent_cards WHERE namespace IS NULL;
ALTER TABLE agent_cards ALTER COLUMN namespace SET NOT NULL;

ALTER TABLE agents DROP CONSTRAINT agents_pkey;
ALTER TABLE agents ADD PRIMARY KEY (namespace, agent_id);
DROP INDEX agents_namespace_idx;
UPDATE agents SET stream_version = 0;

ALTER TABLE agent_cards DROP CONSTRAINT agent_cards_pkey;
ALTER TABLE agent_cards ADD PRIMARY KEY (namespace, agent_id);
ALTER TABLE agent_cards ADD FOREIGN KEY (namespace, agent_id) REFERENCES agents (namespace, agent_id);

-- The breaker's window (an hour at most, pruned by a sweep).
ALTER TABLE agent_attempts ADD COLUMN namespace text;
UPDATE agent_attempts t SET namespace = a.namespace FROM agents a WHERE a.agent_id = t.agent_id;
DELETE FROM agent_attempts WHERE namespace IS NULL;
ALTER TABLE agent_attempts ALTER COLUMN namespace SET NOT NULL;
DROP INDEX agent_attempts_at_idx;
CREATE INDEX agent_attempts_at_idx ON agent_attempts (at, namespace, agent_id);

ALTER TABLE agent_stats_minute DROP CONSTRAINT agent_stats_minute_pkey;
ALTER TABLE agent_stats_minute ADD PRIMARY KEY (namespace, agent_id, capability, bucket);
ALTER TABLE agent_stats_hour DROP CONSTRAINT agent_stats_hour_pkey;
ALTER TABLE agent_stats_hour ADD PRIMARY KEY (namespace, agent_id, capability, bucket);

DROP INDEX jobs_in_flight_idx;
CREATE INDEX jobs_in_flight_idx ON jobs (namespace, agent_id) WHERE status = 'DELIVERED';
DROP INDEX jobs_agent_idx;
CREATE INDEX jobs_agent_idx ON jobs (namespace, agent_id, job_id DESC);

-- An agent's token is its identity on its own routes, whatever id the path
-- names. The token a re-registration replaced is kept (one generation), so
-- a stale instance still heartbeating with it is told it was replaced (401)
-- rather than to register again (404) and take the agent back.
ALTER TABLE agents ADD COLUMN superseded_token_hash bytea;
CREATE INDEX agents_token_idx ON agents (token_hash);
CREATE INDEX agents_prev_token_idx ON agents (prev_token_hash) WHERE prev_token_hash IS NOT NULL;
CREATE INDEX agents_superseded_token_idx ON agents (superseded_token_hash) WHERE superseded_token_hash IS NOT NULL;
