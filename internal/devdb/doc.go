// Package devdb resolves a PostgreSQL database for `agentreach dev` with
// zero setup.
//
// [Open] tries three ways, in order:
//
//  1. an explicit connection string ([Options.DatabaseURL], normally taken
//     from the DATABASE_URL environment variable) is used as is;
//  2. a PostgreSQL server already listening on the local address
//     (127.0.0.1:5432 by default) is used, and the application database is
//     created on it when missing;
//  3. only when nothing listens on the local address (the connection is
//     refused), a private, throw-away cluster is created with the
//     PostgreSQL server binaries (initdb and pg_ctl) found on PATH or under
//     /usr/lib/postgresql/*/bin, and started on a free port of 127.0.0.1.
//     A server that listens and cannot be used (too many clients, a
//     password it wants, a role it lacks) stops Open with its error
//     ([ErrLocalUnusable]): a throw-away cluster in its place would hide
//     the problem and lose what is written to it.
//
// When none of them works, Open returns an error wrapping [ErrNoDatabase]
// that tells the user how to fix it. [DB.Close] stops and removes a private
// cluster; it is a no-op for the other two ways.
//
// The private cluster is started by pg_ctl in its own session, so it does not
// die with the calling process: callers must call [DB.Close] (also on
// SIGINT/SIGTERM) to avoid leaving a postmaster behind.
package devdb
