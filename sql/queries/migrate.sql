-- Statements of the migrator (package sql): its advisory lock and its
-- bookkeeping table. The schema itself is in ../migrations.

-- name: MigrateLock
-- Takes the session advisory lock $1 that serialises migrations across processes.
SELECT pg_advisory_lock($1);

-- name: MigrateUnlock
-- Releases MigrateLock's lock.
SELECT pg_advisory_unlock($1);

-- name: CreateMigrationsTable
-- The bookkeeping table of applied migrations, made before the first one.
CREATE TABLE IF NOT EXISTS agentreach_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now());

-- name: RecordMigration
-- Records a migration applied, in its transaction.
INSERT INTO agentreach_migrations (version, name) VALUES ($1, $2);

-- name: SchemaVersion
-- The newest migration applied, 0 for none.
SELECT coalesce(max(version), 0) FROM agentreach_migrations;

-- name: MigrationsTableExists
-- Whether any migration was ever applied (the bookkeeping table exists).
SELECT to_regclass('agentreach_migrations') IS NOT NULL;

-- name: CreateViewsTable
-- The one row saying which views and functions (sql/views) are applied: the
-- hash of their files and the newest migration of the binary that applied them.
CREATE TABLE IF NOT EXISTS agentreach_views (
    id         boolean     PRIMARY KEY DEFAULT true CHECK (id),
    hash       text        NOT NULL,
    migration  integer     NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now());

-- name: ViewsApplied
-- The hash and migration of the views applied (no row: none yet).
SELECT hash, migration FROM agentreach_views;

-- name: RecordViews
-- Records the views applied: their hash $1, by a binary whose newest migration is $2.
INSERT INTO agentreach_views (hash, migration) VALUES ($1, $2)
ON CONFLICT (id) DO UPDATE SET hash = $1, migration = $2, applied_at = now();
