// Package a2abridge speaks Google's Agent2Agent (A2A) protocol on
// Agent-Reach's behalf: it fetches and maps Agent Cards, sends a job to an
// A2A agent as a JSON-RPC SendMessage (falling back to the v0.3 name
// message/send), reads tasks back with GetTask (tasks/get), and parses the
// push notifications an agent sends. It reads both the v1.0 shapes
// (SendMessageResponse, StreamResponse, TASK_STATE_* names) and the v0.3
// ones (objects with a "kind", lower-case states), because agents in the
// field run either.
//
// It knows nothing of the event log: package jobs decides what a task's
// state means for a job, and package registry what a card means for an
// agent. The A2A server side (Agent-Reach as an agent) is in httpapi, built
// on github.com/a2aproject/a2a-go.
package a2abridge
