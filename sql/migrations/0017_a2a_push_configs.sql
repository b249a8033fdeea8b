-- Push-notification configs of Agent-Reach's own A2A face, each delivered
-- and retried on its own: the protocol version it was created in (whose
-- shape its notifications take: '0.3' the task, '1.0' a StreamResponse),
-- when it acknowledged the job's final task (never sent to again), how
-- often it was tried and what it last answered, and until when one
-- callback run holds it (so two runs never post to it at once).
ALTER TABLE a2a_push_configs
    ADD COLUMN protocol_version text NOT NULL DEFAULT '0.3',
    ADD COLUMN delivered_at timestamptz,
    ADD COLUMN attempts integer NOT NULL DEFAULT 0,
    ADD COLUMN last_status integer NOT NULL DEFAULT 0,
    ADD COLUMN last_error text NOT NULL DEFAULT '',
    ADD COLUMN claimed_until timestamptz;
