// Package a2a is Google's Agent2Agent (A2A) protocol as Agent-Reach speaks
// it, in both versions agents and callers run: v0.3 (objects with a
// "kind", lower-case states and roles, method names like message/send) and
// v1.0 (no kinds, TASK_STATE_* and ROLE_* names, SendMessage). It holds the
// wire shapes of cards, messages, parts and tasks of each version as typed
// structs, and the one translation between the versions (translate.go):
// v1.0's requests become v0.3's, v0.3's answers become v1.0's.
//
// It also reads what agents answer and push, of either version, into a
// Task (ParseTask), and signs the tokens agents push with (PushToken).
//
// Its subpackages do the talking: client sends jobs to A2A agents, card
// fetches and reads agents' Agent Cards, server is Agent-Reach as an A2A
// agent to its callers, and a2atest is an A2A agent built with the Go A2A
// SDK, for tests and demos. None of them knows the event log: package jobs
// decides what a task means for a job, and package registry what a card
// means for an agent.
//
// The structs' fields are in the order of their JSON names: Agent-Reach
// once wrote these shapes from maps, which encoding/json writes sorted, and
// what it writes stays byte for byte the same.
package a2a
