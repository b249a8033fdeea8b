package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/a2aproject/a2a-go/a2asrv/push"
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

func (m *Main) runA2AAgent(ctx context.Context, args []string) error {
	fs := m.newFlagSet("a2a-agent")
	fs.Usage = func() { fmt.Fprint(fs.Output(), a2aAgentHelp); fs.PrintDefaults() }
	var (
		name, skills, addr, behaviour, server, key, id, ns string
		withPush, register                                 bool
		delay                                              time.Duration
	)
	fs.StringVar(&name, "name", "Mock A2A Agent", "the card's name (an agent id is made of it)")
	fs.StringVar(&skills, "skills", "", "skill ids, comma-separated (required)")
	fs.StringVar(&addr, "addr", "127.0.0.1:0", "listen address")
	fs.StringVar(&behaviour, "behaviour", "complete", "complete, fail, reject or input")
	fs.BoolVar(&withPush, "push", true, "offer push notifications (else Agent-Reach polls)")
	fs.DurationVar(&delay, "delay", 0, "time each task takes")
	fs.BoolVar(&register, "register", false, "register with Agent-Reach by card URL")
	fs.StringVar(&server, "server", m.env("AGENTREACH_URL", "http://127.0.0.1:8080"), "Agent-Reach base URL (env AGENTREACH_URL)")
	fs.StringVar(&key, "key", m.Getenv("AGENTREACH_KEY"), "API key with agents:write, to register (env AGENTREACH_KEY)")
	fs.StringVar(&id, "id", "", "agent id to register as (default: made of --name)")
	fs.StringVar(&ns, "namespace", "", "namespace to register in (default: the key's)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if skills == "" {
		fs.Usage()
		return fmt.Errorf("%w: --skills is required", errUsage)
	}
	exec, err := a2aBehaviour(behaviour, name, delay)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	base := "http://" + ln.Addr().String()
	card := &a2a.AgentCard{Name: name, Description: "a mock A2A agent (" + behaviour + ")", URL: base + "/", Version: version,
		ProtocolVersion: "0.3.0", PreferredTransport: a2a.TransportProtocolJSONRPC,
		Capabilities:      a2a.AgentCapabilities{PushNotifications: withPush},
		DefaultInputModes: []string{"application/json", "text/plain"}, DefaultOutputModes: []string{"application/json"}}
	for _, s := range splitList(skills) {
		card.Skills = append(card.Skills, a2a.AgentSkill{ID: s, Name: s, Tags: []string{}})
	}
	var opts []a2asrv.RequestHandlerOption
	if withPush {
		opts = append(opts, a2asrv.WithPushNotifications(push.NewInMemoryStore(), push.NewHTTPPushSender(nil)))
	}
	mux := http.NewServeMux()
	mux.Handle("/", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec, opts...)))
	mux.Handle("GET /.well-known/agent-card.json", a2asrv.NewStaticAgentCardHandler(card))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	fmt.Fprintf(m.Stdout, "a2a agent %q (%s) serving at %s, card at %s/.well-known/agent-card.json\n", name, behaviour, base+"/", base)
	if register {
		agentID, err := registerByCard(ctx, server, key, base, id, ns)
		if err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "registered with %s as %s\n", server, agentID)
	}
	<-ctx.Done()
	return nil
}

// registerByCard registers the agent whose card is at cardURL.
func registerByCard(ctx context.Context, server, key, cardURL, id, ns string) (string, error) {
	body, _ := json.Marshal(map[string]any{"card_url": cardURL, "agent_id": id, "namespace": ns})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(server, "/")+"/v1/agents", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("register: %w", err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("register: %s: %s", resp.Status, strings.TrimSpace(string(answer)))
	}
	var a struct {
		AgentID string `json:"agent_id"`
	}
	return a.AgentID, json.Unmarshal(answer, &a)
}

// a2aExecutor is an a2asrv.AgentExecutor of one function.
type a2aExecutor func(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error

func (f a2aExecutor) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	return f(ctx, rc, q)
}

func (f a2aExecutor) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	return writeFinal(ctx, q, a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCanceled, nil))
}

func writeFinal(ctx context.Context, q eventqueue.Queue, ev *a2a.TaskStatusUpdateEvent) error {
	ev.Final = true
	return q.Write(ctx, ev)
}

func messageData(m *a2a.Message) any {
	if m == nil || len(m.Parts) == 0 {
		return nil
	}
	switch p := m.Parts[0].(type) {
	case a2a.DataPart:
		return p.Data
	case a2a.TextPart:
		return p.Text
	}
	return nil
}

func a2aBehaviour(behaviour, name string, delay time.Duration) (a2aExecutor, error) {
	pause := func(ctx context.Context) error {
		select {
		case <-time.After(delay):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	complete := func(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue, result map[string]any) error {
		if err := q.Write(ctx, a2a.NewStatusUpdateEvent(rc, a2a.TaskStateWorking, nil)); err != nil {
			return err
		}
		if err := pause(ctx); err != nil {
			return err
		}
		if err := q.Write(ctx, a2a.NewArtifactEvent(rc, a2a.DataPart{Data: result})); err != nil {
			return err
		}
		return writeFinal(ctx, q, a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCompleted, nil))
	}
	say := func(text string) *a2a.Message { return a2a.NewMessage(a2a.MessageRoleAgent, a2a.TextPart{Text: text}) }
	switch behaviour {
	case "complete":
		return func(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
			return complete(ctx, rc, q, map[string]any{"echo": messageData(rc.Message), "by": name})
		}, nil
	case "fail":
		return func(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
			return writeFinal(ctx, q, a2a.NewStatusUpdateEvent(rc, a2a.TaskStateFailed, say("mock failure")))
		}, nil
	case "reject":
		return func(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
			return writeFinal(ctx, q, a2a.NewStatusUpdateEvent(rc, a2a.TaskStateRejected, say("not for me")))
		}, nil
	case "input":
		return func(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
			if rc.StoredTask == nil {
				return writeFinal(ctx, q, a2a.NewStatusUpdateEvent(rc, a2a.TaskStateInputRequired, say("what should I use?")))
			}
			return complete(ctx, rc, q, map[string]any{"input": messageData(rc.Message), "by": name})
		}, nil
	}
	return nil, errors.New("--behaviour must be complete, fail, reject or input")
}
