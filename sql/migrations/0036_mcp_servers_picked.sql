-- The tools a registration picked of its MCP server ("capabilities"): a
-- later read of the server's tools keeps to them (NULL: every tool). Only
-- a column is added: a process before this one ignores it.
ALTER TABLE mcp_servers ADD COLUMN picked text[];
