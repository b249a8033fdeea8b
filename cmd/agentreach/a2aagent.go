package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentreach/agentreach/a2a/a2atest"
	"github.com/agentreach/agentreach/internal/cli"
)

const a2aAgentHelp = `agentreach a2a-agent: an A2A agent, built with the Go A2A SDK (a2a-go)

It serves its Agent Card at /.well-known/agent-card.json and A2A JSON-RPC
(message/send, tasks/get, …) at /, and answers every message according to
--behaviour:

  complete  working, then an artifact {"echo": <the message's data>, "by": <name>}, then completed
  fail      failed, with a status message
  reject    rejected: Agent-Reach routes the job to another agent
  input     input-required; the next message to the task completes it with {"input": ...}

With --register it registers itself with Agent-Reach (--server, --key) by
its card URL, the way any A2A agent can be registered.

Flags:
`

// runA2AAgent runs a2atest's agent from the command line.
func (m *Main) runA2AAgent(ctx context.Context, args []string) error {
	fs := m.newFlagSet("a2a-agent")
	fs.Usage = func() { fmt.Fprint(fs.Output(), a2aAgentHelp); fs.PrintDefaults() }
	o := a2atest.Options{Version: version}
	var skills, server, key, id, ns string
	var register bool
	fs.StringVar(&o.Name, "name", "Mock A2A Agent", "the card's name (an agent id is made of it)")
	fs.StringVar(&skills, "skills", "", "skill ids, comma-separated (required)")
	fs.StringVar(&o.Addr, "addr", "127.0.0.1:0", "listen address")
	fs.StringVar(&o.Behaviour, "behaviour", "complete", "complete, fail, reject or input")
	fs.BoolVar(&o.Push, "push", true, "offer push notifications (else Agent-Reach polls)")
	fs.DurationVar(&o.Delay, "delay", 0, "time each task takes")
	fs.BoolVar(&register, "register", false, "register with Agent-Reach by card URL")
	fs.StringVar(&server, "server", m.env("AGENTREACH_URL", "http://127.0.0.1:8080"), "Agent-Reach base URL (env AGENTREACH_URL)")
	cli.SecretVar(fs, &key, "key", m.Getenv("AGENTREACH_KEY"), "API key with agents:write, to register (env AGENTREACH_KEY)")
	fs.StringVar(&id, "id", "", "agent id to register as (default: made of --name)")
	fs.StringVar(&ns, "namespace", "", "namespace to register in (default: the key's)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if o.Skills = splitList(skills); skills == "" {
		fs.Usage()
		return fmt.Errorf("%w: --skills is required", errUsage)
	}
	a, err := a2atest.Start(ctx, o)
	if errors.Is(err, a2atest.ErrBehaviour) {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if err != nil {
		return err
	}
	defer func() { _ = a.Close() }()
	fmt.Fprintf(m.Stdout, "a2a agent %q (%s) serving at %s, card at %s/.well-known/agent-card.json\n", o.Name, o.Behaviour, a.URL+"/", a.URL)
	if register {
		agentID, err := a2atest.Register(ctx, server, key, a.URL, id, ns)
		if err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "registered with %s as %s\n", server, agentID)
	}
	<-ctx.Done()
	return nil
}
