// Package bench is `agentreach bench`: Agent-Reach measured beside the
// limits of the machine it runs on (pgbench -N and a bare River), on a
// scratch database, printed as a Markdown table and optionally drawn as a
// chart.
//
// The service itself is started by the caller's wiring ([Serve]); bench
// loads it over HTTP and reads the log through the event store.
package bench
