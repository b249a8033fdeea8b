-- A2A agents registered by their Agent Card: where the card lives, the
-- validator to revalidate it with, and when to fetch it next. A successful
-- fetch (200 or 304) renews the agent's lease: the card is its heartbeat.
CREATE TABLE agent_cards (
    agent_id      text        PRIMARY KEY REFERENCES agents (agent_id),
    card_url      text        NOT NULL,
    etag          text        NOT NULL DEFAULT '',
    card_hash     bytea       NOT NULL,
    card          jsonb       NOT NULL,
    fetched_at    timestamptz NOT NULL,
    next_fetch_at timestamptz NOT NULL,
    failures      integer     NOT NULL DEFAULT 0,
    last_error    text        NOT NULL DEFAULT ''
);
CREATE INDEX agent_cards_due_idx ON agent_cards (next_fetch_at);

-- Push-notification configs of jobs submitted through Agent-Reach's own A2A
-- endpoint: where to send the task when it ends, and with which credentials.
-- Kept out of the event log, which must not hold callers' secrets.
CREATE TABLE a2a_push_configs (
    job_id      uuid        NOT NULL,
    config_id   text        NOT NULL,
    url         text        NOT NULL,
    token       text        NOT NULL DEFAULT '',
    auth_scheme text        NOT NULL DEFAULT '',
    credentials text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, config_id)
);
