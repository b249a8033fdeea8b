// Package sdk is the Go library an agent imports to take work from
// Agent-Reach: it serves deliveries over HTTP, registers (after a random
// start-up jitter, so a fleet restarting together does not stampede),
// heartbeats on a goroutine of its own that never waits on the agent's work,
// re-registers when the registry has forgotten it, reports results of
// asynchronous work, and goes offline gracefully when its context ends.
//
//	agent := sdk.New(sdk.Config{ServerURL: "http://127.0.0.1:8080"},
//		sdk.Registration{AgentID: "ocr-1", Capabilities: []string{"document:parse:ocr"}},
//		func(ctx context.Context, d sdk.Delivery) (sdk.Result, error) {
//			return sdk.Success(map[string]any{"text": "..."}), nil
//		})
//	err := agent.Run(ctx)
package sdk
