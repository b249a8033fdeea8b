// Package sql holds Agent-Reach's schema as embedded .sql files and applies
// it, together with River's own migrations, under one advisory lock so that
// several processes starting at once never race.
//
// Import it under a name, for example arsql, to keep it apart from
// database/sql.
package sql
