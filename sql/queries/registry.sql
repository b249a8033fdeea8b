-- Statements of package registry (but its Agent Cards', registry/cards.go):
-- agents' rows, leases, heartbeats, attempt samples and the snapshot's
-- reads. A query that returns agents lists the columns scanAgent reads, in
-- its order; registry's TestAgentQueriesReturnAgentColumns holds them to it.

-- name: LoadAgent
-- One agent's row, deregistered or not.
SELECT agent_id, namespace, capabilities, aliases, endpoint, coalesce(health_url, ''), protocol,
       weight, max_concurrent, version, rollout_percent, ttl_seconds, context, metadata, state, instance_id::text,
       probe_ok, reported_in_flight, token_hash, registered_at, last_seen_at, lease_expires_at, state_changed_at,
       stream_version, deregistered, prev_token_hash, prev_token_expires_at, hold,
       reported_queue_length, reported_error_rate, reported_pool_usage, protocol_version, recent_restarts, probe_streak, breaker_open, mode, paused_until,
       coalesce(last_probe_error, ''), last_probe_at
FROM agents WHERE namespace = $1 AND agent_id = $2;

-- name: LoadAgentForUpdate
-- One agent's row, locked for a change decided on it.
SELECT agent_id, namespace, capabilities, aliases, endpoint, coalesce(health_url, ''), protocol,
       weight, max_concurrent, version, rollout_percent, ttl_seconds, context, metadata, state, instance_id::text,
       probe_ok, reported_in_flight, token_hash, registered_at, last_seen_at, lease_expires_at, state_changed_at,
       stream_version, deregistered, prev_token_hash, prev_token_expires_at, hold,
       reported_queue_length, reported_error_rate, reported_pool_usage, protocol_version, recent_restarts, probe_streak, breaker_open, mode, paused_until,
       coalesce(last_probe_error, ''), last_probe_at
FROM agents WHERE namespace = $1 AND agent_id = $2 FOR UPDATE;

-- name: ListAgents
-- The registered agents matching a filter (empty fields match all), by agent id.
SELECT agent_id, namespace, capabilities, aliases, endpoint, coalesce(health_url, ''), protocol,
       weight, max_concurrent, version, rollout_percent, ttl_seconds, context, metadata, state, instance_id::text,
       probe_ok, reported_in_flight, token_hash, registered_at, last_seen_at, lease_expires_at, state_changed_at,
       stream_version, deregistered, prev_token_hash, prev_token_expires_at, hold,
       reported_queue_length, reported_error_rate, reported_pool_usage, protocol_version, recent_restarts, probe_streak, breaker_open, mode, paused_until,
       coalesce(last_probe_error, ''), last_probe_at
FROM agents
WHERE NOT deregistered
  AND ($1 = '' OR namespace = $1)
  AND ($2 = '' OR capabilities @> ARRAY[$2])
  AND ($3 = '' OR state = $3)
  AND ($4 = '' OR agent_id = $4)
ORDER BY agent_id, namespace LIMIT 10000;

-- name: ForgetAgentCard
-- Drops an agent's card when it registers by hand: the card no longer speaks for it.
DELETE FROM agent_cards WHERE namespace = $1 AND agent_id = $2;

-- name: UpsertAgent
-- Registers an agent, or a new instance of it: a fresh token, PROBING, and the old token remembered as superseded.
INSERT INTO agents (agent_id, namespace, capabilities, aliases, endpoint, health_url, protocol,
        weight, max_concurrent, version, rollout_percent, ttl_seconds, context, metadata, state, instance_id,
        probe_ok, reported_in_flight, token_hash, registered_at, last_seen_at, lease_expires_at, state_changed_at,
        stream_version, deregistered, protocol_version, recent_restarts, mode)
    VALUES ($1, $2, $3, $4, $5, nullif($6, ''), $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
        false, 0, $17, $18, $18, $19, $18, $20, false, $21, $22, $23)
    ON CONFLICT (namespace, agent_id) DO UPDATE SET capabilities = excluded.capabilities,
        aliases = excluded.aliases, endpoint = excluded.endpoint, health_url = excluded.health_url,
        protocol = excluded.protocol, weight = excluded.weight, max_concurrent = excluded.max_concurrent,
        version = excluded.version, rollout_percent = excluded.rollout_percent, ttl_seconds = excluded.ttl_seconds,
        context = excluded.context, metadata = excluded.metadata, state = excluded.state,
        instance_id = excluded.instance_id, probe_ok = false, reported_in_flight = 0,
        token_hash = excluded.token_hash, registered_at = excluded.registered_at,
        last_seen_at = excluded.last_seen_at, lease_expires_at = excluded.lease_expires_at,
        state_changed_at = excluded.state_changed_at, stream_version = excluded.stream_version,
        deregistered = false, prev_token_hash = NULL, prev_token_expires_at = NULL,
        superseded_token_hash = agents.token_hash,
        hold = CASE WHEN agents.deregistered THEN '' ELSE agents.hold END, -- an operator's hold outlives a registration, not a deletion
        last_probe_error = NULL, last_probe_at = NULL, -- a new instance, probed anew
        reported_queue_length = 0, reported_error_rate = NULL, reported_pool_usage = NULL,
        protocol_version = excluded.protocol_version, recent_restarts = excluded.recent_restarts, probe_streak = 0,
        mode = excluded.mode;

-- name: AgentByToken
-- The agent whose current or previous token has hash $1, a registered one first.
SELECT agent_id, namespace, capabilities, aliases, endpoint, coalesce(health_url, ''), protocol,
       weight, max_concurrent, version, rollout_percent, ttl_seconds, context, metadata, state, instance_id::text,
       probe_ok, reported_in_flight, token_hash, registered_at, last_seen_at, lease_expires_at, state_changed_at,
       stream_version, deregistered, prev_token_hash, prev_token_expires_at, hold,
       reported_queue_length, reported_error_rate, reported_pool_usage, protocol_version, recent_restarts, probe_streak, breaker_open, mode, paused_until,
       coalesce(last_probe_error, ''), last_probe_at
FROM agents
WHERE token_hash = $1 OR prev_token_hash = $1 ORDER BY deregistered LIMIT 1;

-- name: TokenSuperseded
-- Whether a re-registration replaced the token with hash $1.
SELECT EXISTS (SELECT 1 FROM agents WHERE superseded_token_hash = $1);

-- name: RotateAgentToken
-- Gives an agent a new token hash; the current one stays valid as previous until $2.
UPDATE agents SET prev_token_hash = token_hash, prev_token_expires_at = $2, token_hash = $3,
    stream_version = $4 WHERE namespace = $5 AND agent_id = $1;

-- name: SetAgentContext
-- Writes an agent's routing context, with the version of the event that changed it.
UPDATE agents SET context = $3, stream_version = $4 WHERE namespace = $1 AND agent_id = $2;

-- name: DeregisterAgent
-- Marks an agent deregistered and in state $2 (OFFLINE).
UPDATE agents SET deregistered = true, state = $2, state_changed_at = $3, stream_version = $4
WHERE namespace = $5 AND agent_id = $1;

-- name: SetAgentState
-- Writes an agent's life-cycle state, probe result and operator hold; state_changed_at moves only when the state does.
UPDATE agents SET state = $2, probe_ok = $3, stream_version = $4,
        state_changed_at = CASE WHEN state = $2 THEN state_changed_at ELSE $5 END, hold = $7
WHERE namespace = $6 AND agent_id = $1;

-- name: RecentAgentActivity
-- An agent's attempts and their outcomes since the minute of $3, from the agent_stats projection.
SELECT coalesce(sum(attempted), 0)::int, coalesce(sum(delivered), 0)::int, coalesce(sum(succeeded), 0)::int,
       coalesce(sum(failed), 0)::int, coalesce(sum(timed_out), 0)::int
FROM agent_stats_minute
WHERE namespace = $1 AND agent_id = $2 AND bucket >= date_trunc('minute', $3::timestamptz);

-- name: LockLiveAgents
-- Every registered agent not OFFLINE, locked for the lease sweep; rows a concurrent change holds are skipped.
SELECT agent_id, namespace, capabilities, aliases, endpoint, coalesce(health_url, ''), protocol,
       weight, max_concurrent, version, rollout_percent, ttl_seconds, context, metadata, state, instance_id::text,
       probe_ok, reported_in_flight, token_hash, registered_at, last_seen_at, lease_expires_at, state_changed_at,
       stream_version, deregistered, prev_token_hash, prev_token_expires_at, hold,
       reported_queue_length, reported_error_rate, reported_pool_usage, protocol_version, recent_restarts, probe_streak, breaker_open, mode, paused_until,
       coalesce(last_probe_error, ''), last_probe_at
FROM agents
WHERE NOT deregistered AND state <> 'OFFLINE' ORDER BY namespace, agent_id FOR UPDATE SKIP LOCKED;

-- name: SnapshotAgents
-- Every registered agent, for the router's snapshot.
SELECT agent_id, namespace, capabilities, aliases, endpoint, coalesce(health_url, ''), protocol,
       weight, max_concurrent, version, rollout_percent, ttl_seconds, context, metadata, state, instance_id::text,
       probe_ok, reported_in_flight, token_hash, registered_at, last_seen_at, lease_expires_at, state_changed_at,
       stream_version, deregistered, prev_token_hash, prev_token_expires_at, hold,
       reported_queue_length, reported_error_rate, reported_pool_usage, protocol_version, recent_restarts, probe_streak, breaker_open, mode, paused_until,
       coalesce(last_probe_error, ''), last_probe_at
FROM agents WHERE NOT deregistered;

-- name: SnapshotAttempts
-- The circuit breakers' attempt samples since $1. Only an agent with a
-- failure among them can have tripped: its samples come one a row, oldest
-- first, for EvaluateBreaker to replay. An agent with none comes in one
-- row, at NULL, with how many of its samples fall in its namespace's
-- window: after $3[i] for namespace $2[i] (else after $4), and not after
-- $5 (domain.BreakerOfSuccesses). At a steady load the horizon holds every
-- job of the last minutes, and the snapshot reads it every second.
WITH per_agent AS (
    SELECT a.namespace, a.agent_id, bool_and(a.ok) AS clean,
           count(*) FILTER (WHERE a.at > coalesce(w.since, $4) AND a.at <= $5)::int AS in_window
    FROM agent_attempts a
    LEFT JOIN unnest($2::text[], $3::timestamptz[]) AS w(namespace, since) ON w.namespace = a.namespace
    WHERE a.at > $1
    GROUP BY a.namespace, a.agent_id
)
SELECT namespace, agent_id, NULL::timestamptz AS at, true AS ok, in_window FROM per_agent WHERE clean
UNION ALL
SELECT a.namespace, a.agent_id, a.at, a.ok, 1
FROM agent_attempts a JOIN per_agent p ON p.namespace = a.namespace AND p.agent_id = a.agent_id AND NOT p.clean
WHERE a.at > $1
ORDER BY at NULLS FIRST;

-- name: SnapshotRecentStats
-- Each agent's attempts and successes per minute over the $2 seconds before the minute of $1, for the router's failure term.
SELECT namespace, agent_id, bucket, sum(attempted)::int, sum(succeeded)::int FROM agent_stats_minute
WHERE bucket >= date_trunc('minute', $1::timestamptz) - $2::int * interval '1 second' GROUP BY namespace, agent_id, bucket;

-- name: SnapshotInFlight
-- How many slots of each agent are taken: by attempts of any kind (inline
-- calls, delivered, awaiting input), and handed to woken waiters that have
-- not taken them yet (their timer names the agent), as the unit of work
-- counts them. A slot being handed over is not free to a newcomer.
SELECT namespace, agent_id, sum(n)::bigint FROM (
    SELECT namespace, agent_id, count(*) AS n FROM agent_slots GROUP BY namespace, agent_id
    UNION ALL
    SELECT a.namespace, a.agent_id, (SELECT count(*) FROM job_timers o WHERE o.namespace = a.namespace AND o.agent_id = a.agent_id
        AND o.capability IS NOT NULL AND (o.phase = 'queued' OR (o.phase = 'retry' AND o.due_at <= now())))
    FROM agents a WHERE a.max_concurrent > 0
) AS taken GROUP BY namespace, agent_id HAVING sum(n) > 0;

-- name: FlushHeartbeats
-- Writes buffered heartbeats in one statement; never moves last_seen_at back, never touches a deregistered agent.
UPDATE agents a SET last_seen_at = v.at,
    lease_expires_at = v.at + a.ttl_seconds * interval '1 second',
    reported_in_flight = coalesce(v.in_flight, a.reported_in_flight),
    reported_queue_length = coalesce(v.queue_length, a.reported_queue_length),
    reported_error_rate = coalesce(v.error_rate, a.reported_error_rate),
    reported_pool_usage = coalesce(v.pool_usage, a.reported_pool_usage)
FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::int[], $5::int[], $6::float8[], $7::float8[])
    AS v(namespace, id, at, in_flight, queue_length, error_rate, pool_usage)
