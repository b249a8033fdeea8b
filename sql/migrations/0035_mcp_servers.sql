-- MCP servers registered as agents ("protocol": "mcp"): where each is and
-- the headers every request to it carries (its credentials, never shown),
-- and when its tools are read again (which renews its lease: an MCP server
-- sends no heartbeats). Only a table is added: a process before this one
-- ignores it.
CREATE TABLE mcp_servers (
    namespace       text        NOT NULL,
    agent_id        text        NOT NULL,
    url             text        NOT NULL,
    headers         jsonb       NOT NULL DEFAULT '{}',
    tools_hash      bytea,
    registered_at   timestamptz NOT NULL DEFAULT now(),
    refreshed_at    timestamptz,
    next_refresh_at timestamptz NOT NULL,
    last_error      text,
    PRIMARY KEY (namespace, agent_id)
);
CREATE INDEX mcp_servers_due_idx ON mcp_servers (next_refresh_at);
