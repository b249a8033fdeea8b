// Package demo is `agentreach demo`: a guided run on this machine. It
// serves Agent-Reach (started by the caller's wiring, [Serve]) on a
// scratch database, a fleet of agents with a mix of behaviours, submits
// jobs with a progress bar, waits for every one, and prints each agent's
// health as GET /v1/metrics/agents reports it.
package demo
