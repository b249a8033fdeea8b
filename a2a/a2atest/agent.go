package a2atest

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

	sdk "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/a2aproject/a2a-go/a2asrv/push"
)

// Behaviours an agent answers messages by:
//
//	complete  working, then an artifact {"echo": <the message's data>, "by": <name>}, then completed
//	fail      failed, with a status message
//	reject    rejected: Agent-Reach routes the job to another agent
//	input     input-required; the next message to the task completes it with {"input": ...}
var Behaviours = []string{"complete", "fail", "reject", "input"}

// Options describe an agent.
type Options struct {
	// Name is the card's name (Agent-Reach makes an agent id of it).
	Name string
	// Skills are the card's skill ids.
	Skills []string
	// Addr is the address to listen on ("127.0.0.1:0" if empty).
	Addr string
	// Behaviour is one of Behaviours ("complete" if empty).
	Behaviour string
	// Push offers push notifications; without them Agent-Reach polls.
	Push bool
	// Delay is the time each task takes.
	Delay time.Duration
	// Version is the card's version.
	Version string
}

// Agent is a running agent.
type Agent struct {
	// URL is its JSON-RPC endpoint's base: the card is at
	// URL + "/.well-known/agent-card.json".
	URL string
	srv *http.Server
}

// Start starts an agent; an unknown behaviour is an error before anything
// listens. It serves until ctx ends or Close.
func Start(ctx context.Context, o Options) (*Agent, error) {
	if o.Behaviour == "" {
		o.Behaviour = "complete"
	}
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	exec, err := behaviour(o.Behaviour, o.Name, o.Delay)
	if err != nil {
		return nil, err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", o.Addr)
	if err != nil {
		return nil, err
	}
	base := "http://" + ln.Addr().String()
	card := &sdk.AgentCard{Name: o.Name, Description: "a mock A2A agent (" + o.Behaviour + ")", URL: base + "/", Version: o.Version,
		ProtocolVersion: "0.3.0", PreferredTransport: sdk.TransportProtocolJSONRPC,
		Capabilities:      sdk.AgentCapabilities{PushNotifications: o.Push},
		DefaultInputModes: []string{"application/json", "text/plain"}, DefaultOutputModes: []string{"application/json"}}
	for _, s := range o.Skills {
		card.Skills = append(card.Skills, sdk.AgentSkill{ID: s, Name: s, Tags: []string{}})
	}
	var opts []a2asrv.RequestHandlerOption
	if o.Push {
		opts = append(opts, a2asrv.WithPushNotifications(push.NewInMemoryStore(), push.NewHTTPPushSender(nil)))
	}
	mux := http.NewServeMux()
	mux.Handle("/", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec, opts...)))
	mux.Handle("GET /.well-known/agent-card.json", a2asrv.NewStaticAgentCardHandler(card))
	a := &Agent{URL: base, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = a.srv.Serve(ln) }()
	context.AfterFunc(ctx, func() { _ = a.srv.Close() })
	return a, nil
}

// Close stops the agent.
func (a *Agent) Close() error { return a.srv.Close() }

// Register registers the agent whose card is at cardURL with the
// Agent-Reach at server, with key (an API key with agents:write), as id
// in namespace ns (either empty: the card's name made an id, the key's
// namespace). It answers the agent id Agent-Reach gave it.
func Register(ctx context.Context, server, key, cardURL, id, ns string) (string, error) {
	body, _ := json.Marshal(struct {
		AgentID   string `json:"agent_id"`
		CardURL   string `json:"card_url"`
		Namespace string `json:"namespace"`
	}{id, cardURL, ns})
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

// executor is an a2asrv.AgentExecutor of one function.
type executor func(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error

func (f executor) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	return f(ctx, rc, q)
}

func (f executor) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	return writeFinal(ctx, q, sdk.NewStatusUpdateEvent(rc, sdk.TaskStateCanceled, nil))
}

func writeFinal(ctx context.Context, q eventqueue.Queue, ev *sdk.TaskStatusUpdateEvent) error {
	ev.Final = true
	return q.Write(ctx, ev)
}

func messageData(m *sdk.Message) any {
	if m == nil || len(m.Parts) == 0 {
		return nil
	}
	switch p := m.Parts[0].(type) {
	case sdk.DataPart:
		return p.Data
	case sdk.TextPart:
		return p.Text
	}
	return nil
}

func behaviour(name, agent string, delay time.Duration) (executor, error) {
	pause := func(ctx context.Context) error {
		select {
		case <-time.After(delay):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	complete := func(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue, result map[string]any) error {
		if err := q.Write(ctx, sdk.NewStatusUpdateEvent(rc, sdk.TaskStateWorking, nil)); err != nil {
			return err
		}
		if err := pause(ctx); err != nil {
			return err
		}
		if err := q.Write(ctx, sdk.NewArtifactEvent(rc, sdk.DataPart{Data: result})); err != nil {
			return err
		}
		return writeFinal(ctx, q, sdk.NewStatusUpdateEvent(rc, sdk.TaskStateCompleted, nil))
	}
	say := func(text string) *sdk.Message { return sdk.NewMessage(sdk.MessageRoleAgent, sdk.TextPart{Text: text}) }
	switch name {
	case "complete":
		return func(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
			return complete(ctx, rc, q, map[string]any{"echo": messageData(rc.Message), "by": agent})
		}, nil
	case "fail":
		return func(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
			return writeFinal(ctx, q, sdk.NewStatusUpdateEvent(rc, sdk.TaskStateFailed, say("mock failure")))
		}, nil
	case "reject":
		return func(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
			return writeFinal(ctx, q, sdk.NewStatusUpdateEvent(rc, sdk.TaskStateRejected, say("not for me")))
		}, nil
	case "input":
		return func(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
			if rc.StoredTask == nil {
				return writeFinal(ctx, q, sdk.NewStatusUpdateEvent(rc, sdk.TaskStateInputRequired, say("what should I use?")))
			}
			return complete(ctx, rc, q, map[string]any{"input": messageData(rc.Message), "by": agent})
		}, nil
	}
	return nil, ErrBehaviour
}

// ErrBehaviour is a behaviour not in Behaviours.
var ErrBehaviour = errors.New("--behaviour must be complete, fail, reject or input")
