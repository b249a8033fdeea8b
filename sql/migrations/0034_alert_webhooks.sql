-- A namespace's alert webhooks (PUT /v1/policies/alerts): the operator
-- URLs its alerts are sent to. Versioned like routing_policies; every
-- change is an ALERT_POLICY_CHANGED on "policy:alerts:<namespace>".
-- Only a table is added: a process before this one ignores it.
CREATE TABLE alert_policies (
    namespace  text        PRIMARY KEY,
    version    integer     NOT NULL,
    policy     jsonb       NOT NULL,
    changed_at timestamptz NOT NULL DEFAULT now()
);

-- The alert notifier (a projection that sends, with no read model of its
-- own) starts where the alerts projection stands: an existing log's past
-- alerts are not sent.
INSERT INTO projection_checkpoints (name, tx_id, position, events)
SELECT 'alert_webhooks', tx_id, position, events FROM projection_checkpoints WHERE name = 'alerts'
ON CONFLICT DO NOTHING;
