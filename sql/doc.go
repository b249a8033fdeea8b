// Package sql holds Agent-Reach's schema as embedded .sql files and applies
// it, together with River's own migrations, under one advisory lock so that
// several processes starting at once never race.
//
// migrations/ is the history: each file applied once, in order. views/ is
// the present: one view or function a file (CREATE OR REPLACE), applied
// after the migrations whenever the files differ from what the database
// holds (not by a binary older than the one that applied them). A view is
// read in its file; a migration that changes its columns drops it first.
//
// Import it under a name, for example arsql, to keep it apart from
// database/sql.
package sql
