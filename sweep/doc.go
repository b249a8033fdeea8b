// Package sweep runs Agent-Reach's periodic sweeps (leases, health, Agent
// Cards, deadlines, repairs, watermarks) in the process that holds the
// sweep leadership: a PostgreSQL session advisory lock, held on one pooled
// connection for as long as the process leads.
//
// Why not River's periodic jobs: each run of a sweep every second was a
// River job, and River UI's job list filled with them (thousands an hour),
// burying the dispatch and callback jobs an operator looks for. Run here,
// sweeps leave no rows.
//
// Why it stays safe: only the leader sweeps, since PostgreSQL grants the
// lock to one session; a leader that dies loses its session and so the
// lock, and another process takes it within a second (River's leader
// election takes about 15 s); a leader whose connection breaks stops
// sweeping at once. Every sweep decides each job or agent in its own
// transaction, with the stream's expected version, so a sweep cut short is
// finished by the next run, and two runs that overlap for a moment (a
// leader that has not yet noticed its connection is gone) write each
// change once.
package sweep
