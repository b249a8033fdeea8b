// Package harness holds what the bench, chaos and demo harnesses share:
// scratch databases beside a server's others, waiting on a running
// Agent-Reach (ready, its agents healthy), and submitting and reading over
// its HTTP API. Harnesses are tools, not product: nothing of the service
// imports them.
package harness
