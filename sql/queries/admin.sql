-- Statements on the server itself: test databases (internal/pgtest) and
-- the development database (internal/devdb). Filled by their packages.

-- name: PgtestTemplateExists
-- Whether the migrated template database $1 is made and marked a template.
SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1 AND datistemplate);

-- name: PgtestLock
-- Takes the session advisory lock $1 that serialises template creation across test binaries.
SELECT pg_advisory_lock($1);

-- name: PgtestUnlock
-- Releases PgtestLock's lock.
SELECT pg_advisory_unlock($1);

-- name: CreateDatabase :template
-- Creates the database %s (a sanitised identifier), empty.
CREATE DATABASE %s;

-- name: CreateDatabaseFromTemplate :template
-- Creates the database %s as a copy of the template database %s (both sanitised identifiers).
CREATE DATABASE %s TEMPLATE %s;

-- name: DropDatabaseForce :template
-- Drops the database %s (a sanitised identifier), closing its connections.
DROP DATABASE IF EXISTS %s WITH (FORCE);

-- name: MarkDatabaseTemplate :template
-- Makes the database %s (a sanitised identifier) a template that test databases are cloned from.
ALTER DATABASE %s WITH is_template true;

-- name: PreflightFreeConnections
-- How many more client connections the server admits, for `make test`'s preflight.
SELECT current_setting('max_connections')::int
    - current_setting('superuser_reserved_connections')::int
    - (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend');

-- name: DevdbPing
-- A trivial query: the server answers.
SELECT 1;

-- name: DevdbDatabaseExists
-- Whether the database $1 exists.
SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1);

-- name: Replication
-- What the primary says of its standbys: whether it is itself one, its
-- synchronous_standby_names, how many standbys stream from it and how many
-- of them synchronously, and the largest replay lag in seconds. (A role
-- without pg_monitor sees no sync_state: it counts no synchronous standby.)
SELECT pg_is_in_recovery(), current_setting('synchronous_standby_names'),
       (SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming')::int,
       (SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state IN ('sync', 'quorum'))::int,
       coalesce((SELECT extract(epoch FROM max(replay_lag)) FROM pg_stat_replication), 0)::float8;

-- name: ReadLag
-- How far behind its primary the read database is, in seconds: 0 on a
-- primary, or on a standby that streams from its primary and has replayed
-- all it received; else the age of the last transaction it replayed (a
-- standby cut off from its primary has replayed all it received and
-- still falls behind).
SELECT CASE WHEN NOT pg_is_in_recovery() THEN 0
       WHEN EXISTS (SELECT 1 FROM pg_stat_wal_receiver WHERE status = 'streaming')
            AND pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
       ELSE coalesce(extract(epoch FROM now() - pg_last_xact_replay_timestamp()), 0) END::float8;