WHERE a.namespace = v.namespace AND a.agent_id = v.id AND v.at > a.last_seen_at AND NOT a.deregistered;

-- name: PruneAgentAttempts
-- Deletes attempt samples older than $1: a working set for the breakers, not the audit trail.
DELETE FROM agent_attempts WHERE at < $1;

-- name: LockAgentsForHealth
-- Every registered agent's health standing, locked for the health sweep; rows a concurrent change holds are skipped.
SELECT namespace, agent_id, health_degraded, stream_version FROM agents
WHERE NOT deregistered ORDER BY namespace, agent_id FOR UPDATE SKIP LOCKED;

-- name: SetAgentHealth
-- Writes an agent's health standing, with the version of the event that changed it.
UPDATE agents SET health_degraded = $3, stream_version = $4 WHERE namespace = $1 AND agent_id = $2;

-- name: SetAgentSettings
-- Writes what an operator changed of a running agent (PATCH), with the version of its AGENT_UPDATED.
UPDATE agents SET weight = $3, rollout_percent = $4, max_concurrent = $5, aliases = $6, context = $7, metadata = $8,
    stream_version = $9
WHERE namespace = $1 AND agent_id = $2;

-- name: SetProbeStreak
-- Counts a flapping agent's probes passed in a row (0 after a failure).
UPDATE agents SET probe_streak = $3 WHERE namespace = $1 AND agent_id = $2;

