// Package chaos is `agentreach chaos`: a run that tries to lose jobs, then
// proves it did not. It starts a private PostgreSQL cluster, service
// processes of the agentreach binary on it and a fleet of agents of which a
// third misbehave; kills a service process and restarts PostgreSQL while
// jobs flow; and runs the invariant checker over the database.
package chaos
