// Package registry is Agent-Reach's agent registry: registration with a
// per-agent token, leases renewed by heartbeats, the PROBING → HEALTHY →
// SUSPECT → DOWN life cycle driven by a sweep and by probes, and an
// in-memory snapshot of every agent that the router reads.
//
// Every registration and state change is an event on the agent's stream,
// written in the same transaction as the agent's row in the agents table and
// as any River job it causes (a probe). Heartbeats are not events: they are
// buffered and written in batches.
package registry