-- name: RecordProbe
-- The outcome of a probe of instance $5 of agent $1/$2 while it is PROBING: its error ('' when it passed) at $4; a failure starts a flapping agent's streak over. A probe of an instance replaced meanwhile, or finished after the agent left PROBING, changes nothing.
UPDATE agents SET last_probe_error = NULLIF($3, ''), last_probe_at = $4,
    probe_streak = CASE WHEN $3 = '' THEN probe_streak ELSE 0 END
WHERE namespace = $1 AND agent_id = $2 AND instance_id = $5::uuid AND state = 'PROBING';

-- name: SetBreakerOpen
-- Records whether the agent's breaker is open, with the version of the event that said so.
UPDATE agents SET breaker_open = $3, stream_version = $4 WHERE namespace = $1 AND agent_id = $2;

-- name: LoadRoutingPolicies
-- Every namespace's routing policy, for the snapshot.
SELECT namespace, policy FROM routing_policies;

-- name: LockRoutingPolicy
-- A namespace's routing policy, locked for a change.
SELECT policy FROM routing_policies WHERE namespace = $1 FOR UPDATE;

-- name: UpsertRoutingPolicy
-- Writes a namespace's new routing policy version.
INSERT INTO routing_policies (namespace, version, policy) VALUES ($1, $2, $3)
ON CONFLICT (namespace) DO UPDATE SET version = excluded.version, policy = excluded.policy, changed_at = now();

-- name: RoutingPolicyOf
-- A namespace's routing policy.
SELECT policy FROM routing_policies WHERE namespace = $1;

-- name: RecordLookups
-- Remembers that key $1 was given agents $3 of namespace $2 at $4 (a write at most every 10 s per agent).
INSERT INTO lookups (key_id, namespace, agent_id, looked_up_at)
SELECT $1, $2, unnest($3::text[]), $4
ON CONFLICT (key_id, namespace, agent_id) DO UPDATE SET looked_up_at = excluded.looked_up_at
    WHERE lookups.looked_up_at < excluded.looked_up_at - interval '10 seconds';

-- name: LookedUp
-- Which of agents $3 of namespace $2 key $1 looked up since $4.
SELECT agent_id FROM lookups WHERE key_id = $1 AND namespace = $2 AND agent_id = ANY($3::text[]) AND looked_up_at >= $4;

-- name: RecordDirectSamples
-- The breaker's samples of reported direct calls, in one statement.
INSERT INTO agent_attempts (namespace, agent_id, at, ok)
SELECT $1, unnest($2::text[]), unnest($3::timestamptz[]), unnest($4::bool[]);
