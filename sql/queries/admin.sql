-- Statements on the server itself: test databases (internal/pgtest) and
-- the development database (internal/devdb). Filled by their packages.

-- name: PgtestTemplateExists
SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1 AND datistemplate);
