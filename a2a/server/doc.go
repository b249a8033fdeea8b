// Package server is Agent-Reach as an A2A agent to its callers. Each
// namespace is one agent: its card (ServeCard) lists the capabilities its
// healthy agents offer as skills, and its JSON-RPC endpoint (ServeRPC)
// takes SendMessage / message/send as a job submission, GetTask /
// tasks/get from the job's event stream, CancelTask / tasks/cancel,
// SendStreamingMessage and SubscribeToTask as SSE, and push-notification
// configs as the job's callbacks.
//
// The JSON-RPC framing and the v0.3 methods are a2a-go's (a2asrv); v1.0
// requests are translated to v0.3 on the way in and v0.3 answers to v1.0
// on the way out, by package a2a's one translation. The jobs behind the
// tasks are the Jobs interface's, which package jobs implements; the mount
// (httpapi) authenticates the caller and says so in a Caller.
package server
