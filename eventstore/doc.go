// Package eventstore keeps Agent-Reach's event log in PostgreSQL.
//
// Streams are appended to with an expected version (optimistic concurrency,
// no global lock); versions are gap-free per stream; the database refuses
// UPDATE and DELETE on the log. The global log is read in (transaction id,
// position) order and only below the oldest transaction still running, so a
// reader never skips an event whose transaction commits late. A Projector
// folds the log into read models, moving its checkpoint in the same
// transaction as the read model.
package eventstore
