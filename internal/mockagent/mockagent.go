package mockagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agentreach/agentreach/internal/cli"
	"github.com/agentreach/agentreach/sdk"
)

const help = `agentreach mock-agent: a test agent with a chosen behaviour

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

With --pull it listens on nothing: it registers in pull mode and claims its
deliveries, on --max-concurrent workers (1 when 0). success, async, fail and
hang behave as above (the result is POSTed to result_url; hang holds the
delivery until its deadline, then releases it with an error); the others
become releases:

  5xx       release the attempt with an error: a failed attempt, retried after backoff
  refuse    release the attempt without an error: given back unstarted, routed again
  flaky     like success, but with probability --flaky-p release with an error

Flags:
`

// options are mock-agent's flags.
type options struct {
	server, id, ns, caps, aliases, behaviour, addr, version, key string
	ttl, maxConc, weight                                         int
	delay, jitter                                                time.Duration
	flakyP                                                       float64
	pull                                                         bool
}

func parseFlags(env cli.Env, args []string) (options, error) {
	var o options
	fs := env.NewFlagSet("mock-agent")
	fs.Usage = func() { fmt.Fprint(fs.Output(), help); fs.PrintDefaults() }
	fs.StringVar(&o.server, "server", env.Lookup("AGENTREACH_URL", "http://127.0.0.1:8080"), "Agent-Reach base URL (env AGENTREACH_URL)")
	cli.SecretVar(fs, &o.key, "key", env.Getenv("AGENTREACH_KEY"), "API key with agents:write, to register (env AGENTREACH_KEY)")
	fs.StringVar(&o.id, "id", "", "agent id (required)")
	fs.StringVar(&o.ns, "namespace", "default", "namespace")
	fs.StringVar(&o.caps, "capability", "", "capabilities, comma-separated (required)")
	fs.StringVar(&o.aliases, "aliases", "", "aliases, comma-separated")
	fs.StringVar(&o.behaviour, "behaviour", "success", "success, async, fail, 5xx, refuse, hang or flaky")
	fs.StringVar(&o.addr, "addr", "127.0.0.1:0", "listen address for deliveries (not with --pull)")
	fs.StringVar(&o.version, "version", "", "agent version")
	fs.IntVar(&o.ttl, "ttl", 30, "lease TTL in seconds")
	fs.IntVar(&o.maxConc, "max-concurrent", 0, "most jobs at once (0 = unlimited; with --pull: workers, 0 = 1)")
	fs.IntVar(&o.weight, "weight", 50, "routing weight 1-100")
	fs.DurationVar(&o.delay, "delay", 0, "time each job takes")
	fs.DurationVar(&o.jitter, "jitter", -1, "largest start-up jitter before registering (negative: none)")
	fs.Float64Var(&o.flakyP, "flaky-p", 0.5, "flaky: probability of a 503 (with --pull: of a release with an error)")
	fs.BoolVar(&o.pull, "pull", false, "register in pull mode and claim deliveries instead of serving them")
	if err := cli.ParseFlags(fs, args); err != nil {
		return o, err
	}
	if o.id == "" || o.caps == "" {
		fs.Usage()
		return o, fmt.Errorf("%w: --id and --capability are required", cli.ErrUsage)
	}
	return o, nil
}

// Main runs `agentreach mock-agent` with args until ctx ends; missing or
// unknown flags are an ErrUsage.
func Main(ctx context.Context, env cli.Env, args []string) error {
	o, err := parseFlags(env, args)
	if err != nil {
		return err
	}
	reg := sdk.Registration{AgentID: o.id, Namespace: o.ns, Capabilities: cli.SplitList(o.caps), Aliases: cli.SplitList(o.aliases),
		TTLSeconds: o.ttl, MaxConcurrent: o.maxConc, Weight: o.weight, Version: o.version,
		Metadata: map[string]any{"mock_behaviour": o.behaviour}}
	label := o.behaviour
	if o.pull {
		reg.Mode, label = sdk.ModePull, o.behaviour+", pull"
	}
	handler, err := mockHandler(o.behaviour, o.pull, o.delay, o.flakyP, o.id)
	if err != nil {
		return fmt.Errorf("%w: %w", cli.ErrUsage, err)
	}
	if err := checkKey(ctx, o.server, o.key); err != nil {
		return err
	}
	cfg := sdk.Config{ServerURL: o.server, Addr: o.addr, StartJitter: o.jitter, Logger: env.Logger(), APIKey: o.key}
	var agent *sdk.Agent
	if o.behaviour == "async" {
		handler = asyncHandler(&agent, o.delay, o.id)
	}
	if o.behaviour == "refuse" && !o.pull {
		if err := refuseDeliveries(ctx, &cfg, &reg); err != nil {
			return err
		}
	}
	agent = sdk.New(cfg, reg, handler)
	go func() {
		select {
		case <-agent.Registered():
			fmt.Fprintf(env.Stdout, "mock-agent %s registered (%s) at %s\n", o.id, label, o.server)
		case <-ctx.Done():
		}
	}()
	return agent.Run(ctx)
}

