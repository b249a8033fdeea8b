-- Statements of the registry's MCP servers (registry/mcp.go).

-- name: MCPInsertServer
-- An MCP server registered as an agent, or registered again.
INSERT INTO mcp_servers (namespace, agent_id, url, headers, tools_hash, registered_at, refreshed_at, next_refresh_at, last_error, picked)
VALUES ($1, $2, $3, $4, $5, $6, $6, $7, NULL, $8)
ON CONFLICT (namespace, agent_id) DO UPDATE SET url = excluded.url, headers = excluded.headers, tools_hash = excluded.tools_hash,
    registered_at = excluded.registered_at, refreshed_at = excluded.refreshed_at, next_refresh_at = excluded.next_refresh_at, last_error = NULL,
    picked = excluded.picked;

-- name: MCPForgetServer
-- Drops an agent's MCP server row when it registers by hand.
DELETE FROM mcp_servers WHERE namespace = $1 AND agent_id = $2;

-- name: MCPServersDue
-- The MCP servers whose tools are due to be read again (at most 100, the most overdue first), of agents not deregistered, with the tools their registration picked.
SELECT s.namespace, s.agent_id, s.url, s.headers, coalesce(s.tools_hash, ''::bytea), a.ttl_seconds, coalesce(s.picked, '{}')
FROM mcp_servers s JOIN agents a ON a.namespace = s.namespace AND a.agent_id = s.agent_id
WHERE s.next_refresh_at <= $1 AND NOT a.deregistered
ORDER BY s.next_refresh_at LIMIT 100;

-- name: MCPRefreshed
-- A read of a server's tools that answered: when to read them again.
UPDATE mcp_servers SET refreshed_at = $3, next_refresh_at = $4, tools_hash = $5, last_error = NULL
WHERE namespace = $1 AND agent_id = $2;

-- name: MCPRefreshFailed
-- A read of a server's tools that failed: why, and when to try again.
UPDATE mcp_servers SET next_refresh_at = $3, last_error = $4 WHERE namespace = $1 AND agent_id = $2;

-- name: MCPServerOf
-- Where an MCP server agent is, and the headers its requests carry.
SELECT url, headers FROM mcp_servers WHERE namespace = $1 AND agent_id = $2;

-- name: MCPServersOfNamespace
-- The MCP server agents of a namespace (not deregistered), by agent id: for the registry read API.
SELECT s.agent_id, s.registered_at, coalesce(s.refreshed_at, s.registered_at), a.state, coalesce(a.version, ''), a.capabilities,
       coalesce(a.metadata ->> 'description', '')
FROM mcp_servers s JOIN agents a ON a.namespace = s.namespace AND a.agent_id = s.agent_id
WHERE s.namespace = $1 AND NOT a.deregistered
ORDER BY s.agent_id;

-- name: MCPServersWatched
-- Every MCP server agent not deregistered (at most 1000), with its URL and headers: the servers whose tool lists are watched.
SELECT s.namespace, s.agent_id, s.url, s.headers
FROM mcp_servers s JOIN agents a ON a.namespace = s.namespace AND a.agent_id = s.agent_id
WHERE NOT a.deregistered
ORDER BY s.namespace, s.agent_id LIMIT 1000;

-- name: MCPServerToRead
-- A server that said its tools changed (notifications/tools/list_changed), to read them now: as MCPServersDue answers it.
SELECT s.url, s.headers, coalesce(s.tools_hash, ''::bytea), a.ttl_seconds, coalesce(s.picked, '{}')
FROM mcp_servers s JOIN agents a ON a.namespace = s.namespace AND a.agent_id = s.agent_id
WHERE s.namespace = $1 AND s.agent_id = $2 AND NOT a.deregistered;
