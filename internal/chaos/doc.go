// Package chaos is `agentreach chaos`: a run that tries to lose jobs, then
// proves it did not. It starts a private PostgreSQL cluster, service
// processes of the agentreach binary on it and a fleet of push and pull
// agents of which some misbehave (one pull agent dies holding claimed
// work); kills a service process and restarts PostgreSQL while jobs flow;
// and runs the invariant checker over the database, then checks what the
// dead pull agent held was timed out and retried elsewhere.
package chaos