// refuseDeliveries points deliveries at a port where nothing listens and
// probes at the agent's real listener, so it is admitted and then refuses
// work.
func refuseDeliveries(ctx context.Context, cfg *sdk.Config, reg *sdk.Registration) error {
	live, err := freeAddr(ctx, cfg.Addr)
	if err != nil {
		return err
	}
	dead, err := freeAddr(ctx, "127.0.0.1:0")
	if err != nil {
		return err
	}
	cfg.Addr = live
	cfg.AdvertiseURL = "http://" + dead + "/"
	reg.HealthURL = "http://" + live + "/"
	return nil
}

// freeAddr resolves a ":0" address to a port that is free now.
func freeAddr(ctx context.Context, addr string) (string, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// errMock5xx is the handler error of the 5xx and flaky behaviours in pull
// mode: the SDK releases the attempt with it, a failed attempt.
var errMock5xx = errors.New("mock 5xx: the attempt failed")

// mockHandler is the handler of a behaviour. In push mode 5xx and flaky
// refuse (503); in pull mode they fail with errMock5xx (released with an
// error), and refuse refuses (released without one).
func mockHandler(behaviour string, pull bool, delay time.Duration, flakyP float64, id string) (sdk.Handler, error) {
	fault := sdk.ErrRefused
	if pull {
		fault = errMock5xx
	}
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
	case "success", "refuse", "async": // a refusing push agent's deliveries never reach it
		if behaviour == "refuse" && pull {
			return func(context.Context, sdk.Delivery) (sdk.Result, error) { return sdk.Result{}, sdk.ErrRefused }, nil
		}
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
		return func(context.Context, sdk.Delivery) (sdk.Result, error) { return sdk.Result{}, fault }, nil
	case "hang":
		return func(ctx context.Context, d sdk.Delivery) (sdk.Result, error) {
			<-ctx.Done()
			return sdk.Result{}, ctx.Err()
		}, nil
	case "flaky":
		return func(ctx context.Context, d sdk.Delivery) (sdk.Result, error) {
			if rand.Float64() < flakyP {
				return sdk.Result{}, fault
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

// errNeedsKey: the service has authentication on and mock-agent has no
// key (or one it refuses, or one without agents:write): registering would
// be refused on every try, so it stops and says so instead.
var errNeedsKey = errors.New("mock-agent needs an API key with agents:write to register: --key or AGENTREACH_KEY " +
	"(`agentreach dev` prints an admin key; `agentreach keys create --scopes agents:write` makes one)")

// checkKey asks the service who the key is (GET /v1/session) before the
// agent starts: a service that refuses it, or a key without agents:write,
// stops mock-agent at once. A service that cannot be reached yet, or
// answers anything else, is left to the agent's own retries.
func checkKey(ctx context.Context, server, key string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(server, "/")+"/v1/session", nil)
	if err != nil {
		return fmt.Errorf("%w: --server / AGENTREACH_URL: %w", cli.ErrUsage, err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil // not up yet: the agent retries
	}
	defer resp.Body.Close()
	var who struct {
		Scopes []string `json:"scopes"`
		Error  struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&who)
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		if key == "" {
			return errNeedsKey
		}
		return fmt.Errorf("%w (the service refused the key given: %s)", errNeedsKey, who.Error.Message)
	case http.StatusOK:
		if !slices.Contains(who.Scopes, "admin") && !slices.Contains(who.Scopes, "agents:write") {
			return fmt.Errorf("%w (the key given has %s)", errNeedsKey, strings.Join(who.Scopes, ", "))
		}
	}
	return nil
}
