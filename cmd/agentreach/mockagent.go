package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"time"

	"github.com/agentreach/agentreach/sdk"
)

const mockAgentHelp = `agentreach mock-agent: a test agent with a chosen behaviour

It registers with Agent-Reach (--server), heartbeats, answers probes (GET)
and serves deliveries (POST) according to --behaviour:

  success   answer 200 {"status":"SUCCESS","result":{...}} at once (after --delay)
  async     answer 202, then POST the SUCCESS result to result_url after --delay
  fail      answer 200 {"status":"FAILED","biz_code":"mock_failure"}: a business failure
  5xx       answer 503: the delivery did not happen, Agent-Reach retries
  refuse    register an endpoint where nothing listens: every delivery is refused
            (probes go to a health URL that answers, so the agent looks alive)
  hang      accept the request and never answer before the deadline
  flaky     like success, but with probability --flaky-p answer 503 instead

Flags:
`

func (m *Main) runMockAgent(ctx context.Context, args []string) error {
	fs := m.newFlagSet("mock-agent")
	fs.Usage = func() { fmt.Fprint(fs.Output(), mockAgentHelp); fs.PrintDefaults() }
	var (
		server, id, ns, caps, aliases, behaviour, addr, version, key string
		ttl, maxConc, weight                                         int
		delay, jitter                                                time.Duration
		flakyP                                                       float64
	)
	fs.StringVar(&server, "server", m.env("AGENTREACH_URL", "http://127.0.0.1:8080"), "Agent-Reach base URL (env AGENTREACH_URL)")
	fs.StringVar(&key, "key", m.Getenv("AGENTREACH_KEY"), "API key with agents:write, to register (env AGENTREACH_KEY)")
	fs.StringVar(&id, "id", "", "agent id (required)")
	fs.StringVar(&ns, "namespace", "default", "namespace")
	fs.StringVar(&caps, "capability", "", "capabilities, comma-separated (required)")
	fs.StringVar(&aliases, "aliases", "", "aliases, comma-separated")
	fs.StringVar(&behaviour, "behaviour", "success", "success, async, fail, 5xx, refuse, hang or flaky")
	fs.StringVar(&addr, "addr", "127.0.0.1:0", "listen address for deliveries")
	fs.StringVar(&version, "version", "", "agent version")
	fs.IntVar(&ttl, "ttl", 30, "lease TTL in seconds")
	fs.IntVar(&maxConc, "max-concurrent", 0, "most jobs at once (0 = unlimited)")
	fs.IntVar(&weight, "weight", 50, "routing weight 1-100")
	fs.DurationVar(&delay, "delay", 0, "time each job takes")
	fs.DurationVar(&jitter, "jitter", -1, "largest start-up jitter before registering (negative: none)")
	fs.Float64Var(&flakyP, "flaky-p", 0.5, "flaky: probability of a 503")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if id == "" || caps == "" {
		fs.Usage()
		return fmt.Errorf("%w: --id and --capability are required", errUsage)
	}
	reg := sdk.Registration{AgentID: id, Namespace: ns, Capabilities: splitList(caps), Aliases: splitList(aliases),
		TTLSeconds: ttl, MaxConcurrent: maxConc, Weight: weight, Version: version,
		Metadata: map[string]any{"mock_behaviour": behaviour}}
	handler, err := mockHandler(behaviour, delay, flakyP, id)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	cfg := sdk.Config{ServerURL: server, Addr: addr, StartJitter: jitter, Logger: m.cliLogger(), APIKey: key}
	var agent *sdk.Agent
	if behaviour == "async" {
		handler = asyncHandler(&agent, delay, id)
	}
	if behaviour == "refuse" {
		// Deliveries go to a port where nothing listens; probes go to the
		// agent's real listener, so it is admitted and then refuses work.
		live, err := freeAddr(addr)
		if err != nil {
			return err
		}
		dead, err := freeAddr("127.0.0.1:0")
		if err != nil {
			return err
		}
		cfg.Addr = live
		cfg.AdvertiseURL = "http://" + dead + "/"
		reg.HealthURL = "http://" + live + "/"
	}
	agent = sdk.New(cfg, reg, handler)
	go func() {
		select {
		case <-agent.Registered():
			fmt.Fprintf(m.Stdout, "mock-agent %s registered (%s) at %s\n", id, behaviour, server)
		case <-ctx.Done():
		}
	}()
	return agent.Run(ctx)
}

// freeAddr resolves a ":0" address to a port that is free now.
func freeAddr(addr string) (string, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func mockHandler(behaviour string, delay time.Duration, flakyP float64, id string) (sdk.Handler, error) {
	wait := func(ctx context.Context) error {
		if delay <= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
			return nil
		}
	}
	ok := func(d sdk.Delivery) sdk.Result {
		return sdk.Success(map[string]any{"agent_id": id, "job_id": d.JobID, "attempt": d.Attempt})
	}
	switch behaviour {
	case "success", "refuse", "async":
		return func(ctx context.Context, d sdk.Delivery) (sdk.Result, error) {
			if err := wait(ctx); err != nil {
				return sdk.Result{}, err
			}
			return ok(d), nil
		}, nil
	case "fail":
		return func(ctx context.Context, d sdk.Delivery) (sdk.Result, error) {
			if err := wait(ctx); err != nil {
				return sdk.Result{}, err
			}
			return sdk.Failure("mock_failure", map[string]any{"agent_id": id}), nil
		}, nil
	case "5xx":
		return func(context.Context, sdk.Delivery) (sdk.Result, error) { return sdk.Result{}, sdk.ErrRefused }, nil
	case "hang":
		return func(ctx context.Context, d sdk.Delivery) (sdk.Result, error) {
			<-ctx.Done()
			return sdk.Result{}, ctx.Err()
		}, nil
	case "flaky":
		return func(ctx context.Context, d sdk.Delivery) (sdk.Result, error) {
			if rand.Float64() < flakyP {
				return sdk.Result{}, sdk.ErrRefused
			}
			if err := wait(ctx); err != nil {
				return sdk.Result{}, err
			}
			return ok(d), nil
		}, nil
	}
	return nil, errors.New("unknown --behaviour " + behaviour)
}

// asyncHandler accepts each delivery and reports its result after delay.
func asyncHandler(agent **sdk.Agent, delay time.Duration, id string) sdk.Handler {
	return func(ctx context.Context, d sdk.Delivery) (sdk.Result, error) {
		go func() {
			time.Sleep(delay) // the mock's simulated work time
			rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = (*agent).Report(rctx, d, sdk.Success(map[string]any{"agent_id": id, "job_id": d.JobID, "attempt": d.Attempt, "async": true}))
		}()
		return sdk.Result{}, sdk.ErrAccepted
	}
}
