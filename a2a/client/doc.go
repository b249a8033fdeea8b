// Package client sends jobs to A2A agents over JSON-RPC, as delivery needs:
// SendMessage (message/send for agents that know only v0.3), GetTask
// (tasks/get) and CancelTask (tasks/cancel). A message is built in v1.0's
// shape and, for an agent that answers method-not-found to v1.0's names,
// translated to v0.3's (a2a's one translation). Answers of either version
// are read with a2a.ParseTask.
package client
