-- A2A: the push configs of jobs callers submitted over A2A (jobs), and the
-- rows of agents registered by their Agent Card (registry).

-- name: A2AInsertPushConfig
-- Adds a push config to a job, or replaces the one of the same id: a new
-- destination, so nothing is delivered to it yet.
INSERT INTO a2a_push_configs (job_id, config_id, url, token, auth_scheme, credentials, protocol_version)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (job_id, config_id) DO UPDATE SET url = excluded.url, token = excluded.token,
    auth_scheme = excluded.auth_scheme, credentials = excluded.credentials,
    protocol_version = excluded.protocol_version, delivered_at = NULL, attempts = 0, last_status = 0,
    last_error = '', claimed_until = NULL;

-- name: A2APushConfigs
-- A job's push configs, oldest first.
SELECT config_id, url, token, auth_scheme, credentials, protocol_version FROM a2a_push_configs
WHERE job_id = $1 ORDER BY created_at, config_id;

-- name: A2ADeletePushConfig
-- Removes one push config of a job.
DELETE FROM a2a_push_configs WHERE job_id = $1 AND config_id = $2;

-- name: A2AClaimPushConfigs
-- The push configs of a job that have not acknowledged its final task and
-- that no other callback run holds, held for $2 seconds by this run.
UPDATE a2a_push_configs SET claimed_until = now() + make_interval(secs => $2)
WHERE job_id = $1 AND delivered_at IS NULL AND (claimed_until IS NULL OR claimed_until < now())
RETURNING config_id, url, token, auth_scheme, credentials, protocol_version, created_at;

-- name: A2APushDelivered
-- A push config acknowledged the job's final task (a 2xx): never again.
UPDATE a2a_push_configs SET delivered_at = now(), attempts = attempts + 1, last_status = $3,
    last_error = '', claimed_until = NULL
WHERE job_id = $1 AND config_id = $2;

-- name: A2APushFailed
-- A push config did not take the job's final task: tried again later.
UPDATE a2a_push_configs SET attempts = attempts + 1, last_status = $3, last_error = $4, claimed_until = NULL
WHERE job_id = $1 AND config_id = $2;

-- name: A2APushesPending
-- How many push configs of a job have not acknowledged its final task.
SELECT count(*) FROM a2a_push_configs WHERE job_id = $1 AND delivered_at IS NULL;

-- name: A2AInsertCard
-- The card of an agent registered by card, fetched now; a registration
-- again (a restart) starts its failures afresh.
INSERT INTO agent_cards (agent_id, card_url, etag, card_hash, card, fetched_at, next_fetch_at, namespace)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (namespace, agent_id) DO UPDATE SET card_url = excluded.card_url, etag = excluded.etag,
    card_hash = excluded.card_hash, card = excluded.card, fetched_at = excluded.fetched_at,
    next_fetch_at = excluded.next_fetch_at, failures = 0, last_error = '';

-- name: A2ACardFailed
-- A fetch that failed, or a card that cannot be used, and when to try again.
UPDATE agent_cards SET next_fetch_at = $2, failures = failures + 1, last_error = $3
WHERE agent_id = $1 AND namespace = $4;

-- name: A2ACardsDue
-- The cards due for a fetch, of agents that are registered and not offline,
-- most overdue first.
SELECT c.namespace, c.agent_id, c.card_url, c.etag, c.card_hash, a.ttl_seconds
FROM agent_cards c JOIN agents a USING (namespace, agent_id)
WHERE c.next_fetch_at <= $1 AND NOT a.deregistered AND a.state <> 'OFFLINE'
ORDER BY c.next_fetch_at LIMIT 100;

-- name: A2ACardNotModified
-- A card revalidated with its ETag (304): only when to fetch it again.
UPDATE agent_cards SET next_fetch_at = $2, failures = 0, last_error = ''
WHERE agent_id = $1 AND namespace = $3;

-- name: A2ACardUnchanged
-- A card fetched again whose meaning did not change: its text and validator.
UPDATE agent_cards SET etag = $2, card = $3, fetched_at = $4, next_fetch_at = $5, failures = 0, last_error = ''
WHERE agent_id = $1 AND namespace = $6;

-- name: A2ACardChanged
-- A card fetched again whose meaning changed (the agent is updated with it).
UPDATE agent_cards SET etag = $2, card = $3, card_hash = $4, fetched_at = $5, next_fetch_at = $6,
    failures = 0, last_error = ''
WHERE agent_id = $1 AND namespace = $7;

-- name: A2AUpdateAgentOfCard
-- An agent as its changed card describes it, at the version of its
-- AGENT_CARD_UPDATED event.
UPDATE agents SET capabilities = $2, aliases = $3, version = $4, endpoint = $5,
    metadata = $6, stream_version = $7
WHERE agent_id = $1 AND namespace = $8;

-- name: LegacyPushConfigsExist
-- Whether a push config waits to be posted for a job whose callback_url is not the A2A marker ($1): an A2A job submitted by a release before the marker. A config whose job is not in the read model yet counts too.
SELECT EXISTS (SELECT 1 FROM a2a_push_configs c LEFT JOIN jobs j ON j.job_id = c.job_id
    WHERE c.delivered_at IS NULL AND (j.job_id IS NULL OR j.callback_url IS NULL OR NOT j.callback_url LIKE '%' || $1));
