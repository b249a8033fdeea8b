// Package a2atest is an A2A agent built with the Go A2A SDK (a2a-go), for
// tests and demos: it serves its Agent Card at
// /.well-known/agent-card.json and A2A JSON-RPC (message/send, tasks/get, …)
// at /, and answers every message by a chosen behaviour. It can register
// itself with Agent-Reach by its card URL, the way any A2A agent can be
// registered. `agentreach a2a-agent` runs it.
package a2atest
