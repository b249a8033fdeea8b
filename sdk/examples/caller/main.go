// Command caller submits a job by capability (or, with -intent, by the
// caller's words), waits for its end in one round trip when it is quick
// (wait_ms), and prints the outcome.
//
//	export AGENTREACH_KEY=ark_dev_...   # a key with jobs:submit:<capability> and jobs:read
//	go run ./sdk/examples/caller text.shout '{"text": "hello"}'
//	go run ./sdk/examples/caller -intent "make this text loud" '{"text": "hello"}'
//
// It exits 0 on SUCCESS, 2 on any other end, 1 on an error.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/agentreach/agentreach/sdk/client"
)

func main() {
	intent := flag.String("intent", "", "submit by intent (the caller's words) instead of a capability")
	flag.Parse()
	req := client.SubmitRequest{Intent: *intent, TimeoutMS: 30_000}
	args := flag.Args()
	if req.Intent == "" {
		if len(args) == 0 {
			fmt.Fprintln(os.Stderr, "usage: caller CAPABILITY [PAYLOAD] | caller -intent WORDS [PAYLOAD]")
			os.Exit(1)
		}
		req.Capability, args = args[0], args[1:]
	}
	req.Payload = json.RawMessage(`{"text": "hello"}`)
	if len(args) > 0 {
		req.Payload = json.RawMessage(args[0])
	}
	base := os.Getenv("AGENTREACH_URL")
	if base == "" {
		base = "http://127.0.0.1:8080"
	}
	c, err := client.New(base, os.Getenv("AGENTREACH_KEY"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "caller:", err)
		os.Exit(1)
	}
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job, err := c.Run(ctx, req) // submit, and wait for the end
	if err != nil {
		fmt.Fprintln(os.Stderr, "caller:", err)
		os.Exit(1)
	}
	out, _ := json.Marshal(map[string]any{"status": job.Status, "result": job.Result, "biz_code": job.BizCode,
		"agent_id": job.AgentID, "attempts": job.Attempts})
	fmt.Println(string(out))
	if job.Status != client.StatusSuccess {
		os.Exit(2)
	}
}
