// Package domain holds Agent-Reach's rules as pure Go: the job state machine,
// the events that make a job's stream, the agent lease and health states, the
// circuit breaker and the router.
//
// Nothing here touches a database, the network, a clock or a random source:
// time and randomness are arguments, so every rule can be tested with tables.
// The rest of the program decides with this package and then applies the
// resulting events through the event store.
package domain
