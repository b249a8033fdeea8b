// Package client is the Go client of Agent-Reach for callers: programs
// that hand work to agents by capability.
//
// It has two ways to reach an agent.
//
// Brokered: [Client.Submit] a job and Agent-Reach routes, delivers,
// retries, times out and calls back; [Client.Get], [Client.List],
// [Client.Events], [Client.Wait], [Client.Cancel] and [Client.Replay]
// follow it, and [VerifyCallback] checks the signature of the callback.
//
// Lookup mode: [Client.Lookup] asks the registry for the ranked
// candidates of a capability (scored exactly as brokered routing), each
// with an invocation grant, and [Client.Invoke] calls the best one
// directly, failing over to the next on a connection error, a timeout or
// a 5xx, and reports every outcome in batches (POST /v1/reports) so the
// agents' health figures count direct calls too. Lookups are cached (the
// answer's ttl_ms, capped by its grants' expiry); [Client.Watch] follows
// the registry's agent changes and drops a candidate the moment its agent
// leaves HEALTHY. With [CacheFile], the client keeps its last lists on
// disk and starts, or carries on, without Agent-Reach: lookups answer the
// last known list marked Stale until the registry answers again.
//
// # Stale lists and grants
//
// A grant is good for 5 minutes from its lookup. A stale list older than
// that holds expired grants; its agents refuse them (401 or 403), Invoke
// takes a refusal as a failed candidate and tries the next, and with
// every grant expired Invoke fails with [ErrNoCandidates] until the
// registry answers a lookup again. A refusal is not reported (it says
// nothing of the agent's health), nor is a call whose lookup is older
// than the service's 10-minute report window.
//
// # Errors
//
// An error answer of the service is an [*APIError] (status, code,
// message, field) that unwraps to its kind ([ErrNotFound],
// [ErrInvalidArgument], ...); no answer at all wraps [ErrUnreachable].
// 429 and 503 are retried a bounded number of times honouring
// Retry-After within a bound ([Retry]); 401 and 403 never are.
//
// The package imports nothing of Agent-Reach's own: the few wire types it
// needs are its own.
package client
