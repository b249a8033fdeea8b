-- API keys of callers and operators. Only a SHA-256 of each key is kept.
-- namespace '*' is a key for every namespace (an operator's).
CREATE TABLE api_keys (
    key_id     text        PRIMARY KEY,
    namespace  text        NOT NULL,
    name       text        NOT NULL DEFAULT '',
    key_hash   bytea       NOT NULL UNIQUE,
    scopes     text[]      NOT NULL,
    created_at timestamptz NOT NULL,
    created_by text        NOT NULL,
    expires_at timestamptz,
    revoked_at timestamptz
);

-- Capabilities (glob patterns) whose jobs wait for an operator's approval.
-- namespace '*' applies to every namespace.
CREATE TABLE approval_policies (
    namespace  text        NOT NULL,
    pattern    text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    created_by text        NOT NULL,
    PRIMARY KEY (namespace, pattern)
);

-- Token rotation: the previous token keeps working until it expires.
ALTER TABLE agents ADD COLUMN prev_token_hash bytea;
ALTER TABLE agents ADD COLUMN prev_token_expires_at timestamptz;

-- Callback secret rotation, per namespace: the previous secret still signs
-- (as a second signature) until it expires.
ALTER TABLE signing_secrets ADD COLUMN prev_secret text;
ALTER TABLE signing_secrets ADD COLUMN prev_expires_at timestamptz;
