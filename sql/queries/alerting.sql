-- Statements of package alerting: a namespace's alert webhooks.

-- name: AlertPolicyOf
-- A namespace's alert policy.
SELECT policy FROM alert_policies WHERE namespace = $1;

-- name: LockAlertPolicy
-- A namespace's alert policy, locked for a change.
SELECT policy FROM alert_policies WHERE namespace = $1 FOR UPDATE;

-- name: UpsertAlertPolicy
-- Writes a namespace's new alert policy version.
INSERT INTO alert_policies (namespace, version, policy) VALUES ($1, $2, $3)
ON CONFLICT (namespace) DO UPDATE SET version = excluded.version, policy = excluded.policy, changed_at = now();

-- name: AlertPoliciesOf
-- The alert policies of namespaces $1 that have webhooks.
SELECT namespace, policy FROM alert_policies WHERE namespace = ANY($1::text[]) AND jsonb_array_length(policy -> 'webhooks') > 0;
