// Command push-agent is an Agent-Reach push agent: the service POSTs each
// job to it, and the answer is the job's result.
//
//	make run &                                # the service on 127.0.0.1:8080; note the admin key
//	export AGENTREACH_KEY=ark_dev_...         # a key with agents:write (the admin key will do)
//	go run ./sdk/examples/push-agent &        # serves text.shout on 127.0.0.1:8002 (ADDR to change)
//	go run ./sdk/examples/caller text.shout '{"text": "hello"}'
//
// Ctrl-C (or SIGTERM) takes it offline and stops it.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/agentreach/agentreach/sdk"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	addr := os.Getenv("ADDR")
	if addr == "" {
		addr = "127.0.0.1:8002"
	}
	id := os.Getenv("AGENT_ID")
	if id == "" {
		id = "shouter-go-1"
	}
	// ServerURL and APIKey come from AGENTREACH_URL and AGENTREACH_KEY.
	agent := sdk.New(sdk.Config{Addr: addr},
		sdk.Registration{AgentID: id, Capabilities: []string{"text.shout"}, MaxConcurrent: 8,
			CapabilityInfo: map[string]sdk.CapabilityDoc{"text.shout": {
				Description: "Shouts a text back in capitals.", Examples: []string{"make this text loud"}}}},
		shout)
	if err := agent.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "push-agent:", err)
		os.Exit(1)
	}
}

// shout answers {"text": "..."} with {"shout": "...!"}; anything else is a
// FAILED job with a business code, which is not retried.
func shout(_ context.Context, d sdk.Delivery) (sdk.Result, error) {
	var in struct {
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(d.Payload, &in); err != nil || in.Text == nil {
		return sdk.Failure("no_text", `send {"text": "..."}`), nil
	}
	return sdk.Success(map[string]string{"shout": strings.ToUpper(*in.Text) + "!"}), nil
}
