-- The agent registry's current state. Every change of registration or state
-- is an event on the agent's stream, written in the same transaction as its
-- row here (stream_version says which event the row reflects). Heartbeats are
-- not events: they only move last_seen_at and lease_expires_at, in batches.
CREATE TABLE agents (
    agent_id         text        PRIMARY KEY,
    namespace        text        NOT NULL,
    capabilities     text[]      NOT NULL,
    aliases          text[]      NOT NULL DEFAULT '{}',
    endpoint         text        NOT NULL,
    health_url       text,
    protocol         text        NOT NULL DEFAULT 'http',
    weight           integer     NOT NULL DEFAULT 50,
    max_concurrent   integer     NOT NULL DEFAULT 0,
    version          text        NOT NULL DEFAULT '',
    rollout_percent  integer     NOT NULL DEFAULT 100,
    ttl_seconds      integer     NOT NULL DEFAULT 30,
    context          jsonb       NOT NULL DEFAULT '{}',
    metadata         jsonb       NOT NULL DEFAULT '{}',
    state            text        NOT NULL,
    instance_id      uuid        NOT NULL,
    probe_ok         boolean     NOT NULL DEFAULT false,
    reported_in_flight integer   NOT NULL DEFAULT 0,
    token_hash       bytea       NOT NULL,
    registered_at    timestamptz NOT NULL,
    last_seen_at     timestamptz NOT NULL,
    lease_expires_at timestamptz NOT NULL,
    state_changed_at timestamptz NOT NULL,
    stream_version   integer     NOT NULL,
    deregistered     boolean     NOT NULL DEFAULT false
);

CREATE INDEX agents_namespace_idx ON agents (namespace, agent_id);
CREATE INDEX agents_capabilities_idx ON agents USING gin (capabilities);

-- Attempt outcomes per agent, the breaker's and the router's recent window.
-- Written in the same transaction as the event that records the attempt;
-- rows older than an hour are pruned by a sweep (this is not the log).
CREATE TABLE agent_attempts (
    agent_id    text        NOT NULL,
    at          timestamptz NOT NULL,
    ok          boolean     NOT NULL
);

CREATE INDEX agent_attempts_at_idx ON agent_attempts (at, agent_id);

-- The router's in-flight count per agent reads delivered jobs only.
CREATE INDEX jobs_in_flight_idx ON jobs (agent_id) WHERE status = 'DELIVERED';
