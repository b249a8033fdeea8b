// Package cli holds what agentreach's commands share outside cmd: the
// streams and environment a command runs with ([Env]), its flag set, the
// usage error, the client of the HTTP API and its error answers, a progress
// bar, and the tool commands themselves: jobs (the API's), projections
// rebuild and verify (the database's).
//
// cmd/agentreach parses the service's flags and wires the program; the
// commands here read only what they are given.
package cli
